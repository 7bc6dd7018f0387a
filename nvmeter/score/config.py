"""`ScoreConfig` and `DrawPlan`: the settings of ``nvmeter score`` and the defaults, each with its reason."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from nvmeter import errors
from nvmeter.meter.adaptive import WARMUP_S
from nvmeter.probes.bands import BANDS
from nvmeter.workloads import judge, task

# -- the defaults, and why ----------------------------------------------------------
# Method window, s. On our H200s, aligned-edge windows of 2 s read per-call energy above
# idle within 0.72% of 60 s references (run 2, another board than the error model was
# fitted on, windows after a warm-up: median 0.32%, the stated bound holding 9 of 10)
# and within 0.36% when started cold (run 1: median 0.16%); 4 s windows within 0.60% and
# 0.46%. Twice the length buys no clear accuracy, and the bound states what is left
# (results/window-accuracy-h200-run2-summary.json, window-accuracy-h200-summary.json,
# docs/window-log.md). So 2 s reads as well as the A100 scorer's 20 s at a tenth of the time.
WINDOW_S = 2.0
# Unmetered calls of the method just before its window, s (at least one call): after
# idle the clocks ramp for ~0.3 s and a power-capped board's limiter swings for ~2 s after a
# pause, and a window that starts within the error model's look-back of either is transient
# (its bound widens by transient_rel); measure() warms up as long (adaptive.WARMUP_S).
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
# 2 s (nvmeter.meter.baseline: 1 s spans are known to ~0.3%). The A100 scorer measured 5 s.
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
# The task (docs/task.md): 11 MNIST and 4 hold-out timed calls; 2 warm-ups (the first
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

# -- the upper limits, and why --------------------------------------------------------
# A setting beyond these is a slip (--window-s 1e300 would run until interrupted), not a
# measurement; each lies far past its default and past what any of our runs used.
# Windows (method, control), s: 300x the default; a 600 s window of 1 ms calls keeps a
# record of ~15 MB, well inside nvmeter.files.RECORD_LIMIT_BYTES.
MAX_WINDOW_S = 600.0
# Idle spans, their settle, and the warm-up before the method window, s: 300x the idle
# default; the A100 scorer's longest was 5 s.
MAX_IDLE_S = 600.0
# A call, s: a day. The slowest method takes ~3 s a call (docs/results.md); a call a day
# long is a hang whatever the method.
MAX_CALL_TIMEOUT_S = 86_400.0
# Calls and draws: the window's fewest calls, the timed and warm-up calls, the draws the
# windows cycle through (each kept in the worker's memory).
MAX_MIN_CALLS = 1_000
MAX_DRAWS = 1_000
MAX_WINDOW_DRAWS = 64
# Runs of one command.
MAX_RUNS = 1_000


# nvmeter score's option for a setting, where it is not the setting's name with dashes
_OPTIONS = {"idle_settle_s": "--settle-s", "warmup_calls": "--warmups"}


def _require(obj, names: tuple[str, ...], ok, what: str) -> None:
    """Raise UsageError naming the first of ``obj``'s attributes ``names`` that is not ``ok``.

    The message names the setting as Python and as ``nvmeter score`` spell it: it is said to both.
    """
    for name in names:
        value = getattr(obj, name)
        if not ok(value):
            option = _OPTIONS.get(name, "--" + name.replace("_", "-"))
            raise errors.UsageError(f"{name} ({option}) must be {what}, not {value!r}")


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
        band: Judge the reference against this band (a key of :data:`nvmeter.probes.bands.BANDS`);
            None: the board family's.
        call_timeout_s: A call longer than this is a hang, s.
        mnist_draws, holdout_draws, warmup_calls: Timed calls of a run; fewer than the
            task's (11, 4, 2) make a partial run, marked so (tests use them).
        window_draws: MNIST draws the control and method windows cycle through.
        window_ms_tolerance: Accepted relative margin around the timed calls' range for
            the window's ms per call (less the control's).

    Raises:
        UsageError: a duration or count that is not positive or is over its limit (the
            ``MAX_*`` constants above, with their reasons), or an unknown reference or band.

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
        def number(low: float, high: float, *, above: bool = True):
            def ok(v) -> bool:
                fits = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                return fits and (v > low if above else v >= low) and v <= high

            return ok

        def whole(low: int, high: int):
            return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high

        windows, idle = ("window_s", "control_s"), ("idle_s",)
        _require(self, windows, number(0, MAX_WINDOW_S), f"a number > 0 and at most {MAX_WINDOW_S:g} s")
        _require(self, idle, number(0, MAX_IDLE_S), f"a number > 0 and at most {MAX_IDLE_S:g} s")
        waits = ("idle_settle_s", "window_warmup_s")
        _require(
            self, waits, number(0, MAX_IDLE_S, above=False), f"a number >= 0 and at most {MAX_IDLE_S:g} s"
        )
        limit = MAX_CALL_TIMEOUT_S
        _require(self, ("call_timeout_s",), number(0, limit), f"a number > 0 and at most {limit:g} s")
        _require(self, ("window_ms_tolerance",), number(0, 10.0), "a number > 0 and at most 10")
        _require(self, ("min_calls",), whole(1, MAX_MIN_CALLS), f"a whole number 1-{MAX_MIN_CALLS:,}")
        _require(self, ("mnist_draws",), whole(1, MAX_DRAWS), f"a whole number 1-{MAX_DRAWS:,}")
        _require(self, ("window_draws",), whole(1, MAX_WINDOW_DRAWS), f"a whole number 1-{MAX_WINDOW_DRAWS}")
        optional = ("holdout_draws", "warmup_calls")
        _require(self, optional, whole(0, MAX_DRAWS), f"a whole number 0-{MAX_DRAWS:,}")
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
        holdout: ``kmnist`` where cached, else ``fashion`` (docs/task.md).
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
