"""Does the limiter's swing at the cap die down after a start? Early against later 0.5 s blocks.

For each bf16 ``measure()`` run of a window-accuracy record, and for each of a cap-spread probe's runs: the
relative deviation of consecutive ~0.5 s blocks' per-call energy about the run's mean (the "calls"
figure of ``bench/cap_spread.py``), the RMS of the first ``--early`` blocks against the rest, and the
correlation of neighbouring blocks. Then the records' warm ~0.5 s windows at the cap (``--kind``
reads another kind's ``measure()`` runs and windows instead), grouped by how long their calls had
run unbroken before entry (``unbroken_s``): their errors against the references, and each group's
share within ±1% (issue 10's target); and how far back the sample buffer read at those windows'
entry reached. From committed records only:

    .venv-test/bin/python bench/cap_settling.py results/enclose/call45-cbfd08c-h200j-enclose.json.gz \\
        --probe results/enclose/call45-cbfd08c-h200j-cap-probe.json
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cap_spread
from accuracy import analysis

from nvmeter.probes.report import load_report

BLOCK_S = 0.5
# Groups of time run unbroken before a warm window's entry, s. The bench's warm windows follow at
# least 2 s of the calls (issue 10), so none falls below the first group. The sample buffer reaches
# back ~2.4 s: from about the first group's end a window cannot tell how long its calls have run.
AGES_S = ((2, 3), (3, 5), (5, 10), (10, math.inf))


def deviations(values) -> np.ndarray:
    """Relative deviations of ``values`` about their mean, shape (k,)."""
    v = np.asarray(values, dtype=float)
    return v / v.mean() - 1


def line(name: str, r: np.ndarray, early: int) -> str:
    """One run's figures: blocks, SD, early and later RMS, neighbours' correlation."""
    lag1 = float(np.corrcoef(r[:-1], r[1:])[0, 1]) if len(r) > 2 else float("nan")
    return (
        f"{name:28} {len(r):3d} blocks  SD {100 * r.std(ddof=1):5.2f}%  first {early}: RMS "
        f"{rms_pct(r[:early]):5.2f}%  later: RMS {rms_pct(r[early:]):5.2f}%  neighbours r {lag1:+.2f}"
    )


def by_age(trials: list, kind: str) -> None:
    """Warm ~0.5 s windows of ``kind`` (references matched as the analysis does), by time unbroken."""
    trials = [t for t in trials if _warm_half_second(t)]
    for lo, hi in AGES_S:
        errs = np.array([t.err for t in trials if lo <= t.unit["unbroken_s"] < hi])
        if len(errs):
            print(
                f"{kind} warm 0.5 s, {lo:g}-{hi:g} s unbroken: {len(errs):3d} windows"
                f"  RMS {rms_pct(errs):5.2f}%"
                f"  max {100 * np.abs(errs).max():5.2f}%  mean {100 * errs.mean():+5.2f}%"
                f"  within ±1% {np.mean(np.abs(errs) <= 0.01):4.0%}"
            )


def buffer_reach(trials: list) -> None:
    """How long before the start edge the oldest sample of the warm windows' first read lies, s.

    The samples a window keeps are its reads merged; the oldest came from the read at entry,
    which returns the driver's whole buffer.
    """
    reach = []
    for t in trials:
        raw = t.unit.get("raw") or {}
        samples, start = raw.get("samples", {}).get("t_s"), raw.get("start", {}).get("t0_s")
        if t.mode == "warm" and samples and start:
            reach.append(start[0] - samples[0])
    if reach:
        print(
            f"sample buffer at entry reaches back: median {np.median(reach):.2f} s "
            f"({min(reach):.2f}-{max(reach):.2f} s, {len(reach)} warm windows)"
        )


def kind_trials(path: Path, kind: str) -> list:
    """The trials of one kind of work in one record ([] for a record without that kind)."""
    rec = analysis.load(path)
    if kind not in rec.get("kinds", {}):
        return []
    return analysis.kind_data(rec, kind, cap_spread.MODEL).trials


def _warm_half_second(t) -> bool:
    return (
        t.mode == "warm"
        and t.ref_ok
        and math.isfinite(t.err)
        and abs(t.unit.get("window_s", 0) - BLOCK_S) < 0.01
        and t.unit.get("unbroken_s") is not None
    )


def rms_pct(x: np.ndarray) -> float:
    """Root mean square of ``x``, percent (nan when empty)."""
    return 100 * float(np.sqrt(np.mean(np.square(x)))) if len(x) else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--probe", type=Path, action="append", default=[])
    parser.add_argument("--kind", default=cap_spread.KIND, help="the kind of work read (default bf16cap)")
    parser.add_argument("--early", type=int, default=4, help="blocks counted as early (default 4: 2 s)")
    args = parser.parse_args()
    trials = []
    for path in args.records:  # each record replayed once: its measure() runs, then its windows
        found = kind_trials(path, args.kind)
        trials += found
        for t in found:
            if t.mode == "measure" and t.m is not None:
                r = deviations(cap_spread.block_mj(t.m, BLOCK_S, by_calls=True))
                print(line(f"{path.name[:18]} {args.kind} measure()", r, args.early))
    by_age(trials, args.kind)
    buffer_reach(trials)
    for path in args.probe:
        rec = load_report(path).probes["cap_spread"]
        for i in range(len(rec.runs)):  # each run follows its own pause (probe v7: three)
            blocks = rec.run_blocks_mj(i, BLOCK_S)
            r = deviations(blocks[np.isfinite(blocks)])
            print(line(f"{path.name.removesuffix('.json')} run {i + 1}", r, args.early))


if __name__ == "__main__":
    main()
