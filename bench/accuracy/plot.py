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


# The pooled figure's cells, each with the tolerance its target states (issue 10).
_POOLED_PANELS = (
    ("warm 0.5 s", 0.01, "±1% (target: 95% of trials)"),
    ("single call, isolated reference", 0.08, "±8% (target: every trial)"),
    ("measure()", None, None),
)


def pooled_plot(pool: dict, path: Path) -> None:
    """Every pooled trial's signed error, per kind, one panel per cell, its stated bound beside it.

    ``pool`` is :func:`accuracy.analysis.pooled`'s; a trial is a dot (one colour per board) with
    a faint bar of its bound; the kind's tolerance is shaded. Raises ValueError with no trials.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(label, tol, note) for label, tol, note in _POOLED_PANELS if _cell_trials(pool, label)]
    if not panels:
        cells = ", ".join(label for label, _, _ in _POOLED_PANELS)
        raise ValueError(f"no pooled trials to plot in its cells ({cells})")
    boards = sorted({tr[-1] for cells in pool.values() for c in cells.values() for tr in c["trials"]})
    colours = {b: plt.cm.tab10(i % 10) for i, b in enumerate(boards)}
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, (label, tol, note) in zip(axes[0], panels, strict=True):
        _pooled_panel(ax, _cell_trials(pool, label), colours, tol, note)
        ax.set_title(label, fontsize=9)
    fig.suptitle(
        f"Per-call energy above idle against >= 10 s references: {len(boards)} boards (one colour each)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _cell_trials(pool: dict, label: str) -> dict[str, list]:
    """{kind: its [error, bound, bound held, board] trials} in one pooled cell (kinds with some)."""
    cells = {kind: c.get(label, {}) for kind, c in pool.items()}
    return {kind: c["trials"] for kind, c in cells.items() if c.get("trials")}


def _pooled_panel(ax, by_kind: dict[str, list], colours: dict, tol: float | None, note: str | None) -> None:
    import numpy as np

    top = _pooled_scale_pct(by_kind, tol)
    rng = np.random.default_rng(0)  # the dots' spread across a kind's column only
    for x, trials in enumerate(by_kind.values()):
        errs = np.array([tr[0] for tr in trials]) * 100
        bounds = np.array([tr[1] if tr[1] is not None else np.nan for tr in trials]) * 100
        xs = x + rng.uniform(-0.3, 0.3, len(trials))
        ax.errorbar(xs, errs, yerr=bounds, fmt="none", ecolor="grey", alpha=0.15, lw=0.8)
        inside = np.abs(errs) <= top
        c = np.array([colours[tr[-1]] for tr in trials])
        ax.scatter(xs[inside], errs[inside], s=9, c=c[inside], zorder=3)
        # off the scale: drawn at its edge, pointing the way it went
        for sign, marker in ((1, "^"), (-1, "v")):
            off = ~inside & (np.sign(errs) == sign)
            edge = np.full(off.sum(), sign * top * 0.96)
            ax.scatter(xs[off], edge, s=14, marker=marker, c=c[off], zorder=3)
    if tol is not None:
        ax.axhspan(-tol * 100, tol * 100, color="tab:green", alpha=0.12, label=note)
        ax.legend(fontsize=7, loc="upper right")
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xticks(range(len(by_kind)), [f"{k}\n({len(t)})" for k, t in by_kind.items()], fontsize=8)
    ax.set_ylabel("error of mJ/call above idle, %")
    ax.set_ylim(-top, top)


def _pooled_scale_pct(by_kind: dict[str, list], tol: float | None) -> float:
    """The panel's half-height, %: past the largest error of the trials whose bound is under 50%.

    Work drawing ~0 W above idle (the launch-bound kind) has relative errors that would flatten
    the rest; its trials beyond the scale are drawn at the edge.
    """
    trials = [tr for t in by_kind.values() for tr in t]
    scaled = [abs(tr[0]) for tr in trials if tr[1] is not None and tr[1] < 0.5]
    top = 115 * max(scaled or [abs(tr[0]) for tr in trials])
    return max(top, 150 * (tol or 0.01))
