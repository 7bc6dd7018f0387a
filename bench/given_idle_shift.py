"""Error model 14 on real samples: every committed trial re-read with its given idle moved off the board's.

No committed window was given an idle off its board's, so model 14 (a steady level before the window,
further than 5 W from a given idle, joins the bound) changed none of them. This moves each trial's
given idle by a few watts, as a probe file taken at another temperature or a wrong level would, and
reads the trial again against its reference (which keeps its own idle): under model 13 the bound does
not hold the moved idle, under model 14 it should wherever the samples before the window show the
board's level. The moved idle keeps its sampled figure moved alike. Trials read as
``bench/window_accuracy.py analyze`` reads them (each kind's idle, references within 60 s and ±1 °C).
Refused windows (``quiet_below_idle``: a board under the idle subtracted) count apart: not a wrong
figure. Nothing here is part of the meter.

    python bench/given_idle_shift.py [results/enclose/*.json.gz ...] [--shifts -8,8,20,40] [--out F.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import analysis, cli

from nvmeter import errors

MODELS = (13, 14)


def moved(idle, shift_w: float):
    """``idle`` moved by ``shift_w``, its sampled figure too."""
    return replace(idle, power_w=idle.power_w + shift_w, samples_power_w=idle.samples_power_w + shift_w)


def outcome(t, shift_w: float, version: int) -> str:
    """Trial ``t`` read with its idle moved: ``held``, ``missed`` (reliable, out of bound) or ``refused``."""
    m = replace(t.m, model_version=version)
    m = replace(m, idle=moved(m.idle, shift_w))
    if not m.reliable:
        return "refused"
    return "held" if abs(m.per_call_mj - t.expected_mj) <= m.per_call_mj_err else "missed"


def scan(paths: list[Path], shifts: tuple[float, ...]) -> dict:
    counts: dict = defaultdict(lambda: defaultdict(int))
    skipped = []
    for path in paths:
        try:
            rec = analysis.load(path)
            kinds = [analysis.kind_data(rec, name, 14) for name in rec.get("kinds", {})]
        except (errors.RecordError, KeyError, TypeError, ValueError, AttributeError) as exc:
            skipped.append(f"{path.name}: {exc}"[:160])
            continue
        for kd in kinds:
            for t in kd.trials:
                if t.m is None or not t.ref_ok or t.m.idle.local or not t.m.reliable:
                    continue
                for shift_w in shifts:
                    for version in MODELS:
                        counts[(t.mode, shift_w)][(version, outcome(t, shift_w, version))] += 1
    rows = [
        {"mode": mode, "shift_w": shift_w, **{f"m{v}_{o}": n for (v, o), n in sorted(c.items())}}
        for (mode, shift_w), c in sorted(counts.items())
    ]
    return {"files": len(paths), "skipped": skipped, "rows": rows}


def table(summary: dict) -> str:
    lines = [
        f"{summary['files']} files ({len(summary['skipped'])} skipped); each cell: held / missed / refused",
        "| trials | idle moved by | model 13 | model 14 |",
        "| --- | --- | --- | --- |",
    ]
    for row in summary["rows"]:
        cells = [
            " / ".join(str(row.get(f"m{v}_{o}", 0)) for o in ("held", "missed", "refused")) for v in MODELS
        ]
        lines.append(f"| {row['mode']} | {row['shift_w']:+g} W | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def committed() -> list[Path]:
    """The enclose records under results/enclose/ (their trials have references)."""
    root = Path(__file__).resolve().parents[1] / "results" / "enclose"
    return sorted(p for p in root.glob("call*.json*") if "summary" not in p.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--shifts", default="-8,8,20,40", help="W, comma-separated")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    try:
        cli.check_outputs([args.out], args.paths)  # a breaker: --out took any file, an input too
    except errors.UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    shifts = tuple(float(s) for s in args.shifts.split(","))
    summary = scan(args.paths or committed(), shifts)
    print(table(summary))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
