"""How long, and how deep, do real boards dip under their idle around a window? Every committed window.

A board cannot idle below its idle, so a window whose samples stay under the idle subtracted says
that idle is wrong (``Measurement.quiet_below_idle``). Real boards do dip under it for a moment
right after heavy work, so the check needs a stretch long or deep enough that no real window
shows one. This reads every window-accuracy record under ``results/`` (trials and references,
each with its kind's idle, as ``bench/window_accuracy.py analyze`` reads them), finds each
Measurement's stretches of consecutive samples under the idle less the check's margin
(``QUIET_BELOW_MARGIN_W``, ``QUIET_BELOW_MARGIN_REL``, the idle's bound), and prints, for each
least stretch length, the deepest mean dip among the stretches at least that long, in W and as
a share of the idle. Nothing here is part of the meter.

    python bench/below_idle.py [results/enclose/*.json.gz ...] [--out below-idle.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import analysis, cli

from nvmeter import errors
from nvmeter.meter import measurement as mm

LENGTHS_S = (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.3)


def stretches(m) -> list[tuple[float, float, float]]:
    """(length s, mean dip W, mean dip as a share of the idle) of each stretch under the check's margin,
    anywhere in the window's samples (the check itself reads from the stretch that reaches its first read)."""
    idle_w = m.sampled_idle_w
    return [
        (length_s, idle_w - mean_w, (idle_w - mean_w) / idle_w)
        for _, length_s, mean_w in mm.stretches_under(m.samples, m.quiet_below_w)
    ]


def scan(paths: list[Path]) -> dict:
    found, windows, skipped = [], 0, []
    for path in paths:
        try:
            units = list(analysis.measurements(path))
        except (errors.RecordError, KeyError, TypeError, ValueError) as exc:
            skipped.append(f"{path.name}: {exc}"[:160])
            continue
        windows += len(units)
        found += [(path.name, name, u.get("id"), *s) for name, u, m in units for s in stretches(m)]
    rows = []
    for least_s in LENGTHS_S:
        longer = [f for f in found if f[3] >= least_s]
        deepest = max(longer, key=lambda f: f[5], default=None)
        rows.append({"least_s": least_s, "stretches": len(longer), "deepest": deepest})
    longest = max(found, key=lambda f: f[3], default=None)
    return {"files": len(paths), "windows": windows, "skipped": skipped, "rows": rows, "longest": longest}


def committed() -> list[Path]:
    """Every record under results/ that may be a window-accuracy one (summaries and checks are not)."""
    root = Path(__file__).resolve().parents[1] / "results"
    return sorted(p for p in root.rglob("*.json*") if "summary" not in p.name and "check" not in p.name)


def table(summary: dict) -> str:
    lines = [
        f"{summary['windows']} windows in {summary['files']} files ({len(summary['skipped'])} files skipped)",
        "| stretch at least | stretches | deepest mean dip | where |",
        "| --- | --- | --- | --- |",
    ]
    for row in summary["rows"]:
        d = row["deepest"]
        deep = f"{d[4]:.1f} W ({100 * d[5]:.1f}%, {1e3 * d[3]:.0f} ms)" if d else "-"
        lines.append(f"| {1e3 * row['least_s']:.0f} ms | {row['stretches']} | {deep} | {d[0] if d else ''} |")
    if summary["longest"]:
        f = summary["longest"]
        lines.append(f"\nlongest: {1e3 * f[3]:.0f} ms, {f[4]:.1f} W under ({f[0]}, {f[1]}, {f[2]})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    try:
        cli.check_outputs([args.out], args.paths)  # a breaker: --out took any file, an input too
    except errors.UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = scan(args.paths or committed())
    print(table(summary))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
