"""Run levels at two loads: is a board's second level a share of the work's power, or watts?

Error model 13 takes a board's run level as a share of the energy above idle; on every board it was
12-15 W, each time at one load (FP32 4096² at ~550 W above idle: docs/window-log.md, "Error model 13",
"Open: a share, or watts?"). This makes the run-level probe's restarts (FP32 products after a pause,
``measure()``'s 2.5 s warm-up, then the counter polled; ``nvmeter.probes.schedule``'s marked loads)
alternating two product sizes, and prints each run's power above the context idle against its size's
median, in W and in %. A level of fixed watts shows the same W at both sizes; a share, the same %.
Each run's mean temperature and the least-squares slope of W on it (all runs) show what the board's
warming moved. Nothing here is part of the meter.

    python bench/level_loads.py --out level-loads.json [--sizes 4096,1024] [--starts 12] [--simulate]
    python bench/level_loads.py --table results/enclose/call86-e5f25b5-h100af-level-loads.json.gz

The record (kind ``bench-level-loads``): the board, the sizes, the context idle span and, per size,
the run-level probe's raw record of its runs (``probes.runlevels.RunLevels``). Schema 2: that record
carries its derivation; schema 1's read as the current one (a run's W does not depend on it).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from nvmeter import errors, records
from nvmeter.meter import sanity
from nvmeter.probes import runlevels, schedule
from nvmeter.probes.runlevels import RunLevels
from nvmeter.worker.rig import Rig

SCHEMA_VERSION = 2
PAUSE_S, LEAD_S, POLL_S = 0.5, 2.5, 2.0  # as the run-level probe's plan (probes.schedule.Plan)
# The smallest product: a run of 64² products marks millions of chunks, and the simulated one grew
# ~300 MB a second until the OOM killer ended it (a breaker); the probes use 4096².
MIN_SIZE = 512


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
    """Per size: each run's W above idle against the size's median in W and %, its °C, the W a °C."""
    lines = [
        "| size | median W above idle | each run against it, W | the same, % | each run's °C | W a °C (%) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for n, rec in levels.items():
        watts = np.array([rec.run_above_w(i) for i in range(len(rec.runs))])
        temps = np.array([rec.run_temperature_c(i) for i in range(len(rec.runs))])
        kept = np.isfinite(watts)
        median = float(np.median(watts[kept])) if kept.any() else math.nan
        in_w = ", ".join(f"{w - median:+.1f}" for w in watts[kept])
        in_rel = ", ".join(f"{100 * (w / median - 1):+.2f}" for w in watts[kept])
        in_c = ", ".join(f"{t:.1f}" for t in temps[kept])
        lines.append(f"| {n}² | {median:.1f} | {in_w} | {in_rel} | {in_c} | {_slope(temps, watts, median)} |")
    return lines


def _slope(temps: np.ndarray, watts: np.ndarray, median: float) -> str:
    """Least-squares W a °C over the runs with both figures, and as % of the median ('-': too few)."""
    both = np.isfinite(temps) & np.isfinite(watts)
    if both.sum() < 3 or np.ptp(temps[both]) == 0 or not median > 0:
        return "-"
    slope = float(np.polyfit(temps[both], watts[both], 1)[0])
    return f"{slope:+.2f} ({100 * slope / median:+.2f}%)"


def read(path: Path) -> dict[int, RunLevels]:
    """A written record's runs per size (schema 1's read as the current derivation).

    Raises:
        RecordError: not a readable record of this bench: another kind or schema, no sizes, a
            size whose runs are of another, or a raw series that cannot be real (``sanity``).
    """
    data = records.parse_json(path, "a level-loads record")
    if not isinstance(data, dict) or data.get("kind") != "bench-level-loads":
        raise errors.RecordError(f"{path} is not a record of bench/level_loads.py")
    version = data.get("schema_version")
    if type(version) is not int or version not in (1, SCHEMA_VERSION):
        raise errors.RecordError(
            f"{path} is a level-loads record of schema {version!r}; this script reads 1 and {SCHEMA_VERSION}"
        )
    try:
        sanity.refuse(data.get("levels"), "levels")
        levels = {int(n): _size(int(n), raw) for n, raw in data["levels"].items()}
    except (AttributeError, KeyError, TypeError, ValueError, errors.RecordError) as exc:
        raise errors.RecordError(f"{path}: damaged level-loads record: {exc}") from exc
    if not levels:
        raise errors.RecordError(f"{path}: damaged level-loads record: no sizes")
    return levels


def _size(n: int, raw: dict) -> RunLevels:
    """One size's runs, which must all be of that size."""
    rec = RunLevels.from_dict({"derivation": runlevels.DERIVATION, **raw})
    if any(run.n != n for run in rec.runs):
        raise ValueError(f"size {n} holds runs of {sorted({run.n for run in rec.runs})}")
    return rec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=Path, help="run the loads and write their record here")
    where.add_argument("--table", type=Path, help="print the table of a record written before")
    p.add_argument(
        "--sizes", default="4096,1024", help="comma-separated FP32 product sizes (default 4096,1024)"
    )
    p.add_argument("--starts", type=int, default=12, help="runs of each size (default 12)")
    p.add_argument("--device", default="0")
    p.add_argument("--simulate", action="store_true")
    args = p.parse_args(argv)
    try:
        sizes = tuple(int(s) for s in args.sizes.split(","))
        if len(sizes) < 1 or min(sizes) < MIN_SIZE or args.starts < 2:
            raise ValueError
    except ValueError:
        print(
            f"level_loads: --sizes takes sizes of {MIN_SIZE} or more, comma-separated; --starts 2 or more",
            file=sys.stderr,
        )
        return 2
    if args.table is not None:
        try:
            print("\n".join(table(read(args.table))))
        except errors.NvmeterError as exc:
            print(f"level_loads: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        records.check_writable(args.out, kind="bench-level-loads")
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
