"""Does the board fall to idle within the profile's tail after a window's work? Every committed window.

A window whose energy runs past the work's end (the default exit, ``method="samples"``) takes the
profile's ``tail_s`` as the work's own power falling to idle, and refuses one whose samples after it
still sit well above idle: the board ran on with something the window did not wait for
(``Measurement.after_work_w``, ``Measurement.ran_on_after_work``). This reads every window-accuracy
record under ``results/`` (as ``bench/window_accuracy.py analyze`` reads it) and prints, over the
windows that have samples both inside the work and ending ``tail_s`` or more after it (through the
last the exit read), how far above idle the latter sit, in W and as a share of the work's own power
above idle, and the windows that sit highest.
Nothing here is part of the meter.

    python bench/after_work.py [results/enclose/*.json.gz ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import analysis
from below_idle import committed

from nvmeter import errors
from nvmeter.meter import measurement as mm

QUANTILES = (0.5, 0.9, 0.99, 1.0)
HEAVY_W = 100.0
TOP = 5


def scan(paths: list[Path]) -> list[tuple]:
    """(W above idle past the tail, the work's W above idle, refused, file, kind, unit id) of each window."""
    rows = []
    for path in paths:
        try:
            units = list(analysis.measurements(path))
        except (errors.RecordError, KeyError, TypeError, ValueError):
            continue  # not a window-accuracy record
        for name, u, m in units:
            if (after := m.after_work_w) is not None:
                refused = m.ran_on_after_work
                rows.append((*after, refused, path.name, name, u.get("id")))
    return rows


def _quantiles(values: list[float], digits: int) -> str:
    return ", ".join(f"{p:.0%} {values[round(p * (len(values) - 1))]:.{digits}f}" for p in QUANTILES)


def report(rows: list[tuple]) -> str:
    shares = sorted(a / w for a, w, *_ in rows if w > mm.BUSY_AFTER_MIN_W)
    refused = [r for r in rows if r[2]]
    low_w, share = mm.BUSY_AFTER_MIN_W, mm.BUSY_AFTER_REL
    rule = f"over the larger of {low_w:g} W and {share:g} of the work's, less the artefact"
    lines = [
        f"{len(rows)} windows with samples inside the work and past the tail",
        f"W above idle past the tail: {_quantiles(sorted(a for a, *_ in rows), 1)}",
        f"share of the work's W (work over {low_w:g} W, {len(shares)}): {_quantiles(shares, 3)}",
        f"refused ({rule}): {len(refused)}; the highest in W, then in share of the larger of the work's and "
        f"{mm.BUSY_AFTER_MIN_W:g} W:",
    ]
    heavy = [a / w for a, w, *_ in rows if w > HEAVY_W]
    light = [a for a, w, *_ in rows if w <= HEAVY_W]
    lines.append(
        f"work over {HEAVY_W:g} W: at most {max(heavy, default=0):.3f} of its W; lighter work: at most "
        f"{max(light, default=0):.1f} W"
    )
    by_share = sorted(rows, key=lambda r: r[0] / max(r[1], mm.BUSY_AFTER_MIN_W), reverse=True)
    for a, w, no, f, k, i in sorted(rows, reverse=True)[:TOP] + by_share[:TOP] + refused:
        lines.append(f"  {a:.1f} W after, {w:.1f} W work{', REFUSED' if no else ''}: {f} {k} {i}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)
    print(report(scan(args.paths or committed())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
