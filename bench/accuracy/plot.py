"""Error against window length, one panel per kind, with nvmeter's stated bound beside it."""

from __future__ import annotations

import math
from pathlib import Path

from accuracy.plan import WARM_S


def plot(summary: dict, path: Path) -> None:
    """Median and max |error| of warm and transient windows, Zeus, single calls and measure(), per kind."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        (f"{name} ({f['board'][:12]}…)", k)
        for f in summary["files"].values()
        for name, k in f["kinds"].items()
    ]
    if not panels:
        raise ValueError("no kinds to plot")
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.6 * rows), squeeze=False, sharey=True)
    for ax, (title, k) in zip(axes.flat, panels, strict=False):
        _panel(ax, k)
        ax.set_title(title, fontsize=9)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    axes[0][0].legend(fontsize=6, ncol=2, loc="upper right")
    fig.suptitle("Per-call energy above idle against >= 10 s references", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _panel(ax, k: dict) -> None:
    import matplotlib.ticker

    def series(mode):
        return sorted(
            (
                r["window"],
                r["median_abs_err"] * 100,
                r["max_abs_err"] * 100,
                (r.get("median_bound_rel") or math.nan) * 100,
            )
            for r in k["rows"].values()
            if r["mode"] == mode and isinstance(r["window"], float) and r["n"]
        )

    for mode, style in (("warm", "o-"), ("transient", "s--"), ("zeus", "x:")):
        pts = series(mode)
        if not pts:
            continue
        w, med, mx, bound = zip(*pts, strict=True)
        line = ax.plot(w, med, style, label=f"{mode} median")[0]
        ax.plot(w, mx, style, alpha=0.35, color=line.get_color(), label=f"{mode} max")
        if mode == "warm":
            ax.plot(w, bound, "-", color="grey", lw=1.5, alpha=0.6, label="bound (warm median)")
    for key, marker, label in (("single@single", "^", "single call"), ("measure@measure", "D", "measure()")):
        r = k["rows"].get(key)
        if r and r["n"]:
            # a single call sits at its own length, measure() at its window's
            x = r.get("median_work_s" if key.startswith("single") else "median_window_s") or 0.02
            line = ax.plot([x], [r["median_abs_err"] * 100], marker, label=f"{label} median")[0]
            ax.plot([x], [r["max_abs_err"] * 100], marker, alpha=0.35, color=line.get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("window, s")
    ax.set_ylabel("|error| of mJ/call above idle, %")
    ax.set_xticks((0.02, *WARM_S), ["0.02", *(f"{w:g}" for w in WARM_S)])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
