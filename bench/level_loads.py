"""Run levels at two loads: is a board's second level a share of the work's power, or watts?

Error model 13 takes a board's run level as a share of the energy above idle; on every board it was
12-15 W, each time at one load (FP32 4096² at ~550 W above idle: docs/window.md, "Error model 13",
"Open: a share, or watts?"). This makes the run-level probe's restarts (FP32 products after a pause,
``measure()``'s 2.5 s warm-up, then the counter polled; ``nvmeter.probes.schedule``'s marked loads)
alternating two product sizes, and prints each run's power above the context idle against its size's
median, in W and in %. A level of fixed watts shows the same W at both sizes; a share, the same %.
Nothing here is part of the meter.

    python bench/level_loads.py --out level-loads.json [--sizes 4096,1024] [--starts 12] [--simulate]

The record (kind ``bench-level-loads``, schema 1): the board, the sizes, the context idle span and,
per size, the run-level probe's raw record of its runs (``probes.runlevels.RunLevels``).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from nvmeter import errors, records
from nvmeter.probes import schedule
from nvmeter.probes.runlevels import RunLevels
from nvmeter.worker.rig import Rig

SCHEMA_VERSION = 1
PAUSE_S, LEAD_S, POLL_S = 0.5, 2.5, 2.0  # as the run-level probe's plan (probes.schedule.Plan)


def measure(rig: Rig, sizes: tuple[int, ...], starts: int) -> dict[int, RunLevels]:
    """``starts`` runs of each size, alternating, each after the pause; the context idle first."""
    session = schedule.Session(rig, False, {"idle_context"})
    session.run()
    idle = session.results["idle_context"]
    found: dict[int, list] = {n: [] for n in sizes}
    for k in range(starts):
        for n in sizes:
            print(f"run {k + 1} of {starts}, {n}²", flush=True)
            load = schedule.MarkedLoad(n, "fp32", 1, PAUSE_S, LEAD_S, POLL_S)
            found[n].append(schedule.marked_load(session, load))
    return {
        n: RunLevels(
            idle,
            tuple(r.counters[0] for r in got),
            tuple(r.runs[0] for r in got),
            sum((r.states for r in got), ()),
        )
        for n, got in found.items()
    }


def table(levels: dict[int, RunLevels]) -> list[str]:
    """Per size: each run's W above idle, and its distance from the size's median in W and %."""
    lines = [
        "| size | median W above idle | each run against it, W | the same, % |",
        "| --- | --- | --- | --- |",
    ]
    for n, rec in levels.items():
        watts = [rec.run_above_w(i) for i in range(len(rec.runs))]
        kept = [w for w in watts if math.isfinite(w)]
        median = float(np.median(kept)) if kept else math.nan
        in_w = ", ".join(f"{w - median:+.1f}" for w in kept)
        in_rel = ", ".join(f"{100 * (w / median - 1):+.2f}" for w in kept)
        lines.append(f"| {n}² | {median:.1f} | {in_w} | {in_rel} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--sizes", default="4096,1024", help="comma-separated FP32 product sizes (default 4096,1024)"
    )
    p.add_argument("--starts", type=int, default=12, help="runs of each size (default 12)")
    p.add_argument("--device", default="0")
    p.add_argument("--simulate", action="store_true")
    args = p.parse_args(argv)
    try:
        sizes = tuple(int(s) for s in args.sizes.split(","))
        if len(sizes) < 1 or min(sizes) < 64 or args.starts < 2:
            raise ValueError
    except ValueError:
        print(
            "level_loads: --sizes takes sizes of 64 or more, comma-separated; --starts 2 or more",
            file=sys.stderr,
        )
        return 2
    try:
        records.check_writable(args.out)
        with Rig.open(None if args.simulate else args.device, simulate=args.simulate) as rig:
            levels = measure(rig, sizes, args.starts)
            board = rig.board.identity().to_dict()
    except errors.NvmeterError as exc:
        print(f"level_loads: {exc}", file=sys.stderr)
        return 2
    data = {
        "kind": "bench-level-loads",
        "schema_version": SCHEMA_VERSION,
        "board": board,
        "sizes": list(sizes),
    }
    data["levels"] = {str(n): rec.to_dict() for n, rec in levels.items()}
    records.write_json(args.out, data)
    print("\n".join(table(levels)))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
