"""The counter alone over a window's two steps, against the reference: a diagnostic of docs/window-log.md.

For each warm and stall window of the enclose records whose start step and end step both lie in
the calls (``exit="return"``: the end step falls in the calls after the window, which the bench
keeps the same): the counter's energy between the two steps, less idle, per call, with the calls
in that span counted by time at their median period (``flat``) or weighted by error model 7's
folded profile (``fold``). Beside it, nvmeter's own figure (the record's model, or ``--model``).
Nothing here is part of the meter: the meter cannot assume that the calls after a window are the
window's own. The section "Noticed, not used" of docs/window-log.md quotes its totals:

    python bench/counter_span.py results/enclose/call*-enclose.json --model 7
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import analysis

from nvmeter.meter import fold


def span_mj(m, weighting: str) -> float:
    """Per-call mJ above idle from the counter between the window's two steps."""
    (t_a, e_a, _), (t_b, e_b, _) = m.start.edge_step(m.work_t1_s), m.end.edge_step()
    starts = np.concatenate([[m.work_t0_s], np.asarray(m.call_ends_s, dtype=float)])
    period_s = float(np.median(np.diff(starts)))
    lag_s = m.profile.power_lag_s
    profile = m.call_profile if weighting == "fold" else None
    if profile is None:
        calls = (t_b - t_a) / period_s
    else:  # each end call counted by the profile's share of its energy
        calls = profile.energy_j(t_a - lag_s, t_b - lag_s) / (sum(profile.bin_w) * period_s / fold.BINS)
    return ((e_b - e_a) / 1e3 - m.idle.power_w * (t_b - t_a)) * 1e3 / calls


def _cells(paths: list[Path], model: int | None):
    """(file, kind, mode, [(nvmeter's error, flat span's, fold span's)]) per cell with such windows."""
    for path in paths:
        rec = analysis.load(path)
        for kind in rec["kinds"]:
            if not rec["kinds"][kind]["idle_spans"]:
                continue
            kd = analysis.kind_data(rec, kind, model)
            for mode in ("warm", "stall"):
                errs = [_errors(t) for t in kd.trials if t.mode == mode and _both_in_work(t)]
                if errs:
                    yield path.name, kind, mode, errs


def _both_in_work(t) -> bool:
    """A trial with a reference whose window's two steps lie in the calls, its calls marked."""
    m = t.m
    return t.ref_ok and m is not None and m.in_work and m.end_found_in_work and len(m.call_ends_s) >= 2


def _errors(t) -> tuple[float, float, float]:
    """nvmeter's error, the flat span's and the folded span's, against the trial's reference."""
    return (t.err, *(span_mj(t.m, w) / t.expected_mj - 1 for w in ("flat", "fold")))


def _row(errs) -> str:
    """The three readings of a cell's windows, each as within ±1% and the largest |error|."""
    cols = [_line([e[i] for e in errs]) for i in range(3)]
    return f"nvmeter {cols[0]} | span, flat {cols[1]} | span, fold {cols[2]}"


def _line(errs) -> str:
    return f"{sum(abs(e) <= 0.01 for e in errs)}/{len(errs)}, max {max(abs(e) for e in errs) * 100:.2f}%"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("files", type=Path, nargs="+")
    p.add_argument("--model", type=int, default=None, help="nvmeter's error model (default: each record's)")
    args = p.parse_args(argv)
    totals: dict[tuple[str, str], list] = {}
    for name, kind, mode, errs in _cells(args.files, args.model):
        totals.setdefault((kind, mode), []).extend(errs)
        print(f"{name} {kind} {mode}: within ±1%: {_row(errs)}")
    print("totals:")
    for (kind, mode), errs in totals.items():
        print(f"  {kind} {mode}: {_row(errs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
