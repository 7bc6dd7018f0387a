"""Window accuracy on a real GPU: nvmeter's three readings and ZeusMonitor against long references.

Run on the H200 (one device call, ~8 min):
    python bench/window_accuracy.py run --out $OUT/window-accuracy-h200.json
Then here:
    python bench/window_accuracy.py analyze results/window-accuracy-h200.json --plot docs/window-accuracy.png

The workload: calls of 15 FP32 4096^2 products (random operands, TF32 off), each
synchronised (~41 ms). Reference: per-call energy above idle over 60 s windows with
aligned edges, before, between and after the trials (their spread shows drift).
Each nvmeter trial yields three readings of the same work: aligned edges (the
window), plain edges (one counter read right at the work's start and end, the start
placed at a random phase of the counter), and the sample buffer. Zeus trials are
interleaved with them. Everything raw is kept so every figure can be recomputed.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

SCHEMA_VERSION = 1
WINDOWS_S = (0.25, 0.5, 1.0, 2.0, 4.0)
MATMULS_PER_CALL = 15
N = 4096


def _setup():
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(N, N, device="cuda", generator=g)
    b = torch.randn(N, N, device="cuda", generator=g)
    out = torch.empty_like(a)

    def matmuls(k: int) -> None:
        for _ in range(k):
            torch.matmul(a, b, out=out)
        torch.cuda.synchronize()

    matmuls(20)
    return matmuls, torch.cuda.synchronize


def _plain_read(board):
    from nvmeter.meter.series import CounterSeries

    t0 = board.clock.now()
    v = board.energy_mj()
    return CounterSeries((t0,), (board.clock.now(),), (v,))


def _work(matmuls, *, seconds=None, count=None, on_call=None) -> int:
    """One call of ``count`` products, or calls of MATMULS_PER_CALL for ``seconds``; returns calls."""
    if count is not None:
        matmuls(count)
        if on_call:
            on_call()
        return 1
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        matmuls(MATMULS_PER_CALL)
        calls += 1
        if on_call:
            on_call()
    return calls


def _nvmeter_trial(board, idle, matmuls, sync, *, rng, **work):
    """One window read three ways; returns the aligned Measurement's dict plus the work's edges."""
    from nvmeter.meter.window import EnergyWindow

    with EnergyWindow(board, idle=idle, sync=sync, method="aligned") as w:
        board.clock.sleep(rng.uniform(0, 0.1))  # the plain start lands at a random counter phase
        plain_start = _plain_read(board)
        calls = _work(matmuls, on_call=w.call, **work)
        plain_end = _plain_read(board)
    readings = _three(w.result, plain_start, plain_end)
    return {
        "calls": calls,
        "work_s": plain_end.t0_s[0] - plain_start.t1_s[0],
        "enter_wait_s": plain_start.t0_s[0] - w.result.start.t0_s[0],
        "raw": w.result.to_dict(),
        "plain_start": plain_start.to_dict(),
        "plain_end": plain_end.to_dict(),
        "readings": {
            k: {
                "per_call_mj": m.per_call_mj,
                "per_call_mj_err": m.per_call_mj_err,
                "window_s": m.window_s,
                "reliable": m.reliable,
            }
            for k, m in readings.items()
        },
    }


def _zeus_trial(monitor, idle_w, matmuls, **work):
    monitor.begin_window("trial")
    calls = _work(matmuls, **work)
    m = monitor.end_window("trial")
    gross_j = float(sum(m.gpu_energy.values()))
    return {
        "calls": calls,
        "time_s": m.time,
        "gross_j": gross_j,
        "per_call_mj": (gross_j - idle_w * m.time) * 1e3 / calls,
    }


def _trial(kind, board, idle, matmuls, sync, monitor, rng, warmup_s=0.0, **work) -> dict | None:
    """A trial of one reader (None for Zeus when it is unavailable), after ``warmup_s`` of calls."""
    if kind == "zeus" and monitor is None:
        return None
    if warmup_s:
        _work(matmuls, seconds=warmup_s)
    if kind == "nvmeter":
        return _nvmeter_trial(board, idle, matmuls, sync, rng=rng, **work)
    return _zeus_trial(monitor, idle.power_w, matmuls, **work)


def run(out: Path, ref_s: float, trials: int, singles: int, warmup_s: float, cold_windows_s) -> None:
    from nvmeter.boards.nvml import NvmlBoard
    from nvmeter.meter.baseline import IdleBaseline, measure_quiescent
    from nvmeter.meter.window import EnergyWindow

    matmuls, sync = _setup()
    board = NvmlBoard(0)
    rng = random.Random(20261129)
    try:
        from zeus.monitor import ZeusMonitor

        monitor = ZeusMonitor(gpu_indices=[0])
        zeus_version = __import__("zeus").__version__
    except Exception as exc:  # report, and run nvmeter's methods anyway
        monitor, zeus_version = None, f"unavailable: {exc!r}"
    record = {
        "kind": "window-accuracy",
        "schema_version": SCHEMA_VERSION,
        "board": board.identity().to_dict(),
        "zeus": zeus_version,
        "matmuls_per_call": MATMULS_PER_CALL,
        "n": N,
        "ref_s": ref_s,
        "warmup_s": warmup_s,
        "idle_spans": [],
        "references": [],
        "trials": [],
        "singles": [],
        "overhead": [],
    }

    def save():
        out.write_text(json.dumps(record, allow_nan=True))

    def log(msg):
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    spans = [measure_quiescent(board, 3.0) for _ in range(2)]
    idle = IdleBaseline.from_spans(spans, "quiescent")
    record["idle_spans"] = [s.to_dict() for s in spans]
    record["idle"] = {"power_w": idle.power_w, "err_w": idle.err_w, "samples_power_w": idle.samples_power_w}
    log(f"idle {idle}")

    def reference(tag):
        with EnergyWindow(board, idle=idle, sync=sync, method="aligned") as w:
            t0 = time.perf_counter()
            calls = 0
            while time.perf_counter() - t0 < ref_s:
                matmuls(MATMULS_PER_CALL)
                calls += 1
                w.call()
        record["references"].append({"tag": tag, "calls": calls, "raw": w.result.to_dict()})
        log(f"reference {tag}: {w.result}")
        save()

    # warm trials follow warmup_s of calls; cold ones (nvmeter only) start straight from idle
    plan = [(s, k, warmup_s) for s in WINDOWS_S for _ in range(trials) for k in ("nvmeter", "zeus")]
    plan += [(s, "nvmeter", 0.0) for s in cold_windows_s for _ in range(trials)]
    rng.shuffle(plan)
    reference("before")
    for i, (seconds, kind, warm_s) in enumerate(plan):
        if i == len(plan) // 2:
            reference("between")
        time.sleep(rng.uniform(0.3, 0.8))
        trial = _trial(kind, board, idle, matmuls, sync, monitor, rng, warm_s, seconds=seconds)
        if trial is None:
            continue
        record["trials"].append({"window_s": seconds, "kind": kind, "warmup_s": warm_s, **trial})
        if i % 10 == 0:
            log(f"trial {i + 1}/{len(plan)}")
            save()
    reference("after")

    singles_plan = [(k, kind) for k in (7, 37) for _ in range(singles) for kind in ("nvmeter", "zeus")]
    rng.shuffle(singles_plan)
    for count, kind in singles_plan:
        time.sleep(rng.uniform(0.4, 0.9))
        trial = _trial(kind, board, idle, matmuls, sync, monitor, rng, count=count)
        if trial is None:
            continue
        record["singles"].append({"matmuls": count, "kind": kind, **trial})
    log("singles done")
    save()

    # overhead: the same 2 s block metered and unmetered, energy read by the sample buffer afterwards
    from nvmeter.meter.series import integrate_samples_j

    for _ in range(4):
        for metered in (False, True):
            time.sleep(0.5)
            t0 = time.perf_counter()
            if metered:
                with EnergyWindow(board, idle=idle, sync=sync) as w:
                    t0 = time.perf_counter()
                    for _ in range(40):
                        matmuls(MATMULS_PER_CALL)
                        w.call()
                    t1 = time.perf_counter()
            else:
                for _ in range(40):
                    matmuls(MATMULS_PER_CALL)
                t1 = time.perf_counter()
            time.sleep(0.15)
            samples = board.power_samples()
            energy = integrate_samples_j(samples, t0, t1 + 0.06) - idle.samples_power_w * (t1 + 0.06 - t0)
            record["overhead"].append(
                {"metered": metered, "calls": 40, "work_s": t1 - t0, "samples_above_idle_j": energy}
            )
    log("overhead done")
    save()


def analyze(path: Path, plot: Path | None) -> dict:
    """Per method and window: median and max |error| of per-call energy vs the reference."""
    from nvmeter.meter.measurement import Measurement

    rec = json.loads(path.read_text())
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

    COLD_RAMP_S = model(1).cold_ramp_s

    rec = json.loads(path.read_text())
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--ref-s", type=float, default=60.0)
    r.add_argument("--trials", type=int, default=10)
    r.add_argument("--singles", type=int, default=20)
    r.add_argument("--warmup-s", type=float, default=0.5, help="calls before each window trial, s")
    r.add_argument("--cold", type=float, nargs="*", default=[], help="window lengths also tried cold, s")
    f = sub.add_parser("fit", help="the board-state constants of nvmeter/meter/errormodel.py, from a run")
    f.add_argument("file", type=Path)
    a = sub.add_parser("analyze")
    a.add_argument("file", type=Path)
    a.add_argument("--plot", type=Path)
    a.add_argument("--json", type=Path)
    args = p.parse_args()
    if args.cmd == "run":
        run(args.out, args.ref_s, args.trials, args.singles, args.warmup_s, args.cold)
    elif args.cmd == "fit":
        print(json.dumps(fit(args.file), indent=1))
    else:
        summary = analyze(args.file, args.plot)
        print(json.dumps(summary, indent=1))
        if args.json:
            args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
