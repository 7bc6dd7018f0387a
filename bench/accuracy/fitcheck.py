"""Fit the error model's state constants on one board's fit kinds; check issue 10's targets on another's.

``fit`` takes only the fit kinds (fp32, bf16cap) of one record: the constants it
derives never see the kinds or the board they are checked on. ``check`` rebuilds every
window of the check kinds with those constants (a temporary error-model version built
from the current one with the fitted fields replaced) and says whether each target holds.

Targets (issue 10), per kind:

* every window of 0.25-4 s, warm or transient: the bound contains the reference in >= 95%;
* warm 0.5 s windows: >= 95% within ±1%, all within ±2%;
* measure(): within its bound in >= 95%;
* single ~20 ms calls: median error within ±2%, max ±8%, the bound holding in >= 95%;
* overhead (work time per call in windows against the references) <= 0.5%;
* nvmeter's own time at a warm window's entry and exit <= 5 ms (median; max reported).

A target with fewer trials than it needs to be judged says so (``holds`` None).
"""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

import numpy as np

from accuracy import analysis
from accuracy.kinds import CHECK_KINDS, FIT_KINDS

# Trials a target needs before it is judged: a share of >= 95% resolves with 20.
MIN_N = {"windows": 20, "warm_0.5": 20, "measure": 4, "single": 20}


def _model():
    from nvmeter.meter import errormodel

    return errormodel.model(errormodel.CURRENT)


def _ramp_s(model) -> float:
    """The model's ramp after a pause, s (whatever the current version calls it)."""
    for name in ("transient_s", "cold_ramp_s"):
        if hasattr(model, name):
            return float(getattr(model, name))
    return 0.3


def _transient_name(model) -> str:
    for name in ("transient_rel", "cold_rel"):
        if hasattr(model, name):
            return name
    return "transient_rel"


def _reading_err_j(m) -> float:
    """The reading part of a Measurement's bound, J (its whole bound less the state part if unnamed)."""
    reading = getattr(m, "reading_err_j", None)
    return reading if reading is not None else m.err_j - getattr(m, "state_err_j", 0.0)


def _excess_j(t: analysis.Trial) -> float:
    """How far the window's energy above idle lies from the reference's, beyond its reading bound, J."""
    return abs(t.per_call_mj - t.expected_mj) * t.m.calls / 1e3 - _reading_err_j(t.m)


def fit(path: Path, kinds: tuple[str, ...] = FIT_KINDS) -> dict:
    """The state constants from ``kinds`` of one record.

    ``state_rel``: the largest |error| beyond the reading bound among warm 2 s and 4 s
    windows, as a share of their energy above idle (as in model 1; ``long_from_s`` says
    when a cut run had none and shorter windows stood in). The transient term
    (``cold_rel`` in model 1): among transient windows, the largest |error| left beyond the
    reading bound and ``state_rel``, as a share of the energy above idle of their first
    ramp (the model's ramp, s). Also, per warm window length, the errors' mean and SD (for
    a term that scales with the window), and the single calls' errors.

    Raises:
        KeyError: a kind the record does not hold.
    """
    rec = analysis.load(path)
    model = _model()
    ramp_s = _ramp_s(model)
    trials = [t for k in kinds for t in analysis.kind_data(rec, k).trials if t.ref_ok and t.m is not None]
    # the longest warm windows, where a pause's traces have faded; shorter ones if a cut run has none
    for shortest in (2.0, 1.0, 0.0):
        long = [
            _excess_j(t) / abs(t.m.above_idle_j) for t in trials if t.mode == "warm" and t.key >= shortest
        ]
        if long:
            break
    state_rel = max(0.0, max(long)) if long else math.nan
    transient = []
    for t in (t for t in trials if t.mode == "transient"):
        above = abs(t.m.above_idle_j)
        ramp_j = above * min(1.0, ramp_s / t.m.work_s)
        transient.append((_excess_j(t) - (state_rel if long else 0.0) * above) / ramp_j)
    by_window = {}
    for key in sorted({t.key for t in trials if t.mode == "warm"}):
        errs = np.array([t.err for t in trials if t.mode == "warm" and t.key == key])
        reading = [
            t.m.reading_err_j / abs(t.m.above_idle_j) for t in trials if t.mode == "warm" and t.key == key
        ]
        by_window[f"{key:g}"] = {
            "n": int(errs.size),
            "mean_err": float(errs.mean()),
            "sd_err": float(errs.std(ddof=1)) if errs.size > 1 else None,
            "max_abs_err": float(np.abs(errs).max()),
            "median_reading_rel": float(np.median(reading)),
        }
    singles = np.array([t.err for t in trials if t.mode == "single"])
    return {
        "file": str(path),
        "kinds": list(kinds),
        "model_version": model.version,
        "ramp_s": ramp_s,
        "constants": {
            "state_rel": state_rel,
            _transient_name(model): max(0.0, max(transient)) if transient else None,
        },
        "long_trials": len(long),
        "long_from_s": shortest,
        "transient_trials": len(transient),
        "warm_by_window": by_window,
        "singles": {
            "n": int(singles.size),
            "median_err": float(np.median(singles)) if singles.size else None,
            "max_abs_err": float(np.abs(singles).max()) if singles.size else None,
        },
    }


def model_with(constants: dict) -> tuple[int, list[str]]:
    """Register the current error model with ``constants`` replaced; returns (its version, names ignored).

    The version is a temporary one (current + 1000) in this process only.
    """
    from nvmeter.meter import errormodel

    base = _model()
    names = {f.name for f in fields(base)} - {"version"}
    usable = {k: v for k, v in constants.items() if k in names and v is not None}
    version = errormodel.CURRENT + 1000
    values = {f.name: getattr(base, f.name) for f in fields(base)}
    errormodel.MODELS[version] = type(base)(**{**values, **usable, "version": version})
    return version, sorted(set(constants) - set(usable))


def _target(kind, name, holds, detail, n=None) -> dict:
    return {"kind": kind, "target": name, "holds": holds, "n": n, "detail": detail}


def _judged(n: int, need: int, ok: bool) -> bool | None:
    return ok if n >= need else None


def check(path: Path, constants: dict | None = None, kinds: tuple[str, ...] = CHECK_KINDS) -> dict:
    """Issue 10's targets on ``kinds`` of one record, with ``constants`` (else the current model)."""
    rec = analysis.load(path)
    version, ignored = model_with(constants) if constants else (None, [])
    results = []
    for kind in kinds:
        if kind not in rec["kinds"] or not rec["kinds"][kind]["idle_spans"]:
            results.append(_target(kind, "recorded", False, "the record has no such kind"))
            continue
        s = analysis.summarize_kind(analysis.kind_data(rec, kind, version))
        results += _kind_targets(kind, s)
    verdicts = [r["holds"] for r in results]
    return {
        "file": str(path),
        "constants": constants,
        "ignored_constants": ignored,
        "targets": results,
        "all_hold": all(v is True for v in verdicts),
        "unjudged": sum(1 for v in verdicts if v is None),
    }


def _kind_targets(kind: str, s: dict) -> list[dict]:
    out = []
    pooled = s["pooled_windows"]
    n = pooled["n"]
    out.append(
        _target(
            kind,
            "windows 0.25-4 s: bound contains the reference in >= 95%",
            _judged(n, MIN_N["windows"], (pooled["bound_contains"] or 0) >= 0.95),
            f"{_pct(pooled['bound_contains'])} of {n}" + _without(pooled),
            n,
        )
    )
    row = s["rows"].get("warm@0.5", {"n": 0})
    n = row["n"]
    ok = n and row["within_1pct"] >= 0.95 and row["max_abs_err"] <= 0.02
    out.append(
        _target(
            kind,
            "warm 0.5 s: >= 95% within ±1%, all within ±2%",
            _judged(n, MIN_N["warm_0.5"], bool(ok)),
            f"{_pct(row.get('within_1pct'))} within ±1%, max {_pct(row.get('max_abs_err'))} of {n}"
            + _without(row),
            n,
        )
    )
    row = s["rows"].get("stall@0.5")
    if row:  # only runs that asked for stall trials have them
        flags = (s["detector"] or {}).get("stall", {"transient": 0, "steady": 0})
        # the target is the bound's; how many read transient shows whether the look-back saw the stall
        out.append(
            _target(
                kind,
                "after an injected stall: bound contains the reference in >= 95%",
                _judged(row["n"], MIN_N["windows"], (row["bound_contains"] or 0) >= 0.95),
                f"{flags['transient']} transient, {flags['steady']} warm; bound "
                f"{_pct(row['bound_contains'])} of {row['n']}, max |error| {_pct(row['max_abs_err'])}"
                + _without(row),
                row["n"],
            )
        )
    row = s["rows"].get("measure@measure", {"n": 0})
    n = row["n"]
    out.append(
        _target(
            kind,
            "measure(): within its bound in >= 95%",
            _judged(n, MIN_N["measure"], (row.get("bound_contains") or 0) >= 0.95),
            f"{_pct(row.get('bound_contains'))} of {n}, max |error| {_pct(row.get('max_abs_err'))}"
            + _without(row),
            n,
        )
    )
    row = s["rows"].get("single@single", {"n": 0})
    n = row["n"]
    ok = n and abs(row["median_err"]) <= 0.02 and row["max_abs_err"] <= 0.08 and row["bound_contains"] >= 0.95
    out.append(
        _target(
            kind,
            "single ~20 ms calls: median within ±2%, max ±8%, bound >= 95%",
            _judged(n, MIN_N["single"], bool(ok)),
            f"median {_pct(row.get('median_err'))}, max {_pct(row.get('max_abs_err'))}, bound "
            f"{_pct(row.get('bound_contains'))} of {n}" + _without(row),
            n,
        )
    )
    o = s["overhead"]
    over = o.get("overhead")
    out.append(
        _target(
            kind,
            "overhead <= 0.5%",
            None if over is None else over <= 0.005,
            f"{_pct(over, 3)} (work ms per call {o.get('ms_per_call_windows', math.nan):.3f} in windows, "
            f"{o.get('ms_per_call_refs', math.nan):.3f} in references)",
        )
    )
    meter = s["gaps"].get("nvmeter_ms")
    out.append(
        _target(
            kind,
            "nvmeter's own time at a warm window's entry and exit <= 5 ms",
            None if not meter else meter["median"] <= 5.0,
            "no warm windows" if not meter else f"median {meter['median']:.2f} ms, max {meter['max']:.2f} ms",
            meter["n"] if meter else 0,
        )
    )
    return out


def _without(row: dict) -> str:
    missing = row.get("n_without_ref", 0)
    if not missing:
        return ""
    every = row.get("all", {})
    return (
        f"; {missing} more without a reference within 60 s and ±1 °C (with them: bound "
        f"{_pct(every.get('bound_contains'))}, max {_pct(every.get('max_abs_err'))})"
    )


def _pct(x, digits: int = 2) -> str:
    return "-" if x is None else f"{x * 100:.{digits}f}%"


def report(result: dict) -> str:
    """The check as lines: HOLDS / FAILS / UNJUDGED, kind, target, detail."""
    word = {True: "HOLDS", False: "FAILS", None: "UNJUDGED"}
    lines = [f"{word[r['holds']]:9} {r['kind']:8} {r['target']}: {r['detail']}" for r in result["targets"]]
    if result["ignored_constants"]:
        lines.append(
            f"(constants not in the current error model, ignored: {', '.join(result['ignored_constants'])})"
        )
    lines.append("all targets hold" if result["all_hold"] else "NOT all targets hold")
    return "\n".join(lines)


def fit_v2(path: Path, kinds: tuple[str, ...] = FIT_KINDS) -> dict:
    """Error model 2's state constants from ``kinds`` of one record, each to hold every fit trial.

    In order, each term taking what the ones before left: ``state_rel`` from the warm windows
    (their excess beyond the reading bound, share of the energy above idle); ``transient_fixed_s``
    from the single calls (what is left beyond ``state_rel``, in seconds of the work's power
    above idle); ``transient_rel`` from the transient windows (what is left beyond both, share of
    the energy above idle of the first ``transient_s``); ``state_floor_rel`` from the measure()
    trials (their excess beyond reading and Student-t interval). Each is the largest seen, so the
    fitted model contains every fit trial; the check on other kinds and another board says
    whether that generalises.
    """
    from nvmeter.meter import spread

    rec = analysis.load(path)
    model = _model()
    trials = [t for k in kinds for t in analysis.kind_data(rec, k).trials if t.ref_ok and t.m is not None]

    def excess_j(t) -> float:
        return abs(t.per_call_mj - t.expected_mj) * t.m.calls / 1e3 - t.m.reading_err_j

    warm = [t for t in trials if t.mode == "warm"]
    state_rel = max([0.0] + [excess_j(t) / abs(t.m.above_idle_j) for t in warm])
    singles = [t for t in trials if t.mode == "single"]
    fixed_s = max([0.0] + [(excess_j(t) - state_rel * abs(t.m.above_idle_j)) / t.m.work_w for t in singles])
    transient_rel = 0.0
    for t in (t for t in trials if t.mode == "transient"):
        above = abs(t.m.above_idle_j)
        first_j = above * min(1.0, model.transient_s / t.m.work_s)
        left = excess_j(t) - state_rel * above - fixed_s * t.m.work_w
        transient_rel = max(transient_rel, left / first_j)
    floor = 0.0
    for t in (t for t in trials if t.mode == "measure"):
        halfwidth = spread.state_halfwidth_mj(t.m)
        student_j = (halfwidth or 0.0) * t.m.calls / 1e3
        floor = max(floor, (excess_j(t) - student_j) / abs(t.m.above_idle_j))
    return {
        "file": str(path),
        "kinds": list(kinds),
        "model_version": model.version,
        "constants": {
            "state_rel": state_rel,
            "transient_fixed_s": fixed_s,
            "transient_rel": transient_rel,
            "state_floor_rel": floor,
            "limited_rel": 0.0,
        },
        "trials": {
            "warm": len(warm),
            "single": len(singles),
            "measure": sum(t.mode == "measure" for t in trials),
        },
    }
