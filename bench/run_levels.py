"""The board's power level in each trial against its references', and after each pause: a diagnostic.

Call 67 (docs/window-log.md, "Calls 63-68") had six FP32 ``measure()`` runs read +2.2-2.4% against
references that agreed within 0.6%, each following another run. This reads a record's samples to
show where that came from: for each unit of a kind (references, windows, ``measure()`` runs) the
mean gross power of the ~20 ms samples inside its window (from ``--skip-s`` after its start to 0.05 s
before its end) against the references' mean, beside its per-call error; then, for every restart of
the work after a pause (a sample under half the references' level), the level in ``--bin-s`` bins
for ``--after-s`` and when it first came within ``--band-w`` of the references' level and held there
for a second. Nothing here is part of the meter.

    python bench/run_levels.py results/enclose/call67-38a4472-h200k-fp32measure.json.gz --kind fp32
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import analysis

HOLD_S = 1.0  # a level "settled" when the bins stay within the band this long


def _samples(units: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """Every unit's samples merged by time, each once (overlapping windows share samples)."""
    merged: dict[float, float] = {}
    for u in units:
        s = u["raw"]["samples"]
        merged.update(zip(np.round(s["t_s"], 4), s["power_w"], strict=True))
    t_s = np.array(sorted(merged))
    return t_s, np.array([merged[t] for t in t_s])


def _inside_w(unit: dict, skip_s: float) -> float:
    raw = unit["raw"]
    t_s, power_w = np.asarray(raw["samples"]["t_s"]), np.asarray(raw["samples"]["power_w"])
    keep = (t_s >= raw["work_t0_s"] + skip_s) & (t_s <= raw["work_t1_s"] - 0.05)
    return float(power_w[keep].mean()) if keep.any() else float("nan")


def _refs_w(units: list[dict], skip_s: float) -> float:
    """The references' mean level, W."""
    return statistics.fmean(_inside_w(u, skip_s) for u in units if u["type"] == "ref")


def units_table(units: list[dict], skip_s: float) -> list[str]:
    refs = [u for u in units if u["type"] == "ref"]
    ref_w = _refs_w(units, skip_s)
    ref_mj = statistics.fmean(u["per_call_mj"] for u in refs)
    lines = [
        f"references: {len(refs)}, mean level {ref_w:.1f} W, mean {ref_mj:,.0f} mJ a call",
        "| unit | start, s | length, s | level, W | against the references' | error |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for u in sorted(units, key=lambda u: u["t0_s"]):
        level_w = _inside_w(u, skip_s)
        length_s = u["raw"]["work_t1_s"] - u["raw"]["work_t0_s"]
        lines.append(
            f"| {u['id']} | {u['t0_s']:.1f} | {length_s:.2f} | {level_w:.1f} | {level_w - ref_w:+.1f} W "
            f"| {u['per_call_mj'] / ref_mj - 1:+.2%} |"
        )
    return lines


def restarts(units: list[dict], skip_s: float, bin_s: float, after_s: float, band_w: float) -> list[str]:
    ref_w = _refs_w(units, skip_s)
    t_s, power_w = _samples(units)
    low = power_w < ref_w / 2
    # a restart: the first sample at the work's level after a run of low ones
    starts = [i for i in range(1, len(t_s)) if low[i - 1] and not low[i]]
    lines = [f"restarts after a pause: {len(starts)} (level in {bin_s:g} s bins, W above the references')"]
    for i in starts:
        t0 = t_s[i]
        edges = np.arange(t0, t0 + after_s, bin_s)
        means = []
        for a in edges:
            keep = (t_s >= a) & (t_s < a + bin_s)
            if not keep.any() or low[keep].any():  # the work stopped again
                break
            means.append(float(power_w[keep].mean()) - ref_w)
        hold = max(1, round(HOLD_S / bin_s))
        held = [all(abs(m) <= band_w for m in means[k : k + hold]) for k in range(len(means) - hold + 1)]
        settled = held.index(True) * bin_s if any(held) else None
        said = f"within ±{band_w:g} W from {settled:.2f} s" if settled is not None else "not settled"
        lines.append(f"{t0:8.2f} s: {' '.join(f'{m:+.0f}' for m in means)}  ({said})")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", type=Path)
    parser.add_argument("--kind", default="fp32")
    parser.add_argument("--skip-s", type=float, default=0.1, help="left out after each unit's start, s")
    parser.add_argument("--bin-s", type=float, default=0.25)
    parser.add_argument("--after-s", type=float, default=6.0)
    parser.add_argument("--band-w", type=float, default=5.0)
    args = parser.parse_args(argv)
    record = analysis.load(args.record)
    units = [u for u in record["kinds"][args.kind]["units"] if u.get("raw") and u.get("per_call_mj")]
    if not any(u["type"] == "ref" for u in units):
        sys.exit(f"{args.record}: kind {args.kind} has no references")
    print(f"{args.record} ({args.kind})")
    print("\n".join(units_table(units, args.skip_s)))
    print("\n".join(restarts(units, args.skip_s, args.bin_s, args.after_s, args.band_w)))


if __name__ == "__main__":
    main()
