"""measure()'s state part over batch means (error model 9) against the sub-windows' (model 8), run by run.

``measure()`` takes its bound's state part from a Student-t interval over its ~0.5 s
sub-windows as if they were independent. Where neighbouring sub-windows' costs are
correlated (anti-correlated at a power cap, positively for a call that waits on the host),
that interval over- or understates the mean's uncertainty; error model 9 takes it over
batches of at least 2 s instead (:func:`nvmeter.meter.spread.batch_steps`). This prints, for
every ``measure()`` trial with a reference, its error and its bound under both models, and how
many bounds held. Nothing here is part of the meter; docs/window-log.md quotes it:

    python bench/subwindow_batches.py results/enclose/call*-measure.json \\
        results/enclose/call3*-h100b*enclose.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import analysis

MODELS = (8, 9)


def rows(path: Path):
    """(kind, error, (bound under each of MODELS), |reference|) of each measure() trial, mJ a call."""
    rec = analysis.load(path)
    for kind in rec["kinds"]:
        by_model = [analysis.kind_data(rec, kind, version).trials for version in MODELS]
        for trials in zip(*by_model, strict=True):
            t = trials[0]
            if t.mode == "measure" and t.expected_mj and t.m is not None:
                err = t.per_call_mj - t.expected_mj  # the figure is the same under both models
                yield kind, err, tuple(u.per_call_mj_err for u in trials), abs(t.expected_mj)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path)
    args = parser.parse_args()
    n, held = 0, [0] * len(MODELS)
    for path in args.records:
        for kind, err, bounds, ref in rows(path):
            n += 1
            held = [h + (abs(err) <= b) for h, b in zip(held, bounds, strict=True)]
            # shares of the reference: a launch-bound call's ~0 mJ makes them large, not wrong
            shown = "  ".join(f"model {v} ±{100 * b / ref:.2f}%" for v, b in zip(MODELS, bounds, strict=True))
            print(f"{path.name[:24]:24} {kind:8} error {100 * err / ref:+7.2f}%  {shown}")
    print("; ".join(f"model {v}: bound held {h}/{n}" for v, h in zip(MODELS, held, strict=True)))


if __name__ == "__main__":
    main()
