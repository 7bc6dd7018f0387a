"""Kinds of work the bench meters: each one call that does its work and synchronises.

A :class:`Work` is what the runner needs of a kind: ``call()`` (one call, synchronised),
``single()`` (one isolated ~20 ms call, for the single-call trials), the single call's
share of a call's energy (its reference is that share of the call's reference), the
device sync, and the parameters to record.

Kinds on the GPU (torch, random operands, TF32 off):

* ``fp32``: 15 FP32 4096^2 products a call (~41 ms; 450-700 W on the H200); the call
  of results/window-accuracy-h200*.json. Single: 7 products (~19 ms).
* ``bf16cap``: bf16 8192^2 products, as many as fill ~40 ms; on the H200 this holds the
  board at its 700 W limit (clock-event reason: software power cap). Single: half.
* ``copy``: device-to-device copies of a 2 GiB buffer, ~20 ms a call (memory-bound).
* ``duty``: FP32 4096^2 products for ~15 ms, synchronised, then 15 ms of host sleep.
* ``launch``: in-place adds on a 1,024-element tensor, as many as fill ~20 ms
  (launch-bound: the GPU waits on the host between kernels).
* ``fp32big``: FP32 8192^2 products, ~40 ms a call (power-capped too). Single: half.

Counts other than fp32's are calibrated on the board after a warm-up (the time of a few
calls of a guessed count) and recorded, so a resumed run makes the same calls.

Each kind also has a simulated twin for the CPU tests (:func:`simulated`): the same
names, drawing set powers for set times on a :class:`~nvmeter.boards.simulated.SimulatedBoard`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

FIT_KINDS = ("fp32", "bf16cap")
CHECK_KINDS = ("copy", "duty", "launch", "fp32big")
ALL_KINDS = FIT_KINDS + CHECK_KINDS

# One isolated call in the single-call trials lasts about this long (issue 10's target).
SINGLE_TARGET_MS = 20.0
# Calls of the guessed count before calibration times any: past the clocks' ~0.3 s ramp
# after idle (docs/window.md), with margin.
CALIBRATE_WARM_S = 1.0


@dataclass
class Work:
    """One kind of work, ready to call.

    Attributes:
        name: The kind's name.
        call: One call: does the work and synchronises.
        single: One isolated ~20 ms call (may be ``call``).
        single_share: The single call's share of ``call``'s work (1.0 when it is ``call``).
        sync: The device sync the windows use at their edges.
        params: What the call does (sizes, counts, calibration), for the record.
        close: Frees the kind's buffers.
    """

    name: str
    call: Callable[[], None]
    single: Callable[[], None]
    single_share: float
    sync: Callable[[], None]
    params: dict
    close: Callable[[], None] = field(default=lambda: None)


@dataclass(frozen=True)
class _Spec:
    """How a GPU kind is built: its unit of work, the call's target and the guess before calibration."""

    description: str
    target_ms: float | None  # None: fixed count (fp32)
    guess_units: int
    single_units: int | None = None  # fixed single (fp32); else from SINGLE_TARGET_MS
    host_sleep_ms: float = 0.0


SPECS = {
    "fp32": _Spec("15 FP32 4096^2 products, random operands, TF32 off", None, 15, single_units=7),
    "bf16cap": _Spec("bf16 8192^2 products, random operands (at the power cap)", 40.0, 28),
    "copy": _Spec("device-to-device copies of a 2 GiB buffer", 20.0, 20),
    "duty": _Spec(
        "FP32 4096^2 products for ~15 ms, synchronised, then 15 ms host sleep", 15.0, 5, None, 15.0
    ),
    "launch": _Spec("in-place adds on a 1,024-element FP32 tensor (launch-bound)", 20.0, 3000),
    "fp32big": _Spec("FP32 8192^2 products, random operands, TF32 off (at the power cap)", 40.0, 2),
}


# Sizes of the kinds' buffers (the CPU tests shrink them).
SIZES = {"matmul_n": 4096, "big_n": 8192, "copy_bytes": 2 << 30, "launch_elems": 1024}


def _units_fn(name: str, torch, device: str) -> tuple[Callable[[int], None], Callable[[], None]]:
    """``run(n)``: n units of the kind's work, unsynchronised; and a function freeing its buffers."""
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device=device).manual_seed(0)
    bufs: dict = {}
    if name in ("fp32", "duty", "fp32big", "bf16cap"):
        n = SIZES["big_n"] if name in ("fp32big", "bf16cap") else SIZES["matmul_n"]
        dtype = torch.bfloat16 if name == "bf16cap" else torch.float32
        a = torch.randn(n, n, device=device, generator=g).to(dtype)
        b = torch.randn(n, n, device=device, generator=g).to(dtype)
        bufs.update(a=a, b=b, out=torch.empty_like(a))

        def run(k: int) -> None:
            for _ in range(k):
                torch.matmul(bufs["a"], bufs["b"], out=bufs["out"])

    elif name == "copy":
        nbytes = SIZES["copy_bytes"]
        bufs.update(
            src=torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=device, generator=g),
            dst=torch.empty(nbytes, dtype=torch.uint8, device=device),
        )

        def run(k: int) -> None:
            for _ in range(k):
                bufs["dst"].copy_(bufs["src"])

    elif name == "launch":
        bufs.update(x=torch.zeros(SIZES["launch_elems"], device=device))

        def run(k: int) -> None:
            x = bufs["x"]
            for _ in range(k):
                x.add_(1.0)

    else:
        raise ValueError(f"no kind of work named {name!r} (kinds: {', '.join(SPECS)})")

    def close() -> None:
        bufs.clear()
        if device == "cuda":
            torch.cuda.empty_cache()

    return run, close


def build(name: str, params: dict | None = None, log=print, device: str = "cuda") -> Work:
    """A GPU kind on CUDA device 0 (``CUDA_VISIBLE_DEVICES`` picks the board).

    Args:
        name: One of :data:`ALL_KINDS`.
        params: A previous run's recorded params: reuse its counts (no calibration).
        log: Where calibration reports.
        device: ``"cuda"``; the CPU tests pass ``"cpu"`` (with small :data:`SIZES`).

    Raises:
        ValueError: an unknown kind.
    """
    import torch

    spec = SPECS.get(name)
    if spec is None:
        raise ValueError(f"no kind of work named {name!r} (kinds: {', '.join(SPECS)})")
    run, close = _units_fn(name, torch, device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    run(2)  # first use: cuBLAS handles, allocator
    sync()
    if params and "units" in params:
        units, single_units = int(params["units"]), int(params["single_units"])
        calibration = params.get("calibration")
    else:
        units, single_units, calibration = _calibrate(spec, run, sync)
        log(f"{name}: {units} units a call, {single_units} a single call ({calibration})")
    sleep_s = spec.host_sleep_ms / 1e3

    def call() -> None:
        run(units)
        sync()
        if sleep_s:
            time.sleep(sleep_s)

    def single() -> None:
        run(single_units)
        sync()
        if sleep_s:
            time.sleep(sleep_s)

    return Work(
        name=name,
        call=call,
        single=single,
        single_share=single_units / units,
        sync=sync,
        params={
            "description": spec.description,
            "units": units,
            "single_units": single_units,
            "host_sleep_ms": spec.host_sleep_ms,
            "calibration": calibration,
            "torch": torch.__version__,
            "device_name": torch.cuda.get_device_name(0) if device == "cuda" else device,
            "sizes": dict(SIZES),
        },
        close=close,
    )


def _calibrate(spec: _Spec, run, sync, calls: int = 5) -> tuple[int, int, dict]:
    """Counts for the call's target from the time of ``calls`` calls of the guessed count (~2 s warm).

    The guessed calls run for ``CALIBRATE_WARM_S`` first; the median of the timed ones
    sets the count.
    """
    warm_end = time.perf_counter() + CALIBRATE_WARM_S
    while time.perf_counter() < warm_end:
        run(spec.guess_units)
        sync()
    times_ms = []
    for _ in range(calls):
        t0 = time.perf_counter()
        run(spec.guess_units)
        sync()
        times_ms.append((time.perf_counter() - t0) * 1e3)
    unit_ms = sorted(times_ms)[len(times_ms) // 2] / spec.guess_units
    units = spec.guess_units if spec.target_ms is None else max(1, round(spec.target_ms / unit_ms))
    if spec.single_units is not None:
        single_units = spec.single_units
    elif spec.host_sleep_ms or units * unit_ms <= 1.5 * SINGLE_TARGET_MS:
        single_units = units  # the call is already ~20 ms (or its sleep is part of it)
    else:
        single_units = max(1, round(SINGLE_TARGET_MS / unit_ms))
    return units, single_units, {"guess_units": spec.guess_units, "unit_ms": unit_ms, "timed_ms": times_ms}


# -- simulated twins ----------------------------------------------------------

# (call s, load above idle W while busy, busy share of the call, single's share of a call):
# powers roughly as the H200 draws them (fp32 553 W: results/probe-h200.json; the capped
# kinds at the 700 W limit less the 121 W context idle); the rest are placeholders.
SIM = {
    "fp32": (0.041, 553.0, 1.0, 7 / 15),
    "bf16cap": (0.040, 579.0, 1.0, 0.5),
    "copy": (0.020, 250.0, 1.0, 1.0),
    "duty": (0.030, 553.0, 0.5, 1.0),
    "launch": (0.020, 60.0, 1.0, 1.0),
    "fp32big": (0.043, 579.0, 1.0, 0.5),
}


def simulated(name: str, board) -> Work:
    """The kind's twin on a simulated board: set power for set virtual time.

    Raises:
        ValueError: an unknown kind.
    """
    if name not in SIM:
        raise ValueError(f"no kind of work named {name!r} (kinds: {', '.join(SIM)})")
    call_s, load_w, busy, share = SIM[name]

    def burst(seconds: float) -> None:
        board.set_load(load_w)
        board.clock.sleep(seconds * busy)
        board.set_load(0.0)
        board.clock.sleep(seconds * (1 - busy))

    single_s = call_s * share if not math.isclose(share, 1.0) else call_s
    return Work(
        name=name,
        call=lambda: burst(call_s),
        single=lambda: burst(single_s),
        single_share=share,
        sync=lambda: None,
        params={
            "description": f"simulated: {load_w:.0f} W above idle for {busy:.0%} of {call_s * 1e3:.0f} ms",
            "simulated": True,
            "call_s": call_s,
            "load_w": load_w,
            "busy_share": busy,
            "units": 1,
        },
    )
