"""The schedule of ``nvmeter probe``: what is measured, in which order, for how long, each thing once.

Several probes read the same kind of span: the no-context idle span is also the polling
probe's sparse span; the context idle span is also the sample-buffer probe's idle span and
the reference's idle before its constant-operand load; the random-operand load span is the
reference's, the sample-buffer probe's load span and the bursts' long window; the step
response's counter polls are also the cadence's context and load phases. The schedule
measures each once and hands it to every probe that uses it, so every probe's record keeps
its shape (docs/formats.md) while a run makes far fewer waits (docs/probe.md, Timing budget).

The order, and why:

1. No context. The worker process is started first and imports torch meanwhile (no CUDA
   call, so no context: :meth:`nvmeter.worker.rig.Rig.start_worker`). A settle, the
   no-context idle span, the read cost, then the counter polled back to back. The idle span
   comes before any polling of ours: polling raises the H200's draw by ~4 W, and once it
   stayed up 1.9 s after the polling had stopped (results/probe-h200.json: the sample buffer
   of the polling probe's sparse span reads ~82.7 W for its first 1.8 s after the read-cost
   probe, 78.7 W after).
2. The context opened, its worker frozen (SIGSTOP) at once, a settle, the frozen span; the
   worker resumed, the context idle span, one full read of the sample buffer. The settle
   covers the context's own transient (the level is reached ~0.25 s after the context
   appears, results/probe-h200-quick*.json) and the polling of step 1.
3. Constant-operand load span; idle span; random-operand load span (quick: after a 1 s
   counter poll, the cadence's load phase; what the polling adds to the span after it, at most
   the ~4.4 W it adds at no context, is at most 0.8% of the ~555 W the bursts' energy per
   product rests on, against their medians' ±5-30 points); idle span (full only). Each load
   job is stopped as soon as its span has ended (:meth:`nvmeter.worker.protocol.Job.stop`).
4. The isolated bursts.
5. Full: the step response (counter and instant power polled back to back around a load),
   whose idle and load polls are also the cadence's context and load phases; quick: a 1 s
   counter poll at context idle. Polling comes last, where no idle span follows it.

An idle span of the idle probe whose two halves differ by more than :data:`DISTURBED_W`
(by the sample buffer) is measured once more: a settle that was too short shows as a step
of several watts inside the span.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nvmeter.meter.series import CounterSeries, poll_counter
from nvmeter.meter.span import AlignedSpan, joined, measure_span
from nvmeter.worker.rig import Rig

# 4096^2 FP32 products: the probes' standard load (docs/facts.md reference).
LOAD_N = 4096
# A load job runs at most this long past its lead, poll and span: the span's two edges take
# up to 2 x 0.35 s (nvmeter.meter.span.EDGE_TIMEOUT_S) and ordinary ones ~0.1 s. The job is
# stopped once the span has ended, so the slack costs nothing in an ordinary run.
JOB_SLACK_S = 1.5
# A no-context, frozen or context idle span whose halves differ by more than this (W, by the
# sample buffer) is measured again, once. On the H200 the halves of every idle span of the
# three committed probes differ by at most 0.10 W (bench/probe_prefix.py), while the polling
# hangover and a context's teardown are steps of ~4 W and ~45 W (results/probe-h200.json).
DISTURBED_W = 1.0
# The sample covering an aligned span's end lands up to one spacing (~20 ms) after it; a load
# job runs on until measure_span has read it (measure_span waits 0.05 s), so a stop never cuts
# into the span's last samples.


@dataclass(frozen=True)
class Plan:
    """How long each part of a run takes, s (counts where named).

    Attributes:
        start_settle_s: Wait before the no-context idle span (the CLI's own start, ~1 s, comes
            before it): the board's draw after another process's polling or context.
        idle_s: The no-context, frozen and context idle spans.
        read_rounds: Rounds of the read-cost probe (one read of each of the four signals).
        tight_s: The no-context counter poll (the polling probe's tight series and the
            cadence's no-context phase).
        context_settle_s: After the context opens and its worker is frozen, before the frozen span.
        load_lead_s: Load running before a load span's start edge (the counter settles within
            149 ms of a load's start on the H200: results/probe-h200.json, step).
        load_s: Each load span.
        after_load_s: After a load job, before an idle span (the samples are back at idle
            within ~60 ms of a burst: docs/probe.md).
        between_s: The idle spans after a load.
        bursts: Isolated bursts of each size.
        step_s: Full runs: the step response's (idle before, load, idle after) polls.
        cadence_s: Quick runs: the counter polls at context idle and under load.
        cap_starts: The cap-spread probe's runs of bf16 products, each after a pause.
        cap_pause_s: The board idle (context open) before each of those runs.
        cap_lead_s: bf16 products before each run's poll: the limiter's overshoot after a start,
            and the 2 s look-back of error model 6, are over.
        cap_s: Each run's poll through those products.
        level_starts: The run-level probe's runs of FP32 products, each after a pause.
        level_pause_s: The board idle (context open) before each of those runs.
        level_lead_s: FP32 products before each run's poll: ``measure()``'s own warm-up.
        level_s: Each run's poll through those products.

    """

    start_settle_s: float
    idle_s: float
    read_rounds: int
    tight_s: float
    context_settle_s: float
    load_lead_s: float
    load_s: float
    after_load_s: float
    between_s: float
    bursts: int
    step_s: tuple[float, float, float] | None
    cadence_s: float | None
    # three runs of 6 s, 2.5-8.5 s after a start: where windows after a pause land, and where the
    # limiter swings most (results/enclose/cap-settling.txt); 2 s blocks: 2-3 a run
    cap_starts: int = 3
    cap_pause_s: float = 1.0
    cap_lead_s: float = 2.5
    cap_s: float = 6.0
    # eight runs after a short pause, as measure() runs follow one another: 2.5 s of warm-up as
    # measure()'s own, then 2 s polled (its three 0.5 s sub-windows and their edges); a second
    # level showed from the first 0.25 s of a run to its end (results/enclose/call79-*-levels.txt)
    level_starts: int = 8
    level_pause_s: float = 0.5
    level_lead_s: float = 2.5
    level_s: float = 2.0


# The full run. What each length does to today's figures, from the raw series of the committed
# H200 probe (bench/probe_prefix.py, results/probe-speed/prefix.md; docs/probe.md, Timing budget).
FULL = Plan(
    # the H200 stayed at its polled draw 1.9 s after polling, and at 127 W 1.1 s after a context
    # closed (results/probe-h200.json: polling's sparse span, cadence's no-context phase); the
    # CLI's own start (~1 s) comes before this
    start_settle_s=2.0,
    # 5.1 s before: the first 4 s read within 0.011 W of the whole, the stated uncertainty x1.27
    idle_s=4.0,
    read_rounds=150,  # as before (0.7 s)
    # the cadence's no-context phase was 4 s, the polling probe's tight poll 5 s: the first 4 s
    # read within 0.011 W of the 5 s, the stated uncertainty x1.21
    tight_s=4.0,
    # the context's level is reached ~0.25 s after it appears, then creeps by <= 0.15 W over 2 s
    # (results/probe-h200-quick*.json); with the context's opening (~1 s) it also puts > 2.5 s
    # between the no-context polling and the frozen span
    context_settle_s=1.5,
    load_lead_s=0.3,  # as before
    # 5.1 s before: the first 3 s read within 0.15 W, J/TFLOP within 0.008, uncertainty x1.3-1.6
    load_s=3.0,
    after_load_s=0.3,  # as before
    between_s=2.0,  # as before (the reference's idle spans)
    # 16 before: the first 8 of each size give medians within 0.016 of the 16's, their
    # uncertainties x1.1-4.1
    bursts=8,
    # 1.5, 3, 2 s before: 2 s of idle give the cadence's context phase 19 gaps (median within
    # 0.12 ms of 39), the delay fits read 0.6 s either side of an edge (step.FIT_WINDOW_S)
    step_s=(2.0, 3.0, 1.0),
    cadence_s=None,
)
# ``--quick``: the spans of the quick run before issue 16 (1 s idle and load, 0.6 s idle after a
# load, 3 bursts of each size, 1 s cadence phases), waits of 0.3 s.
QUICK = Plan(
    start_settle_s=0.3,
    idle_s=1.0,
    read_rounds=40,
    tight_s=1.0,
    context_settle_s=0.3,
    load_lead_s=0.3,
    load_s=1.0,
    after_load_s=0.3,
    between_s=0.6,
    bursts=3,
    step_s=None,
    cadence_s=1.0,
)


def plan(quick: bool) -> Plan:
    """The plan of a full or quick run."""
    return QUICK if quick else FULL


@dataclass(frozen=True)
class Load:
    """One load job and what was read during it.

    Attributes:
        span: The aligned span inside the job.
        run: The job (stopped once the span had ended).
        poll: Quick random-operand load only: the counter polled before the span (else None).
        submitted_s: When the job was asked for, s.

    """

    span: AlignedSpan
    run: object
    poll: CounterSeries | None
    submitted_s: float


@dataclass(frozen=True)
class MarkedRuns:
    """Marked runs (cap spread, run levels): per run the counter reads about each step and the job; states."""

    counters: tuple
    runs: tuple
    states: tuple


@dataclass(frozen=True)
class StepPolls:
    """The step response's reads (full runs): the record, and the cadence's two phases cut from it."""

    record: object
    context: CounterSeries
    load: CounterSeries


class Session:
    """One run's measurements, each made once, in schedule order.

    Args:
        rig: The board and its worker.
        quick: The quick plan.
        needs: The measurements to make (names of :data:`STEPS`).

    """

    def __init__(self, rig: Rig, quick: bool, needs: set[str]) -> None:
        self.rig = rig
        self.board = rig.board
        self.clock = rig.clock
        self.quick = quick
        self.plan = plan(quick)
        self.needs = needs
        self.results: dict[str, object] = {}
        self._opened_s: float | None = None
        self._load_end_s = -np.inf

    # -- helpers -----------------------------------------------------------
    def context(self):
        """The worker with its context (opened on first use)."""
        if not self.rig.has_context:
            worker = self.rig.context()
            self._opened_s = self.clock.now()
            return worker
        return self.rig.context()

    def no_context(self) -> None:
        """No context on the board (a leftover one is ended; a starting worker is kept)."""
        if self.rig.has_context:
            self.rig.no_context()

    def idle_span(self, duration_s: float) -> AlignedSpan:
        """An aligned idle span, measured again once if a step inside it shows a disturbance."""
        span = measure_span(self.board, self.clock, duration_s)
        if disturbed(span):
            span = measure_span(self.board, self.clock, duration_s)
        return span

    def after_load(self) -> None:
        """Wait out ``after_load_s`` since the last load job ended (no wait before the first load)."""
        if np.isfinite(self._load_end_s):
            self.clock.sleep_until(self._load_end_s + self.plan.after_load_s)

    def load(self, operands: str, *, check: bool = False, poll_s: float = 0.0) -> Load:
        """A load span (after ``poll_s`` of counter polling) inside one job, stopped after the span."""
        p = self.plan
        worker = self.context()
        submitted = self.clock.now()
        job = worker.matmul(
            LOAD_N, operands, seconds=p.load_lead_s + poll_s + p.load_s + JOB_SLACK_S, check=check
        )
        self.clock.sleep(p.load_lead_s)
        poll = poll_counter(self.board, self.clock, poll_s) if poll_s else None
        span = measure_span(self.board, self.clock, p.load_s)
        job.stop()
        run = job.result()
        self._load_end_s = run.t1_s
        return Load(span, run, poll, submitted)

    def run(self, on_step: Callable[[object], None] | None = None) -> dict[str, object]:
        """Make every needed measurement in schedule order; name -> its result."""
        if any(s.context for s in STEPS if s.NAME in self.needs):
            if any(not s.context for s in STEPS if s.NAME in self.needs):
                self.no_context()
            self.rig.start_worker()
        for step in STEPS:
            if step.NAME not in self.needs:
                continue
            if on_step:
                on_step(step)
            if not step.context:
                self.no_context()
            self.results[step.NAME] = step.make(self)
        return self.results


def disturbed(span: AlignedSpan) -> bool:
    """True if the sample buffer's mean power in the span's two halves differs by over DISTURBED_W."""
    t = np.array([s.t_s for s in span.samples])
    p = np.array([s.power_w for s in span.samples])
    mid = (span.t_a_s + span.t_b_s) / 2
    first = p[(t > span.t_a_s) & (t <= mid)]
    second = p[(t > mid) & (t <= span.t_b_s)]
    if first.size == 0 or second.size == 0:
        return False
    return bool(abs(first.mean() - second.mean()) > DISTURBED_W)


# -- the measurements ---------------------------------------------------------------------------------
def _idle_no_context(s: Session) -> AlignedSpan:
    s.clock.sleep(s.plan.start_settle_s)
    s.rig.on_phase("idle, no context")
    return s.idle_span(s.plan.idle_s)


def _read_cost(s: Session) -> dict[str, tuple[float, ...]]:
    from nvmeter.probes.read_cost import SIGNALS

    board, clock = s.board, s.clock
    readers = {
        "energy": board.energy_mj,
        "power_instant": board.power_instant_w,
        "power_average": board.power_average_w,
        "samples": board.power_samples,
    }
    reads: dict[str, list[float]] = {sig: [] for sig in SIGNALS}
    s.rig.on_phase("reading each signal")
    for _ in range(s.plan.read_rounds):  # interleaved, so drifts hit all alike
        for sig in SIGNALS:
            t0 = clock.now()
            readers[sig]()
            reads[sig].append(clock.now() - t0)
    return {sig: tuple(v) for sig, v in reads.items()}


def _tight(s: Session) -> CounterSeries:
    s.rig.on_phase("counter polled back to back, no context")
    return poll_counter(s.board, s.clock, s.plan.tight_s)


def _frozen(s: Session) -> AlignedSpan:
    worker = s.context()
    s.rig.on_phase("context frozen (SIGSTOP)")
    worker.freeze()
    try:
        s.clock.sleep(s.plan.context_settle_s)
        return s.idle_span(s.plan.idle_s)
    finally:
        worker.resume()


def _idle_context(s: Session) -> AlignedSpan:
    s.context()
    s.clock.sleep_until(s._opened_s + s.plan.context_settle_s)  # when the frozen span did not
    s.rig.on_phase("idle, context open")
    return s.idle_span(s.plan.idle_s)


def _buffer(s: Session):
    s.context()
    return s.board.power_samples()


def _constant(s: Session) -> Load:
    s.rig.on_phase("constant operands")
    return s.load("constant", check=True)


def _random(s: Session) -> Load:
    s.rig.on_phase("random operands")
    poll = s.plan.cadence_s if s.plan.cadence_s and "context_poll" in s.needs else 0.0
    return s.load("random", poll_s=poll)


def _idle_after_load(phase: str) -> Callable[[Session], AlignedSpan]:
    """An idle span right after a load job (the reference's idle between and after its loads)."""

    def make(s: Session) -> AlignedSpan:
        s.context()
        s.after_load()
        s.rig.on_phase(phase)
        return measure_span(s.board, s.clock, s.plan.between_s)

    return make


def _bursts(s: Session):
    from nvmeter.probes.bursts import run_bursts

    return run_bursts(s.rig, s.context(), s.plan.bursts)


def _coverage_bursts(s: Session):
    from nvmeter.probes.coverage import run_trials

    s.after_load()
    return run_trials(s.rig, s.context())


def _step(s: Session) -> StepPolls:
    from nvmeter.probes.cadence import LOAD_RAMP_S
    from nvmeter.probes.step import poll_step

    record, submitted_s = poll_step(s.rig, s.context(), s.plan.step_s or FULL.step_s)
    c, run = record.counter, record.load
    pre = [i for i in range(len(c)) if c.t1_s[i] <= submitted_s]
    during = [i for i in range(len(c)) if c.t0_s[i] >= submitted_s + LOAD_RAMP_S and c.t1_s[i] <= run.t1_s]
    return StepPolls(record, _cut(c, pre), _cut(c, during))


def _context_poll(s: Session) -> CounterSeries:
    s.context()
    s.rig.on_phase("counter polled back to back, context idle")
    return poll_counter(s.board, s.clock, s.plan.cadence_s or QUICK.cadence_s)


# The cap-spread probe's products: bf16 8192² holds Hopper boards at their 700 W limit
# (results/enclose/: the bf16cap kind, power-cap reason at 491 of 491 warm windows' edges).
CAP_N = 8192
# The board's state is read between polls of this length (a few cheap NVML reads).
CAP_STATE_EVERY_S = 1.0


@dataclass(frozen=True)
class MarkedLoad:
    """Runs of marked products, each after a pause: how many, of what, and for how long.

    Attributes:
        n: The products' size (n x n).
        dtype: ``"fp32"`` or ``"bf16"``.
        starts: Runs.
        pause_s: The board idle (context open) before each run, s.
        lead_s: Products before each run's poll, s.
        poll_s: Each run's poll through the products, s.
    """

    n: int
    dtype: str
    starts: int
    pause_s: float
    lead_s: float
    poll_s: float

    def seconds(self, after_load_s: float) -> float:
        """How long its runs take, s, each after ``after_load_s`` since the load before."""
        return self.starts * (after_load_s + self.pause_s + self.lead_s + self.poll_s)


def cap_load(p: Plan) -> MarkedLoad:
    """The cap-spread probe's load under plan ``p``: bf16 products at the power cap."""
    return MarkedLoad(CAP_N, "bf16", p.cap_starts, p.cap_pause_s, p.cap_lead_s, p.cap_s)


def level_load(p: Plan) -> MarkedLoad:
    """The run-level probe's load under plan ``p``: the probes' FP32 products, restarted."""
    return MarkedLoad(LOAD_N, "fp32", p.level_starts, p.level_pause_s, p.level_lead_s, p.level_s)


def marked_load(s: Session, load: MarkedLoad) -> MarkedRuns:
    """``load``'s runs, each after its pause, the counter polled through each while the worker marks."""
    worker = s.context()
    counters, runs, states = [], [], []
    for k in range(load.starts):
        s.after_load()
        s.clock.sleep(load.pause_s)  # the pause each window after a pause follows
        s.rig.on_phase(f"run {k + 1} of {load.starts}: {load.lead_s:g} s to settle, {load.poll_s:g} s polled")
        counter, run = _marked_run(s, worker, states, load)
        counters.append(counter)
        runs.append(run)
    return MarkedRuns(tuple(counters), tuple(runs), tuple(states))


def _marked_run(s: Session, worker, states: list, load: MarkedLoad):
    """One run of products: the lead, then the counter polled (the state read between polls)."""
    job = worker.matmul(
        load.n, "random", seconds=load.lead_s + load.poll_s + JOB_SLACK_S, dtype=load.dtype, marks=True
    )
    try:
        s.clock.sleep(load.lead_s)
        kept = []
        end_s = s.clock.now() + load.poll_s
        while (left_s := end_s - s.clock.now()) > 0:
            states.append(s.board.state())
            kept.append(_bracketing(poll_counter(s.board, s.clock, min(CAP_STATE_EVERY_S, left_s))))
        states.append(s.board.state())
    finally:
        job.stop()
    run = job.result()
    s._load_end_s = run.t1_s
    return functools.reduce(joined, kept), run


def _bracketing(series: CounterSeries) -> CounterSeries:
    """Only the reads either side of each step (and the first and last): the steps, kept small."""
    e = np.asarray(series.energy_mj)
    changed = np.flatnonzero(np.diff(e) != 0)
    keep = sorted({0, len(e) - 1} | set(changed.tolist()) | set((changed + 1).tolist())) if len(e) else []
    return _cut(series, keep)


def _cut(series: CounterSeries, idx: list[int]) -> CounterSeries:
    return CounterSeries(
        tuple(series.t0_s[i] for i in idx),
        tuple(series.t1_s[i] for i in idx),
        tuple(series.energy_mj[i] for i in idx),
    )


@dataclass(frozen=True)
class Step:
    """One measurement of the schedule (``NAME`` and ``TITLE`` as a probe module has them).

    Attributes:
        NAME: Its key in :attr:`Session.results`.
        TITLE: What the progress display shows.
        context: Whether it needs the context (else it needs none on the board).
        make: Measures it.

    """

    NAME: str
    TITLE: str
    context: bool
    make: Callable[[Session], object]


# The schedule, in order (see the module docstring).
STEPS = (
    Step("idle_no_context", "idle, no context", False, _idle_no_context),
    Step("read_cost", "read cost of each signal", False, _read_cost),
    Step("tight", "counter polled, no context", False, _tight),
    Step("frozen", "idle, context frozen", True, _frozen),
    Step("idle_context", "idle, context", True, _idle_context),
    Step("buffer", "power-sample buffer", True, _buffer),
    Step("constant", "load, constant operands", True, _constant),
    Step("idle_between", "idle between the loads", True, _idle_after_load("idle between the loads")),
    Step("random", "load, random operands", True, _random),
    Step("idle_after", "idle after the loads", True, _idle_after_load("idle after the loads")),
    Step("bursts", "isolated bursts", True, _bursts),
    Step("coverage_bursts", "bursts over the counter's period", True, _coverage_bursts),
    Step("step", "step response", True, _step),
    Step("context_poll", "counter polled, context", True, _context_poll),
    # last: an idle span after ~30 s at the cap would read a board still warm
    Step("cap_load", "bf16 products at the power cap", True, lambda s: marked_load(s, cap_load(s.plan))),
    Step("level_load", "FP32 products, restarted", True, lambda s: marked_load(s, level_load(s.plan))),
)
BY_NAME = {s.NAME: s for s in STEPS}


# -- the expected duration ------------------------------------------------------------------------
# What an aligned span costs beyond its length, s: each edge waits for a counter step, on
# average half the 100 ms period plus a ~3.1 ms read; then measure_span's 0.05 s wait for the
# end's sample and a ~0.5 ms buffer read a second (results/probe-h200.json, read_cost, cadence).
SPAN_EXTRA_S = 2 * (0.050 + 0.0031) + 0.05 + 0.002
# One read of each signal: 3.11 ms + 7.7 us + 4.5 us + 0.49 ms (results/probe-h200.json, read_cost).
READ_ROUND_S = 0.00362
# One burst beyond its gap and its products: three counter reads, TAIL_S, the 0.05 s wait and a
# buffer read, and ~5 ms of request and synchronisation (nvmeter.probes.bursts).
BURST_EXTRA_S = 3 * 0.0031 + 0.25 + 0.05 + 0.0005 + 0.005
# Burst lengths (nvmeter.probes.bursts.TARGETS_S), the mean gap (GAP_S) and the calibration's
# 28 products of ~2.7 ms, s.
BURST_S = (0.020, 0.075)
BURST_GAP_S = (0.35 + 0.7) / 2
CALIBRATE_S = 28 * 0.0027


def expected_s(quick: bool, needs: set[str], plan_: Plan | None = None) -> float:
    """The expected duration of measuring ``needs``, s, from the plan and the costs above.

    ``plan_`` replaces the run's plan (default :data:`FULL` or :data:`QUICK`). The worker's start
    overlaps the measurements before the context opens; opening it costs
    :data:`nvmeter.worker.simulated.REAL_CONTEXT_S` and whatever of its start
    (:data:`~nvmeter.worker.simulated.REAL_START_S`) those have not covered. The CLI's own start
    and the record's writing are not included.
    """
    from nvmeter.probes import coverage  # it reads LOAD_N from here
    from nvmeter.worker.simulated import REAL_CONTEXT_S, REAL_START_S

    p = plan_ or plan(quick)
    span = SPAN_EXTRA_S
    step_s = p.step_s or FULL.step_s
    cadence_s = p.cadence_s or QUICK.cadence_s
    poll = cadence_s if p.cadence_s and "context_poll" in needs else 0.0
    costs = {
        "idle_no_context": p.start_settle_s + p.idle_s + span,
        "read_cost": p.read_rounds * READ_ROUND_S,
        "tight": p.tight_s,
        "frozen": p.context_settle_s + p.idle_s + span,
        "idle_context": (0.0 if "frozen" in needs else p.context_settle_s) + p.idle_s + span,
        "buffer": 0.0005,
        "constant": p.load_lead_s + p.load_s + span,
        "idle_between": p.after_load_s + p.between_s + span,
        "random": p.load_lead_s + poll + p.load_s + span,
        "idle_after": p.after_load_s + p.between_s + span,
        "bursts": CALIBRATE_S + p.bursts * sum(BURST_GAP_S + b + BURST_EXTRA_S for b in BURST_S),
        "coverage_bursts": p.after_load_s + coverage.expected_s(),
        "step": sum(step_s),
        "context_poll": cadence_s,
        "cap_load": cap_load(p).seconds(p.after_load_s),
        "level_load": level_load(p).seconds(p.after_load_s),
    }
    total = sum(costs[name] for name in needs)
    context_steps = [s.NAME for s in STEPS if s.context and s.NAME in needs]
    if context_steps:
        before = sum(costs[s.NAME] for s in STEPS if not s.context and s.NAME in needs)
        total += REAL_CONTEXT_S + max(0.0, REAL_START_S - before)
    return total


def measure(rig: Rig, quick: bool, needs: set[str], on_step=None) -> dict[str, object]:
    """Make the measurements ``needs`` names (and nothing else), in schedule order.

    Raises:
        ValueError: a name no step has (the CLI checks names first: a caller's slip). The
            telemetry's and the worker's errors pass through (:mod:`nvmeter.errors`).
    """
    unknown = needs - set(BY_NAME)
    if unknown:
        raise ValueError(f"unknown measurements {sorted(unknown)}")
    return Session(rig, quick, needs).run(on_step)
