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

The board's run level is :data:`MARGIN` times the runs' range as a share of their median, with the
board's warming taken out where the runs span over :data:`WARMING_C` (derivation 2): a board draws more
per product as it warms (GPU-497e4db9, an H100: +0.36% and +0.74% a °C at FP32 4096² in two runs of
bench/level_loads.py, 0.41% for the second without the machine's first load;
results/enclose/call8[46]-e5f25b5-h100af-level-loads.json.gz), and that board, warming 53 -> 61 °C
through its probe, read its warming as a level of 4.84%
(results/enclose/call85-e5f25b5-h100af-run-levels-probe.json): a cost that moved, not a level a run
took. Where the runs span over :data:`WARMING_C`, the range is the wider of two that leave the warming
out: the largest difference between runs within :data:`SAME_TEMPERATURE_C` of each other (every run's
where under :data:`MIN_RUNS` have such a neighbour), and the range after the Theil-Sen slope of figure
on temperature is taken out (``scipy.stats.theilslopes``, the median of the pairwise slopes; only a
rise). Each alone can take a level for warming: the first a lone run at the level with no neighbour,
the second a block of runs at the level at one end of the warming (simulated boards, a 4% level,
58 probes that took both levels, warming 7 and 11 °C: under the level in 3 and 0 probes by the first,
2 and 2 by the second, 0 by the wider of the two, as by the runs as they are;
results/enclose/level-warming-sim-fb95c24.md, from bench/level_warming.py). Every run stays
in the range. The profile keeps the figure (``BoardProfile.run_level_rel``), which error
model 13 holds every window's state part to. The range, not the distance from the median: with two
levels taken about as often the median falls between them. A board none of whose runs took another
level reads its runs' scatter (0.35-0.81% over the runs at the main level of four H100 probes, calls
80-83: a figure of 0.4-1.0%), near the error model's own 0.7% floor. Eight runs see a level that one
run in eight takes with a chance of 1 - (7/8)^8, about two in three: a board whose probe showed
none may still have a rare one: the profile keeps the probe's figure only where it is wider than the
family's default (``nvmeter.probes.profile``), so the probe widens the floor on a board with a larger
level and never narrows it. A load the board limited (a clock-event reason in half the state reads
or more) keeps the family's default: the limiter, not the level, set its power.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
from scipy import stats

from nvmeter import errors
from nvmeter.boards.profile import RUN_LEVEL_MAX
from nvmeter.probes import schedule
from nvmeter.probes.marked import MarkedRecord
from nvmeter.worker.rig import Rig

NAME = "run_levels"
TITLE = "run levels"
IN_QUICK = False
# Not in a plain run (``nvmeter probe --run-levels`` adds it): eight runs of ~5 s would take a
# full run past issue 16's minute.
OPT_IN = True

# The profile's figure is this multiple of the runs' range: a chosen margin (a quarter again, for a
# level a little further off than the probe's runs reached), not fitted.
MARGIN = 1.25
# Fewest runs with a figure for the profile to keep one (a range needs a few).
MIN_RUNS = 4
# The load held at a limit (a clock-event reason) in at least this share of the state reads: the
# limiter, not the level, set its power, so the probe cannot see the level (an adversarial review:
# a simulated board capped at 450 W read 0.58% for a level of 2.5%).
LIMITED_SHARE = 0.5
# Runs spanning more than this, °C, are read with the board's warming left out: twice the ±1 °C within
# which a reference is taken for its trial (docs/window.md), a chosen bound, not fitted. Runs within it
# (the four probes of boards with a level, calls 80-83: 1.0-1.3 °C) are read as they are, so that no
# slope fitted to a few runs takes part of a level out on a board that did not warm.
WARMING_C = 2.0
# Runs whose mean temperatures are this near, °C, are compared as they are where the runs warmed: the
# rule that pairs a trial with its reference (within ±1 °C, docs/window.md), not fitted.
SAME_TEMPERATURE_C = 1.0
# 1: the range of the runs as they are (probe records before v10); 2: with the warming left out.
DERIVATION = 2
DERIVATIONS = (1, 2)


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`)."""
    return {"idle_context", "level_load"}


@dataclass(frozen=True)
class RunLevels(MarkedRecord):
    """The run-level probe's record: its runs of FP32 products, each after a pause (:class:`MarkedRecord`)."""

    LOAD: ClassVar[str] = "the run-level load"
    derivation: int = DERIVATION

    def __post_init__(self) -> None:
        super().__post_init__()
        if type(self.derivation) is not int or self.derivation not in DERIVATIONS:
            raise errors.RecordError(
                f"{self.LOAD}'s derivation must be one of {DERIVATIONS}, not {self.derivation!r}"
            )
        sizes = {(run.dtype, run.n) for run in self.runs}
        if len(sizes) != 1 or next(iter(sizes))[0] != "fp32":
            raise errors.RecordError(
                f"{self.LOAD} must be runs of FP32 products of one size, not {sorted(sizes)}"
            )

    def _span(self, i: int) -> tuple[float, float, float] | None:
        """Run ``i``'s first and last counter step inside its marks: (seconds, J above idle, products)."""
        steps = self.marked_steps[i]
        if len(steps) < 2:
            return None
        first, last = steps[0], steps[-1]
        seconds = last.t_s - first.t_s
        above_j = (last.energy_mj - first.energy_mj) / 1e3 - self.idle.power_w * seconds
        products = float(np.diff(self.products_at(i, [first.t_s, last.t_s]))[0])
        return seconds, above_j, products

    def run_mj(self, i: int) -> float:
        """Run ``i``'s energy above idle per product, mJ (nan: under two steps inside its marks).

        Between its first and last counter step inside the marks, over the products done between.
        """
        span = self._span(i)
        if span is None or not span[2] > 0:
            return math.nan
        return span[1] / span[2] * 1e3

    def run_above_w(self, i: int) -> float:
        """Run ``i``'s power above idle, W, over the same steps as :meth:`run_mj` (nan: under two)."""
        span = self._span(i)
        return math.nan if span is None or not span[0] > 0 else span[1] / span[0]

    def run_temperature_c(self, i: int) -> float:
        """Run ``i``'s mean temperature over the state reads inside it, °C (nan: none, or hidden)."""
        run = self.runs[i]
        found = [s.temperature_c for s in self.states if run.t0_s <= s.t_s <= run.t1_s]
        found = [t for t in found if math.isfinite(t)]
        return float(np.mean(found)) if found else math.nan

    def warming_mj_per_c(self, runs_mj: list[float], temps_c: list[float]) -> float | None:
        """The warming taken out of the runs' figures, mJ a product a °C (None: not taken out).

        Derivation 2, with :data:`MIN_RUNS` or more runs with a figure, every one's temperature
        known, spanning over :data:`WARMING_C`: the Theil-Sen slope of figure on temperature, or
        0 where it falls (a board draws more as it warms; a fall is no warming to take out).
        """
        known = [(t, v) for t, v in zip(temps_c, runs_mj, strict=True) if math.isfinite(v)]
        temps = np.array([t for t, _ in known])
        if self.derivation < 2 or len(known) < MIN_RUNS or not np.isfinite(temps).all():
            return None  # a hidden temperature: the runs as they are, the wider reading
        if np.ptp(temps) <= WARMING_C:
            return None
        slope = stats.theilslopes([v for _, v in known], temps)[0]
        return max(0.0, float(slope))

    def to_dict(self) -> dict:
        """Raw JSON form, with the derivation its figures follow."""
        return {**super().to_dict(), "derivation": self.derivation}

    @classmethod
    def from_dict(cls, data: dict) -> RunLevels:
        """Inverse of :meth:`to_dict` (probe records before v10 read as derivation 1: nvmeter.formats)."""
        return replace(super().from_dict(data), derivation=data["derivation"])

    @property
    def limited_share(self) -> float:
        """Share of the state reads that reported a limiting clock-event reason (nan with none)."""
        return self.state_share(lambda s: s.limited)

    def derived(self) -> dict:
        """Each run's figure (mJ a product), their median, their range as a share of it, the profile's figure.

        The range, not the distance from the median: with two levels taken about as often, the
        median falls between them and the distance is half the gap (an adversarial review).
        """
        runs_mj = [self.run_mj(i) for i in range(len(self.runs))]
        temps_c = [self.run_temperature_c(i) for i in range(len(self.runs))]
        warming = self.warming_mj_per_c(runs_mj, temps_c)
        kept = [(v, t) for v, t in zip(runs_mj, temps_c, strict=True) if math.isfinite(v)]
        median = float(np.median([v for v, _ in kept])) if kept else math.nan
        range_rel = _range_mj(kept, warming) / median if kept and median > 0 else math.nan
        usable = (
            len(kept) >= MIN_RUNS and math.isfinite(range_rel) and not self.limited_share >= LIMITED_SHARE
        )
        found: dict[str, Any] = {
            "runs": len(self.runs),
            "runs_with_figure": len(kept),
            "run_mj": runs_mj,
            "median_mj": median,
            "range_rel": range_rel,
            "limited_share": self.limited_share,
            "run_level_rel": min(RUN_LEVEL_MAX, MARGIN * range_rel) if usable else None,
        }
        if self.derivation >= 2:  # derivation 1's records keep the block they were written with
            found["run_temperature_c"] = temps_c
            found["warming_mj_per_c"] = warming
        return found

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        d = self.derived()
        runs = f"{d['runs']} starts"
        if d["runs_with_figure"] < d["runs"]:
            runs += f" ({d['runs'] - d['runs_with_figure']} with under two counter steps: no figure)"
        if d["run_level_rel"] is None:
            if d["limited_share"] >= LIMITED_SHARE:
                why = (
                    f"the load was limited in {100 * d['limited_share']:.0f}% of the state reads "
                    "(the limiter hides a level)"
                )
            elif d["runs_with_figure"] < MIN_RUNS:
                why = f"under {MIN_RUNS} runs with a figure"
            else:
                why = "the runs drew nothing above the idle"
            return [("run levels", f"{runs}: {why}; the family's default kept")]
        offsets = ", ".join(
            f"{100 * (v / d['median_mj'] - 1):+.2f}%" for v in d["run_mj"] if math.isfinite(v)
        )
        return [
            (
                "run levels",
                f"{runs}, {d['median_mj']:,.1f} mJ a product (median); each run against it: {offsets}; "
                f"run level {MARGIN:g} x the range {100 * d['range_rel']:.2f}%{self._range_words(d)} = "
                f"{100 * d['run_level_rel']:.2f}%",
            )
        ]

    @staticmethod
    def _range_words(d: dict) -> str:
        """The runs' temperatures, and the warming taken out of their range (derivation 2)."""
        known = [t for t in d.get("run_temperature_c", ()) if math.isfinite(t)]
        if not known:  # derivation 1, or a board that hides its temperature
            return ""
        span = f"the runs at {min(known):.0f}-{max(known):.0f} °C"
        if d["warming_mj_per_c"] is None:
            return f" ({span})"
        slope = f"Theil-Sen slope {d['warming_mj_per_c']:+.2f} mJ a product a °C"
        return f" with the warming left out ({span}; {slope})"


def _range_mj(kept: list[tuple[float, float]], warming: float | None) -> float:
    """The range of (figure mJ, temperature °C) runs, mJ: as they are, or the wider of two warming-free ones.

    ``warming`` (mJ a °C; None: the runs did not warm) is the slope to take out.
    """
    if warming is None:
        return _as_they_are_mj(kept)
    return max(flattened_range_mj(kept, warming), neighbours_range_mj(kept))


def _as_they_are_mj(kept: list[tuple[float, float]]) -> float:
    """The range of (figure mJ, temperature °C) runs' figures as they are, mJ."""
    return max(v for v, _ in kept) - min(v for v, _ in kept)


def flattened_range_mj(kept: list[tuple[float, float]], warming: float) -> float:
    """The range of (figure mJ, temperature °C) runs with ``warming`` (mJ a °C) taken out, mJ."""
    centre_c = float(np.mean([t for _, t in kept]))
    flattened = [v - warming * (t - centre_c) for v, t in kept]
    return max(flattened) - min(flattened)


def neighbours_range_mj(kept: list[tuple[float, float]]) -> float:
    """The largest difference between runs within :data:`SAME_TEMPERATURE_C`, mJ (too few such: all runs')."""
    near = [
        (i, j)
        for i, (_, ti) in enumerate(kept)
        for j, (_, tj) in enumerate(kept)
        if i < j and abs(ti - tj) <= SAME_TEMPERATURE_C
    ]
    if len({k for pair in near for k in pair}) < MIN_RUNS:
        return _as_they_are_mj(kept)
    return max(abs(kept[i][0] - kept[j][0]) for i, j in near)


def wider_levels(kept: RunLevels, new: RunLevels) -> RunLevels:
    """Of two probes of one board, the one whose run level is wider (on a tie, or neither: the new one).

    The kept one is read by the new one's derivation first: a kept probe that read a board's warming
    as a level (derivation 1) would otherwise outlast every later probe of the board.
    """
    kept = replace(kept, derivation=max(kept.derivation, new.derivation))
    figures = [rec.derived()["run_level_rel"] for rec in (kept, new)]
    widths = [-1.0 if f is None else f for f in figures]
    return kept if widths[0] > widths[1] else new


def assemble(m: dict, quick: bool) -> RunLevels:
    """The record: the context idle span and the restarted load."""
    load = m["level_load"]
    return RunLevels(m["idle_context"], load.counters, load.runs, load.states)


def run(rig: Rig, quick: bool) -> RunLevels:
    """This probe alone (``nvmeter probe --only run_levels``)."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
