"""Is a warm window's error in its cuts or in the counter's own span? A reading without samples.

For each warm window of the records whose calls were all marked (``w.call()`` once per call, the
bench's way): nvmeter's per-call error against its reference (as ``analyze`` replays it), beside
a *counter-only* reading of the same window: the counter's energy above idle between the
window's two in-work steps, over the calls in that span, each call counted by the share of its
time inside it (calls after the exit, up to the end step, taken to follow at the median period,
as the bench's warm stream does). It needs no sample and no cut, but it assumes the calls on
both sides of each step alike, so it is a diagnostic, not a reading the meter could give any
window. Errors shared by both readings lie in the span (the counter, or the reference); errors
nvmeter alone has lie in its cuts. From committed records only:

    .venv-test/bin/python bench/counter_only.py --kind duty results/enclose/call2[89]-*-enclose.json* ...

Nothing here is part of the meter.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cap_settling import kind_trials


def counter_only_per_call_j(m) -> float | None:
    """Per-call energy above idle over the counter's span between the in-work steps, J (None: no span).

    ``m``: a replayed Measurement whose every call was marked, with both steps inside the work.
    """
    t_a, t_b, e_a_mj, e_b_mj, *_ = m._edges
    ends = np.asarray(m.call_ends_s, dtype=float)
    if len(ends) != m.calls or len(ends) < 3 or not (m.work_t0_s <= t_a < t_b):
        return None
    period_s = float(np.median(np.diff(ends)))
    later = ends[-1] + period_s * np.arange(math.ceil(max(0.0, t_b - ends[-1]) / period_s) + 1)
    starts = np.concatenate([[m.work_t0_s], ends[:-1], later])
    stops = np.concatenate([ends, later + period_s])
    shares = np.clip(np.minimum(stops, t_b) - np.maximum(starts, t_a), 0.0, None) / (stops - starts)
    above_idle_j = (e_b_mj - e_a_mj) / 1e3 - m.idle.power_w * (t_b - t_a)
    return above_idle_j / shares.sum()


def errors_by_length(paths: list[Path], kind: str) -> dict[float, list[tuple[float, float]]]:
    """(nvmeter's error, the counter-only reading's) per warm window, by window length (s)."""
    found = defaultdict(list)
    for path in paths:
        for t in kind_trials(path, kind):
            if t.mode != "warm" or not t.ref_ok or not math.isfinite(t.err) or t.m is None:
                continue
            per_call_j = counter_only_per_call_j(t.m)
            if per_call_j is not None:
                ref_j = t.m.above_idle_j / t.m.calls / (1 + t.err)
                found[round(t.unit["window_s"], 2)].append((t.err, per_call_j / ref_j - 1))
    return found


def report(found: dict[float, list[tuple[float, float]]], kind: str) -> None:
    """One line per window length: each reading's RMS error and share within ±1%, their correlation."""
    for length_s in sorted(found):
        e = np.array(found[length_s])
        r = np.corrcoef(e[:, 0], e[:, 1])[0, 1] if len(e) > 2 else math.nan
        cells = [
            f"{name} RMS {100 * np.sqrt(np.mean(x**2)):5.2f}% ({np.mean(np.abs(x) <= 0.01):4.0%} within ±1%)"
            for name, x in (("nvmeter", e[:, 0]), ("counter-only", e[:, 1]))
        ]
        print(f"{kind} warm {length_s:g} s: {len(e):3d} windows  {'  '.join(cells)}  r {r:+.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", type=Path)
    parser.add_argument("--kind", default="duty", help="the kind of work read (default duty)")
    args = parser.parse_args()
    report(errors_by_length(args.records, args.kind), args.kind)


if __name__ == "__main__":
    main()
