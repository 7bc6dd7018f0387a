"""Schema-1 window-accuracy files (results/window-accuracy-h200*.json): analyze and fit.

Runs 1 and 2 (2026-11-29) were made by the first bench, one kind of work (calls of 15
FP32 4096^2 products) against 60 s references, each trial read three ways (aligned
edges, plain edges, the sample buffer) with ZeusMonitor 0.16 trials interleaved. The
bench that made them is replaced by :mod:`accuracy.runner` (schema 2); this module
keeps their analysis so every figure in docs/window-log.md still recomputes:

    python bench/window_accuracy.py analyze results/window-accuracy-h200-run2.json
    python bench/window_accuracy.py fit results/window-accuracy-h200.json
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from nvmeter import records

SCHEMA_VERSION = 1
WINDOWS_S = (0.25, 0.5, 1.0, 2.0, 4.0)


def analyze(path: Path, plot: Path | None) -> dict:
    """Per method and window: median and max |error| of per-call energy vs the reference."""
    from nvmeter.meter.measurement import Measurement

    rec = records.parse_json(path, "a bench record")
    refs = [Measurement.from_dict(r["raw"]) for r in rec["references"]]
    ref_mj = float(np.mean([r.per_call_mj for r in refs]))
    ref_spread = float(np.ptp([r.per_call_mj for r in refs]) / ref_mj)
    rows = {}
    for t in rec["trials"]:
        # run 1 had no warm-up: every trial there started from idle
        cold = "" if t.get("warmup_s", 0.0) else " cold"
        if t["kind"] == "nvmeter":
            for method, r in _recorded_three(t).items():
                err = r.per_call_mj / ref_mj - 1
                contains = abs(r.per_call_mj - ref_mj) <= r.per_call_mj_err
                rows.setdefault((method + cold, t["window_s"]), []).append((err, contains))
        else:
            rows.setdefault(("zeus" + cold, t["window_s"]), []).append((t["per_call_mj"] / ref_mj - 1, None))
    table = {}
    for (method, w), vals in sorted(rows.items()):
        errs = np.abs([v[0] for v in vals])
        contains = [v[1] for v in vals if v[1] is not None]
        table[f"{method}@{w}"] = {
            "method": method,
            "window_s": w,
            "n": len(vals),
            "median_abs_err": float(np.median(errs)),
            "max_abs_err": float(errs.max()),
            "bound_contains": float(np.mean(contains)) if contains else None,
        }
    per_matmul_mj = ref_mj / rec["matmuls_per_call"]
    singles = {}
    for s in rec["singles"]:
        expected = per_matmul_mj * s["matmuls"]
        if s["kind"] == "nvmeter":
            for method, r in _recorded_three(s).items():
                contains = abs(r.per_call_mj - expected) <= r.per_call_mj_err
                err = r.per_call_mj / expected - 1
                singles.setdefault((method, s["matmuls"]), []).append((err, contains))
        else:
            singles.setdefault(("zeus", s["matmuls"]), []).append((s["per_call_mj"] / expected - 1, None))
    single_table = {
        f"{m}@{k}": {
            "method": m,
            "matmuls": k,
            "n": len(v),
            "median_err": float(np.median(e)),
            "median_abs_err": float(np.median(np.abs(e))),
            "max_abs_err": float(np.max(np.abs(e))),
            "zero_reads": int(np.sum(np.isclose(e, -1.0, atol=0.02))),
            "bound_contains": float(np.mean(c)) if (c := [x[1] for x in v if x[1] is not None]) else None,
        }
        for (m, k), v in sorted(singles.items())
        for e in [np.array([x[0] for x in v])]
    }
    over = rec["overhead"]
    nvmeter_rows = [v for (m, _), vals in rows.items() if m.split()[0] == "aligned" for v in vals]
    ms = {
        flag: np.median([o["work_s"] / o["calls"] * 1e3 for o in over if o["metered"] == flag])
        for flag in (False, True)
    }
    mj = {
        flag: np.median([o["samples_above_idle_j"] / o["calls"] * 1e3 for o in over if o["metered"] == flag])
        for flag in (False, True)
    }
    waits = [t["enter_wait_s"] for t in rec["trials"] if t["kind"] == "nvmeter"]
    summary = {
        "reference_mj": ref_mj,
        "reference_spread": ref_spread,
        "windows": table,
        "aligned_bound_contains_all": float(np.mean([c for _, c in nvmeter_rows])),
        "singles": single_table,
        "overhead": {
            "ms_unmetered": ms[False],
            "ms_metered": ms[True],
            "slowdown": ms[True] / ms[False] - 1,
            "mj_unmetered": mj[False],
            "mj_metered": mj[True],
            "extra_energy": mj[True] / mj[False] - 1,
            "enter_wait_ms_median": float(np.median(waits) * 1e3),
        },
    }
    if plot:
        _plot(table, plot)
    return summary


def fit(path: Path) -> dict:
    """The board-state terms of nvmeter/meter/errormodel.py, fitted on one run's aligned trials.

    ``state_rel``: the largest |error| beyond the reading bound among 2 s and 4 s windows
    (where a cold start has faded), as a share of their energy above idle.
    ``cold_rel``: among cold 0.25-1 s windows, the largest |error| left beyond the reading
    bound and ``state_rel``, as a share of the energy above idle of their first
    ``COLD_RAMP_S`` (the work's mean power above idle times min(work, ramp)).
    """
    from nvmeter.meter.errormodel import model
    from nvmeter.meter.measurement import Measurement

    COLD_RAMP_S = model(1).transient_s

    rec = records.parse_json(path, "a bench record")
    ref_mj = float(np.mean([Measurement.from_dict(r["raw"]).per_call_mj for r in rec["references"]]))
    long, short = [], []
    for t in rec["trials"]:
        if t["kind"] != "nvmeter":
            continue
        m = Measurement.from_dict(t["raw"])
        excess_j = abs(m.per_call_mj - ref_mj) * m.calls / 1e3 - m.reading_err_j
        if t["window_s"] >= 2.0:
            long.append(excess_j / abs(m.above_idle_j))
        elif m.cold:
            short.append((excess_j, abs(m.above_idle_j), m.above_idle_j * min(1.0, COLD_RAMP_S / m.work_s)))
    state_rel = max(long)
    cold_rel = max((e - state_rel * a) / ramp_j for e, a, ramp_j in short) if short else None
    return {"state_rel": state_rel, "cold_rel": cold_rel, "long_trials": len(long), "cold_trials": len(short)}


def _three(m, plain_start, plain_end) -> dict:
    """One trial's three readings: the aligned window, plain edges at the work, the samples over it."""
    return {
        "aligned": m,
        "plain": replace(m, method="plain", start=plain_start, end=plain_end),
        "samples": replace(m, method="samples", work_t0_s=plain_start.t1_s[0], work_t1_s=plain_end.t0_s[0]),
    }


def _recorded_three(t: dict) -> dict:
    from nvmeter.meter.measurement import Measurement
    from nvmeter.meter.series import CounterSeries

    return _three(
        Measurement.from_dict(t["raw"]),
        CounterSeries.from_dict(t["plain_start"]),
        CounterSeries.from_dict(t["plain_end"]),
    )


def _plot(table: dict, path: Path) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    styles = (("aligned", "o-"), ("aligned cold", "o--"), ("samples", "s-"), ("plain", "^--"), ("zeus", "x:"))
    for method, style in styles:
        pts = sorted(
            (v["window_s"], v["median_abs_err"] * 100, v["max_abs_err"] * 100)
            for v in table.values()
            if v["method"] == method
        )
        if not pts:
            continue
        w, med, mx = zip(*pts, strict=True)
        line = ax.plot(w, med, style, label=f"{method} (median)")[0]
        ax.plot(w, mx, style, alpha=0.35, color=line.get_color(), label=f"{method} (max)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("window length, s")
    ax.set_ylabel("|error| of mJ/call above idle, %")
    ax.set_xticks(WINDOWS_S, [str(w) for w in WINDOWS_S])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_title("Per-call energy vs 60 s references, NVIDIA H200")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
