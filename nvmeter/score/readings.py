"""The raw readings of one run: timed calls, idle spans, window blocks and the energy block."""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, replace

from nvmeter.meter.baseline import IdleBaseline
from nvmeter.meter.measurement import Measurement
from nvmeter.meter.span import AlignedSpan
from nvmeter.probes.check import CheckResult, check
from nvmeter.probes.reference import Trial


@dataclass(frozen=True)
class TimedCall:
    """One timed call: the draw, the method's time by CUDA events (ms) and its correct labels."""

    dataset: str
    seed: int
    ms: float
    correct: int
    rows: int


@dataclass(frozen=True)
class IdleReading:
    """An idle span with the worker frozen, and what the board said during it.

    Attributes:
        span: The span, edges on counter steps.
        settle_s: Wait between the freeze and the span, s.
        gpu_pct: GPU utilisation read at the span's end (the driver's last sample
            period, 1/6 s to 1 s, lies inside the span), percent (None: the board does not say).
        pids: Processes holding a compute context during the span (NVML's view; None: the
            board does not say).
        worker_pid: The worker's process id (the parent's view).

    """

    span: AlignedSpan
    settle_s: float
    gpu_pct: float | None
    pids: tuple[int, ...] | None
    worker_pid: int

    def __repr__(self) -> str:
        busy = "unknown" if self.gpu_pct is None else f"{self.gpu_pct:g}%"
        pids = "unknown" if self.pids is None else list(self.pids)
        return (
            f"IdleReading({self.span.power_w:,.1f} W over {self.span.duration_s:.2f} s, settled "
            f"{self.settle_s:g} s after the freeze, GPU {busy}, pids {pids})"
        )

    @property
    def others(self) -> tuple[int, ...] | None:
        """Processes on the GPU other than the worker.

        One process that is not the worker's pid counts as the worker: inside a
        container NVML reports pids of another namespace. None where the board does not say.
        """
        if self.pids is None:
            return None
        others = tuple(p for p in self.pids if p != self.worker_pid)
        if self.worker_pid not in self.pids and len(self.pids) == 1:
            return ()
        return others

    def to_dict(self) -> dict:
        """JSON form."""
        return {
            "span": self.span.to_dict(),
            "settle_s": self.settle_s,
            "gpu_pct": self.gpu_pct,
            "pids": None if self.pids is None else list(self.pids),
            "worker_pid": self.worker_pid,
        }

    @classmethod
    def from_dict(cls, d: dict) -> IdleReading:
        """Inverse of :meth:`to_dict`."""
        return cls(
            AlignedSpan.from_dict(d["span"]),
            d["settle_s"],
            d["gpu_pct"],
            None if d["pids"] is None else tuple(d["pids"]),
            d["worker_pid"],
        )


@dataclass(frozen=True)
class Block:
    """A window's calls as the worker ran them.

    Attributes:
        kind: ``"method"`` or ``"null"`` (the control's null calls).
        t0_s, t1_s: Before the first call and after the last, s on the shared clock.
        ms: Each call's time by CUDA events (the host clock on CPU), ms, shape (calls,).
        draws: The (dataset, seed) draws the calls cycled through.
        correct: Method calls: each call's correct labels, judged by the scorer.
        rows: Test rows of each draw.

    """

    kind: str
    t0_s: float
    t1_s: float
    ms: tuple[float, ...]
    draws: tuple[tuple[str, int], ...]
    correct: tuple[int, ...] = ()
    rows: int = 0

    def __repr__(self) -> str:
        return (
            f"Block({self.kind}: {self.calls} calls in {self.t1_s - self.t0_s:.2f} s, "
            f"{self.wall_ms_per_call:,.2f} ms a call)"
        )

    @property
    def calls(self) -> int:
        """Calls in the window."""
        return len(self.ms)

    @property
    def wall_ms_per_call(self) -> float:
        """Wall time per call, harness included, ms."""
        return (self.t1_s - self.t0_s) * 1e3 / self.calls if self.calls else math.nan

    def call_draws(self) -> list[tuple[str, int]]:
        """The draw of each call, in order."""
        return list(itertools.islice(itertools.cycle(self.draws), self.calls))

    def to_dict(self) -> dict:
        """JSON form."""
        return {**asdict(self), "draws": [list(d) for d in self.draws]}

    @classmethod
    def from_dict(cls, d: dict) -> Block:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: a call judged right on more rows than its draw holds, or judged calls
                that are not the block's (a breaker's edit printed an MNIST score of 100.05%).
        """
        block = cls(
            d["kind"],
            d["t0_s"],
            d["t1_s"],
            tuple(d["ms"]),
            tuple((ds, int(s)) for ds, s in d["draws"]),
            tuple(d["correct"]),
            d["rows"],
        )
        if block.correct and len(block.correct) != block.calls:
            raise ValueError(f"{len(block.correct)} calls judged, {block.calls} timed")
        if not all(type(c) is int for c in block.correct):
            raise ValueError("a call's count of right labels is not a whole number")
        if any(not 0 <= c <= block.rows for c in block.correct):
            raise ValueError(
                f"a call judged right on more rows than its draw's {block.rows}, or on fewer than 0"
            )
        return block


@dataclass(frozen=True)
class Energy:
    """The raw readings of a run's energy: reference, three idle spans, control and method windows.

    The idle spans lie before the control window, between the two windows, and after
    the method window. The windows are stored as read; :attr:`control` and :attr:`method`
    rebuild their idle baseline from the spans either side and the method's control
    figure from the control window, so nothing stored as a figure is trusted.

    Attributes:
        reference: The constant-operand J/TFLOP trial (same worker, same context).
        band: Band forced by the caller, or None for the board family's.
        idle: (before the control, between, after the method).
        control_window: The control window as read.
        control_block: Its null calls.
        method_window: The method window as read.
        method_block: Its calls.
        warmup_block: The unmetered method calls just before the method window (None: none).

    """

    reference: Trial
    band: str | None
    idle: tuple[IdleReading, IdleReading, IdleReading]
    control_window: Measurement
    control_block: Block
    method_window: Measurement
    method_block: Block
    warmup_block: Block | None = None

    def __repr__(self) -> str:
        control = self.control
        return (
            f"Energy({self.method!r}; control {control.per_call_mj:,.1f} ± {control.per_call_mj_err:,.1f} "
            f"mJ/call; reference {self.reference.j_per_tflop:.2f} J/TFLOP)"
        )

    @property
    def control(self) -> Measurement:
        """The control window, above the frozen idle either side of it."""
        baseline = self._frozen(self.control_window, 0, 1)
        return replace(self.control_window, idle=baseline, control_mj=0.0, control_err_mj=0.0)

    @property
    def method(self) -> Measurement:
        """The method window above the frozen idle either side, less the control per call."""
        control = self.control
        baseline = self._frozen(self.method_window, 1, 2)
        return replace(
            self.method_window,
            idle=baseline,
            control_mj=control.per_call_mj,
            control_err_mj=control.per_call_mj_err,
        )

    def _frozen(self, window: Measurement, *which: int) -> IdleBaseline:
        """The frozen idle of spans ``which``, bounded as ``window``'s error model bounds rebuilt idles."""
        spans = [self.idle[i].span for i in which]
        return IdleBaseline.from_spans(spans, "frozen", polling_artefact_w=window.idle_artefact_w)

    @property
    def check_result(self) -> CheckResult:
        """The reference judged against its band (``nvmeter check``'s rules)."""
        return check(self.method_window.device, self.reference, self.band)

    @property
    def samples_per_call_mj(self) -> float:
        """The same method window read from the power-sample buffer, mJ (a cross-check)."""
        return self.method.with_method("samples").per_call_mj

    def to_dict(self) -> dict:
        """JSON form: raw readings (each window's derived block is informative only)."""
        return {
            "band": self.band,
            "reference": self.reference.to_dict(),
            "idle": [i.to_dict() for i in self.idle],
            "control": {"window": self.control.to_dict(), "block": self.control_block.to_dict()},
            "method": {"window": self.method.to_dict(), "block": self.method_block.to_dict()},
            "warmup": self.warmup_block.to_dict() if self.warmup_block else None,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Energy:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: not three idle spans; KeyError, TypeError: a missing or mistyped field; the
                windows' RecordError (:meth:`Measurement.from_dict`). The score record's reader
                names the file for each (:func:`nvmeter.records.building`).
        """
        idle = tuple(IdleReading.from_dict(i) for i in d["idle"])
        if len(idle) != 3:
            raise ValueError(f"three idle spans expected, found {len(idle)}")
        energy = cls(
            Trial.from_dict(d["reference"]),
            d["band"],
            idle,
            Measurement.from_dict(d["control"]["window"]),
            Block.from_dict(d["control"]["block"]),
            Measurement.from_dict(d["method"]["window"]),
            Block.from_dict(d["method"]["block"]),
            Block.from_dict(d["warmup"]) if d["warmup"] is not None else None,
        )
        # a window's calls are its block's: one edited alone read 14x a call's energy, 883 W above
        # idle on a 700 W board, as a pass (a breaker's trial, 2026-12-07)
        for name, window, block in (
            ("control", energy.control_window, energy.control_block),
            ("method", energy.method_window, energy.method_block),
        ):
            if window.calls != block.calls:
                raise ValueError(f"the {name} window counts {window.calls} call(s), its block {block.calls}")
        return energy
