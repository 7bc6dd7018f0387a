"""How far a window's ~20 ms samples and its energy counter disagree, over every committed window.

For each stored window (a Measurement's JSON form, found anywhere in the records given) whose
samples cover the span between its start and end steps without a gap,
``Measurement.samples_to_counter`` is the samples' energy over that span against the counter's.
The range over the committed records is the source of ``sanity.SAMPLES_COUNTER_RATIO``'s
margin (a damaged record's check, not a fit). The same windows' disagreement as a share of the
energy above idle over that span (``Measurement.counter_samples_share``; windows of at least
``measurement.COUNTER_CHECK_MIN_W`` above idle) is the source of
``measurement.COUNTER_SAMPLES_DISAGREE_REL`` (error model 11).

    python bench/samples_counter_ratio.py results/ tests/fixtures/ > results/enclose/samples-counter-ratio.txt
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from nvmeter import records
from nvmeter.meter.measurement import COUNTER_CHECK_MIN_W, Measurement

_WINDOW_KEYS = {"start", "end", "samples", "calls", "method", "device"}


def windows(raw):
    """Every stored window in a record's JSON form, depth first."""
    if isinstance(raw, dict):
        if set(raw) >= _WINDOW_KEYS:
            yield raw
            return
        for value in raw.values():
            yield from windows(value)
    elif isinstance(raw, list):
        for value in raw:
            yield from windows(value)


def ratios(paths: list[Path]) -> tuple[int, dict[str, list[float]], dict[str, list[float]]]:
    """Over the JSON files under ``paths``: (windows read, the compared windows' ratios by board
    family, their disagreement as a share of the energy above idle by family)."""
    read, by_family, above_by_family = 0, defaultdict(list), defaultdict(list)
    files = [f for p in paths for f in (sorted(p.rglob("*.json*")) if p.is_dir() else [p])]
    for f in files:
        try:
            data = records.parse_json(f, "a bench record")
        except (OSError, ValueError):
            continue
        for raw in windows(data):
            read += 1
            m = Measurement.from_dict(raw)
            if m.samples_to_counter is not None:
                by_family[m.device.name].append(m.samples_to_counter)
                share = m.counter_samples_share
                if share is not None:
                    above_by_family[m.device.name].append(share)
    return read, by_family, above_by_family


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", type=Path, nargs="+", help="record files, or folders searched for *.json")
    args = p.parse_args(argv)
    read, by_family, above_by_family = ratios(args.paths)
    every = [r for rs in by_family.values() for r in rs]
    print(f"windows read: {read}; compared (a gapless span of at least 0.3 s between steps): {len(every)}")
    for name, rs in [*sorted(by_family.items()), ("all", every)]:
        if rs:
            middle = statistics.median(rs)
            print(f"{name}: n {len(rs)}, min {min(rs):.3f}, median {middle:.3f}, max {max(rs):.3f}")
    shares = [abs(r) for rs in above_by_family.values() for r in rs]
    print(
        f"samples less counter over the energy above idle (windows at least {COUNTER_CHECK_MIN_W:g} W "
        f"above idle): {len(shares)}"
    )
    for name, rs in [*sorted(above_by_family.items()), ("all", shares)]:
        if rs:
            size = sorted(abs(r) for r in rs)
            print(
                f"{name}: n {len(rs)}, |share| median {statistics.median(size):.2%}, "
                f"99th percentile {size[int(0.99 * (len(size) - 1))]:.2%}, max {size[-1]:.2%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
