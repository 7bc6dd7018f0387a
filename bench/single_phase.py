"""Single isolated calls against where they fall in the counter's period: a diagnostic.

Reads records made with ``--single-delays-ms`` (each single call started that long after its
window's entry, which on a quiet board returns right after a counter step) and prints, per kind,
each trial's error against its isolated reference by the call's start after the step, the mean
over all phases, and (with ``--plot``) error against start. Trials without the delay field (made
before it, or with the meter's own dither) are read at their start after the step as well.
Nothing here is part of the meter; docs/window-log.md quotes what it printed:

    python bench/single_phase.py results/enclose/call23-054bb23-phase-enclose.json.gz \\
        --plot results/enclose/call23-054bb23-phase.png
    python bench/single_phase.py results/enclose/call2[2-7]-*-enclose.json --model 8  # calls 22-27
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from nvmeter import records

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import analysis

NO_TAIL = -1.0  # the trial left the window's tail_s to the profile


def phase_rows(path: Path, model_version: int | None = None) -> dict[str, np.ndarray]:
    """{kind: rows of (call's start after the start step ms, error %, bound %, dithered 0/1, tail s)}.

    The tail is the window's ``tail_s`` where the trial set one (``--single-tail-s``), else -1.
    Every window is read with error model ``model_version`` (None: the one each record names).
    """
    rec = records.parse_json(Path(path), "a bench record")
    out = {}
    for name in rec["kinds"]:
        kd = analysis.kind_data(rec, name, model_version)
        rows = [
            (
                (t.m.work_t0_s - t.m.edge_steps_s[0] + t.unit.get("delay_s", 0.0)) * 1e3,
                t.err * 100,
                t.per_call_mj_err / abs(t.expected_mj) * 100,
                # absent before 6f7550e: call 24's were dithered, and calls 1-23 (never split here) not
                float(t.unit.get("dither", True)),
                float(t.unit.get("tail_s", NO_TAIL)),
            )
            for t in kd.trials
            if t.mode == "single_iso" and t.ref is not None
        ]
        if rows:
            out[name] = np.array(sorted(rows))
    return out


def report(by_kind: dict[str, np.ndarray], bin_ms: float) -> None:
    """Per kind: median error in each ``bin_ms`` of start, and mean, median, max over all."""
    for name, a in by_kind.items():
        err, held = a[:, 1], np.abs(a[:, 1]) <= a[:, 2]
        sem = err.std(ddof=1) / np.sqrt(len(err)) if len(err) > 1 else np.nan
        print(
            f"{name}: {len(a)} calls; over all starts mean {err.mean():+.2f}% (SE {sem:.2f}), "
            f"median {np.median(err):+.2f}%, max |error| {np.abs(err).max():.2f}%; bound held "
            f"{held.sum()}/{len(a)}"
        )
        bins = np.floor(a[:, 0] / bin_ms).astype(int)
        cells = []
        for b in np.unique(bins):
            inside = bins == b
            span = f"{b * bin_ms:.0f}-{(b + 1) * bin_ms:.0f} ms"
            cells.append(f"{span} {np.median(err[inside]):+.1f}% ({inside.sum()})")
        print("   " + "; ".join(cells))
        # arms against the same references (--single-dither alternate, --single-tail-s a,b)
        arms = {(d, t): (a[:, 3] == d) & (a[:, 4] == t) for d, t in {(row[3], row[4]) for row in a}}
        if len(arms) > 1:
            print("   " + "; ".join(_arm(d, t, err[sel]) for (d, t), sel in sorted(arms.items())))


def _arm(dithered: float, tail_s: float, err: np.ndarray) -> str:
    """One arm's line: its settings, count, median and largest error."""
    name = ("dithered" if dithered else "undithered") + ("" if tail_s == NO_TAIL else f", tail {tail_s:g} s")
    return f"{name} {len(err)}: median {np.median(err):+.2f}%, max |error| {np.abs(err).max():.2f}%"


def plot(by_kind: dict[str, np.ndarray], path: Path, title: str) -> None:
    """Error against the call's start after the step, one colour per kind, the bounds as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for name, a in by_kind.items():
        line = ax.plot(a[:, 0], a[:, 1], "o", ms=4, label=name, zorder=3)[0]
        ax.errorbar(a[:, 0], a[:, 1], yerr=a[:, 2], fmt="none", ecolor=line.get_color(), alpha=0.12, lw=0.8)
    ax.axhspan(-8, 8, color="tab:green", alpha=0.1, label="±8% (issue 10's single-call target)")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_ylim(-25, 25)
    ax.set_xlabel("the call's start after the window's start step, ms")
    ax.set_ylabel("error of mJ/call above idle, %")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=3, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def delay_arms(path: Path) -> list[str]:
    """Per kind with ``--single-delays-ms``: each delay's single calls against the others', no reference.

    Each arm's mean mJ a call (its standard error), the ratio of each arm's mean to the first
    arm's (with the standard error of the ratio, the two arms independent), and the same calls
    against the mean of the kind's steady references (the calls back to back, less their spread:
    a steady call runs on a warmer board and with no pause before it, so this is a yardstick, not
    the single call's truth).
    """
    rec = records.parse_json(Path(path), "a bench record")
    lines = []
    for name, kind in rec["kinds"].items():
        singles = [u for u in kind.get("units", []) if u.get("type") == "single" and u.get("per_call_mj")]
        arms: dict[float, list[float]] = {}
        for u in singles:
            arms.setdefault(u.get("delay_s") or 0.0, []).append(u["per_call_mj"])
        if len(arms) < 2:
            continue
        steady = [u["per_call_mj"] for u in kind["units"] if u.get("type") == "ref" and not u.get("isolated")]
        share = singles[0].get("single_share", 1.0)
        yard = np.mean(steady) * share if steady else np.nan
        spread = (np.max(steady) - np.min(steady)) / np.mean(steady) * 100 if steady else np.nan
        (d0, first), *rest = sorted(arms.items())
        m0, se0 = np.mean(first), np.std(first, ddof=1) / np.sqrt(len(first))
        cells = [f"{d0 * 1e3:.0f} ms: {m0:,.0f} (SE {se0:,.0f}) mJ, {m0 / yard - 1:+.2%} of steady"]
        for d, values in rest:
            m, se = np.mean(values), np.std(values, ddof=1) / np.sqrt(len(values))
            ratio_se = (m / m0) * np.hypot(se / m, se0 / m0)
            cells.append(
                f"{d * 1e3:.0f} ms: {m:,.0f} (SE {se:,.0f}) mJ, {m / yard - 1:+.2%} of steady; "
                f"{d0 * 1e3:.0f} ms against it {m0 / m - 1:+.2%} (SE {ratio_se:.2%})"
            )
        lines.append(
            f"{name} ({len(singles)} calls; steady references spread {spread:.1f}%): " + "; ".join(cells)
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("records", nargs="+", type=Path, help="enclose records with single-call trials")
    p.add_argument("--bin-ms", type=float, default=10.0, help="start bins of the printed table, ms")
    p.add_argument("--plot", type=Path, help="write the figure here (one record)")
    p.add_argument(
        "--model", type=int, help="read every window with this error model (default: each record's)"
    )
    args = p.parse_args(argv)
    for path in args.records:
        print(f"## {path.name} (error model {args.model or 'of the record'})")
        by_kind = phase_rows(path, args.model)
        report(by_kind, args.bin_ms)
        for line in delay_arms(path):
            print("   arms: " + line)
        if args.plot:
            board = records.parse_json(path, "a bench record").get("board", {}).get("uuid", "?")[:12]
            plot(by_kind, args.plot, f"Isolated single calls by start in the counter's period ({board}…)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
