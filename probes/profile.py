"""A board's :class:`~nvmeter.boards.profile.BoardProfile` from its probe report.

Each figure the meter uses comes from the probe that measures it; a figure the report
lacks (a quick or partial probe) keeps the family's default, and the source says which.
"""

from __future__ import annotations

import numpy as np

from nvmeter.boards.profile import (
    COUNTER_PERIOD_MAX_S,
    EDGE_TIMEOUT_MAX_S,
    POWER_LAG_ERR_MAX_S,
    TAIL_MAX_S,
    BoardProfile,
    default_profile,
)

# A bound on the sample buffer's disagreement with the counter: twice the larger of the
# idle and load ratios' offsets the samples probe read, and never under 0.1%.
_SAMPLES_MARGIN = 2.0
_SAMPLES_FLOOR = 0.001
# An aligned edge waits up to a period for the counter's first step, polls on past a step a slow
# read blurred to the next (nvmeter.meter.span.sharp_edge), a second, and a third holds a late
# update. Hopper's 0.35 s is 2.9 of its 0.12 s period. A probed period under 0.35 / 3 keeps the
# family's wait.
EDGE_TIMEOUT_PERIODS = 3.0
# The step response's delays widen the lag bound from derivation 3 (probe record v11) on. Those of
# derivation 1 could fit the load's edge inside a gap that a slow read left (179 ms for 16 ms,
# results/probe-speed/f2595641/new-full.json); a record of derivation 2 was made with the family's
# bound and keeps it, so that it verifies as it did.
LAG_DERIVATION = 3
# A step response widens the lag bound only where its load lifted the counter by this much (the
# probes' FP32 products draw 550 W above idle on an H200: results/probe-h200.json) and each delay is
# known to within this (a sharp interval across the edge places it to a grid step or two; a slow
# read's gap leaves it tens of ms wide). Chosen margins, not fitted.
STEP_RISE_MIN_W = 50.0
STEP_SPAN_MAX_MS = 10.0


def profile_from_report(report) -> BoardProfile:
    """The profile of the probed board (a :class:`~nvmeter.probes.report.ProbeReport`).

    What its probes did not measure comes from the family's defaults. The user cache keeps the
    probes of earlier runs with a run's own (``nvmeter probe --only``), so a run of some probes
    does not reset what an earlier run measured.
    """
    derived = report.derived()
    profile = default_profile(report.board.name)
    used = []
    for name, figures in _FIGURES.items():
        if name in derived:
            changes = figures(report.probes[name], derived[name], profile)
            if changes:
                profile = profile.with_(**changes)
                used.append(name)
    source = f"probe {report.board.uuid} {report.finished_utc}: " + (", ".join(used) or "no telemetry probe")
    return profile.with_(source=source)


def _cadence(record, d: dict, base: BoardProfile) -> dict:
    """The counter's period and the edges' wait for a step, from the longest gap or still stretch.

    A counter that no phase saw update twice has no period to take: its reads say only that it
    is longer than their longest still stretch. Its profile takes the longest period a profile
    holds, :data:`~nvmeter.boards.profile.COUNTER_PERIOD_MAX_S`, not the family's (a 1 s counter's
    quick probe had kept Hopper's 0.12 s, and plain windows' bounds with it: an adversarial
    review, 2026-12-07); the probe's table says so (:mod:`nvmeter.probes.cadence`).
    """
    gaps = [
        level["gap_ms"]["max"] / 1e3
        for level in d.values()
        if isinstance(level, dict) and level["gap_ms"]["n"]
    ]
    if record.derivation < 2:  # as made: the longest gap, else the family's period and wait
        return {"counter_period_s": max(gaps)} if gaps else {}
    # with gaps, a still stretch longer than every gap is a longer one (none was on the H200s:
    # 94-96 ms against 101-108 ms, every probe file in results/)
    still = max((series.longest_still_s for series in record.phases.values()), default=0.0)
    period = max(*gaps, still) if gaps else COUNTER_PERIOD_MAX_S
    return {"counter_period_s": period, "edge_timeout_s": edge_timeout_s(period, base)}


def edge_timeout_s(period_s: float, base: BoardProfile) -> float:
    """The edges' wait for a step on a counter of ``period_s``, s: :data:`EDGE_TIMEOUT_PERIODS` of them.

    Never under the family's (``base``), nor over what a profile holds. A probed 0.514 s period
    had kept Hopper's 0.35 s, and idle spans found no step at their edges (an adversarial review,
    2026-12-07).
    """
    return min(EDGE_TIMEOUT_MAX_S, max(base.edge_timeout_s, EDGE_TIMEOUT_PERIODS * period_s))


def _polling(_record, d: dict, _base: BoardProfile) -> dict:
    return {"polling_artefact_w": max(0.0, d["artefact_w"])}


def _samples(_record, d: dict, _base: BoardProfile) -> dict:
    offset = max(abs(d["idle_ratio"] - 1), abs(d["load_ratio"] - 1))
    return {
        "sample_spacing_s": d["spacing_ms"]["median"] / 1e3,
        "samples_vs_counter": max(_SAMPLES_FLOOR, _SAMPLES_MARGIN * offset),
    }


def _step(record, _d: dict, base: BoardProfile) -> dict:
    """A power-lag bound that reaches the counter's own delay after a load change, where that is further.

    The counter's step delays (10-11 ms on the H200, results/probe-h200.json) bound the power lag
    from above but are not it: the lag an in-work edge sees was fitted on the window bench
    (nvmeter.boards.profile), and is kept. Its bound is widened, never narrowed, to reach the
    later of the rise's and the fall's delays (the largest of those that fit the readings as well
    as the best) plus the series' median read: each step is placed between two reads, so a delay
    is known to about one (2.5 ms in that record). On a board whose power trailed by 30-50 ms,
    the family's 7.5 +- 5 ms held 0 of 20 warm 0.25-0.5 s windows, all marked reliable (an
    adversarial review on the simulated board, 2026-12-07). Records of an earlier nvmeter (step
    derivation 1 or 2) keep the family's bound they were made with: probe again for the board's.
    """
    reach_s = lag_reach_s(record)
    if reach_s is None:
        return {}
    err_s = reach_s - base.power_lag_s
    if not err_s > base.power_lag_err_s:
        return {}
    # the exit waits as long for the power to come down: capped at the tail instead, a 150 ms lag
    # read +45-62% against ±37%, reliable (a breaker's trial, 2026-12-07); both within what a
    # profile holds, past which its figures are a fault, not a board
    return {
        "power_lag_err_s": min(err_s, POWER_LAG_ERR_MAX_S),
        "tail_s": min(max(base.tail_s, reach_s), TAIL_MAX_S),
    }


def lag_reach_s(record) -> float | None:
    """How far after a load change the step response places the counter's delay, s (None: not placed).

    The later of the rise's and the fall's delays (the largest that fits the readings as well as
    the best) plus the series' median read. None for a record of derivation 1 or 2 (made before
    the probe widened anything), and where the step places no delay: a load that barely lifts the
    board, or an edge inside a slow read's gap, fits any delay alike (a flat step tied the fall at
    the grid's 500 ms: a review, 2026-12-07).
    """
    if record.derivation < LAG_DERIVATION:
        return None
    counter = record.derived()["counter"]
    spans = [span for span in record.delay_spans_ms()["counter"].values() if span is not None]
    sharp = spans and all(high - low <= STEP_SPAN_MAX_MS for low, high in spans)
    if not sharp or not counter["plateau_w"] - counter["idle_w"] >= STEP_RISE_MIN_W:
        return None
    return max(high for _, high in spans) / 1e3 + step_read_s(record)


def step_read_s(record) -> float:
    """The step response's median counter read, s: the part of :func:`lag_reach_s` past the delay."""
    return float(np.median(record.counter.read_cost_s))


def _cap_spread(_record, d: dict, _base: BoardProfile) -> dict:
    from nvmeter.probes.capspread import profile_spread

    spread = profile_spread(d)
    return {"cap_spread": spread} if spread else {}


def _run_levels(_record, d: dict, base: BoardProfile) -> dict:
    """Only a wider run level than the family's: eight runs cannot rule out a rarer level.

    A probe whose runs all took one level says little of a level one run in ten takes: eight runs
    all take the same level with a chance of 0.9^8 + 0.1^8 = 43%, and 59 of 150 such probes read
    under it, and then every run at that level fell outside a bound that
    trusted the probe (an adversarial review on the simulated board, 2026-12-07). Ruling out a
    level taken once in twenty runs, with 95% confidence, needs about 60 runs without one (the
    rule of three), which a probe of a minute cannot make.
    """
    level = d["run_level_rel"]  # None: too few runs with a figure, or a limited load
    return {"run_level_rel": level} if level is not None and level > (base.run_level_rel or 0.0) else {}


def _coverage(_record, d: dict, base: BoardProfile) -> dict:
    """Only a lower coverage than the family's: sixteen bursts may all miss a sensed part's edges.

    A counter of partial coverage whose bursts all fell in its sensed part would read as full;
    one whose bursts went unseen cannot be full. So the probe turns error model 11's check on
    (``nvmeter.probes.coverage``) and never off.
    """
    coverage = d["coverage"]
    return {"counter_coverage": coverage} if coverage is not None and coverage < base.counter_coverage else {}


# Each probe's figures: (its record, its derived figures, the profile so far) -> the figures it sets.
_FIGURES = {
    "cadence": _cadence,
    "polling": _polling,
    "samples": _samples,
    "step": _step,
    "cap_spread": _cap_spread,
    "run_levels": _run_levels,
    "coverage": _coverage,
}
