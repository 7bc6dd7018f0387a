"""Isolated single calls on H100s replayed with an idle moved by the board's temperature (a diagnostic).

Nothing here is part of the meter. bench/idle_temperature.py found an H100's idle (with a CUDA
context) following its temperature at 0.85-1.06 W/°C within a board. This replays every isolated
single call of the two H100 boards (``single_iso`` trials of :func:`accuracy.analysis.kind_data`,
each read with the idle of its isolated reference's own quiescent spans, against that reference)
with the idle baseline moved by ``slope * (T_window - T_baseline)``, the slope fitted
(bench/idle_temperature.py's ``fit``, idle data only) on the *other* H100 board. ``T_window`` is
the mean of the window's edge states, ``T_baseline`` the mean over the baseline's spans of their
two state reads. Variants (Δidle in W; the figure moves by ``-Δidle * window_s * 1e3 / calls``):

* a: error model 8 as recorded (Δ = its drift from the quiet stretch before the window, or 0);
* b: error model 7 (Δ = 0);
* c: model 7 + the temperature shift;
* d: model 8's drift where nonzero, else the temperature shift;
* e: the temperature shift plus model 8's drift measured against the shifted baseline (its quiet
  stretch within 5 W of the shifted baseline's sampled idle).

Bounds are the models' as they stand (7 for b and c, 8 for a, d, e); for the shifted variants also
widened by ``WIDEN_W * window_s * 1e3 / calls``. A second part fits idle against temperature on each
H200 board (the same pairs as bench/idle_temperature.py) and asks whether one slope fits them all::

    .venv-test/bin/python bench/idle_temperature_replay.py > results/enclose/idle-temperature-replay.txt
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy import stats

from nvmeter import records

sys.path.insert(0, str(Path(__file__).resolve().parent))

import idle_temperature as it
from accuracy import analysis

ROOT = it.ROOT
# The widened bound's idle uncertainty, W: about the residual SD of the fit on the fitting board
# (0.61 and 0.83 W on the two H100s; the cross-board RMSE of "start idle + slope" was 0.80 and 1.70 W).
WIDEN_W = 1.0
VARIANTS = {
    "a": "model 8 as is",
    "b": "model 7 (no drift)",
    "c": "model 7 + slope*dT",
    "d": "model 8 drift if nonzero, else slope*dT",
    "e": "slope*dT + model-8 drift vs shifted base",
}
SHIFTED = ("c", "d", "e")  # variants that can carry the temperature shift (widened bound)
# An H200 board is fitted when its pairs span at least this many °C and number at least this many.
MIN_RANGE_C = 3.0
MIN_PAIRS = 8


@dataclass(frozen=True)
class Call:
    """One isolated single call, read under models 7 and 8, with the temperatures around it."""

    board: str
    record: str
    kind: str
    id: str
    window_s: float
    calls: int
    expected_mj: float
    fig7_mj: float
    bound7_mj: float
    bound8_mj: float
    drift8_w: float
    temp_window_c: float
    temp_base_c: float
    temp_start_c: float  # the window's start edge alone (a sensitivity figure)
    ref_ok: bool
    ref_bound_rel: float  # the isolated reference's own bound, share of its figure
    m8: object  # the model-8 Measurement, to look for a stretch against a shifted baseline

    @property
    def dt_c(self) -> float:
        """Window temperature less the baseline's, °C."""
        return self.temp_window_c - self.temp_base_c

    def mj_per_w(self) -> float:
        """mJ per call that one watt of idle moves over this window."""
        return self.window_s * 1e3 / self.calls

    def err(self, delta_w: float) -> float:
        """Relative error against the reference with the model-7 idle moved by ``delta_w``."""
        return (self.fig7_mj - delta_w * self.mj_per_w()) / self.expected_mj - 1


def _span_temp(span: dict) -> float:
    return (span["state_before"]["temperature_c"] + span["state_after"]["temperature_c"]) / 2


def baseline_temp(trial, part: dict) -> float:
    """Temperature of the idle the trial was read with: its reference's own spans, else the kind's.

    As :func:`accuracy.analysis._trial` picks them (``own_idle``); checked against the idle's power.
    """
    spans = trial.ref.unit.get("idle_spans") or part["idle_spans"]
    power = statistics.fmean(s["power_w"] for s in spans)
    if not math.isclose(power, trial.m.idle.power_w, abs_tol=1e-3):  # stored vs recomputed span
        raise SystemExit(f"{trial.unit['id']}: baseline {trial.m.idle.power_w} W is not its spans' {power}")
    return statistics.fmean(_span_temp(s) for s in spans)


def calls_of(path: Path, board: str) -> list[Call]:
    """Every isolated single call of a record (``single_iso`` with a reference), under models 7 and 8."""
    rec, out = analysis.load(path), []
    for name, part in rec["kinds"].items():
        k7, k8 = analysis.kind_data(rec, name, 7), analysis.kind_data(rec, name, 8)
        for t7, t8 in zip(k7.trials, k8.trials, strict=True):
            if t7.mode != "single_iso" or t7.ref is None:
                continue
            assert t7.unit is t8.unit and math.isclose(t7.expected_mj, t8.expected_mj)
            temps = analysis._temps(t7.unit)
            ref_rel = t7.ref.per_call_mj_err / abs(t7.ref.per_call_mj)
            call = Call(board, path.name.split("-enclose")[0], name, t7.unit["id"], t7.m.window_s,
                        t7.m.calls, t7.expected_mj, t7.per_call_mj, t7.per_call_mj_err, t8.per_call_mj_err,
                        t8.m.idle_drift_w, statistics.fmean(temps), baseline_temp(t7, part), temps[0],
                        t7.ref_ok, ref_rel, t8.m)  # fmt: skip
            out.append(call)
            _check_model8(out[-1], t8.per_call_mj)
    return out


def _check_model8(call: Call, fig8_mj: float) -> None:
    """Model 8's figure is model 7's less its drift over the window (the formula every variant uses)."""
    if not math.isclose(call.fig7_mj - call.drift8_w * call.mj_per_w(), fig8_mj, rel_tol=1e-9, abs_tol=1e-6):
        raise SystemExit(f"{call.record} {call.kind} {call.id}: model 8 is not model 7 less its drift")


def shifted_drift(call: Call, shift_w: float) -> float:
    """Model 8's drift against the baseline moved by ``shift_w`` (counter and sampled figures alike)."""
    idle = call.m8.idle
    moved = replace(idle, power_w=idle.power_w + shift_w, samples_power_w=idle.samples_power_w + shift_w)
    m = replace(call.m8, idle=moved)
    want = call.fig7_mj - (shift_w + m.idle_drift_w) * call.mj_per_w()
    if not math.isclose(m.per_call_mj, want, rel_tol=1e-9, abs_tol=1e-6):
        raise SystemExit(f"{call.id}: the shifted Measurement reads {m.per_call_mj}, not {want}")
    return m.idle_drift_w


def variants(call: Call, slope: float) -> dict[str, tuple[float, float, bool]]:
    """{variant: (Δidle W, bound mJ, shifted by temperature)} for one call and slope (W/°C)."""
    shift = slope * call.dt_c
    drift = call.drift8_w
    return {
        "a": (drift, call.bound8_mj, False),
        "b": (0.0, call.bound7_mj, False),
        "c": (shift, call.bound7_mj, True),
        "d": (drift, call.bound8_mj, False) if drift != 0 else (shift, call.bound8_mj, True),
        "e": (shift + shifted_drift(call, shift), call.bound8_mj, True),
    }


@dataclass
class Cell:
    """Errors and bound checks of one group of calls under one variant."""

    errs: list
    held: list
    held_wide: list
    ratio: list  # |error| / bound


def tally(calls: list[Call], slope: float) -> dict[str, Cell]:
    """Per variant, each call's error and whether its bound (and the widened one) holds."""
    cells = {v: Cell([], [], [], []) for v in VARIANTS}
    for call in calls:
        for v, (delta_w, bound_mj, shifted) in variants(call, slope).items():
            err = call.err(delta_w)
            wide = bound_mj + (WIDEN_W * call.mj_per_w() if shifted else 0.0)
            miss = abs(err * call.expected_mj)
            cells[v].errs.append(err)
            cells[v].held.append(miss <= bound_mj)
            cells[v].held_wide.append(miss <= wide)
            cells[v].ratio.append(miss / bound_mj)
    return cells


def cell_line(label: str, cell: Cell, v: str) -> str:
    """One table row: n, mean signed, mean / median / max |error| (%), bounds held."""
    e = np.array(cell.errs) * 100
    n = len(e)
    wide = f"{sum(cell.held_wide)}/{n}" if v in SHIFTED else "-"
    return (
        f"  {label:22s} {v}  n={n:2d}  mean {e.mean():+6.2f}  mean|e| {np.abs(e).mean():5.2f}  "
        f"median|e| {np.median(np.abs(e)):5.2f}  max|e| {np.abs(e).max():5.2f}  "
        f"held {sum(cell.held)}/{n}  widened {wide}  max |e|/bound {max(cell.ratio):.2f}"
    )


def h100_slopes() -> dict[str, tuple[str, object, float]]:
    """{board: (uuid, its idle-on-temperature fit, residual SD W)} from bench/idle_temperature.py's pairs."""
    out = {}
    for board, (uuid, patterns) in it.BOARDS.items():
        pairs = it.board_pairs(board, uuid, patterns)
        res = it.fit(pairs)
        out[board] = (uuid, res, it._resid_sd(res, pairs))
    return out


def records_of(uuid: str) -> list[Path]:
    """Every enclose record of the board ``uuid`` (its prefix) in results/enclose/."""
    out = []
    for path in sorted(ROOT.glob("call*.json*")):
        if "summary" in path.name:
            continue
        if records.parse_json(path, "a bench record")["board"]["uuid"].startswith(uuid):
            out.append(path)
    return out


def h100_calls(uuid: str, board: str) -> list[Call]:
    """The board's isolated single calls, over every record of it that has them."""
    return [c for path in records_of(uuid) for c in calls_of(path, board)]


def board_lines(board: str, calls: list[Call], slope: float, source: str) -> list[str]:
    """One board's table: per kind and all kinds, every variant."""
    dts = [c.dt_c for c in calls]
    edge = max(abs(c.temp_start_c - c.temp_window_c) for c in calls)
    records = sorted({c.record for c in calls})
    lines = [
        f"{board}: {len(calls)} isolated single calls ({', '.join(records)}); slope {slope:.3f} W/°C "
        f"from {source}",
        f"  dT window - baseline {min(dts):+.1f}..{max(dts):+.1f} °C (median {np.median(dts):+.1f}); "
        f"start edge vs edges' mean at most {edge:.1f} °C apart; window {min(c.window_s for c in calls):.3f}-"
        f"{max(c.window_s for c in calls):.3f} s; reference temperature-matched (±1 °C) "
        f"{sum(c.ref_ok for c in calls)}/{len(calls)}",
        f"  model 8 drift nonzero {sum(c.drift8_w != 0 for c in calls)}/{len(calls)}; median bound (model 8) "
        f"{np.median([c.bound8_mj / c.expected_mj for c in calls]) * 100:.1f}% of the reference; the "
        f"isolated references' own bounds {_ref_bounds(calls)} (one a kind, shared by its calls)",
    ]
    kinds = list(dict.fromkeys(c.kind for c in calls))
    groups = [(k, [c for c in calls if c.kind == k]) for k in kinds] + [("all kinds", calls)]
    for label, group in groups:
        cells = tally(group, slope)
        lines += [cell_line(label, cells[v], v) for v in VARIANTS]
    return lines


def _ref_bounds(calls: list[Call]) -> str:
    refs = {(c.record, c.kind): c.ref_bound_rel * 100 for c in calls}
    return f"{min(refs.values()):.1f}-{max(refs.values()):.1f}%"


def shift_vs_drift(calls: list[Call], slope: float) -> str:
    """Where model 8 found a drift: how the temperature shift compares with it, W."""
    both = [(slope * c.dt_c, c.drift8_w) for c in calls if c.drift8_w != 0]
    if not both:
        return "  (model 8 found no drift on any call)"
    s, d = np.array(both).T
    r = np.corrcoef(s, d)[0, 1] if np.ptp(s) > 0 and np.ptp(d) > 0 else math.nan
    return (
        f"  where model 8 moved the idle (n={len(both)}): slope*dT {s.mean():+.2f} W on average, drift "
        f"{d.mean():+.2f} W; shift - drift mean {np.mean(s - d):+.2f}, SD {np.std(s - d, ddof=1):.2f} W; "
        f"r {r:+.2f}"
    )


def kind_means(calls: list[Call], slope: float) -> str:
    """How many reference groups (record and kind) each variant gives a lower mean |error| than model 8."""
    groups = by_reference(calls)
    better = dict.fromkeys(VARIANTS, 0)
    for group in groups.values():
        cells = tally(group, slope)
        base = np.abs(cells["a"].errs).mean()
        for v in VARIANTS:
            better[v] += np.abs(cells[v].errs).mean() < base - 1e-12
    return ", ".join(f"{v} {better[v]}/{len(groups)}" for v in VARIANTS if v != "a")


def merge(parts: list[dict[str, Cell]]) -> dict[str, Cell]:
    """Cells of several groups (each read with its own slope) as one."""
    fields = ("errs", "held", "held_wide", "ratio")
    return {v: Cell(*([x for p in parts for x in getattr(p[v], f)] for f in fields)) for v in VARIANTS}


def by_reference(calls: list[Call]) -> dict[tuple[str, str], list[Call]]:
    """The calls grouped by record and kind: each group is read against one isolated reference."""
    out: dict[tuple[str, str], list[Call]] = {}
    for c in calls:
        out.setdefault((c.record, c.kind), []).append(c)
    return out


def within_sd(groups: list[dict[str, Cell]], v: str) -> float:
    """Pooled SD of the errors about each reference group's own mean, % (the reference's offset removed)."""
    dev = [e - np.mean(g[v].errs) for g in groups for e in g[v].errs]
    return float(np.sqrt(np.sum(np.square(dev)) / (len(dev) - len(groups))) * 100)


def kind_matrix(groups: list[tuple[str, list[Call], float]]) -> list[str]:
    """Per record and kind (one reference): mean signed / mean |error| / SD (%) under every variant."""
    lines = ["  record  kind     n  " + "  ".join(f"{v}: mean / mean|e| / SD " for v in VARIANTS)]
    for _, calls, slope in groups:
        for (record, kind), group in by_reference(calls).items():
            cells = tally(group, slope)
            row = "  ".join(
                f"{np.mean(cells[v].errs) * 100:+6.2f} / {np.mean(np.abs(cells[v].errs)) * 100:4.2f} / "
                + (f"{np.std(cells[v].errs, ddof=1) * 100:4.2f}" if len(group) > 1 else "  - ")
                for v in VARIANTS
            )
            lines.append(f"  {record[:6]:7s} {kind:8s} {len(group):2d}  {row}")
    return lines


def pooled_lines(groups: list[tuple[str, list[Call], float]]) -> list[str]:
    """Both boards together (each with the other's slope), and the temperature-matched calls alone."""
    lines = ["both H100 boards, each read with the other board's slope:"]
    for label, keep in (("all calls", lambda c: True), ("temperature-matched ref", lambda c: c.ref_ok)):
        cells = merge([tally([c for c in calls if keep(c)], slope) for _, calls, slope in groups])
        lines += [cell_line(label, cells[v], v) for v in VARIANTS]
    refs = [tally(g, slope) for _, calls, slope in groups for g in by_reference(calls).values()]
    sds = ", ".join(f"{v} {within_sd(refs, v):.2f}" for v in VARIANTS)
    lines.append(f"  SD about each reference group's own mean (its offset removed), all calls: {sds} %")
    head = "per record and kind (the calls of a row share one isolated reference):"
    return [*lines, "", head, *kind_matrix(groups)]


def h100_report() -> list[str]:
    """The replay on both H100 boards, each with the other board's slope (and, apart, its own)."""
    fits = h100_slopes()
    names = list(fits)
    lines = ["# Part 1: isolated single calls on two H100s, idle moved by slope * dT", ""]
    for board, (_, res, sd) in fits.items():
        lines.append(f"{board}: idle slope {res.slope:.3f} ± {res.stderr:.3f} W/°C, residual SD {sd:.2f} W")
    lines.append("")
    groups = []
    for board, other in zip(names, names[::-1], strict=True):
        calls = h100_calls(fits[board][0], board)
        slope = fits[other][1].slope
        groups.append((board, calls, slope))
        lines += board_lines(board, calls, slope, f"{other} (out of sample)")
        lines.append(shift_vs_drift(calls, slope))
        lines.append(f"  reference groups whose mean |error| is below model 8's: {kind_means(calls, slope)}")
        own = fits[board][1].slope
        cells = tally(calls, own)
        lines.append(f"  with the board's own slope {own:.3f} (in-sample, not a test):")
        lines += [cell_line("all kinds", cells[v], v) for v in SHIFTED]
        lines.append("")
    return [*lines, *pooled_lines(groups), ""]


# -- H200s ---------------------------------------------------------------------------------------


def h200_boards() -> dict[str, list[str]]:
    """{board uuid (12 characters): its record names} for every H200 enclose record."""
    out: dict[str, list[str]] = {}
    for path in sorted(ROOT.glob("call*.json*")):
        if "summary" in path.name:
            continue
        board = records.parse_json(path, "a bench record")["board"]
        if "H200" in board.get("name", ""):
            out.setdefault(board["uuid"][:12], []).append(path.name)
    return out


@dataclass
class BoardFit:
    """One board's idle-on-temperature pairs and, where they allow, its fit."""

    uuid: str
    records: list
    pairs: list
    res: object | None
    why_not: str

    @property
    def temps(self) -> np.ndarray:
        """The pairs' temperatures, °C."""
        return np.array([q.temp_c for q in self.pairs])


def h200_fit(uuid: str, names: list[str]) -> BoardFit:
    """A board's pairs (bench/idle_temperature.py's) and their fit when they span enough temperature."""
    pairs = it.board_pairs(uuid, uuid, names)
    temps = np.array([q.temp_c for q in pairs])
    why = []
    if len(pairs) < MIN_PAIRS:
        why.append(f"{len(pairs)} pairs < {MIN_PAIRS}")
    if np.ptp(temps) < MIN_RANGE_C:
        why.append(f"{np.ptp(temps):.1f} °C range < {MIN_RANGE_C:.0f}")
    res = it.fit(pairs) if np.ptp(temps) > 0 else None
    return BoardFit(uuid, names, pairs, res, "; ".join(why))


def fit_line(f: BoardFit) -> str:
    """One H200 board's row: pairs, temperatures, slope with its CIs, or why it is not fitted."""
    src = "/".join(str(sum(q.source == s for q in f.pairs)) for s in ("span", "pauses", "quiet"))
    kinds = len({q.kind for q in f.pairs})
    head = (
        f"  {f.uuid} {len(f.records)} rec {len(f.pairs):3d} pairs ({src}) {kinds} kinds "
        f"{f.temps.min():4.1f}-{f.temps.max():4.1f} °C"
    )
    if f.res is None:
        return head + "  no temperature spread"
    lo, hi = it._ci(f.res, len(f.pairs))
    boot = "-"
    if kinds >= 3:
        blo, bhi, _ = it.boot_slope(f.pairs)
        boot = f"{blo:.2f}..{bhi:.2f}"
    tail = f"  NOT FITTED ({f.why_not})" if f.why_not else ""
    return (
        f"{head}  slope {f.res.slope:.3f} (95% {lo:.2f}..{hi:.2f}; kinds resampled {boot}) "
        f"r² {f.res.rvalue**2:.2f} resid SD {it._resid_sd(f.res, f.pairs):.2f} W{tail}"
    )


def common_slope_test(fits: list[BoardFit]) -> list[str]:
    """Is one slope consistent with every fitted board? Cochran's Q, random-effects spread, ANCOVA F."""
    b = np.array([f.res.slope for f in fits])
    se = np.array([f.res.stderr for f in fits])
    w = 1 / se**2
    mean = float((w * b).sum() / w.sum())
    k = len(fits)
    q = float((w * (b - mean) ** 2).sum())
    tau2 = max(0.0, (q - (k - 1)) / (w.sum() - (w**2).sum() / w.sum()))
    wr = 1 / (se**2 + tau2)
    re_mean = float((wr * b).sum() / wr.sum())
    re_se = math.sqrt(1 / wr.sum())
    f_stat, df1, df2 = _ancova(fits)
    return [
        f"  {k} boards fitted: slopes {b.min():.3f}..{b.max():.3f} W/°C (median {np.median(b):.3f}, "
        f"SD across boards {b.std(ddof=1):.3f}; median SE {np.median(se):.3f})",
        f"  one slope, fixed effect: {mean:.3f} W/°C; Cochran's Q {q:.1f} on {k - 1} df, "
        f"p {stats.chi2.sf(q, k - 1):.1e}; I² {max(0.0, (q - (k - 1)) / q) * 100:.0f}%",
        f"  random effects: mean {re_mean:.3f} ± {1.96 * re_se:.3f} W/°C (95%), between-board SD (tau) "
        f"{math.sqrt(tau2):.3f} W/°C",
        f"  ANCOVA (board intercepts; one slope vs a slope per board): F {f_stat:.2f} on ({df1}, {df2}) df, "
        f"p {stats.f.sf(f_stat, df1, df2):.1e}",
        "  (pairs of one kind are not independent: every p here is too small, the SEs too narrow)",
    ]


def _ancova(fits: list[BoardFit]) -> tuple[float, int, int]:
    """F of per-board slopes against one common slope, both with per-board intercepts."""
    x = np.concatenate([f.temps - it.T0_C for f in fits])
    y = np.concatenate([[q.idle_w for q in f.pairs] for f in fits])
    board = np.concatenate([[i] * len(f.pairs) for i, f in enumerate(fits)])
    dummies = (board[:, None] == np.arange(len(fits))).astype(float)
    reduced = np.column_stack([dummies, x])
    full = np.column_stack([dummies, dummies * x[:, None]])
    rss = [float(np.sum((y - d @ np.linalg.lstsq(d, y, rcond=None)[0]) ** 2)) for d in (reduced, full)]
    df1, df2 = len(fits) - 1, len(y) - 2 * len(fits)
    return (rss[0] - rss[1]) / df1 / (rss[1] / df2), df1, df2


def h200_report() -> list[str]:
    """Part 2: each H200 board's slope, and whether one slope fits the family."""
    fits = [h200_fit(uuid, names) for uuid, names in h200_boards().items()]
    lines = [
        "# Part 2: H200 idle against temperature, per board (bench/idle_temperature.py's pairs:",
        f"#   span/pauses/quiet); fitted with >= {MIN_PAIRS} pairs over >= {MIN_RANGE_C:.0f} °C",
        "",
    ]
    lines += [fit_line(f) for f in fits]
    good = [f for f in fits if f.res is not None and not f.why_not]
    lines += ["", *common_slope_test(good)]
    return lines


def main() -> int:
    """Print both parts."""
    print("# Isolated single calls with a temperature-moved idle (bench/idle_temperature_replay.py)")
    print("# errors: per-call figure against the isolated reference, %; 'held': |error| <= model's bound;")
    print(f"# 'widened': shifted variants' bound + {WIDEN_W:.1f} W x window_s / calls (~ the fitting board's")
    print("# residual SD); variants:")
    for v, text in VARIANTS.items():
        print(f"#   {v}: {text}")
    print()
    print("\n".join(h100_report()))
    print("\n".join(h200_report()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
