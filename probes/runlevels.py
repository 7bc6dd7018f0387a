"""Run levels: how far one whole run's per-call energy sits from the same calls' other runs.

Some boards settle, after a start, into one of two power levels for the same calls at the same
clocks and temperature, and stay there for the whole run: FP32 4096² ``measure()`` runs read
+2.2-2.6% against 10 s references on an H200 and an H100, 12-15 W above the references' level in
every 0.25 s bin of the run, while four other H100s showed none (docs/window.md, error model 13).
A run's own windows agree with each other, so nothing inside one run shows it. The probe starts
FP32 4096² products (the probes' standard load, random operands) ``level_starts`` times, each
after ``level_pause_s`` of idle (as ``measure()`` runs follow one another), lets each run for
``measure()``'s 2.5 s warm-up, then polls the counter through ``level_s`` while the worker marks
when each chunk of 8 products ended. Each run's figure is its energy above the context idle
between its first and last counter step inside the marks, over the products done between them.

The board's run level is :data:`MARGIN` times the largest distance of a run's figure from the
runs' median, as a share of that median; the profile keeps it (``BoardProfile.run_level_rel``),
which error model 13 holds every window's state part to. The median, not the mean: with two
levels it sits at the level most runs took, and the distance then reaches the other. A board
none of whose runs took another level reads about twice the runs' scatter (~0.2% on the H100s'
runs), under the error model's own 0.7% floor. Eight runs see a level that one run in eight
takes with a chance of 1 - (7/8)^8, about two in three: a board whose probe showed none may still
have a rare one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from nvmeter.probes import schedule
from nvmeter.probes.marked import MarkedRecord
from nvmeter.worker.rig import Rig

NAME = "run_levels"
TITLE = "run levels"
IN_QUICK = False
# Not in a plain run (``nvmeter probe --run-levels`` adds it): eight runs of ~5 s would take a
# full run past issue 16's minute.
OPT_IN = True

# The profile's figure is this multiple of the largest distance seen: a chosen margin (half as wide
# again, as the families no board was measured on take over Hopper's), not fitted.
MARGIN = 1.5
# Fewest runs with a figure for the profile to keep one (a median and a distance need a few).
MIN_RUNS = 4
# The profile's figure is at most this (BoardProfile's limit); a larger distance is not a level.
MAX_REL = 0.5


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`)."""
    return {"idle_context", "level_load"}


@dataclass(frozen=True)
class RunLevels(MarkedRecord):
    """The run-level probe's record: its runs of FP32 products, each after a pause (:class:`MarkedRecord`)."""

    LOAD: ClassVar[str] = "the run-level load"

    def run_mj(self, i: int) -> float:
        """Run ``i``'s energy above idle per product, mJ (nan: under two steps inside its marks).

        Between its first and last counter step inside the marks, over the products done between.
        """
        run, steps = self.runs[i], self.counters[i].steps
        inside = (steps.t_s >= run.mark_t_s[0]) & (steps.t_s <= run.mark_t_s[-1])
        t_s, energy_mj = np.asarray(steps.t_s)[inside], np.asarray(steps.energy_mj)[inside]
        if len(t_s) < 2:
            return math.nan
        t_marks = np.concatenate([[run.t0_s], run.mark_t_s])
        n_marks = np.concatenate([[0], run.mark_products])
        products = float(np.diff(np.interp(t_s[[0, -1]], t_marks, n_marks))[0])
        above_j = (energy_mj[-1] - energy_mj[0]) / 1e3 - self.idle.power_w * (t_s[-1] - t_s[0])
        return above_j / products * 1e3 if products > 0 else math.nan

    def derived(self) -> dict:
        """Each run's figure (mJ a product), their median, the largest distance from it, the profile's."""
        runs_mj = [self.run_mj(i) for i in range(len(self.runs))]
        kept = [v for v in runs_mj if math.isfinite(v)]
        median = float(np.median(kept)) if kept else math.nan
        spread = max((abs(v - median) for v in kept), default=math.nan) / median if median > 0 else math.nan
        limited = [s.limited for s in self.states]
        return {
            "runs": len(self.runs),
            "run_mj": runs_mj,
            "median_mj": median,
            "max_offset_rel": spread,
            "run_level_rel": MARGIN * spread if len(kept) >= MIN_RUNS and math.isfinite(spread) else None,
            "limited_share": sum(limited) / len(limited) if limited else math.nan,
        }

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        d = self.derived()
        if d["run_level_rel"] is None:
            return [("run levels", f"{d['runs']} starts, too few with a figure: the family's default kept")]
        offsets = ", ".join(
            f"{100 * (v / d['median_mj'] - 1):+.2f}%" for v in d["run_mj"] if math.isfinite(v)
        )
        return [
            (
                "run levels",
                f"{d['runs']} starts, {d['median_mj']:,.1f} mJ a product (median); each run against it: "
                f"{offsets}; run level {MARGIN:g} x {100 * d['max_offset_rel']:.2f}% = "
                f"{100 * d['run_level_rel']:.2f}% (the profile keeps it)",
            )
        ]


def profile_level(derived: dict) -> float | None:
    """``BoardProfile.run_level_rel`` from :meth:`RunLevels.derived` (None: too few runs)."""
    level = derived["run_level_rel"]
    return None if level is None else min(MAX_REL, level)


def assemble(m: dict, quick: bool) -> RunLevels:
    """The record: the context idle span and the restarted load."""
    load = m["level_load"]
    return RunLevels(m["idle_context"], load.counters, load.runs, load.states)


def run(rig: Rig, quick: bool) -> RunLevels:
    """This probe alone (``nvmeter probe --only run_levels``)."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
