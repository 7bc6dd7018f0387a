"""Does a run-level probe on a warming board take a level for warming? Each reading on simulated boards.

The run-level probe leaves a board's warming out of its runs' range where they span over 2 °C
(``probes.runlevels``, derivation 2): the wider of the range between runs within 1 °C of each other
and the range after the Theil-Sen slope is taken out. This probes simulated boards that warm through
the runs (``SimConfig.c_per_w``; the simulated board's power does not follow its temperature, so all
the spread is the level) with a second level taken by a share of the runs, and counts, among the
probes whose runs took both levels, those whose figure fell under the level: by each reading alone,
by the wider of the two, and by the runs as they are (derivation 1). Nothing here is part of the meter.

    python bench/level_warming.py [--seeds 60] [--levels 0.025,0.04] [--warming 0.03,0.05]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import numpy as np

from nvmeter.boards.simulated import SimConfig, SimulatedBoard
from nvmeter.probes import runlevels
from nvmeter.probes.report import run_probes
from nvmeter.worker.rig import Rig
from nvmeter.worker.simulated import SimWorker

SHARE = 0.4  # the share of runs at the second level (call 79's H100: three of eight)
# The largest second level asked for (the simulated board's load, ~550 W above idle, meets its 700 W
# cap past ~5%: the limiter then hides the level) and the fastest warming, °C a W (ten times the
# simulated board's default)
MAX_LEVEL = 0.2
MAX_C_PER_W = 0.5


def readings(rec: runlevels.RunLevels, d: dict) -> dict[str, float]:
    """Each reading's run level (1.25 x its range over the median), derivation 2's parts and derivation 1.

    ``d``: ``rec.derived()``.
    """
    kept = [(v, t) for v, t in zip(d["run_mj"], d["run_temperature_c"], strict=True) if np.isfinite(v)]
    scale = runlevels.MARGIN / d["median_mj"]
    warming = d["warming_mj_per_c"] or 0.0
    return {
        "neighbours": scale * runlevels.neighbours_range_mj(kept),
        "slope out": scale * runlevels.flattened_range_mj(kept, warming),
        "derivation 2": d["run_level_rel"],
        "derivation 1": replace(rec, derivation=1).derived()["run_level_rel"],
    }


def count(level: float, c_per_w: float, seeds: int) -> tuple[int, dict[str, int], int, float]:
    """Probes that took both levels, how many each reading put under it, probes with no figure, °C span.

    A probe with no figure (a load the limiter held, or a run without two counter steps) keeps the
    family's default and is counted apart.
    """
    took, under, no_figure, spans = 0, {}, 0, []
    for seed in range(seeds):
        board = SimulatedBoard(
            SimConfig(seed=seed, c_per_w=c_per_w, second_level_rel=level, second_level_p=SHARE)
        )
        rec = run_probes(Rig(board, lambda b=board: SimWorker(b)), only=("run_levels",)).probes["run_levels"]
        d = rec.derived()
        figures = np.array(d["run_mj"])
        spans.append(float(np.nanmax(d["run_temperature_c"]) - np.nanmin(d["run_temperature_c"])))
        if d["run_level_rel"] is None or not np.isfinite(figures).all():
            no_figure += 1
            continue
        if np.ptp(figures) / np.median(figures) < 0.6 * level:  # the runs took one level only
            continue
        took += 1
        for name, value in readings(rec, d).items():
            under[name] = under.get(name, 0) + (value < level)
    return took, under, no_figure, float(np.median(spans))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=60, help="simulated boards per cell (default 60)")
    p.add_argument("--levels", default="0.025,0.04", help="second levels, shares (default 0.025,0.04)")
    p.add_argument(
        "--warming", default="0.03,0.05", help="SimConfig.c_per_w values, °C a W (default 0.03,0.05)"
    )
    args = p.parse_args(argv)
    try:
        levels = [float(x) for x in args.levels.split(",")]
        warmings = [float(x) for x in args.warming.split(",")]
        fine = all(0 < x <= MAX_LEVEL for x in levels) and all(0 <= x <= MAX_C_PER_W for x in warmings)
        if args.seeds < 1 or not fine:  # NaN fails every comparison
            raise ValueError
    except ValueError:
        print(
            f"level_warming: --seeds 1 or more; --levels in (0, {MAX_LEVEL:g}] and --warming in "
            f"[0, {MAX_C_PER_W:g}], comma-separated numbers",
            file=sys.stderr,
        )
        return 2
    names = ["neighbours", "slope out", "derivation 2", "derivation 1"]
    print(
        "| level | c_per_w | °C span (median) | probes that took both levels | "
        + " | ".join(f"under it: {n}" for n in names)
        + " | probes with no figure |"
    )
    print("| --- " * (5 + len(names)) + "|")
    for level in levels:
        for c_per_w in warmings:
            took, under, no_figure, span = count(level, c_per_w, args.seeds)
            cells = " | ".join(str(under.get(n, 0)) for n in names)
            print(
                f"| {100 * level:g}% | {c_per_w:g} | {span:.1f} | {took} | {cells} | {no_figure} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
