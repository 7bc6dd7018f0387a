"""Counter coverage: how much of each counter period the energy counter senses.

Yang, Adamek and Armour (SC24, arXiv 2312.02741) found the power sensor of A100s and H100s sampling
about 25 ms of each ~100 ms period. Where a counter senses only part of each period, work whose
power moves within a period reads wherever that part falls: calls locked to the period read -100%
or +300%, and error model 11 checks such a board's windows against the power samples
(``BoardProfile.counter_coverage``). The families' defaults say which boards do (Hopper: none, on
driver 580.159.04, docs/facts.md); this probe measures the board in hand.

:data:`BURSTS` bursts of ~:data:`BURST_S` of the probes' FP32 products, each started at a phase
spread evenly over the counter's period after a step, with the counter polled back to back from a
period before the burst to :data:`AFTER_S` past its end. Each burst's reading is the counter's
energy between the last step before it and the first step :data:`AFTER_S` after it, less the
polled idle of the period before, over the burst's energy from the probe's long load (its products
times the energy of one there, as the bursts probe reads it). A counter that senses all of each
period reads every burst near its energy (10 ms bursts, counter polled: 0.77 of their mean at
least on two H100s and an H200, docs/facts.md); one that senses part of it reads the bursts outside
that part as nothing. Bursts read under :data:`UNSEEN` of their energy are unseen; at least
:data:`MIN_UNSEEN` of them make the board's counter partial, its coverage the share seen less the
burst's share of a period (a burst is seen where it overlaps the sensed part). The profile keeps the
figure only where it is under the family's (``nvmeter.probes.profile``): the probe narrows the
coverage, turning error model 11's check on, and never widens it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from nvmeter import errors
from nvmeter.meter.series import CounterSeries, poll_counter
from nvmeter.meter.span import AlignedSpan, aligned_edge, joined
from nvmeter.probes import schedule
from nvmeter.probes.bursts import energy_per_matmul_j
from nvmeter.worker.protocol import MatmulRun
from nvmeter.worker.rig import Rig

NAME = "coverage"
TITLE = "counter coverage"
IN_QUICK = False
# Not in a plain run (``nvmeter probe --coverage`` adds it): its ~20 s would take a full run past
# issue 16's minute.
OPT_IN = True

LOAD_N = schedule.LOAD_N
# A burst's length, s: under half the sensed part SC24 found (~25 ms), so that a burst outside it
# reads nothing; four of the H200's ~2.7 ms products.
BURST_S = 0.010
# Bursts, at phases (k + 0.5) / BURSTS of the period after a step: a sensed part of a quarter
# period holds about four of them.
BURSTS = 16
# The reading ends at the first sharp step this long after the burst: the counter's delay (10-11 ms
# on the H200, results/probe-h200.json) and the power's fall (the profiles' 60 ms tail), five times
# over, so that a board whose power falls more slowly still has its burst inside (a review: 0.15 s
# read a full counter whose power fell over 0.2 s as partial).
AFTER_S = 0.3
# A step whose two reads lie this close is sharp: an ordinary read is ~3 ms (results/probe-h200.json,
# read_cost), a slow one 9-16 ms, which blurs its step by as much (a review: steps placed to +-15 ms
# misread a 124 W idle as 131-155 W and judged full counters partial). Absolute, not the windows'
# SHARP_READS of the series' median read: the error that matters is the idle's power times the blur
# against a ~5 J burst, and where half the reads were 50 ms slow, sharp by the median read misjudged
# a full counter as covering 67% of each period (one simulated probe). A chosen margin.
SHARP_S = 0.005
# Steps polled before each burst, whose sharp ones give the polled idle.
IDLE_STEPS = 4
# Idle before each trial, s: the last burst's power has fallen (a board whose power fell over 0.2 s
# read an idle still falling as the idle, and bursts as unseen), as the bursts probe's gaps.
GAP_S = 0.5
# A counter slower than this, s, has no period the bursts can be spread over in a probe's time
# (and one step a second leaves few sharp steps): its coverage is not read.
MAX_PERIOD_S = 0.3
# A burst read under this share of its energy went unseen: a full counter's polled 10 ms bursts
# read 0.77 of their mean at least (docs/facts.md), and short bursts cost more a product than the
# long load this divides by (the H200's 19 ms bursts read +33% at the median with a 0.25 s tail,
# results/probe-h200.json; an H100's 11 ms ones here 1.17, results/probe-coverage-h100-5a56942e.json);
# a partial one's unseen ones read ~0. A chosen margin, not fitted.
UNSEEN = 0.35
# Unseen bursts that make a counter partial: one burst alone may be a read that stalled.
MIN_UNSEEN = 2
# Bursts after which the probe stops where none could be read between sharp steps (a breaker: all
# sixteen ran on a board whose every read was slow).
NO_READ_STOP = 4
# Fewest bursts read for a figure.
MIN_READ = BURSTS // 2
# The lowest coverage the probe states: a few bursts seen at random still say "some".
COVERAGE_MIN = 0.05


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`).

    The idle span between the loads and the random-operand load span, as the bursts probe, for
    the energy of one product; then the bursts.
    """
    return {"idle_between", "random", "coverage_bursts"}


@dataclass(frozen=True)
class Trial:
    """One burst: the counter polled around it, the burst, and the phase it was started at.

    Attributes:
        counter: The counter's reads, back to back, from before the step the phase is counted
            from to :data:`AFTER_S` past the burst's end.
        run: The burst.
        phase: Its asked-for place in the period after that step, 0..1.
    """

    counter: CounterSeries
    run: MatmulRun
    phase: float

    def above_j(self) -> float:
        """The counter's energy above the polled idle across the burst, J (nan: not bracketed).

        From the last sharp step (:data:`SHARP_S`) before the burst to the first sharp one
        :data:`AFTER_S` after it, less the polled idle: the counter's mean power between the first
        and last sharp steps before it (a step a slow read blurred misplaces its interval's power, a
        review: +-15 ms read a 124 W idle as 131-155 W).
        """
        steps = self.counter.steps
        t, e, sharp = steps.t_s, steps.energy_mj, steps.half_width_s <= SHARP_S
        before = np.flatnonzero((t <= self.run.t0_s) & sharp)
        after = np.flatnonzero((t >= self.run.t1_s + AFTER_S) & sharp)
        if len(before) < 2 or not len(after):
            return math.nan
        first, a, b = before[0], before[-1], after[0]
        idle_w = (e[a] - e[first]) / 1e3 / (t[a] - t[first])  # the counter's own mean: no step between counts
        return float((e[b] - e[a]) / 1e3 - idle_w * (t[b] - t[a]))

    def period_s(self) -> float:
        """The counter's period as the polls before the burst saw it: their steps' median gap, s."""
        t_s = self.counter.steps.t_s
        return _median_gap_s(t_s[t_s <= self.run.t0_s])

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {"counter": self.counter.to_dict(), "run": self.run.__dict__, "phase": self.phase}

    @classmethod
    def from_dict(cls, d: dict) -> Trial:
        """Inverse of :meth:`to_dict`."""
        phase = d["phase"]
        if not (type(phase) in (int, float) and 0 <= phase <= 1):
            raise errors.RecordError(f"a coverage burst's phase must be in [0, 1], not {phase!r}")
        return cls(CounterSeries.from_dict(d["counter"]), MatmulRun(**d["run"]), float(phase))


@dataclass(frozen=True)
class Coverage:
    """The idle between the loads, the long load (one product's energy), and the bursts."""

    idle: AlignedSpan
    reference: AlignedSpan
    reference_run: MatmulRun
    trials: tuple[Trial, ...]

    def ratios(self) -> np.ndarray:
        """Each burst's reading over its energy, shape (n,) (nan: not bracketed, or no energy to read)."""
        per_j = energy_per_matmul_j(self.idle, self.reference, self.reference_run)
        if not per_j > 0:  # a counter that never stepped through the long load (a review)
            return np.full(len(self.trials), math.nan)
        return np.array([t.above_j() / (per_j * t.run.matmuls) for t in self.trials])

    def period_s(self) -> float:
        """The counter's period as the bursts' polls saw it: the median of theirs, s (nan: none)."""
        periods = [p for t in self.trials if math.isfinite(p := t.period_s())]
        return float(np.median(periods)) if periods else math.nan

    def derived(self) -> dict:
        """The readings, how many went unseen, and the coverage (None: too few read, or a slow counter)."""
        r = self.ratios()
        read = r[np.isfinite(r)]
        unseen = int(np.sum(read < UNSEEN))
        lengths = [t.run.t1_s - t.run.t0_s for t in self.trials]
        burst_s = float(np.median(lengths)) if lengths else math.nan
        period_s = self.period_s()
        coverage = None
        if read.size >= MIN_READ and period_s <= MAX_PERIOD_S:
            coverage = 1.0
            if unseen >= MIN_UNSEEN:
                seen = 1 - unseen / read.size
                coverage = float(np.clip(seen - burst_s / period_s, COVERAGE_MIN, 1.0 - 1e-3))
        return {
            "ratios": [None if not math.isfinite(x) else float(x) for x in r],
            "read": int(read.size),
            "unseen": unseen,
            "burst_ms": burst_s * 1e3,
            "period_ms": period_s * 1e3,
            "coverage": coverage,
        }

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        d = self.derived()
        if d["coverage"] is None:
            why = (
                f"a counter period of {d['period_ms']:.0f} ms, too slow to spread "
                f"{d['burst_ms']:.0f} ms bursts over"
                if d["period_ms"] > MAX_PERIOD_S * 1e3
                else f"{d['read']} of {len(self.trials)} bursts read between sharp counter steps"
            )
            return [("counter coverage", f"not read: {why}; the family's default stands")]
        read = np.array([x for x in d["ratios"] if x is not None])
        spread = f"median {np.median(read):.2f} of their energy (range {read.min():.2f}..{read.max():.2f})"
        head = f"{d['read']} bursts of {d['burst_ms']:.0f} ms over the period: {spread}, {d['unseen']} unseen"
        if d["coverage"] >= 1:
            return [("counter coverage", f"{head}: all of each period")]
        return [("counter coverage", f"{head}: about {d['coverage']:.0%} of each period")]

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {
            "idle": self.idle.to_dict(),
            "reference": self.reference.to_dict(),
            "reference_run": self.reference_run.__dict__,
            "trials": [t.to_dict() for t in self.trials],
        }

    @classmethod
    def from_dict(cls, d: dict) -> Coverage:
        """Inverse of :meth:`to_dict`."""
        return cls(
            AlignedSpan.from_dict(d["idle"]),
            AlignedSpan.from_dict(d["reference"]),
            MatmulRun(**d["reference_run"]),
            tuple(Trial.from_dict(t) for t in d["trials"]),
        )


def expected_s(period_s: float = 0.1) -> float:
    """How long the bursts take on a counter of ``period_s`` (Hopper's ~0.1 s), s.

    Each waits :data:`GAP_S`, polls to :data:`IDLE_STEPS` steps (the first half a period away on
    average), waits its phase (half a period on average), runs the burst, :data:`AFTER_S` and two
    steps more (1.5 periods), with ~5 ms of request and synchronisation (as the bursts probe's).
    """
    periods = (IDLE_STEPS - 0.5) + 0.5 + 1.5
    return BURSTS * (GAP_S + periods * period_s + BURST_S + AFTER_S + 0.005)


def lower_coverage(kept: Coverage, new: Coverage) -> Coverage:
    """Of two probes of one board, the one whose coverage is lower (on a tie, or neither: the new one).

    As a run level only widens: a later probe whose bursts missed the sensed part's edges does not
    undo an earlier one that found it.
    """
    figures = [rec.derived()["coverage"] for rec in (kept, new)]
    return kept if figures[0] is not None and (figures[1] is None or figures[0] < figures[1]) else new


def run_trials(rig: Rig, worker, n: int = BURSTS) -> tuple[Trial, ...]:
    """``n`` bursts at phases spread over the period, each with the counter polled around it.

    Stops after the first where the counter is slower than :data:`MAX_PERIOD_S` (or never stepped),
    and after :data:`NO_READ_STOP` where none could be read.
    """
    count = max(1, round(BURST_S / worker.seconds_per_matmul(LOAD_N)))
    trials = []
    for k in range(n):
        rig.on_phase(f"burst {k + 1}/{n} at {(k + 0.5) / n:.0%} of the counter's period")
        trials.append(_trial(rig, worker, count, (k + 0.5) / n))
        if not trials[-1].period_s() <= MAX_PERIOD_S:
            break
        if k + 1 == NO_READ_STOP and all(math.isnan(t.above_j()) for t in trials):
            break  # no sharp steps to read between (every read slow): the rest would read none either
    return tuple(trials)


def _trial(rig: Rig, worker, count: int, phase: float) -> Trial:
    """One burst ``phase`` of a period after a step, the counter polled from IDLE_STEPS steps before."""
    board, clock = rig.board, rig.clock
    clock.sleep(GAP_S)
    edges = (aligned_edge(board, clock, 2 * MAX_PERIOD_S) for _ in range(IDLE_STEPS))
    before = functools.reduce(joined, edges)
    period_s = _median_gap_s(before.steps.t_s)  # this board's, not its family's
    # a counter slower than MAX_PERIOD_S (or one that never stepped) ends the probe after this burst
    lead = poll_counter(board, clock, phase * period_s if period_s <= MAX_PERIOD_S else 0.0)
    job = worker.matmul(LOAD_N, "random", count=count)
    during = poll_counter(board, clock, 1.0, until=job.done)
    run = job.result()
    settle = poll_counter(board, clock, max(0.0, run.t1_s + AFTER_S - clock.now()))
    # two steps more: the first sharp one past AFTER_S ends the reading
    after = joined(aligned_edge(board, clock, 2 * MAX_PERIOD_S), aligned_edge(board, clock, 2 * MAX_PERIOD_S))
    return Trial(functools.reduce(joined, (before, lead, during, settle, after)), run, phase)


def _median_gap_s(t_s: np.ndarray) -> float:
    """The median gap between steps at ``t_s``, s (nan: under two steps)."""
    return float(np.median(np.diff(t_s))) if len(t_s) > 1 else math.nan


def assemble(m: dict, quick: bool) -> Coverage:
    """The record: the idle between the loads, the random-operand load span, the bursts."""
    return Coverage(m["idle_between"], m["random"].span, m["random"].run, m["coverage_bursts"])


def run(rig: Rig, quick: bool) -> Coverage:
    """This probe alone (``nvmeter probe --only coverage``)."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
