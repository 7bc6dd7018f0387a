"""Spread at the power cap: how far a window's per-call energy moves about its steady value there.

At the power cap the limiter moves the board's power over about a second, and the calls of a
0.5 s window cost up to ~4% more or less than the same calls over 10 s (an H100, bf16 products;
docs/window.md). The probe starts bf16 8192² products (a load that holds Hopper boards at their
700 W limit) several times after a pause (``cap_starts``, ``cap_pause_s``), lets each run for
``cap_lead_s`` (the overshoot after a start, and error model 6's 2 s look-back), then polls the
counter through ``cap_s`` of the same products while the worker marks when each chunk of 8
ended. Several short runs, not one long one: the limiter's swing dies down over seconds after a
start, and a window 2-5 s after a pause sees about twice the spread of a settled run
(bench/cap_settling.py, results/enclose/cap-settling.txt). Each run is cut at counter steps into
consecutive blocks of about each of :data:`WINDOWS_S`; each block's energy above idle over the
products done in it is a window's per-call energy. The relative SD of the blocks about their own
run's mean, pooled over the runs, and its one-sided upper confidence limit at :data:`CONFIDENCE`
(the chi-square limit of an SD, ``scipy.stats.chi2``), are the figures; the board's profile keeps
the limit (``BoardProfile.cap_spread``), which error model 10 uses for windows that the board
limited.

A board that did not report the software power cap (``BoardState.power_capped``) for at least
half of the probe's state reads was not held at its limit: its figures are kept but the profile
keeps the family's defaults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import stats

from nvmeter.meter.series import Step
from nvmeter.meter.spread import cut_at, pooled_rel_sd
from nvmeter.probes import schedule
from nvmeter.probes.marked import MarkedRecord
from nvmeter.worker.rig import Rig

NAME = "cap_spread"
TITLE = "spread at the power cap"
IN_QUICK = False
# Not in a plain run (``nvmeter probe --cap-spread`` adds it): see nvmeter.probes.selected.
OPT_IN = True

# Block lengths, s: the windows issue 10 bounds run from 0.25 to 4 s; beyond 2 s three runs of 6 s
# hold too few blocks for a useful limit (the meter keeps the 2 s figure for longer ones).
# 0.75 and 1.5 s are there because the spread need not fall monotonically with the length.
WINDOWS_S = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
# A block ends at the first counter step at least its length less this share of the counter's
# period after its start: the step nearest the length (0.25 s -> 0.3 s blocks on a 0.1 s counter).
SHORT_BY_PERIODS = 0.4
# One-sided confidence of the SD's upper limit; a profile figure needs this many blocks.
CONFIDENCE = 0.95
MIN_BLOCKS = 4


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`)."""
    return {"idle_context", "cap_load"}


@dataclass(frozen=True)
class CapSpread(MarkedRecord):
    """The cap-spread probe's record: its runs of bf16 products at the power cap (:class:`MarkedRecord`)."""

    LOAD: ClassVar[str] = "the cap-spread load"

    @property
    def cap_share(self) -> float:
        """Share of the state reads that reported the software power cap (nan with none)."""
        return self.state_share(lambda s: s.power_capped)

    @property
    def at_cap(self) -> bool:
        """True when at least half of the state reads reported the software power cap."""
        return self.cap_share >= 0.5

    def _cuts(self, i: int, window_s: float) -> list[Step]:
        steps = self.marked_steps[i]
        period_s = float(np.median(np.diff([s.t_s for s in steps]))) if len(steps) > 1 else 0.0
        return cut_at(steps, window_s - SHORT_BY_PERIODS * period_s)

    def run_blocks_mj(self, i: int, window_s: float) -> np.ndarray:
        """Energy above idle per product of run ``i``'s consecutive ~``window_s`` blocks, mJ, shape (k,)."""
        cuts = self._cuts(i, window_s)
        if len(cuts) < 2:
            return np.empty(0)
        t = np.array([c[0] for c in cuts])
        e_j = np.array([c[1] for c in cuts]) / 1e3
        products = np.diff(self.products_at(i, t))
        above_j = np.diff(e_j) - self.idle.power_w * np.diff(t)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(products > 0, above_j / products * 1e3, np.nan)

    def blocks_mj(self, window_s: float) -> np.ndarray:
        """Every run's blocks (:meth:`run_blocks_mj`), run after run, mJ, shape (k,)."""
        return np.concatenate([self.run_blocks_mj(i, window_s) for i in range(len(self.runs))])

    def block_s(self, window_s: float) -> float:
        """The median length of the ~``window_s`` blocks, s.

        Cut at counter steps, they run longer (~0.3 s for 0.25 s on a 0.1 s counter); the
        profile files each spread under this length.
        """
        lengths = [np.diff([c[0] for c in self._cuts(i, window_s)]) for i in range(len(self.runs))]
        lengths = np.concatenate(lengths) if lengths else np.empty(0)
        return float(np.median(lengths)) if len(lengths) else math.nan

    def window_figures(self, window_s: float) -> dict:
        """Blocks, their median length (s), relative SD about each run's mean pooled, its upper limit."""
        runs = [self.run_blocks_mj(i, window_s) for i in range(len(self.runs))]
        runs = [values[np.isfinite(values)].tolist() for values in runs]
        rel_sd, dof = pooled_rel_sd(runs)
        found = {"window_s": window_s, "block_s": self.block_s(window_s), "blocks": sum(map(len, runs))}
        if dof < 1:
            return found | {"rel_sd": None, "rel_sd_upper": None}
        upper = rel_sd * math.sqrt(dof / stats.chi2.ppf(1 - CONFIDENCE, dof))
        return found | {"rel_sd": rel_sd, "rel_sd_upper": upper}

    def derived(self) -> dict:
        """At the cap or not, mean power (W), product time (ms), and each block length's spread."""
        powers, products_ms = [], []
        for i, run in enumerate(self.runs):
            steps = self.marked_steps[i]
            if len(steps) > 1:
                powers.append((steps[-1][1] - steps[0][1]) / 1e3 / (steps[-1][0] - steps[0][0]))
            if run.matmuls:
                products_ms.append(run.duration_s / run.matmuls * 1e3)
        return {
            "at_cap": self.at_cap,
            "cap_share": self.cap_share,
            "power_w": float(np.mean(powers)) if powers else math.nan,
            "product_ms": float(np.mean(products_ms)) if products_ms else math.nan,
            "runs": len(self.runs),
            "windows": [self.window_figures(w) for w in WINDOWS_S],
        }

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        d = self.derived()
        cells = ", ".join(
            f"{w['block_s']:.2f} s {100 * w['rel_sd']:.2f}% (95% limit {100 * w['rel_sd_upper']:.2f}%, "
            f"{w['blocks']} blocks)"
            for w in d["windows"]
            if w["rel_sd"] is not None
        )
        where = "at the power cap"
        if not d["at_cap"]:
            where = f"NOT at the power cap ({100 * d['cap_share']:.0f}% of reads): family defaults kept"
        kept = "the profile keeps each 95% limit" if d["at_cap"] else "the profile keeps the family's"
        return [
            (
                "spread at the power cap",
                f"{d['power_w']:.0f} W over {d['runs']} starts, {where}; SD of the energy per product over "
                f"blocks of: {cells}; {kept}",
            )
        ]


def profile_spread(derived: dict) -> tuple[tuple[float, float], ...]:
    """``BoardProfile.cap_spread`` from :meth:`CapSpread.derived`: (window s, upper limit).

    The lengths with at least :data:`MIN_BLOCKS` blocks; empty for a board not at its cap.
    """
    if not derived["at_cap"]:
        return ()
    kept = {}  # by block length: two lengths whose blocks came out alike keep the wider figure
    for w in derived["windows"]:
        if w["blocks"] >= MIN_BLOCKS and w["rel_sd_upper"] is not None:
            length = round(w["block_s"], 3)
            kept[length] = max(kept.get(length, 0.0), min(0.5, w["rel_sd_upper"]))
    return tuple(sorted(kept.items()))


def assemble(m: dict, quick: bool) -> CapSpread:
    """The record: the context idle span and the load at the cap."""
    load = m["cap_load"]
    return CapSpread(m["idle_context"], load.counters, load.runs, load.states)


def run(rig: Rig, quick: bool) -> CapSpread:
    """This probe alone (``nvmeter probe --only cap_spread``)."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
