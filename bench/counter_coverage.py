"""Does the energy counter see all of a short burst, wherever it falls in the counter's period?

    python bench/counter_coverage.py run --out FILE [--seconds S] [--period-ms P] [--burst-ms B] [--unpolled]
    python bench/counter_coverage.py analyze FILE [FILE ...] [--plot PNG]

Yang, Adamek and Armour (SC24, arXiv 2312.02741; docs/facts.md) found that on A100 and H100
the power sensor samples about 25 ms of each ~100 ms. If the energy counter summed only those
samples, a 10 ms burst would add about four times its energy when it fell inside the sampled
share and nothing otherwise; a counter that integrates continuously adds the same energy
wherever it falls. Single short calls and duty-cycled work (issue 10) depend on which it is.

``run`` (CUDA only) fires bursts of FP32 4096² products every ``--period-ms`` (338.2 ms: the
burst's place in the ~100 ms counter period moves by a golden-ratio share of it, 38.2 ms, so
successive bursts, and every other burst, fall all over the period; at 305 ms, calls 38-40's,
they fell on 20 places only), while a thread polls the counter back to back; 2 s quiet spans before and
after give the idle (the polling's own artefact is in both, so it cancels). The driver's power
samples are read in the gaps. ``analyze`` gives each burst the energy above idle between the
step before it and the step before the next burst (the burst's whole response, lag included),
from the counter and from the samples, against where the burst started after the step
before it, as a share of the counter's period. With ``--unpolled`` every other burst runs with
the polls paused (a meter's window reads nothing during its work), to tell the counter's own
response from one the polling makes. ``selftest`` runs the analysis on synthetic
counters of both kinds.

After the last quiet span the bursts run back to back for ``--steady-s`` (4 s): their per-burst
energy over whole counter periods, where no burst's place matters, is one yardstick that the
polled and the unpolled bursts' means are both set against (not the isolated bursts' truth:
:func:`steady_j`).

Record, version 2: board, burst_ms, period_ms, polls [[t_before_s, t_after_s, energy_mj]],
bursts [[t_start_s, t_end_s, polled 0/1]], samples [[t_s, power_w]], quiet [[a_s, b_s], [a_s, b_s]],
steady [[t_start_s, t_end_s]]; times on one monotonic clock. History: version 1 (calls 38-40) had no
``steady``, and calls 38-39's bursts no ``polled`` (all polled); both still read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

from nvmeter import errors, records
from nvmeter.boards.protocol import PowerSample
from nvmeter.meter import sanity
from nvmeter.meter.series import integrate_samples_j

VERSION = 2
QUIET_S = 2.0
# A quiet span's samples are read from this far in, s: past the power's fall after earlier work.
QUIET_SETTLE_S = 0.2
# Read the driver's sample buffer this often, s: it holds ~100 samples, ~2 s on an H100 or H200
# (every quiet span of results/enclose/call38-40's records held 99-100).
READ_EVERY_S = 0.5
# Share-of-period bins for the table: ten, so a 25 ms sampled share (Yang et al.) spans ~3.
BINS = 10
# The steady bursts' first stretch is left out, s: past the clocks' ~0.3 s ramp (bench/accuracy/kinds.py).
STEADY_SETTLE_S = 0.5


def _poll(board, stop: threading.Event, polls: list, lock: threading.Lock) -> None:
    clock = board.clock
    while not stop.is_set():
        with lock:  # held by the caller through an unpolled burst
            t0 = clock.now()
            mj = board.energy_mj()
            polls.append((t0, clock.now(), mj))
        time.sleep(0)  # let a waiting burst take the lock


def _burst_fn(burst_ms: float):
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()
    # ~2.7 ms a product at ~50 TFLOP/s; calibrate to the board
    for _ in range(3):
        torch.mm(a, b)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        torch.mm(a, b)
    torch.cuda.synchronize()
    per_s = (time.perf_counter() - t0) / 20
    count = max(1, round(burst_ms / 1000 / per_s))

    def burst() -> None:
        for _ in range(count):
            torch.mm(a, b)
        torch.cuda.synchronize()

    return burst, count, per_s


def run(
    out: Path, seconds: float, period_ms: float, burst_ms: float, unpolled: bool, steady_s: float
) -> None:
    from nvmeter.boards.factory import open_board

    board = open_board(0)
    clock = board.clock
    burst, count, per_s = _burst_fn(burst_ms)
    polls: list = []
    stop = threading.Event()
    lock = threading.Lock()
    poller = threading.Thread(target=_poll, args=(board, stop, polls, lock), daemon=True)
    samples: list[tuple[float, float]] = []

    def read_samples() -> None:
        # a sample read twice may come back ~1 µs later (float rounding of the driver's µs stamps);
        # held backwards over the time since the one before (integrate_samples_j), it weighs nothing
        since_s = samples[-1][0] if samples else None
        samples.extend((x.t_s, x.power_w) for x in board.power_samples(since_s=since_s))

    def quiet_span() -> list[float]:
        t0 = clock.now()
        while clock.now() - t0 < QUIET_S:  # the buffer holds ~2 s (~100 samples): read it often
            clock.sleep(READ_EVERY_S)
            read_samples()
        return [t0, clock.now()]

    poller.start()
    quiet = [quiet_span()]
    bursts = []
    start = clock.now() + 0.05
    k = 0
    while clock.now() - start < seconds:
        clock.sleep_until(start + k * period_ms / 1000)
        polled = not (unpolled and k % 2)
        with lock if not polled else contextlib.nullcontext():
            t0 = clock.now()
            burst()
            bursts.append([t0, clock.now(), int(polled)])
        k += 1
        read_samples()  # in the gap, so the buffer (~1-2 s deep) never wraps
    clock.sleep_until(start + k * period_ms / 1000)
    quiet.append(quiet_span())
    steady = []  # after the last quiet span, so the bursts' idle is not read warmed by it
    t_steady = last_read_s = clock.now()
    while clock.now() - t_steady < steady_s:
        t0 = clock.now()
        burst()
        steady.append([t0, clock.now()])
        if clock.now() - last_read_s > READ_EVERY_S:
            read_samples()
            last_read_s = clock.now()
    stop.set()
    poller.join(1.0)
    read_samples()
    rec = {
        "version": VERSION,
        "board": board.identity().to_dict(),
        "burst_ms": burst_ms,
        "products_per_burst": count,
        "product_s": per_s,
        "period_ms": period_ms,
        "polls": polls,
        "bursts": bursts,
        "samples": samples,
        "quiet": quiet,
        "steady": steady,
    }
    tmp = out.with_suffix(out.suffix + ".part")
    tmp.write_text(json.dumps(rec))
    tmp.replace(out)
    burst_s = count * per_s
    print(f"{len(bursts)} bursts of {count} products ({burst_s * 1e3:.1f} ms), {len(polls)} polls -> {out}")


# ---------------------------------------------------------------- analysis


def steps(polls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(times s, counter mJ) of each step: midway between the last old read and the first new.

    A step that fell while the polls paused (an unpolled burst) is timed only to the pause;
    it is never a burst's edge, which is the last step before a burst's start (polled).
    """
    mj = polls[:, 2]
    new = np.flatnonzero(np.diff(mj) != 0) + 1
    mid = (polls[:, 0] + polls[:, 1]) / 2
    return (mid[new - 1] + mid[new]) / 2, mj[new]


def _counter_mj_at(step_t: np.ndarray, step_mj: np.ndarray, t: float) -> tuple[float, float]:
    """The last step at or before ``t``: (its time, its value).

    Raises:
        ValueError: ``t`` comes before the first step (a record without its first quiet span).
    """
    i = np.searchsorted(step_t, t, side="right") - 1
    if i < 0:
        raise ValueError(f"no counter step before t = {t:.3f} s")
    return step_t[i], step_mj[i]


def _quiet_w(step_t, step_mj, span) -> float:
    inside = (step_t >= span[0]) & (step_t <= span[1])
    t, e = step_t[inside], step_mj[inside]
    return (e[-1] - e[0]) / 1000 / (t[-1] - t[0])


def _samples_j(samples: tuple[PowerSample, ...], a: float, b: float) -> float:
    """The samples' energy over [a, b], J (nan where they do not cover it): as the meter reads them."""
    try:
        return integrate_samples_j(samples, a, b)
    except ValueError:
        return float("nan")


def _samples_quiet_w(samples: tuple[PowerSample, ...], span) -> float:
    # up to the last sample: the buffer's last read may come a spacing before the span's end
    a, b = span[0] + QUIET_SETTLE_S, min(span[1], samples[-1].t_s)
    return _samples_j(samples, a, b) / (b - a)


def per_burst(rec: dict) -> dict:
    """Each burst's energy above idle (counter, samples; J) and phase: its start after the step before it.

    The phase is a share of the counter's period, in [0, 1): by its start, not its middle, so a
    burst that straddles a step (one that starts late in a period) is never put beside one that
    started right after a step.
    """
    polls = np.asarray(rec["polls"], dtype=float)
    step_t, step_mj = steps(polls)
    period_s = float(np.median(np.diff(step_t)))
    q = rec["quiet"]
    idle_w = [_quiet_w(step_t, step_mj, s) for s in q]
    samples = tuple(PowerSample(t, w) for t, w in rec["samples"])
    s_idle_w = [_samples_quiet_w(samples, s) for s in q] if len(samples) else [np.nan, np.nan]
    mid_q = [(s[0] + s[1]) / 2 for s in q]
    bursts = rec["bursts"]
    out = {
        "phase": [],
        "counter_j": [],
        "samples_j": [],
        "polled": [],
        "period_s": period_s,
        "idle_w": idle_w,
    }
    for k in range(len(bursts) - 1):
        t0 = bursts[k][0]
        out["polled"].append(bool(bursts[k][2]) if len(bursts[k]) > 2 else True)
        a, ea = _counter_mj_at(step_t, step_mj, t0)
        b, eb = _counter_mj_at(step_t, step_mj, bursts[k + 1][0])
        iw = np.interp((a + b) / 2, mid_q, idle_w)
        out["counter_j"].append((eb - ea) / 1000 - iw * (b - a))
        out["phase"].append((t0 - a) / period_s)
        if len(samples):
            siw = np.interp((a + b) / 2, mid_q, s_idle_w)
            out["samples_j"].append(_samples_j(samples, a, b) - siw * (b - a))
    out["steady_j"] = steady_j(rec.get("steady", []), step_t, step_mj, idle_w[-1])
    return {k: np.asarray(v) if isinstance(v, list) else v for k, v in out.items()}


def steady_j(steady: list, step_t: np.ndarray, step_mj: np.ndarray, idle_w: float) -> float:
    """A burst's energy above idle with bursts back to back, J (nan without them).

    Over the whole counter periods from ``STEADY_SETTLE_S`` in to the last burst's end, the
    bursts counted by their share of that span (back to back, apart only by the host's next launch); the
    idle of the quiet span right before them. Phase plays no part here: every period holds the
    same work. It is not the isolated bursts' truth: an isolated burst also carries its power's
    rise and its tail above idle after it (in the segment: the counter reads it whole), and
    a board warmed by back-to-back work leaks more, so a perfect counter need not read the two
    alike. What it gives is one yardstick for the polled and the unpolled bursts of one run.
    """
    if len(steady) < 2:
        return float("nan")
    times = np.asarray(steady, dtype=float)[:, :2]
    inside = (step_t >= times[0, 0] + STEADY_SETTLE_S) & (step_t <= times[-1, 1])
    if inside.sum() < 2:
        return float("nan")
    (a, b), (ea, eb) = step_t[inside][[0, -1]], step_mj[inside][[0, -1]]
    overlap = np.clip(np.minimum(times[:, 1], b) - np.maximum(times[:, 0], a), 0, None)
    count = float(np.sum(overlap / (times[:, 1] - times[:, 0])))
    return ((eb - ea) / 1000 - idle_w * (b - a)) / count


def table(d: dict) -> list[str]:
    """Per phase bin: bursts, counter and samples energy as shares of their means (mean, SD).

    Where some bursts ran with the polls paused, one table for each, both as shares of the
    polled bursts' means.
    """
    before_w, after_w = d["idle_w"]
    rows = [f"period {d['period_s'] * 1e3:.1f} ms; idle {before_w:.2f} W before, {after_w:.2f} W after"]
    groups = (
        [("polled", d["polled"]), ("unpolled", ~d["polled"])] if (~d["polled"]).any() else [("", d["polled"])]
    )
    norm = [np.mean(d["counter_j"][d["polled"]])]
    norm.append(np.mean(d["samples_j"][d["polled"]]) if len(d["samples_j"]) else np.nan)
    for name, keep in groups:
        rows += _bins(d, keep, norm, name)
    if np.isfinite(d["steady_j"]):
        ratios = ", ".join(
            f"{name or 'isolated'} {np.mean(d['counter_j'][keep]) / d['steady_j']:.3f}"
            for name, keep in groups
        )
        steady = f"back to back: {d['steady_j']:.2f} J a burst above idle"
        rows.append(f"{steady}; the isolated bursts' mean, as a share of it: {ratios}")
    rows.append(verdict(d))
    return rows


def _bins(d: dict, keep: np.ndarray, norm: list[float], name: str) -> list[str]:
    rows = [f"{name + ' ' if name else ''}phase  n   counter mean (SD)   samples mean (SD)"]
    c = d["counter_j"] / norm[0]
    s = d["samples_j"] / norm[1] if len(d["samples_j"]) else None
    for i in range(BINS):
        sel = keep & (d["phase"] >= i / BINS) & (d["phase"] < (i + 1) / BINS)
        if not sel.any():
            continue
        share = f"{i / BINS:.1f}-{(i + 1) / BINS:.1f}"
        line = f"{share}  {sel.sum():3d}   {c[sel].mean():.3f} ({c[sel].std():.3f})"
        if s is not None:
            line += f"       {s[sel].mean():.3f} ({s[sel].std():.3f})"
        rows.append(line)
    return rows


def verdict(d: dict) -> str:
    """Continuous or part-time, from the spread of the polled bursts' per-bin means."""
    polled = d["polled"]
    c = d["counter_j"][polled] / np.mean(d["counter_j"][polled])
    phase = d["phase"][polled]
    means = [c[(phase >= i / BINS) & (phase < (i + 1) / BINS)] for i in range(BINS)]
    means = np.asarray([m.mean() for m in means if m.size])
    lo, hi = means.min(), means.max()
    kind = "part-time (bins differ by over 2x)" if hi > 2 * max(lo, 1e-9) else "continuous"
    return (
        f"counter: {kind}; bin means {lo:.3f}-{hi:.3f}, all bursts SD {c.std():.3f}, "
        f"{np.mean(d['counter_j'][polled]):.2f} J above idle on average"
    )


def plot(ds: list[tuple[str, dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, d in ds:
        c = d["counter_j"] / np.mean(d["counter_j"][d["polled"]])
        ax.plot(d["phase"][d["polled"]], c[d["polled"]], "o", ms=3, label=f"{name}: counter")
        if (~d["polled"]).any():
            un = ~d["polled"]
            ax.plot(d["phase"][un], c[un], "s", ms=3, mfc="none", label=f"{name}: counter, unpolled")
        if len(d["samples_j"]):
            s = d["samples_j"] / np.mean(d["samples_j"])
            ax.plot(d["phase"], s, "x", ms=3, label=f"{name}: samples")
    ax.axhline(1, color="grey", lw=0.5)
    ax.set_xlabel("burst's start after the step before it (share of the counter's period)")
    ax.set_ylabel("energy above idle / mean")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


# ---------------------------------------------------------------- self-test


def synthetic(
    part_time: bool,
    seed: int = 0,
    unpolled: bool = False,
    burst_s: float = 0.01,
    weight_amp: float = 0.0,
    idle_drift_w_per_s: float = 0.0,
) -> dict:
    """A record of a simulated counter: integrating, or summing a 25 ms share of each 100 ms.

    ``unpolled``: every other burst's polls are dropped, as ``run --unpolled`` pauses them.
    ``weight_amp``: the counter weighs power by 1 + amp sin(2 pi phase) over its period.
    ``idle_drift_w_per_s``: the idle moves linearly. Samples every 20 ms, each the mean power
    over the 20 ms before it.
    """
    rng = np.random.default_rng(seed)
    idle_w, burst_w, period, dt = 130.0, 500.0, 0.1, 0.0005
    t = np.arange(0, 32, dt)
    bursts = [[2.05 + k * 0.305, 2.05 + k * 0.305 + burst_s] for k in range(78)]
    steady = [
        [28.0 + k * (burst_s + 1e-4), 28.0 + k * (burst_s + 1e-4) + burst_s]
        for k in range(int(3.9 / burst_s))
    ]
    p = idle_w + idle_drift_w_per_s * t
    for a, b in bursts + steady:
        p[(t >= a) & (t < b)] += burst_w
    weight = 1 + weight_amp * np.sin(2 * np.pi * (t % period) / period)
    if part_time:
        weight = weight * 4.0 * ((t % period) < 0.025)
    ends = np.arange(period, 32, period)
    per_step = [np.sum((p * weight)[(t >= s - period) & (t < s)]) * dt for s in ends]
    counter = np.cumsum(per_step) * 1000
    polls, tp = [], 0.0
    paused = [(a, b) for k, (a, b) in enumerate(bursts) if unpolled and k % 2]
    while tp < 31.9:
        i = int(tp // period)
        if not any(a <= tp <= b for a, b in paused):
            polls.append([tp, tp + 0.003, float(counter[i - 1]) if i > 0 else 0.0])
        tp += 0.003 + rng.uniform(0, 0.0005)
    per_sample = round(0.02 / dt)
    samples = [
        [float(t[i]), float(p[i - per_sample : i].mean())] for i in range(per_sample, t.size, per_sample)
    ]
    bursts = [[a, b, int(not (unpolled and k % 2))] for k, (a, b) in enumerate(bursts)]
    quiet = [[0.0, 2.0], [26.0, 27.9]]
    head = {"version": VERSION, "board": {"uuid": "GPU-synthetic"}, "burst_ms": burst_s * 1e3}
    return {**head, "polls": polls, "bursts": bursts, "samples": samples, "quiet": quiet, "steady": steady}


def selftest() -> int:
    ok = True
    for part_time in (False, True):
        d = per_burst(synthetic(part_time))
        v = verdict(d)
        print(("part-time" if part_time else "continuous") + " counter -> " + v)
        ok &= ("part-time" in v.split(";")[0]) == part_time
    print("selftest " + ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--seconds", type=float, default=24.0)
    r.add_argument("--period-ms", type=float, default=338.2)
    r.add_argument("--burst-ms", type=float, default=10.0)
    r.add_argument("--unpolled", action="store_true", help="every other burst runs with the polls paused")
    r.add_argument("--steady-s", type=float, default=4.0, help="bursts back to back at the end, s")
    a = sub.add_parser("analyze")
    a.add_argument("files", type=Path, nargs="+")
    a.add_argument("--plot", type=Path)
    sub.add_parser("selftest")
    args = p.parse_args(argv)
    if args.cmd == "run":
        run(args.out, args.seconds, args.period_ms, args.burst_ms, args.unpolled, args.steady_s)
        return 0
    if args.cmd == "selftest":
        return selftest()
    if args.plot:
        records.check_writable(args.plot, record=False)
        if args.plot.suffix.lower() not in PLOT_SUFFIXES:
            raise errors.UsageError(f"--plot {args.plot}: give a {', '.join(PLOT_SUFFIXES)} file")
    # every file read and analysed before a line is printed: a bad one leaves no partial table
    ds = [(f, *_analysed(f)) for f in args.files]
    for f, rec, d in ds:
        print(f"## {f.name}: {rec['board']['uuid']}, {rec['burst_ms']} ms bursts")
        print("\n".join(table(d)))
    if args.plot:
        plot([(f.stem, d) for f, _, d in ds], args.plot)
    return 0


PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def _analysed(path: Path) -> tuple[dict, dict]:
    """(the record, its per-burst analysis).

    Raises:
        RecordError: one line: unreadable, damaged, or too few bursts to analyse.
    """
    rec = records.parse_json(path, "a counter_coverage record")
    with records.building(path, "counter_coverage"):
        if records.mapping(rec, "the record").get("version") not in (1, VERSION):
            raise records.BadField(f"version is {rec.get('version')!r}, not 1 or {VERSION}")
        records.text(records.mapping(rec["board"], "board")["uuid"], "board.uuid")
        records.number(rec["burst_ms"], "burst_ms", at_least=0)  # the table's heading prints both
        polls = np.asarray(rec["polls"], dtype=float).reshape(-1, 3)
        samples = np.asarray(rec["samples"], dtype=float).reshape(-1, 2)
        t0_s, t1_s, energy_mj = (polls[:, i].tolist() for i in range(3))
        series = {"t0_s": t0_s, "t1_s": t1_s, "energy_mj": energy_mj}
        why = sanity.series_fault(series) or sanity.samples_fault(
            {"t_s": samples[:, 0].tolist(), "power_w": samples[:, 1].tolist()}
        )
        if why:
            raise records.BadField(why)
        if len(rec["bursts"]) < 2 or not rec["quiet"]:
            raise records.BadField("fewer than two bursts, or no quiet span: nothing to analyse")
        d = per_burst(rec)
        if not all(np.isfinite(d["counter_j"])):
            raise records.BadField("a burst's counter energy is not a number (a quiet span too short?)")
    return rec, d


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (errors.UsageError, errors.RecordError) as exc:  # bad input: one line, no traceback
        print(f"counter_coverage: {exc}", file=sys.stderr)
        sys.exit(2)
