"""Single calls against isolated references re-read with the idle of their own pauses: a diagnostic.

An isolated reference (``--enclose``) is ~15 single calls with ~0.5 s pauses in one 10 s window, read
above the kind's idle (its quiescent spans, start and end, together). If that idle were off by the
idle power's drift with temperature, ~95% of the window's time would carry the error into the reference.
This re-reads each isolated reference with the idle measured inside it: the mean of the ~20 ms power
samples lying ``--after-s`` past a call's end and ``--before-s`` before the next call's start (the
quiet part of each pause), less the idle spans' sample-against-counter offset; and prints the single
calls' median error against both readings. Nothing here is part of the meter. docs/window-log.md (where
issue 10's targets stand) quotes what it printed:

    python bench/iso_local_idle.py results/enclose/call*-enclose.json
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from nvmeter import records

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import analysis


def pause_idle_w(unit: dict, idle, after_s: float, before_s: float) -> tuple[float, int]:
    """The counter-equivalent idle in the quiet part of a reference's pauses, W, and pauses used."""
    raw = unit["raw"]
    t_s = np.asarray(raw["samples"]["t_s"], dtype=float)
    power_w = np.asarray(raw["samples"]["power_w"], dtype=float)
    ends_s = np.asarray(raw["call_ends_s"], dtype=float)
    starts_s = ends_s - np.asarray(unit["call_ms"], dtype=float) / 1e3
    means = []
    for end_s, next_start_s in zip(ends_s[:-1], starts_s[1:], strict=True):
        quiet = (t_s >= end_s + after_s) & (t_s <= next_start_s - before_s)
        if quiet.sum() >= 3:
            means.append(power_w[quiet].mean())
    if not means:
        return float("nan"), 0
    return float(np.mean(means)) - (idle.samples_w - idle.power_w), len(means)


def report(path: str, after_s: float, before_s: float) -> None:
    """One line per isolated reference of the record at ``path`` that holds its calls' ends."""
    rec = records.parse_json(Path(path), "a bench record")
    for name, part in rec["kinds"].items():
        isolated = [u for u in part["units"] if u.get("isolated") and u["raw"].get("call_ends_s")]
        if not isolated:
            continue
        kd = analysis.kind_data(rec, name, 7)
        for u in isolated:
            local_w, pauses = pause_idle_w(u, kd.idle, after_s, before_s)
            local_mj = analysis.measurement(u["raw"], replace(kd.idle, power_w=local_w), 7).per_call_mj
            singles = [t for t in kd.trials if t.mode == "single_iso" and t.ref and t.ref.id == u["id"]]
            if not singles:
                continue
            kind_err = np.median([t.err for t in singles])
            local_err = np.median([t.per_call_mj / local_mj - 1 for t in singles])
            print(
                f"{Path(path).name[:14]:14s} {name:8s} idle {kd.idle.power_w:6.2f} W, in its pauses "
                f"{local_w:6.2f} W ({pauses}); {len(singles)} singles, median error "
                f"{kind_err:+.2%} -> {local_err:+.2%}"
            )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("records", nargs="+", help="enclose records (results/enclose/call*-enclose.json)")
    p.add_argument("--after-s", type=float, default=0.2, help="quiet from this long after a call's end, s")
    p.add_argument("--before-s", type=float, default=0.05, help="until this long before the next call, s")
    args = p.parse_args(argv)
    for path in args.records:
        report(path, args.after_s, args.before_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
