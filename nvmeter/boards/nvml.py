"""The one module that talks to NVML.

Everything NVML can do wrong becomes an :mod:`nvmeter.errors` exception here, raised
``from`` the original, with a one-line cause. CUDA device indices are mapped to
NVML handles by UUID through ``CUDA_VISIBLE_DEVICES``, since NVML enumerates in PCI
order and ignores that variable (docs/facts.md; NVML API reference).
"""

from __future__ import annotations

import bisect
import functools
import math
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import TypeVar

from nvmeter import errors
from nvmeter.boards.protocol import (
    BoardIdentity,
    BoardState,
    ClockSample,
    PowerSample,
    Utilization,
    checked_pids,
    device_spec,
)
from nvmeter.clock import Clock, RealClock

T = TypeVar("T")
S = TypeVar("S", PowerSample, ClockSample)

# in Python, --simulate is a board given as the device, or Rig.open's simulate=True (a new user's trial)
_SIMULATE_HINT = (
    "try --simulate to run on the simulated board (in Python: an nvmeter.SimulatedBoard as the device, "
    "nvmeter.simulated_host(n) for several, Rig.open(simulate=True))"
)
_NO_DRIVER_HINT = f"no NVIDIA driver or GPU found on this machine; {_SIMULATE_HINT}"


@functools.cache
def _pynvml():
    """Import ``pynvml`` once, refusing the deprecated PyPI package of that name."""
    try:
        import pynvml
    except ImportError as exc:
        raise errors.NvmlUnavailable(
            "the nvidia-ml-py package is not installed (pip install nvidia-ml-py)"
        ) from exc
    _warn_if_shadowed(pynvml)
    return pynvml


def _warn_if_shadowed(module) -> None:
    """Warn loudly when ``pynvml`` comes from the deprecated ``pynvml`` distribution.

    nvidia-ml-py is NVIDIA's binding; the PyPI package ``pynvml`` is deprecated and
    its older releases ship a ``pynvml.py`` of their own that shadows it.
    """
    from importlib import metadata

    try:
        files = metadata.files("nvidia-ml-py") or []
    except metadata.PackageNotFoundError:
        files = []
    ours = {os.path.realpath(str(f.locate())) for f in files if str(f).endswith("pynvml.py")}
    if os.path.realpath(module.__file__ or "") not in ours:
        message = (
            f"nvmeter: module pynvml at {module.__file__} does not come from nvidia-ml-py; "
            "the deprecated 'pynvml' package shadows it: pip uninstall pynvml && "
            "pip install --force-reinstall nvidia-ml-py"
        )
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        print(message, file=sys.stderr)


# NVML return codes (nvml.h), by name, where the binding lacks a constant (older nvidia-ml-py).
_CODES = {
    "NVML_ERROR_UNINITIALIZED": 1,
    "NVML_ERROR_INVALID_ARGUMENT": 2,
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NO_PERMISSION": 4,
    "NVML_ERROR_NOT_FOUND": 6,
    "NVML_ERROR_DRIVER_NOT_LOADED": 9,
    "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
    "NVML_ERROR_FUNCTION_NOT_FOUND": 13,
    "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_NOT_READY": 27,
}
# NOT_READY: a board that has just started answers it for a moment (reported by users of
# other GPU-energy tools; docs/failures.md). Retried this many times, the waits doubling
# from the first: at most ~0.3 s in all, so an edge read is never stalled for long.
NOT_READY_TRIES = 6
NOT_READY_FIRST_WAIT_S = 0.01


def _code(name: str) -> int:
    return getattr(_pynvml(), name, _CODES[name])


def _translate(exc: Exception, what: str) -> errors.TelemetryError:
    """Map an NVMLError to nvmeter's exception for it (``what`` names the query and the board)."""
    code = getattr(exc, "value", None)
    table: dict[int, tuple[type[errors.TelemetryError], str]] = {
        _code("NVML_ERROR_LIBRARY_NOT_FOUND"): (errors.NvmlUnavailable, _NO_DRIVER_HINT),
        _code("NVML_ERROR_DRIVER_NOT_LOADED"): (errors.NvmlUnavailable, _NO_DRIVER_HINT),
        _code("NVML_ERROR_NOT_SUPPORTED"): (
            errors.NotSupported,
            f"{what} is not supported on this board (pre-Volta, a MIG instance or a vGPU)",
        ),
        _code("NVML_ERROR_FUNCTION_NOT_FOUND"): (
            errors.NotSupported,
            f"{what}: this driver lacks the NVML function the bindings call (an older driver)",
        ),
        _code("NVML_ERROR_GPU_IS_LOST"): (
            errors.GpuLost,
            f"the GPU was lost while reading {what} (it fell off the bus or needs a reset)",
        ),
        _code("NVML_ERROR_NO_PERMISSION"): (
            errors.PermissionDenied,
            f"NVML refused {what}: no permission (run as a user allowed to query the GPU)",
        ),
        _code("NVML_ERROR_NOT_FOUND"): (errors.DeviceNotFound, f"{what}: not found"),
        _code("NVML_ERROR_INVALID_ARGUMENT"): (errors.DeviceNotFound, f"{what}: invalid device"),
        _code("NVML_ERROR_NOT_READY"): (
            errors.NotReady,
            f"{what}: counter not ready (NVML answered NOT_READY {NOT_READY_TRIES} times; "
            "a board that has just started): try again in a few seconds",
        ),
        _code("NVML_ERROR_UNINITIALIZED"): (
            errors.TelemetryError,
            f"NVML failed on {what}: Uninitialized (NVML was not initialised in this process)",
        ),
    }
    cls, message = table.get(code, (errors.TelemetryError, f"NVML failed on {what}: {exc}"))
    return cls(message)


def _call(what: str, fn: Callable[..., T], *args) -> T:
    """Call an NVML function, translating its errors; NOT_READY is retried a few times first."""
    nv = _pynvml()
    wait_s, attempt = NOT_READY_FIRST_WAIT_S, 1
    while True:
        try:
            return fn(*args)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) != _code("NVML_ERROR_NOT_READY") or attempt == NOT_READY_TRIES:
                raise _translate(exc, what) from exc
        _sleep(wait_s)
        wait_s, attempt = 2 * wait_s, attempt + 1


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # a seam for the tests


@functools.cache
def _init() -> None:
    """``nvmlInit`` once per process; NVML keeps its own reference count.

    A child forked after this (multiprocessing's fork start method) inherits a library
    that answers "Uninitialized", so the child forgets it was done and initialises again.
    """
    nv = _pynvml()
    _call("NVML initialisation", nv.nvmlInit)


def _forget_init_in_child() -> None:
    _init.cache_clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_init_in_child)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def visible_uuids() -> list[str]:
    """UUIDs of the GPUs CUDA would see, in CUDA index order.

    Returns:
        One ``GPU-…`` UUID per CUDA device index.

    Raises:
        NvmlUnavailable: no driver. NoGpu: NVML sees no GPU.
        DeviceNotFound: ``CUDA_VISIBLE_DEVICES`` names a GPU that does not exist.

    """
    _init()
    nv = _pynvml()
    count = _call("the device count", nv.nvmlDeviceGetCount)
    if count == 0:
        raise errors.NoGpu(f"NVML sees no GPU on this machine; {_SIMULATE_HINT}")
    all_uuids = [
        _text(_call("a UUID", nv.nvmlDeviceGetUUID, _call("a handle", nv.nvmlDeviceGetHandleByIndex, i)))
        for i in range(count)
    ]
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return all_uuids
    return [_match_visible(entry.strip(), all_uuids) for entry in _visible_entries(spec)]


def _visible_entries(spec: str) -> list[str]:
    # CUDA stops at the first invalid entry; "-1" or "" hides every GPU.
    entries = []
    for entry in spec.split(","):
        entry = entry.strip()
        if not entry or entry.startswith("-"):
            break
        entries.append(entry)
    return entries


def _match_visible(entry: str, all_uuids: list[str]) -> str:
    if entry.isdigit():
        index = int(entry)
        if index >= len(all_uuids):
            raise errors.DeviceNotFound(
                f"CUDA_VISIBLE_DEVICES names GPU {index} but this machine has {len(all_uuids)}"
            )
        return all_uuids[index]
    if entry.startswith("MIG-"):
        raise errors.NotSupported(
            f"{entry} is a MIG instance: MIG instances have no energy counter of their own"
        )
    hits = [u for u in all_uuids if u.startswith(entry if entry.startswith("GPU-") else f"GPU-{entry}")]
    if len(hits) != 1:
        raise errors.DeviceNotFound(f"CUDA_VISIBLE_DEVICES entry {entry!r} matches {len(hits)} GPUs")
    return hits[0]


def resolve_uuid(device: int | str | None) -> str:
    """The UUID of a device named by CUDA index, UUID (or unique prefix), or None (index 0).

    Raises:
        DeviceNotFound: no such index or UUID. NoGpu: ``CUDA_VISIBLE_DEVICES`` hides every GPU.
        UsageError: a malformed spec.

    """
    # a malformed spec is the caller's to fix, on any machine: said before NVML is asked
    device = device_spec(device)
    if device is None:
        device = 0
    index = isinstance(device, int)
    if not index and device.startswith("MIG-"):
        raise errors.NotSupported(f"{device} is a MIG instance: it has no energy counter of its own")
    uuids = visible_uuids()
    if not uuids:
        # CUDA_VISIBLE_DEVICES="" (or -1) hides every board: no GPU for this process, as CUDA sees it,
        # not a device named wrong (the pytest plugin skips the one and fails the other: a review)
        spec = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        raise errors.NoGpu(f"CUDA_VISIBLE_DEVICES={spec!r} hides every GPU; {_SIMULATE_HINT}")
    if index:
        if device >= len(uuids):
            raise errors.DeviceNotFound(
                f"no GPU with CUDA index {device}: {len(uuids)} visible (indices 0-{len(uuids) - 1})"
            )
        return uuids[device]
    hits = [u for u in uuids if u.startswith(device)]
    if len(hits) != 1:
        raise errors.DeviceNotFound(f"{device} matches {len(hits)} visible GPUs")
    return hits[0]


class _StampMap:
    """NVML's sample stamps (us) onto a monotonic clock, one time for each stamp however often read.

    NVML stamps samples with the host's wall clock. The wall-minus-monotonic offset is taken at
    every read; one that moved from the last by more than :data:`RETAKE_S` applies only to stamps
    later than any seen before. So a sample read twice maps to one time (``merge_samples`` drops
    repeats by time: an offset taken afresh at each read kept every re-read sample again, 238 ns
    apart, a code review), and a wall clock stepped during a long monitor (NTP, an admin) moves
    the samples stamped after the step with it, not every later one by the step.
    """

    # Above the jitter of the offset itself (38 us at most over 100,000 back-to-back reads on the
    # development machine, 2026-12-06), far below a sample spacing (~20 ms on the H100 and H200:
    # results/probe-h200.json). A choice.
    RETAKE_S = 0.001
    # Offsets kept: the buffer holds ~2 s of samples, far fewer retakes than this.
    KEPT = 256

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._on_wall: bool | None = None
        self._from_us: list[int] = []  # the first stamp each offset applies to, rising
        self._offsets_s: list[float] = []
        self._latest_us = -1

    def mapper(self, latest_us: int | None) -> Callable[[int], float]:
        """The map for one read whose newest stamp is ``latest_us`` (None: an empty buffer)."""
        if self._on_wall is None and latest_us is not None:
            # which clock the stamps are on, decided once: the wall's, or already a monotonic one
            self._on_wall = abs(latest_us * 1e-6 - time.time()) < 3600
        if not self._on_wall or latest_us is None:
            return self._t_s
        offset_s = time.time() - self.clock.now()
        if not self._offsets_s or abs(offset_s - self._offsets_s[-1]) > self.RETAKE_S:
            self._from_us.append(self._latest_us + 1)
            self._offsets_s.append(offset_s)
            del self._from_us[: -self.KEPT], self._offsets_s[: -self.KEPT]
        self._latest_us = max(self._latest_us, latest_us)
        return self._t_s

    def _t_s(self, stamp_us: int) -> float:
        i = bisect.bisect_right(self._from_us, stamp_us) - 1
        return stamp_us * 1e-6 - (self._offsets_s[max(i, 0)] if self._offsets_s else 0.0)


class NvmlBoard:
    """A real GPU through NVML. Implements :class:`nvmeter.boards.protocol.Board`.

    Every error names the board (its UUID): on a host with several, the message says which.
    The board works in a child forked after it was made (it takes a fresh handle there).

    Args:
        device: CUDA index (``CUDA_VISIBLE_DEVICES`` respected), ``GPU-…`` UUID or
            unique prefix, or None for index 0.
        clock: The clock sample timestamps are mapped onto (default: real).

    Raises:
        NvmlUnavailable, NoGpu, DeviceNotFound, NotSupported, PermissionDenied.

    """

    def __init__(self, device: int | str | None = None, clock: Clock | None = None) -> None:
        self.clock = clock or RealClock()
        self.uuid = resolve_uuid(device)
        self._pid = -1
        self._handle_ = None
        self._identity: BoardIdentity | None = None
        self._stamps = _StampMap(self.clock)
        self._open()  # a UUID NVML cannot open fails here, not at the first read

    def __repr__(self) -> str:
        return f"NvmlBoard({self.uuid})"

    def _open(self):
        """The NVML handle; a fresh one in a process forked after the last (handles do not cross a fork)."""
        if self._pid != os.getpid():
            _init()
            nv = _pynvml()
            self._handle_ = _call(f"GPU {self.uuid}", nv.nvmlDeviceGetHandleByUUID, self.uuid.encode())
            self._pid = os.getpid()
        return self._handle_

    @property
    def _handle(self):
        return self._open()

    def _q(self, what: str, fn: Callable[..., T], *args) -> T:
        """``fn(handle, *args)``, its errors naming this board."""
        return _call(f"{what} of {self.uuid}", fn, self._handle, *args)

    def identity(self) -> BoardIdentity:
        """Name, UUID, PCI bus id, driver, VBIOS, power limit (W; nan where not reported) and memory (MiB)."""
        if self._identity is None:
            nv = _pynvml()
            try:
                vbios = _text(self._q("the VBIOS version", nv.nvmlDeviceGetVbiosVersion))
            except errors.NotSupported:
                vbios = ""
            try:  # a board without power telemetry: the limit is unknown, never 0 W
                power_limit_w = self._q("the power limit", nv.nvmlDeviceGetEnforcedPowerLimit) / 1e3
            except errors.NotSupported:
                power_limit_w = math.nan
            self._identity = BoardIdentity(
                name=_text(self._q("the name", nv.nvmlDeviceGetName)),
                uuid=self.uuid,
                pci_bus_id=_text(self._q("the PCI info", nv.nvmlDeviceGetPciInfo).busId),
                driver=_text(_call("the driver version", nv.nvmlSystemGetDriverVersion)),
                vbios=vbios,
                power_limit_w=power_limit_w,
                memory_total_mib=self._q("the memory info", nv.nvmlDeviceGetMemoryInfo).total / 2**20,
            )
        return self._identity

    def energy_mj(self) -> int:
        """Total energy counter, mJ."""
        nv = _pynvml()
        return int(self._q("the energy counter", nv.nvmlDeviceGetTotalEnergyConsumption))

    def _field_w(self, field_id: int, what: str) -> float:
        nv = _pynvml()

        def read(handle):
            (value,) = nv.nvmlDeviceGetFieldValues(handle, [field_id])
            if value.nvmlReturn != nv.NVML_SUCCESS:  # each field has its own status (NOT_READY too)
                raise nv.NVMLError(value.nvmlReturn)
            return value

        return self._q(what, read).value.uiVal / 1e3

    def power_instant_w(self) -> float:
        """Field ``NVML_FI_DEV_POWER_INSTANT``, W."""
        return self._field_w(_pynvml().NVML_FI_DEV_POWER_INSTANT, "instant power")

    def power_average_w(self) -> float:
        """Field ``NVML_FI_DEV_POWER_AVERAGE``, W."""
        return self._field_w(_pynvml().NVML_FI_DEV_POWER_AVERAGE, "average power")

    def power_samples(self, since_s: float | None = None) -> tuple[PowerSample, ...]:
        """The driver's power-sample buffer (``NVML_TOTAL_POWER_SAMPLES``), oldest first.

        Timestamps come from NVML in microseconds of the host's wall clock; they are
        mapped onto ``self.clock``. An empty buffer gives an empty tuple.
        """
        buffer = _pynvml().NVML_TOTAL_POWER_SAMPLES
        return self._samples(
            buffer, "the power-sample buffer", since_s, lambda t_s, mw: PowerSample(t_s, mw / 1e3)
        )

    def clock_samples(self, since_s: float | None = None) -> tuple[ClockSample, ...]:
        """The driver's SM-clock sample buffer (``NVML_PROCESSOR_CLK_SAMPLES``), oldest first.

        Timestamps are mapped as :meth:`power_samples` maps them. Raises NotSupported where
        the board keeps no such buffer.
        """
        buffer = _pynvml().NVML_PROCESSOR_CLK_SAMPLES
        return self._samples(
            buffer, "the SM-clock sample buffer", since_s, lambda t_s, mhz: ClockSample(t_s, float(mhz))
        )

    def _samples(
        self, sampling_type: int, what: str, since_s: float | None, sample: Callable[[float, int], S]
    ) -> tuple[S, ...]:
        """A driver sample buffer as ``sample(t_s, raw value)`` after ``since_s``, oldest first."""
        raw = self._buffer(sampling_type, what)
        t_s = self._stamps.mapper(max((s.timeStamp for s in raw), default=None))
        samples = sorted((sample(t_s(s.timeStamp), s.sampleValue.uiVal) for s in raw), key=lambda s: s.t_s)
        return tuple(s for s in samples if since_s is None or s.t_s > since_s)

    def _buffer(self, sampling_type: int, what: str) -> list:
        """One of the driver's sample buffers, raw (an empty one as [])."""
        nv = _pynvml()

        def read(handle):
            try:
                return nv.nvmlDeviceGetSamples(handle, sampling_type, 0)[1]
            except nv.NVMLError as exc:
                if getattr(exc, "value", None) == nv.NVML_ERROR_NOT_FOUND:
                    return []  # an empty buffer
                raise

        return self._q(what, read)

    def utilization(self) -> Utilization:
        """GPU and memory utilisation, percent."""
        nv = _pynvml()
        u = self._q("utilisation", nv.nvmlDeviceGetUtilizationRates)
        return Utilization(float(u.gpu), float(u.memory))

    def compute_process_count(self) -> int:
        """Processes holding a compute context on this board."""
        return len(self._compute_processes())

    def compute_pids(self) -> tuple[int, ...]:
        """Process ids of the processes holding a compute context (the driver's pid namespace)."""
        return checked_pids(p.pid for p in self._compute_processes())

    def _compute_processes(self) -> list:
        nv = _pynvml()
        return self._q("the compute processes", nv.nvmlDeviceGetComputeRunningProcesses)

    def state(self) -> BoardState:
        """SM and memory clocks (MHz), GPU temperature (°C), clock-event reasons (bitmask).

        Each is one cheap NVML query (microseconds, no counter read); a query the board
        does not support reads nan (or -1 for the reasons) rather than failing the window.
        """
        nv = _pynvml()
        t_s = self.clock.now()
        # the bindings renamed "throttle" to "clocks event" reasons (nvidia-ml-py 12.535+)
        reasons_fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        reasons_fn = reasons_fn or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        return BoardState(
            t_s,
            self._optional("the SM clock", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM),
            self._optional("the memory clock", nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_MEM),
            self._optional("the temperature", nv.nvmlDeviceGetTemperature, nv.NVML_TEMPERATURE_GPU),
            int(self._optional("the clock-event reasons", reasons_fn, default=-1)),
        )

    def _optional(self, what: str, fn, *args, default: float = float("nan")) -> float:
        try:
            return float(self._q(what, fn, *args))
        except errors.NotSupported:
            return default
