"""measure()'s state part with correlated sub-windows: batch means, a diagnostic of docs/window.md.

``measure()`` takes its bound's state part from a Student-t interval over its ~0.5 s
sub-windows as if they were independent. Where neighbouring sub-windows' costs are
correlated (anti-correlated at a power cap, positively for a call that waits on the host),
that interval over- or understates the mean's uncertainty. Batch means, the standard remedy
in simulation output analysis, sum consecutive sub-windows into batches of at least
``--batch-s`` (the counter gives each batch's energy exactly) and take the interval over the
batches' means. This prints, for every ``measure()`` trial with a reference, its error, its
bound, and the bound with the batch-means interval in place of the sub-windows' one (runs with
fewer than three batches keep theirs). Nothing here is part of the meter:

    python bench/subwindow_batches.py results/enclose/call*-measure.json \\
        results/enclose/call3*-h100b*enclose.json
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import analysis
from scipy import stats

from nvmeter.meter import spread

MIN_BATCHES = 3  # a t interval over fewer has 1 degree of freedom: no estimate worth the name


def batch_halfwidth_mj(m, batch_s: float, confidence: float) -> float | None:
    """Student-t half-width of the run's per-call energy over batch means, mJ (None: too few)."""
    steps = spread.boundaries(m)
    durations = [b[0] - a[0] for a, b in itertools.pairwise(steps) if b[0] > a[0]]
    batches, current = [], []
    for value, duration in zip(spread.subwindow_mj(m), durations, strict=False):
        current.append((value, duration))
        if sum(d for _, d in current) >= batch_s:
            batches.append(current)
            current = []
    if current and batches:  # a short remainder joins the last batch
        batches[-1].extend(current)
    if len(batches) < MIN_BATCHES:
        return None
    means = [sum(v * d for v, d in b) / sum(d for _, d in b) for b in batches]
    quantile = float(stats.t.ppf(0.5 + confidence / 2, len(means) - 1))
    return quantile * statistics.stdev(means) / math.sqrt(len(means))


def rows(path: Path, batch_s: float):
    """(kind, error, bound, batch-means bound, |reference|) of each measure() trial, mJ a call."""
    rec = analysis.load(path)
    for kind in rec["kinds"]:
        for t in analysis.kind_data(rec, kind).trials:
            if t.mode != "measure" or not t.expected_mj or t.m is None:
                continue
            own = spread.state_halfwidth_mj(t.m)
            batched = batch_halfwidth_mj(t.m, batch_s, t.m.model.confidence)
            bound = t.per_call_mj_err
            # the batches' interval replaces the sub-windows' one, the rest of the bound unchanged
            new = bound - own + batched if own is not None and batched is not None else bound
            yield kind, t.per_call_mj - t.expected_mj, bound, new, abs(t.expected_mj)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--batch-s", type=float, default=2.0, help="shortest batch, s (default 2)")
    args = parser.parse_args()
    held = [0, 0, 0]
    for path in args.records:
        for kind, err, bound, new, ref in rows(path, args.batch_s):
            held = [held[0] + 1, held[1] + (abs(err) <= bound), held[2] + (abs(err) <= new)]
            # shares of the reference: a launch-bound call's ~0 mJ makes them large, not wrong
            pct = [f"{100 * err / ref:+.2f}%", *(f"{100 * v / ref:.2f}%" for v in (bound, new))]
            print(f"{path.name[:24]:24} {kind:8} error {pct[0]:>8}  bound ±{pct[1]}  batches ±{pct[2]}")
    print(f"bound held {held[1]}/{held[0]}; with batch means {held[2]}/{held[0]}")


if __name__ == "__main__":
    main()
