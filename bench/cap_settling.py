"""Does the limiter's swing at the cap die down after a start? Early against later 0.5 s blocks.

For each bf16 ``measure()`` run of a window-accuracy record, and for each of a cap-spread probe's runs: the
relative deviation of consecutive ~0.5 s blocks' per-call energy about the run's mean (the "calls"
figure of ``bench/cap_spread.py``), the RMS of the first ``--early`` blocks against the rest, and the
correlation of neighbouring blocks. From committed records only:

    .venv-test/bin/python bench/cap_settling.py results/enclose/call45-cbfd08c-h200j-enclose.json.gz \\
        --probe results/enclose/call45-cbfd08c-h200j-cap-probe.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cap_spread
from accuracy import analysis

from nvmeter.probes.report import load_report

BLOCK_S = 0.5


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


def rms_pct(x: np.ndarray) -> float:
    """Root mean square of ``x``, percent (nan when empty)."""
    return 100 * float(np.sqrt(np.mean(np.square(x)))) if len(x) else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--probe", type=Path, action="append", default=[])
    parser.add_argument("--early", type=int, default=4, help="blocks counted as early (default 4: 2 s)")
    args = parser.parse_args()
    for path in args.records:
        rec = analysis.load(path)
        for t in analysis.kind_data(rec, cap_spread.KIND, cap_spread.MODEL).trials:
            if t.mode == "measure" and t.m is not None:
                r = deviations(cap_spread.block_mj(t.m, BLOCK_S, by_calls=True))
                print(line(f"{path.name[:18]} measure()", r, args.early))
    for path in args.probe:
        rec = load_report(path).probes["cap_spread"]
        for i in range(len(rec.runs)):  # each run follows its own pause (probe v7: three)
            r = deviations(rec.run_blocks_mj(i, BLOCK_S))
            print(line(f"{path.name[:18]} probe run {i + 1}", r, args.early))


if __name__ == "__main__":
    main()
