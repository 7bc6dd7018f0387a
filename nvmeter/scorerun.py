"""One run of ``nvmeter score``: what it measured (raw), and every figure derived from that.

A :class:`RunRecord` holds raw readings only: each timed call's ms and correct count, the
reference's spans, the idle spans with what the board said about itself meanwhile, and the
control and method windows (their counter edges, ticks and samples as
:class:`~nvmeter.window.Measurement` keeps them) with the worker's timestamps of the calls.
Every figure (the verdict, ms per call, mJ per call above idle and its bound, the checks) is
a property computed from those, so ``nvmeter summarize`` recomputes a record with today's
code and refuses one whose stored figures disagree.

The record's JSON form (kind ``score``) carries ``schema_version``; its history is in
:mod:`nvmeter.records`.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from nvmeter import errors
from nvmeter.bands import BANDS
from nvmeter.board import BoardIdentity
from nvmeter.check import CheckResult, Verdict, check
from nvmeter.idle import IdleBaseline
from nvmeter.probes.reference import Trial
from nvmeter.span import AlignedSpan
from nvmeter.window import WARMUP_S, Measurement
from nvmeter.workloads import judge, task

KIND = "score"

# -- the defaults, and why ----------------------------------------------------------
# Method window, s. On our H200s, aligned-edge windows of 2 s read per-call energy above
# idle within 0.72% of 60 s references (run 2, another board than the error model was
# fitted on, windows after a warm-up: median 0.32%, the stated bound holding 9 of 10)
# and within 0.36% when started cold (run 1: median 0.16%); 4 s windows within 0.60% and
# 0.46%. Twice the length buys no clear accuracy, and the bound states what is left
# (results/window-accuracy-h200-run2-summary.json, window-accuracy-h200-summary.json,
# docs/window.md). So 2 s reads as well as the A100 scorer's 20 s at a tenth of the time.
WINDOW_S = 2.0
# Unmetered calls of the method just before its window, s (at least one call): after
# idle the clocks ramp for ~0.3 s and a window that starts cold reads low, so its bound
# widens (window.COLD_REL); measure() warms up as long (window.WARMUP_S).
WINDOW_WARMUP_S = WARMUP_S
# A window holds whole calls and at least this many, so a 3 s call is averaged over
# several (its window then runs ~12 s) rather than read from one or two.
MIN_CALLS = 4
# Control window of null calls, s: the same evidence as the method window.
CONTROL_S = 2.0
# Settle after freezing the worker, s. After a load the counter follows within a fitted
# 11 ms and the power samples are back at idle within ~60 ms (results/probe-h200.json,
# step response and bursts); 1 s is 16 times that. The A100 scorer settled 3 s.
IDLE_SETTLE_S = 1.0
# Idle span, s: 20 counter periods; the aligned edges are known to ~3 ms each, 0.3% of
# 2 s (nvmeter.idle: 1 s spans are known to ~0.3%). The A100 scorer measured 5 s.
IDLE_S = 2.0
# The J/TFLOP reference: "quick" is 1 s of products between 0.6 s idle spans
# (nvmeter.probes.reference); on our H200 it read 5.78 J/TFLOP against the full
# probe's 5.76 (results/probe-h200-quick.json, probe-h200.json), 0.3% apart inside a
# band of +-20%. "full" is the 5 s recipe the A100 scorer and `nvmeter check` use.
REFERENCE = "quick"
# A timed call that takes longer than this, s, counts as hung: the worker is killed.
# The slowest method (the difficulty-4 Ladder) takes ~3 s a call and its first call
# compiles kernels; 300 s is far beyond that, yet bounds a hang's cost.
CALL_TIMEOUT_S = 300.0
# Draws a window cycles through (MNIST, seeds of their own): the calls are back to back,
# so the draws are built before the window; a call never sees the same draw as the one
# before it.
WINDOW_DRAWS = 4
# The task (WORKLOADS.md): 11 MNIST and 4 hold-out timed calls; 2 warm-ups (the first
# builds the trainer and captures graphs), as in nvmeter.workloads.evaluate.
MNIST_DRAWS = judge.RUN_MNIST_DRAWS
HOLDOUT_DRAWS = judge.RUN_HOLDOUT_DRAWS
WARMUP_CALLS = task.WARMUP_CALLS
# Window ms per call, less the control's (the harness), must lie within the timed calls'
# range widened by this share. Not their median: back-to-back window calls run on warm clocks
# and timed calls each start from idle after the L2 flush, so launch-bound eager methods run
# faster in the window (H200, results/score-h200: mlp_tf32 window 207-213 ms a call, timed
# calls 151-385 ms, medians 237-279 ms); graph methods agree to 2.4% (Ladder d3/d4).
WINDOW_MS_TOLERANCE = 0.10
# Window draws: a seed block of their own after the task's (nvmeter.workloads.task.Plan).
_WINDOW_SEED0 = 4_000


def _require(obj, names: tuple[str, ...], ok, what: str) -> None:
    """Raise UsageError naming the first of ``obj``'s attributes ``names`` that is not ``ok``."""
    for name in names:
        value = getattr(obj, name)
        if not ok(value):
            raise errors.UsageError(f"{name.replace('_', '-')} must be {what}, not {value!r}")


@dataclass(frozen=True)
class ScoreConfig:
    """How runs are measured; stored in every record.

    Attributes:
        window_s: Method window, s (whole calls, at least ``min_calls``).
        window_warmup_s: Unmetered method calls just before its window, s (at least one
            call; 0: none, and the window starts cold).
        min_calls: Fewest calls in the method window.
        control_s: Control window of null calls, s.
        idle_settle_s: Wait after freezing the worker before an idle span, s.
        idle_s: Each idle span, s.
        reference: ``"quick"`` or ``"full"`` J/TFLOP reference.
        band: Judge the reference against this band (a key of :data:`nvmeter.bands.BANDS`);
            None: the board family's.
        call_timeout_s: A call longer than this is a hang, s.
        mnist_draws, holdout_draws, warmup_calls: Timed calls of a run; fewer than the
            task's (11, 4, 2) make a partial run, marked so (tests use them).
        window_draws: MNIST draws the control and method windows cycle through.
        window_ms_tolerance: Accepted relative margin around the timed calls' range for
            the window's ms per call (less the control's).

    Raises:
        UsageError: a non-positive duration or count, or an unknown reference or band.

    """

    window_s: float = WINDOW_S
    window_warmup_s: float = WINDOW_WARMUP_S
    min_calls: int = MIN_CALLS
    control_s: float = CONTROL_S
    idle_settle_s: float = IDLE_SETTLE_S
    idle_s: float = IDLE_S
    reference: str = REFERENCE
    band: str | None = None
    call_timeout_s: float = CALL_TIMEOUT_S
    mnist_draws: int = MNIST_DRAWS
    holdout_draws: int = HOLDOUT_DRAWS
    warmup_calls: int = WARMUP_CALLS
    window_draws: int = WINDOW_DRAWS
    window_ms_tolerance: float = WINDOW_MS_TOLERANCE

    def __post_init__(self) -> None:
        def finite(v) -> bool:
            return isinstance(v, (int, float)) and math.isfinite(v)

        durations = ("window_s", "control_s", "idle_s", "call_timeout_s", "window_ms_tolerance")
        _require(self, durations, lambda v: finite(v) and v > 0, "a number > 0")
        _require(self, ("idle_settle_s", "window_warmup_s"), lambda v: finite(v) and v >= 0, "a number >= 0")
        counts = ("min_calls", "mnist_draws", "window_draws")
        _require(self, counts, lambda v: isinstance(v, int) and v >= 1, "a whole number >= 1")
        optional = ("holdout_draws", "warmup_calls")
        _require(self, optional, lambda v: isinstance(v, int) and v >= 0, "a whole number >= 0")
        if self.reference not in ("quick", "full"):
            raise errors.UsageError(f"reference must be 'quick' or 'full', not {self.reference!r}")
        if self.band is not None and self.band not in BANDS:
            raise errors.UsageError(f"unknown band {self.band!r}; known: {', '.join(BANDS)}")

    @property
    def full_task(self) -> bool:
        """True when the run makes at least the task's timed calls (11 MNIST + 4 hold-out)."""
        return self.mnist_draws >= MNIST_DRAWS and self.holdout_draws >= HOLDOUT_DRAWS

    def to_dict(self) -> dict:
        """JSON form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ScoreConfig:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class DrawPlan:
    """Which draws one run uses; every seed derives from ``seed``.

    Attributes:
        seed: The run seed (also the split seed of its draws).
        holdout: ``kmnist`` where cached, else ``fashion`` (WORKLOADS.md).
        kmnist_available: Whether KMNIST was in the cache.
        warmup_dataset: Warm-ups use the foreign set that is not the hold-out (Fashion-MNIST
            draws of other seeds where KMNIST is missing).
        warmup_seeds, mnist_seeds, holdout_seeds, window_seeds: Draw seeds.
        order: The timed calls' secret order, (dataset, seed) pairs.

    """

    seed: int
    holdout: str
    kmnist_available: bool
    warmup_dataset: str
    warmup_seeds: tuple[int, ...]
    mnist_seeds: tuple[int, ...]
    holdout_seeds: tuple[int, ...]
    window_seeds: tuple[int, ...]
    order: tuple[tuple[str, int], ...]

    @classmethod
    def make(cls, seed: int, kmnist: bool, config: ScoreConfig) -> DrawPlan:
        """The draws of run ``seed`` (KMNIST as hold-out only if ``kmnist``)."""
        plan = task.Plan.make(seed, kmnist, config.mnist_draws, config.holdout_draws, config.warmup_calls)
        return cls(
            seed=seed,
            holdout=plan.holdout,
            kmnist_available=kmnist,
            warmup_dataset=plan.warmup_dataset,
            warmup_seeds=plan.warmup_seeds,
            mnist_seeds=plan.mnist_seeds,
            holdout_seeds=plan.holdout_seeds,
            window_seeds=task.run_seeds(seed, _WINDOW_SEED0, config.window_draws),
            order=plan.order,
        )

    @property
    def window_draws(self) -> tuple[tuple[str, int], ...]:
        """(dataset, seed) of the window draws."""
        return tuple(("mnist", s) for s in self.window_seeds)

    def to_dict(self) -> dict:
        """JSON form."""
        return {**asdict(self), "order": [list(k) for k in self.order]}

    @classmethod
    def from_dict(cls, d: dict) -> DrawPlan:
        """Inverse of :meth:`to_dict`."""
        return cls(
            seed=d["seed"],
            holdout=d["holdout"],
            kmnist_available=d["kmnist_available"],
            warmup_dataset=d["warmup_dataset"],
            warmup_seeds=tuple(d["warmup_seeds"]),
            mnist_seeds=tuple(d["mnist_seeds"]),
            holdout_seeds=tuple(d["holdout_seeds"]),
            window_seeds=tuple(d["window_seeds"]),
            order=tuple((ds, int(s)) for ds, s in d["order"]),
        )


@dataclass(frozen=True)
class Target:
    """The method to score: a registered one (``graph_mlp``) or ``FILE.py:FUNCTION``.

    Attributes:
        name: ``graph_mlp``, or ``file.py:function`` (the file's name, not its folder).
        registered: True for a method of :data:`nvmeter.workloads.methods.METHODS`.
        file: Absolute path of its source (the module's file for a registered method).
        function: The function's name (``method`` for registered modules; the Ladder's
            registry key for its variants).
        sha256: Of the source file, when the run started.
        difficulty: The registered method's own level (None for a file).

    """

    name: str
    registered: bool
    file: str
    function: str
    sha256: str
    difficulty: int | None = None

    @classmethod
    def parse(cls, spec: str) -> Target:
        """Resolve ``spec`` without importing it (the worker imports it).

        Raises:
            UsageError: no such registered method, file, or top-level function in it;
                a file that is not Python or does not parse.

        """
        from nvmeter.workloads import methods

        spec = spec.strip()
        if ":" not in spec:
            if spec in methods.METHODS:
                return cls._registered(methods.METHODS[spec])
            hint = (
                "FILE.py:FUNCTION"
                if spec.endswith(".py")
                else f"FILE.py:FUNCTION or one of: {', '.join(methods.METHODS)}"
            )
            raise errors.UsageError(f"unknown method {spec!r}; give {hint}")
        file, function = spec.rsplit(":", 1)
        path = Path(file).expanduser()
        if not function.isidentifier():
            raise errors.UsageError(f"{spec!r}: {function!r} is not a Python function name")
        if not path.is_file():
            raise errors.UsageError(f"{path}: no such file" if not path.exists() else f"{path} is not a file")
        if path.suffix != ".py":
            raise errors.UsageError(f"{path} is not a .py file")
        try:
            source = path.read_bytes()
            tree = ast.parse(source, filename=str(path))
        except OSError as exc:
            raise errors.UsageError(f"cannot read {path}: {exc.strerror}") from exc
        except (SyntaxError, ValueError) as exc:
            where = f" (line {exc.lineno})" if getattr(exc, "lineno", None) else ""
            raise errors.UsageError(f"{path} is not valid Python{where}: {getattr(exc, 'msg', exc)}") from exc
        names = _top_level_names(tree)
        if function not in names:
            known = sorted(n for n in names if not n.startswith("_"))[:8]
            found = f" (it defines: {', '.join(known)})" if known else ""
            raise errors.UsageError(f"{path} has no top-level function {function!r}{found}")
        return cls(
            name=f"{path.name}:{function}",
            registered=False,
            file=str(path.resolve()),
            function=function,
            sha256=hashlib.sha256(source).hexdigest(),
        )

    @classmethod
    def _registered(cls, spec) -> Target:
        origin = importlib.util.find_spec(spec.module).origin
        return cls(
            name=spec.name,
            registered=True,
            file=origin,
            function=spec.name if spec.family else "method",
            sha256=hashlib.sha256(Path(origin).read_bytes()).hexdigest(),
            difficulty=spec.difficulty,
        )

    def load_request(self) -> dict:
        """The worker's ``load`` request for this target."""
        if self.registered:
            return {"method": self.name, "name": self.name}
        return {"file": self.file, "function": self.function, "name": self.name}

    def same_method(self, other: Target) -> bool:
        """Same name, source file and source bytes."""
        return (self.name, self.file, self.function, self.sha256) == (
            other.name,
            other.file,
            other.function,
            other.sha256,
        )

    def to_dict(self) -> dict:
        """JSON form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Target:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def _top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (defs, classes, assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):  # conditional definitions: look one level in
            names |= _top_level_names(ast.Module(body=list(ast.iter_child_nodes(node)), type_ignores=[]))
    return names


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
        """Inverse of :meth:`to_dict`."""
        return cls(
            d["kind"],
            d["t0_s"],
            d["t1_s"],
            tuple(d["ms"]),
            tuple((ds, int(s)) for ds, s in d["draws"]),
            tuple(d["correct"]),
            d["rows"],
        )


@dataclass(frozen=True)
class Check:
    """One check of a run's energy figure.

    Attributes:
        name: Short id, e.g. ``counter_monotonic``.
        status: ``"pass"``, ``"fail"`` (voids the energy figure) or ``"note"`` (said, not judged).
        detail: One line: what was seen.

    """

    name: str
    status: str
    detail: str

    def __repr__(self) -> str:
        return f"{self.status.upper()} {self.name}: {self.detail}"


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
        baseline = IdleBaseline.from_spans([self.idle[0].span, self.idle[1].span], "frozen")
        return replace(self.control_window, idle=baseline, control_mj=0.0, control_err_mj=0.0)

    @property
    def method(self) -> Measurement:
        """The method window above the frozen idle either side, less the control per call."""
        control = self.control
        baseline = IdleBaseline.from_spans([self.idle[1].span, self.idle[2].span], "frozen")
        return replace(
            self.method_window,
            idle=baseline,
            control_mj=control.per_call_mj,
            control_err_mj=control.per_call_mj_err,
        )

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
        """Inverse of :meth:`to_dict`."""
        idle = tuple(IdleReading.from_dict(i) for i in d["idle"])
        if len(idle) != 3:
            raise ValueError(f"three idle spans expected, found {len(idle)}")
        return cls(
            Trial.from_dict(d["reference"]),
            d["band"],
            idle,
            Measurement.from_dict(d["control"]["window"]),
            Block.from_dict(d["control"]["block"]),
            Measurement.from_dict(d["method"]["window"]),
            Block.from_dict(d["method"]["block"]),
            Block.from_dict(d["warmup"]) if d["warmup"] is not None else None,
        )


def energy_checks(
    energy: Energy, difficulty: int, timed_ms: Sequence[float], ms_tolerance: float
) -> tuple[Check, ...]:
    """Every check of the energy figure, from the raw readings.

    Args:
        energy: The run's energy readings.
        difficulty: The level the run was judged at (the window's accuracy floor).
        timed_ms: The timed calls, ms each.
        ms_tolerance: Accepted relative margin around the timed calls' range.

    """
    return (
        _monotonic(energy),
        _reliable(energy),
        _idle_utilisation(energy),
        _idle_processes(energy),
        _reference_exact(energy),
        _reference_band(energy),
        _band_provisional(energy),
        _window_accuracy(energy, difficulty),
        _window_ms(energy, timed_ms, ms_tolerance),
    )


def _series_in_order(energy: Energy):
    t = energy.reference
    spans = [t.idle_before, t.load, t.idle_after, energy.idle[0].span]
    yield from (s for span in spans for s in (span.start, span.end))
    yield from (energy.control_window.start, energy.control_window.end, energy.idle[1].span.start)
    yield from (energy.idle[1].span.end, energy.method_window.start, energy.method_window.end)
    yield from (energy.idle[2].span.start, energy.idle[2].span.end)


def _monotonic(energy: Energy) -> Check:
    values = [v for s in _series_in_order(energy) for v in s.energy_mj]
    backwards = sum(b < a for a, b in itertools.pairwise(values))
    if backwards:
        return Check("counter_monotonic", "fail", f"the energy counter went backwards {backwards} time(s)")
    return Check("counter_monotonic", "pass", f"{len(values):,} counter reads, never backwards")


def _reliable(energy: Energy) -> Check:
    bad = [
        f"{name}: {m.reason}"
        for name, m in (("control", energy.control), ("method", energy.method))
        if not m.reliable
    ]
    if bad:
        return Check("windows_reliable", "fail", "; ".join(bad))
    return Check("windows_reliable", "pass", "both windows' edges sat on counter steps")


def _idle_utilisation(energy: Energy) -> Check:
    if any(i.gpu_pct is None for i in energy.idle):
        return Check("idle_utilization_zero", "note", "the board does not report utilisation: not checked")
    busy = [f"{i.gpu_pct:g}%" for i in energy.idle if i.gpu_pct != 0]
    if busy:
        return Check("idle_utilization_zero", "fail", f"GPU busy during frozen idle: {', '.join(busy)}")
    return Check("idle_utilization_zero", "pass", "0% GPU utilisation in all three idle spans")


def _idle_processes(energy: Energy) -> Check:
    if any(i.pids is None for i in energy.idle):
        return Check("idle_no_other_process", "note", "the board does not list its processes: not checked")
    others = sorted({p for i in energy.idle for p in i.others})
    if others:
        return Check("idle_no_other_process", "fail", f"other processes on the GPU during idle: {others}")
    return Check("idle_no_other_process", "pass", "only the worker held a context during idle")


def _reference_exact(energy: Energy) -> Check:
    exact = energy.reference.exact
    if exact is True:
        return Check("reference_exact", "pass", "constant-operand products exact (true FP32)")
    err = energy.reference.run.max_abs_err
    return Check("reference_exact", "fail", f"products not exact (max |C-1| = {err}): not true FP32")


def _reference_band(energy: Energy) -> Check:
    result = energy.check_result
    t = energy.reference
    figures = f"{t.j_per_tflop:.2f} J/TFLOP at {t.tflops:.1f} TFLOP/s"
    if result.verdict is Verdict.NO_BAND:
        return Check("reference_in_band", "note", f"{figures}; no band known for {result.board.name}")
    if result.verdict is Verdict.FAIL:
        return Check("reference_in_band", "fail", f"{figures}: {'; '.join(result.reasons)}")
    return Check("reference_in_band", "pass", f"{figures} in {result.band.describe()}")


def _band_provisional(energy: Energy) -> Check:
    band = energy.check_result.band
    if band is None:
        return Check("band_provisional", "note", "no band: the reference is reported, not judged")
    if band.provisional:
        return Check("band_provisional", "note", f"the {band.family} band is provisional ({band.source})")
    return Check("band_provisional", "pass", f"the {band.family} band is established ({band.source})")


def _window_accuracy(energy: Energy, difficulty: int) -> Check:
    block = energy.method_block
    floor = judge.floor(block.rows, difficulty) if block.rows else 0
    pairs = list(zip(block.call_draws(), block.correct, strict=True))
    mnist = [c for (dataset, _), c in pairs if dataset == "mnist"]
    low = [c for c in mnist if c < floor]
    if not mnist:
        return Check("window_accuracy_floor", "fail", "no judged MNIST calls in the method window")
    worst = min(mnist)
    if low:
        return Check(
            "window_accuracy_floor",
            "fail",
            f"{len(low)} of {len(mnist)} window calls under the floor {floor:,} (worst {worst:,})",
        )
    return Check(
        "window_accuracy_floor", "pass", f"{len(mnist)} window calls at or above {floor:,} (worst {worst:,})"
    )


def _window_ms(energy: Energy, timed_ms: Sequence[float], tolerance: float) -> Check:
    method_ms = energy.method_block.wall_ms_per_call
    harness_ms = energy.control_block.wall_ms_per_call
    implied = method_ms - harness_ms
    low, high = (min(timed_ms), max(timed_ms)) if timed_ms else (math.nan, math.nan)
    detail = (
        f"window {method_ms:,.1f} ms a call less {harness_ms:,.2f} ms harness = {implied:,.1f} ms "
        f"vs timed {low:,.1f}-{high:,.1f} ms"
    )
    if low * (1 - tolerance) <= implied <= high * (1 + tolerance):
        return Check("window_ms_consistent", "pass", detail)
    return Check("window_ms_consistent", "fail", f"{detail}: beyond their range ±{tolerance:.0%}")


@dataclass(frozen=True)
class RunRecord:
    """One run: raw readings, with every figure derived on demand.

    Attributes:
        run: Its number in the output folder (1, 2, …).
        target: The method.
        difficulty: The level it was judged at.
        board: The board.
        config: How it was measured.
        plan: Its draws.
        worker_pid: The worker's process id (None if it never started).
        warmup_ms: Warm-up calls' times, ms.
        calls: The timed calls, in the order they ran.
        energy: The energy readings (None: the run did not pass, or failed before).
        error: Why the run stopped early (the worker died, hung, sent garbage; the method
            raised or returned bad output), or None.
        created_utc, host, argv, software: Provenance.

    """

    run: int
    target: Target
    difficulty: int
    board: BoardIdentity
    config: ScoreConfig
    plan: DrawPlan
    worker_pid: int | None = None
    warmup_ms: tuple[float, ...] = ()
    calls: tuple[TimedCall, ...] = ()
    energy: Energy | None = None
    error: str | None = None
    created_utc: str = ""
    host: str = ""
    argv: tuple[str, ...] = ()
    software: dict = field(default_factory=dict)

    # -- time and accuracy ---------------------------------------------------------
    @property
    def complete(self) -> bool:
        """True when every planned timed call ran."""
        return self.error is None and len(self.calls) == len(self.plan.order)

    @property
    def verdict(self) -> judge.Verdict | None:
        """The judge's verdict over the timed calls made (None before any MNIST call)."""
        mnist = [
            judge.Score(c.dataset, c.seed, c.correct, c.rows) for c in self.calls if c.dataset == "mnist"
        ]
        holdout = [
            judge.Score(c.dataset, c.seed, c.correct, c.rows) for c in self.calls if c.dataset != "mnist"
        ]
        return judge.judge(mnist, holdout, self.difficulty) if mnist else None

    @property
    def passed(self) -> bool:
        """Every timed call ran and the judge passed them."""
        verdict = self.verdict
        return self.complete and verdict is not None and verdict.passed

    @property
    def ms_per_call(self) -> float:
        """Median of the timed calls, ms (nan with none)."""
        return statistics.median(c.ms for c in self.calls) if self.calls else math.nan

    @property
    def mnist_accuracy(self) -> float:
        """Correct share of the MNIST timed calls (nan with none)."""
        v = self.verdict
        return v.mnist_correct / v.mnist_rows if v else math.nan

    @property
    def holdout_accuracy(self) -> float:
        """Correct share of the hold-out timed calls (nan with none)."""
        v = self.verdict
        return v.holdout_correct / v.holdout_rows if v and v.holdout_rows else math.nan

    # -- energy --------------------------------------------------------------------
    @property
    def checks(self) -> tuple[Check, ...]:
        """The energy figure's checks (empty without energy readings)."""
        if self.energy is None:
            return ()
        timed = [c.ms for c in self.calls]
        return energy_checks(self.energy, self.difficulty, timed, self.config.window_ms_tolerance)

    @property
    def energy_valid(self) -> bool:
        """A passing run with energy readings and no failed check."""
        return self.passed and self.energy is not None and not any(c.status == "fail" for c in self.checks)

    @property
    def energy_note(self) -> str:
        """Why there is no energy figure, or ``""``."""
        if self.error:
            return "not measured: the run failed"
        if not self.passed:
            return "not measured: the run did not pass"
        if self.energy is None:
            return "not measured"
        failed = [c.name for c in self.checks if c.status == "fail"]
        return f"void: {', '.join(failed)} failed" if failed else ""

    @property
    def status(self) -> str:
        """``"error"``, ``"fail"`` or ``"pass"`` (time and accuracy; see :attr:`energy_note`)."""
        if self.error:
            return "error"
        return "pass" if self.passed else "fail"

    def reasons(self) -> tuple[str, ...]:
        """Why the run failed, one line each (empty on a pass)."""
        if self.error:
            return (self.error,)
        verdict = self.verdict
        reasons = list(verdict.reasons) if verdict else []
        if not self.complete:
            reasons.append(f"{len(self.calls)} of {len(self.plan.order)} timed calls ran")
        return tuple(reasons)

    @property
    def w_above_idle(self) -> float:
        """Power above idle while the method runs: mJ per call / timed ms per call, W.

        As the A100 table's column reads (e.g. 2,429 mJ / 61.6 ms = 39 W for the CUDA-graph
        MLP); nan without energy readings.
        """
        if self.energy is None or not self.calls:
            return math.nan
        return self.energy.method.per_call_mj / self.ms_per_call

    def energy_figures(self) -> dict | None:
        """Per-call energy and what it rests on (None without energy readings)."""
        e = self.energy
        if e is None:
            return None
        m, c = e.method, e.control
        return {
            "mj_per_call": m.per_call_mj,
            "mj_per_call_err": m.per_call_mj_err,
            "w_above_idle": self.w_above_idle,
            "window_s": m.window_s,
            "window_calls": m.calls,
            "idle_w": m.idle_w,
            "idle_err_w": m.idle.err_w,
            "control_mj_per_call": c.per_call_mj,
            "control_mj_per_call_err": c.per_call_mj_err,
            "control_calls": c.calls,
            "samples_mj_per_call": e.samples_per_call_mj,
            "reference_j_per_tflop": e.reference.j_per_tflop,
            "reference_tflops": e.reference.tflops,
            "method": m.to_dict()["derived"],
            "control": c.to_dict()["derived"],
        }

    def derived(self) -> dict:
        """Every figure of the run, recomputed from the raw readings."""
        verdict = self.verdict
        return {
            "status": self.status,
            "reasons": list(self.reasons()),
            "full_task": self.config.full_task,
            "ms_per_call": self.ms_per_call,
            "ms_min": min((c.ms for c in self.calls), default=math.nan),
            "ms_max": max((c.ms for c in self.calls), default=math.nan),
            "mnist_accuracy": self.mnist_accuracy,
            "holdout_accuracy": self.holdout_accuracy,
            "verdict": verdict.to_dict() if verdict else None,
            "energy_valid": self.energy_valid,
            "energy_note": self.energy_note,
            "energy": self.energy_figures(),
            "checks": [asdict(c) for c in self.checks],
        }

    def __repr__(self) -> str:
        text = f"run {self.run} {self.target.name} d{self.difficulty}: {self.status.upper()}"
        if self.calls:
            text += f", {self.ms_per_call:,.1f} ms/call, MNIST {self.mnist_accuracy:.2%}"
        if self.energy_valid:
            m = self.energy.method
            text += f", {m.per_call_mj:,.1f} ± {m.per_call_mj_err:,.1f} mJ/call above idle"
        elif self.energy_note:
            text += f", energy {self.energy_note}"
        return f"{text} ({self.board.short})" if not self.error else f"{text}: {self.error}"

    # -- JSON ----------------------------------------------------------------------
    def to_dict(self, schema_version: int) -> dict:
        """The record: raw readings, provenance, and the derived figures."""
        return {
            "kind": KIND,
            "schema_version": schema_version,
            "created_utc": self.created_utc,
            "host": self.host,
            "argv": list(self.argv),
            "software": self.software,
            "run": self.run,
            "target": self.target.to_dict(),
            "difficulty": self.difficulty,
            "board": self.board.to_dict(),
            "config": self.config.to_dict(),
            "plan": self.plan.to_dict(),
            "worker_pid": self.worker_pid,
            "warmup_ms": list(self.warmup_ms),
            "calls": [asdict(c) for c in self.calls],
            "energy": self.energy.to_dict() if self.energy else None,
            "error": self.error,
            "derived": self.derived(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> RunRecord:
        """Rebuild from :meth:`to_dict` (stored derived figures are not read)."""
        return cls(
            run=d["run"],
            target=Target.from_dict(d["target"]),
            difficulty=d["difficulty"],
            board=BoardIdentity.from_dict(d["board"]),
            config=ScoreConfig.from_dict(d["config"]),
            plan=DrawPlan.from_dict(d["plan"]),
            worker_pid=d["worker_pid"],
            warmup_ms=tuple(d["warmup_ms"]),
            calls=tuple(TimedCall(**c) for c in d["calls"]),
            energy=Energy.from_dict(d["energy"]) if d["energy"] is not None else None,
            error=d["error"],
            created_utc=d["created_utc"],
            host=d["host"],
            argv=tuple(d["argv"]),
            software=d["software"],
        )
