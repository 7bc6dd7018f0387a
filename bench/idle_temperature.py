"""Does an H100's idle power follow its temperature closely enough to carry a fit to another board?

A diagnostic over the enclose records of two H100 boards (nothing here is part of the meter): it
gathers (temperature °C, idle W) pairs on each board, fits ``idle_w = a + b * (temperature_c - T0)``
on one board (``scipy.stats.linregress``) and predicts the other board's idle with it, against the
constant the bench uses (the idle of the kind's start span). Pairs come from three places:

* ``span``: every quiescent span (a kind's start and end, an isolated reference's before and after),
  its counter idle (:func:`accuracy.analysis.idle_of` of that span alone), at the mean of its two
  state reads;
* ``pauses``: every isolated reference's pauses (:func:`accuracy.analysis.pause_idle` against the
  kind's idle), at the mean of its edge temperatures (``analysis._temps``);
* ``quiet``: every other stretch of the ~20 ms power samples (a kind's buffers merged) that starts
  ``PAUSE_SETTLE_S`` after the last work, lasts >= ``QUIET_MIN_S`` with a spread <= ``QUIET_SPREAD_W``,
  made counter-equivalent as ``pause_idle`` does; at the nearest state read (reads taken within
  ``PAUSE_SETTLE_S`` of work are skipped: a read 0.1 s after a 19 ms call reads up to 2 °C high).

Each pair carries the seconds since the last work (any call) and since the last heavy work (>= 0.5 s
busy, or a sustained window), which a second regressor tests. Pairs of one kind are not independent,
so a slope's CI is also given with kinds resampled (bootstrap). Prints a report::

    .venv-test/bin/python bench/idle_temperature.py > results/enclose/idle-temperature-h100.txt
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import analysis

ROOT = Path(__file__).resolve().parent.parent / "results" / "enclose"
BOARDS = {
    "board 1 (GPU-546291fd)": ("GPU-546291fd", ["call2[89]-*-h100-enclose.json*"]),
    "board 2 (GPU-adc46b01)": ("GPU-adc46b01", ["call3[0-3]-97fe32f-h100b-*enclose.json*"]),
}
T0_C = 50.0  # the fit's reference temperature
BUSY_W = 8.0  # a sample this far above the kind's highest span idle is work
HEAVY_S = 0.5  # busy this long without a break is heavy work
GAP_S = 0.1  # samples further apart break a stretch
QUIET_MIN_S = 0.5
QUIET_SPREAD_W = 5.0
READ_MAX_S = 1.0  # a quiet stretch's temperature read lies within this of its midpoint
BOOT = 2000


@dataclass(frozen=True)
class Pair:
    """One idle reading and the board state around it."""

    board: str
    kind: str  # file and kind
    source: str  # span, pauses, quiet
    tag: str
    temp_c: float
    idle_w: float
    since_work_s: float
    since_heavy_s: float
    start_w: float  # the kind's start-span idle (the constant baseline)
    start_c: float  # ... and its temperature


@dataclass
class Timeline:
    """A kind's merged power samples, its work and its state reads."""

    t: np.ndarray
    p: np.ndarray
    work_ends: np.ndarray  # every busy sample and call end, s
    heavy_ends: np.ndarray  # ends of heavy work, s
    reads: list  # (t_s, temperature_c, quiet)


def _runs(mask: np.ndarray, t: np.ndarray) -> list[tuple[int, int]]:
    """Index ranges [i, j] where ``mask`` holds without a sample gap over ``GAP_S``."""
    out, start = [], None
    for i, on in enumerate(mask):
        broken = i > 0 and t[i] - t[i - 1] > GAP_S
        if start is not None and (not on or broken):
            out.append((start, i - 1))
            start = None
        if on and start is None:
            start = i
    if start is not None:
        out.append((start, len(mask) - 1))
    return out


def _spans(part: dict) -> list[tuple[str, dict]]:
    """The kind's quiescent spans and its isolated references', tagged."""
    spans = [(s["tag"], s) for s in part["idle_spans"]]
    return spans + [(f"{u['id']} {s['tag']}", s) for u in part["units"] for s in u.get("idle_spans", [])]


def _span_edges(span: dict) -> tuple[float, float]:
    return span["span"]["start"]["t0_s"][0], span["span"]["end"]["t1_s"][-1]


def timeline(part: dict) -> Timeline:
    """All of a kind's sample buffers merged, where work ran, and every state read."""
    buffers = [s["span"]["samples"] for _, s in _spans(part)] + [u["raw"]["samples"] for u in part["units"]]
    t_all = np.concatenate([np.asarray(b["t_s"], dtype=float) for b in buffers])
    p_all = np.concatenate([np.asarray(b["power_w"], dtype=float) for b in buffers])
    t, first = np.unique(t_all, return_index=True)
    p = p_all[first]
    busy = p > max(s["power_w"] for s in part["idle_spans"]) + BUSY_W
    call_ends, heavy = [], [t[j] for i, j in _runs(busy, t) if t[j] - t[i] >= HEAVY_S]
    for u in part["units"]:
        raw = analysis._with_call_ends(u)
        call_ends += raw.get("call_ends_s") or []
        if u["type"] not in ("single",) and not u.get("isolated"):
            heavy.append(raw["work_t1_s"])
    work_ends = np.sort(np.concatenate([t[busy], call_ends]))
    reads = []
    for state in _states(part):
        prior = work_ends[work_ends <= state["t_s"]]
        quiet = not prior.size or state["t_s"] - prior[-1] >= analysis.PAUSE_SETTLE_S
        reads.append((state["t_s"], float(state["temperature_c"]), quiet))
    return Timeline(t, p, work_ends, np.sort(heavy), reads)


def _states(part: dict) -> list[dict]:
    """Every state read of a kind that holds a temperature."""
    states = [st for _, s in _spans(part) for st in (s["state_before"], s["state_after"])]
    for u in part["units"]:
        states += [u.get("state_before"), u.get("state_after"), *(u["raw"].get("states") or [])]
    return [s for s in states if s and isinstance(s.get("temperature_c"), (int, float))]


def _since(ends: np.ndarray, t_s: float) -> float:
    prior = ends[ends <= t_s]
    return t_s - prior[-1] if prior.size else math.inf


def span_pairs(part: dict, tl: Timeline) -> list[tuple]:
    """(source, tag, temperature, idle, mid time) of every quiescent span."""
    out = []
    for tag, s in _spans(part):
        idle = analysis.idle_of({"idle_spans": [s]})
        temp = (s["state_before"]["temperature_c"] + s["state_after"]["temperature_c"]) / 2
        out.append(("span", tag, temp, idle.power_w, sum(_span_edges(s)) / 2))
    return out


def pause_pairs(part: dict, tl: Timeline) -> list[tuple]:
    """(source, tag, temperature, idle, mid time) of every isolated reference's pauses."""
    out, idle = [], analysis.idle_of(part)
    for u in part["units"]:
        own = analysis.pause_idle(u, idle) if u.get("isolated") else None
        temps = analysis._temps(u)
        if own is not None and temps:
            out.append(("pauses", u["id"], float(np.mean(temps)), own.power_w, (u["t0_s"] + u["t1_s"]) / 2))
    return out


def quiet_pairs(part: dict, tl: Timeline) -> list[tuple]:
    """(source, tag, temperature, idle, mid time) of the quiet stretches outside spans and isolated refs."""
    idle = analysis.idle_of(part)
    offset_w = idle.samples_power_w - idle.power_w  # samples against counter, as pause_idle removes
    taken = [_span_edges(s) for _, s in _spans(part)]
    taken += [(u["raw"]["work_t0_s"], u["raw"]["work_t1_s"]) for u in part["units"] if u.get("isolated")]
    since = np.array([_since(tl.work_ends, x) for x in tl.t])
    quiet = (since >= analysis.PAUSE_SETTLE_S) & np.isfinite(since)
    out = []
    for i, j in _runs(quiet, tl.t):
        t, p = tl.t[i : j + 1], tl.p[i : j + 1]
        nxt = tl.work_ends[tl.work_ends > t[-1]]
        if nxt.size:  # keep PAUSE_MARGIN_S clear of the next work
            t, p = t[t < nxt[0] - analysis.PAUSE_MARGIN_S], p[t < nxt[0] - analysis.PAUSE_MARGIN_S]
        if t.size < analysis.PAUSE_MIN_SAMPLES:
            continue
        a, b = t[0], t[-1]
        if b - a < QUIET_MIN_S or np.ptp(p) > QUIET_SPREAD_W or any(a < e and b > s for s, e in taken):
            continue
        mid = (a + b) / 2
        reads = [(abs(rt - mid), rc) for rt, rc, ok in tl.reads if ok and abs(rt - mid) <= READ_MAX_S]
        if reads:
            out.append(("quiet", f"{a:.1f}-{b:.1f}s", min(reads)[1], float(p.mean()) - offset_w, mid))
    return out


def kind_pairs(board: str, label: str, part: dict) -> list[Pair]:
    """Every pair of one kind, with its start-span idle and the seconds since work."""
    tl = timeline(part)
    start = next(s for s in part["idle_spans"] if s["tag"] == "start")
    start_c = (start["state_before"]["temperature_c"] + start["state_after"]["temperature_c"]) / 2
    rows = span_pairs(part, tl) + pause_pairs(part, tl) + quiet_pairs(part, tl)
    out = []
    for src, tag, temp, w, mid in rows:  # a pauses pair spans its calls: no one "since work"
        since_work = math.nan if src == "pauses" else _since(tl.work_ends, mid)
        out.append(Pair(board, label, src, tag, temp, w, since_work, _since(tl.heavy_ends, mid),
                        start["power_w"], start_c))  # fmt: skip
    return out


def board_pairs(board: str, uuid: str, patterns: list[str]) -> list[Pair]:
    """Every pair of one board's records (each record checked to be that board)."""
    pairs = []
    for path in sorted(p for pat in patterns for p in ROOT.glob(pat)):
        rec = analysis.load(path)
        if not rec["board"]["uuid"].startswith(uuid):
            raise SystemExit(f"{path.name} is {rec['board']['uuid']}, not {uuid}")
        for name, part in rec["kinds"].items():
            pairs += kind_pairs(board, f"{path.name.split('-enclose')[0]} {name}", part)
    return pairs


def _arrays(pairs: list[Pair]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([q.temp_c for q in pairs]) - T0_C, np.array([q.idle_w for q in pairs])


def fit(pairs: list[Pair]):
    """``linregress`` of idle on temperature - T0."""
    x, y = _arrays(pairs)
    return stats.linregress(x, y)


def _ci(res, n: int) -> tuple[float, float]:
    half = stats.t.ppf(0.975, n - 2) * res.stderr
    return res.slope - half, res.slope + half


def _resid_sd(res, pairs: list[Pair]) -> float:
    x, y = _arrays(pairs)
    return float(np.std(y - res.intercept - res.slope * x, ddof=2))


def boot_slope(pairs: list[Pair], seed: int = 1) -> tuple[float, float, int]:
    """95% interval of the slope with whole kinds resampled, and the number of kinds."""
    kinds = sorted({q.kind for q in pairs})
    by = {k: [q for q in pairs if q.kind == k] for k in kinds}
    rng, slopes = np.random.default_rng(seed), []
    for _ in range(BOOT):
        sample = [q for k in rng.choice(kinds, len(kinds)) for q in by[k]]
        if len({q.temp_c for q in sample}) > 1:
            slopes.append(fit(sample).slope)
    lo, hi = np.percentile(slopes, [2.5, 97.5])
    return float(lo), float(hi), len(kinds)


def ols(pairs: list[Pair], extra: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Idle on (temperature - T0, ``extra``'s columns): coefficients, 95% half-widths, residual SD."""
    x, y = _arrays(pairs)
    design = np.column_stack([np.ones_like(x), x, extra])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    dof = len(y) - design.shape[1]
    sigma2 = float(resid @ resid) / dof
    se = np.sqrt(np.diag(sigma2 * np.linalg.inv(design.T @ design)))
    return coef, stats.t.ppf(0.975, dof) * se, math.sqrt(sigma2)


def time_lines(pairs: list[Pair]) -> list[str]:
    """Idle on temperature and the time since work (s, ln s), also with a term for the pair's source."""
    lines = []
    for name, key in (("since last work", "since_work_s"), ("since last heavy work", "since_heavy_s")):
        ok = [q for q in pairs if math.isfinite(getattr(q, key))]
        sec = np.array([getattr(q, key) for q in ok])
        quiet = np.array([q.source != "span" for q in ok], dtype=float)
        corr = np.corrcoef(sec, [q.temp_c for q in ok])[0, 1]
        span = f"{sec.min():.1f}-{sec.max():.1f} s"
        lines.append(f"  + time {name} (n={len(ok)}, {span}, r with T {corr:+.2f}):")
        for label, time in (("s", sec), ("ln s", np.log(sec))):
            coef, half, sd = ols(ok, time)
            both, bhalf, _ = ols(ok, np.column_stack([time, quiet]))
            lines.append(
                f"      {label:4s}: T {coef[1]:+.3f}±{half[1]:.3f} W/°C, time {coef[2]:+.3f}±{half[2]:.3f} "
                f"W/{label}, resid SD {sd:.2f} W (T alone {_resid_sd(fit(ok), ok):.2f}); "
                f"with a sample/counter term: time {both[2]:+.3f}±{bhalf[2]:.3f}"
            )
    return lines


def _err_line(name: str, err: np.ndarray) -> str:
    return (
        f"    {name:34s} mean {err.mean():+6.2f}  RMSE {np.sqrt((err**2).mean()):5.2f}  "
        f"MAE {np.abs(err).mean():5.2f}  max|e| {np.abs(err).max():5.2f} W"
    )


def cross(train: list[Pair], test: list[Pair]) -> list[str]:
    """Errors (predicted - measured) on ``test`` (start spans left out) of the models fitted on ``train``."""
    res = fit(train)
    held = [q for q in test if not (q.source == "span" and q.tag == "start")]
    x, y = _arrays(held)
    start_w = np.array([q.start_w for q in held])
    start_dc = np.array([q.temp_c - q.start_c for q in held])
    lines = [f"  n={len(held)} pairs (the kinds' start spans left out)"]
    lines.append(_err_line("linear a + b(T-T0), fitted", res.intercept + res.slope * x - y))
    lines.append(_err_line("constant: kind's start idle", start_w - y))
    lines.append(_err_line("start idle + fitted b * (T-Tstart)", start_w + res.slope * start_dc - y))
    own = fit(test).slope  # in-sample reference: the test board's own slope
    lines.append(_err_line("(start idle + own b, in-sample)", start_w + own * start_dc - y))
    for src in ("span", "pauses", "quiet"):
        sub = np.array([q.source == src for q in held])
        if sub.any():
            lin = np.sqrt(((res.intercept + res.slope * x - y)[sub] ** 2).mean())
            const = np.sqrt(((start_w - y)[sub] ** 2).mean())
            hyb = np.sqrt(((start_w + res.slope * start_dc - y)[sub] ** 2).mean())
            lines.append(
                f"      {src:6s} n={sub.sum():3d}: RMSE linear {lin:5.2f}, constant {const:5.2f}, "
                f"start+slope {hyb:5.2f} W"
            )
    return lines


def describe(board: str, pairs: list[Pair]) -> list[str]:
    """One board's pairs, its temperature fit and the fit with time since work added."""
    res, n = fit(pairs), len(pairs)
    lo, hi = _ci(res, n)
    blo, bhi, nk = boot_slope(pairs)
    temps = [q.temp_c for q in pairs]
    counts = ", ".join(f"{s} {sum(q.source == s for q in pairs)}" for s in ("span", "pauses", "quiet"))
    lines = [
        f"{board}: {n} pairs ({counts}) from {nk} kinds; {min(temps):.1f}-{max(temps):.1f} °C, "
        f"idle {min(q.idle_w for q in pairs):.1f}-{max(q.idle_w for q in pairs):.1f} W",
        f"  idle = {res.intercept:.2f} + {res.slope:.3f} (T - {T0_C:.0f}) W; slope 95% CI "
        f"{lo:.3f}..{hi:.3f} (linregress), {blo:.3f}..{bhi:.3f} (kinds resampled); "
        f"r² {res.rvalue**2:.2f}; residual SD {_resid_sd(res, pairs):.2f} W",
    ]
    for src in ("span", "quiet"):
        sub = [q for q in pairs if q.source == src]
        if len(sub) > 2:
            r = fit(sub)
            a, b = _ci(r, len(sub))
            lines.append(f"    {src} only (n={len(sub)}): slope {r.slope:.3f} ({a:.3f}..{b:.3f}) W/°C")
    return lines + time_lines(pairs)


def offsets(pairs: dict[str, list[Pair]]) -> str:
    """The boards' idle at T0 from their own fits, and their difference."""
    a, b = (fit(p) for p in pairs.values())
    return (
        f"boards at {T0_C:.0f} °C: {a.intercept:.2f} and {b.intercept:.2f} W "
        f"(difference {a.intercept - b.intercept:+.2f} W)"
    )


def main() -> int:
    """Print the report."""
    pairs = {board: board_pairs(board, uuid, pats) for board, (uuid, pats) in BOARDS.items()}
    print("# H100 idle power against GPU temperature (bench/idle_temperature.py)")
    print(f"# T0 = {T0_C:.0f} °C; errors are predicted - measured, W\n")
    for board, ps in pairs.items():
        print("\n".join(describe(board, ps)) + "\n")
    print(offsets(pairs) + "\n")
    names = list(pairs)
    for train, test in (names, names[::-1]):
        print(f"fit on {train}, predict {test}:")
        print("\n".join(cross(pairs[train], pairs[test])) + "\n")
    print("pairs (board, kind, source, tag, °C, W, s since work, s since heavy work):")
    for ps in pairs.values():
        for q in ps:
            print(
                f"  {q.board[:7]} {q.kind:14s} {q.source:6s} {q.tag:32s} {q.temp_c:5.1f} {q.idle_w:7.2f} "
                f"{q.since_work_s:6.2f} {q.since_heavy_s:6.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
