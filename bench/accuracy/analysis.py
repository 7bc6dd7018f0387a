"""Errors of every trial against its reference, per kind of work, window length and trial type.

Everything is recomputed from the raw readings: each window's Measurement is rebuilt
with ``Measurement.from_dict`` after its idle is replaced by the kind's two quiescent
spans together (``IdleBaseline.from_spans``, start and end), so trials and references
share one idle and its bound. A trial's reference is the one nearest in time among
those within ``REF_WINDOW_S`` whose temperature range (±``REF_TEMP_C``) holds the
trial's; a trial with none is counted apart (``ref_ok`` False), never silently compared.
A trial inside a reference's span (``--enclose``: the warm stream inside one unbroken
reference) takes that reference. Single calls are also read against the isolated
references (the same single call after the same pauses, ``--enclose``): rows ``single_iso``.

Figures per row (kind x type x window): n, median signed and median/max |error| of
per-call mJ above idle, the share of stated bounds (``per_call_mj_err``) that contain
the reference, the shares within ±1% and ±2%, and for ZeusMonitor its errors. Per kind:
the warm windows' gaps before entry and nvmeter's own ms at entry and exit; the meter's
overhead (work time per call in warm windows against the references); the board state.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from nvmeter.boards.profile import default_profile
from nvmeter.boards.protocol import SW_POWER_CAP

# A trial's reference: within this many seconds (centre to centre) and degrees (issue 10).
REF_WINDOW_S = 60.0
REF_TEMP_C = 1.0
MODES = ("warm", "transient", "stall", "single", "single_iso", "measure", "zeus")
# Trial types whose windows pool into the 0.25-4 s bound target (a stall trial is a transient window).
WINDOW_MODES = ("warm", "transient", "stall")
# Board-profile figures to read every window with instead of those it was recorded with (an
# analysis option: a record made with one family default, read with a later one).
PROFILE_CHANGES: dict = {}
# A board's cap spread by UUID, from its cap-spread probe (``analyze --cap-probe``): replaces the
# profile's (model 10 reads it), so windows recorded before the probe are read with its figure.
CAP_SPREADS: dict[str, tuple] = {}
# A board's run level by UUID, from its run-level probe (``analyze --level-probe``): replaces the
# profile's (model 13 reads it), so windows recorded before the probe are read with its figure.
RUN_LEVELS: dict[str, float] = {}
# Read every window without a probe's figure with its family's current cap-spread defaults, not the
# ones it was recorded with (``analyze --cap-defaults``: what an unprobed board is told now).
CAP_DEFAULTS = False


def load(path: Path) -> dict:
    """A window-accuracy record (schema 2, upgraded as nvmeter.formats says), its raw series checked.

    Raises:
        RecordError: missing, unreadable, not JSON, another kind of record, or damaged (a trial's
            raw series that cannot be real, :mod:`nvmeter.meter.sanity`; units that are no list).
    """
    from nvmeter import records
    from nvmeter.meter import sanity

    rec = records.read_json(Path(path), "window-accuracy")
    with records.building(Path(path), "window-accuracy"):
        for name, part in records.mapping(rec.get("kinds", {}), "kinds").items():  # runs 1-2: legacy
            for i, unit in enumerate(records.items(part["units"], f"kinds.{name}.units", records.mapping)):
                for at, why in sanity.faults(unit.get("raw"), f"kinds.{name}.units[{i}].raw"):
                    raise records.BadField(f"{why} (at {at})")
    return rec


def idle_of(part: dict):
    """The kind's idle: its quiescent spans together (start and end; one if the run was cut).

    Also a unit's own (an isolated reference made with ``--iso-idle``), from its ``idle_spans``.
    """
    from nvmeter.meter.baseline import IdleBaseline
    from nvmeter.meter.span import AlignedSpan

    spans = [AlignedSpan.from_dict(s["span"]) for s in part["idle_spans"]]
    return IdleBaseline.from_spans(spans, "quiescent")


# The isolated reference's pauses, read for its idle: from this long after a call's end (its
# power is within 0.15 W of the pause's from 0.18 s on: results/enclose/call27-25b7f91-tail-enclose.json.gz)
# to this long before the next call's start, s; at least this many samples (0.2 s of ~20 ms ones).
PAUSE_SETTLE_S = 0.2
PAUSE_MARGIN_S = 0.03
PAUSE_MIN_SAMPLES = 10


def pause_idle(unit: dict, idle):
    """An isolated reference's idle, from the sample buffer in its own pauses (None: none seen).

    ~95% of an isolated reference is pauses, so an idle 1 W off moves it ~7%, and an H200's
    idle moved 2.4 W within the ~15 s around one (call 27, FP32 8192²: 129.9 W in the samples
    right before it, 127.0-127.9 W in its pauses from 1.8 s in, 127.5 W on average, 128.6 W
    in the quiescent span after it). Its pauses are its own idle: the kind's idle ``idle``
    moved by the samples' mean over them less the idle's sampled figure (the samples follow
    the counter's idle to -0.05..+0.14 W in the quiescent spans of calls 26-27). The result
    has no sampled figure, so that error model 8 does not move it again by the stretch
    before the reference, and is local (measured inside the reference), so that error model 14
    does not hold that stretch in its bound either.
    """
    from nvmeter.meter.baseline import IdleBaseline

    raw = _with_call_ends(unit)
    ends, call_ms = raw.get("call_ends_s"), unit.get("call_ms")
    if not ends or not call_ms or not math.isfinite(idle.samples_power_w):
        return None
    t = np.asarray(raw["samples"]["t_s"], dtype=float)
    p = np.asarray(raw["samples"]["power_w"], dtype=float)
    starts = np.asarray(ends) - np.asarray(call_ms, dtype=float) / 1e3
    quiet = np.zeros(t.size, dtype=bool)
    for end_s, next_s in zip(ends[:-1], starts[1:], strict=True):
        quiet |= (t > end_s + PAUSE_SETTLE_S) & (t < next_s - PAUSE_MARGIN_S)
    if quiet.sum() < PAUSE_MIN_SAMPLES:
        return None
    shift_w = float(p[quiet].mean()) - idle.samples_power_w
    return IdleBaseline(idle.power_w + shift_w, idle.err_w, "pauses", local=True)


def _ref_idle(u: dict, idle):
    """A reference's idle: an isolated one's pauses', else its own quiescent spans', else the kind's."""
    if u.get("isolated"):
        own = pause_idle(u, idle)
        if own is not None:
            return own
    return idle_of(u) if u.get("idle_spans") else idle


def measurement(raw: dict, idle, model_version: int | None = None):
    """The Measurement of ``raw`` with ``idle`` (and, if given, error model ``model_version``)."""
    from nvmeter.meter.measurement import Measurement

    raw = {**raw, "idle": {**raw["idle"], **_idle_dict(idle)}}
    m = Measurement.from_dict(raw)
    if model_version is not None:
        m = replace(m, model_version=model_version)
    if PROFILE_CHANGES:
        m = replace(m, profile=m.profile.with_(**PROFILE_CHANGES))
    if m.device.uuid in CAP_SPREADS:
        m = replace(m, profile=m.profile.with_(cap_spread=CAP_SPREADS[m.device.uuid]))
    elif CAP_DEFAULTS:
        m = replace(m, profile=m.profile.with_(cap_spread=default_profile(m.device.name).cap_spread))
    if m.device.uuid in RUN_LEVELS:
        m = replace(m, profile=m.profile.with_(run_level_rel=RUN_LEVELS[m.device.uuid]))
    return m


def measurements(path: Path):
    """Every window of a record: (kind, unit, Measurement), trials and references, each with the idle
    :func:`kind_data` reads it with (a unit that does not build is left out).

    Raises:
        RecordError: as :func:`load`.
    """
    from nvmeter import errors

    for name, part in load(path).get("kinds", {}).items():
        idle = idle_of(part)
        for u in part["units"]:
            if "raw" not in u:
                continue
            try:
                m = measurement(_with_call_ends(u), _ref_idle(u, idle) if u["type"] == "ref" else idle)
            except (errors.NvmeterError, KeyError, TypeError, ValueError):
                continue
            yield name, u, m


def _with_call_ends(u: dict) -> dict:
    """The trial's raw Measurement, with its calls' ends where the Measurement predates them.

    Measurements before schema 5 kept no call ends (error model 7 folds the calls' profile
    from them); the bench timed every call (``call_ms``) and called ``w.call()`` once per call
    straight after it, so the calls laid end to end from the work's start give their ends to
    within the few microseconds between a call's return and its mark. An isolated reference
    slept ``pauses_s[i]`` after call ``i``: those pauses lie between its calls (each sleep's
    overshoot, ~0.1 ms, is not recorded).
    """
    raw, call_ms = u["raw"], u.get("call_ms")
    if raw.get("call_ends_s") or not call_ms or len(call_ms) != raw.get("calls"):
        return raw
    spans_s = np.asarray(call_ms, dtype=float) / 1e3
    pauses_s = np.asarray(u.get("pauses_s") or [], dtype=float)[: len(spans_s) - 1]
    spans_s[1 : 1 + len(pauses_s)] += pauses_s
    ends = raw["work_t0_s"] + np.cumsum(spans_s)
    return {**raw, "call_ends_s": ends.tolist()}


def _idle_dict(idle) -> dict:
    return {
        "power_w": idle.power_w,
        "err_w": idle.err_w,
        "source": idle.source,
        "samples_power_w": idle.samples_power_w,
        "local": idle.local,
    }


def _temps(unit: dict) -> list[float]:
    """The temperatures at a window's own edges (its Measurement's states), °C.

    The runner's ``state_before`` can precede a trial's lead-in, over which a board at its
    power limit warms by ~10 °C in 2 s (results/enclose/call1-fe66f43-enclose.json.gz), so it
    stands in only where the record holds no edge states.
    """
    states = (unit.get("raw") or {}).get("states") or [unit.get("state_before"), unit.get("state_after")]
    out = []
    for state in states:
        t = (state or {}).get("temperature_c")
        if isinstance(t, (int, float)) and math.isfinite(t):
            out.append(float(t))
    return out


def _ref_temps(unit: dict, units: dict) -> tuple[float, ...]:
    """A reference's temperatures: its edges', and those of the trials it enclosed (its span's)."""
    temps = _temps(unit)
    for uid in unit.get("encloses", []):
        temps += _temps(units.get(uid, {}))
    return tuple(temps)


@dataclass(frozen=True)
class Ref:
    """A reference: the same calls for >= 10 s in one window (isolated: single calls with pauses)."""

    id: str
    t_s: float
    temps: tuple[float, ...]
    per_call_mj: float
    per_call_mj_err: float
    work_ms_per_call: float
    unit: dict

    @property
    def isolated(self) -> bool:
        """True for a reference of isolated single calls (the single-call trials' own)."""
        return bool(self.unit.get("isolated"))

    def encloses(self, unit: dict) -> bool:
        """True when the trial ran inside this reference's span (one unbroken run of calls)."""
        return self.unit["t0_s"] <= unit["t0_s"] and unit["t1_s"] <= self.unit["t1_s"]


@dataclass(frozen=True)
class Trial:
    """One trial, read against its reference.

    Attributes:
        unit: The recorded unit.
        mode: ``warm``, ``transient``, ``single``, ``measure`` or ``zeus``.
        key: The row it belongs to: a window length (s), ``"single"`` or ``"measure"``.
        m: Its Measurement (None for Zeus).
        per_call_mj, per_call_mj_err: Its reading and bound (bound None for Zeus).
        ref: Its reference (None if the kind has none).
        ref_dt_s: Time from it to the reference, s. temp_ok: The temperature matched.
        expected_mj: What the reference says it should read.
    """

    unit: dict
    mode: str
    key: object
    m: object
    per_call_mj: float
    per_call_mj_err: float | None
    ref: Ref | None
    ref_dt_s: float
    temp_ok: bool | None
    expected_mj: float

    @property
    def ref_ok(self) -> bool:
        """A reference within 60 s and (where temperatures are known) ±1 °C."""
        return self.ref is not None and self.ref_dt_s <= REF_WINDOW_S and self.temp_ok is not False

    @property
    def err(self) -> float:
        """Relative error against the reference."""
        return self.per_call_mj / self.expected_mj - 1

    @property
    def call_time_dev(self) -> float | None:
        """The window's work time per call against its reference's, relative (None without both)."""
        if self.m is None or self.ref is None or not self.m.calls or self.mode not in WINDOW_MODES:
            return None
        return self.m.work_s / self.m.calls * 1e3 / self.ref.work_ms_per_call - 1

    @property
    def sm_clock_mhz(self) -> float | None:
        """Mean SM clock of the window, MHz: its clock samples, else its edges' states.

        The samples between entry and exit where there are two or more; else (a board that
        keeps the buffer empty, such as the H200) the mean of the clocks read at the edges.
        None without either.
        """
        inside = [
            mhz
            for t, mhz in self.unit.get("sm_clock_samples") or ()
            if self.unit["t0_s"] <= t <= self.unit["t1_s"]
        ]
        if len(inside) >= 2:
            return float(np.mean(inside))
        edges = [s.sm_clock_mhz for s in getattr(self.m, "states", ()) if np.isfinite(s.sm_clock_mhz)]
        return float(np.mean(edges)) if edges else None

    @property
    def samples_err(self) -> float | None:
        """The window's sample-buffer reading against the reference, relative (a diagnostic).

        The ~20 ms power samples integrated over the span nvmeter's figure covers, with the
        same lag corrections, less the idle's sample-buffer figure, per call: a second
        reading of the same window that shares no counter read with nvmeter's. A window
        whose end edge fell in idle is read to the last sample, which must lie at least two
        sample spacings past the work's end and its lag (the board idle from there on).
        None outside window trials or where the samples do not cover the span.
        """
        m = self.m
        if m is None or self.mode not in WINDOW_MODES or not m.calls or len(m.samples) < 2:
            return None
        from nvmeter.meter.series import integrate_samples_j

        a_s, b_s = m.window_t0_s, m.window_t1_s
        if not m.end_found_in_work:
            idle_from_s = m.work_t1_s + m.profile.power_lag_s + 2 * m.profile.sample_spacing_s
            if m.samples[-1].t_s < idle_from_s:
                return None
            b_s = min(b_s, m.samples[-1].t_s)
        try:
            gross_j = integrate_samples_j(m.samples, a_s, b_s) - m.lag_j + m.trail_j
        except ValueError:
            return None
        per_call_mj = (gross_j - m.idle.samples_w * (b_s - a_s)) * 1e3 / m.calls - m.control_mj
        return per_call_mj / self.expected_mj - 1

    @property
    def span_err(self) -> float | None:
        """The counter alone over the steps inside the window, against the reference (a diagnostic).

        From the window's start step to the last sharp step the trial's step log found before
        the work's end (``run --step-log``): the counter's energy between them less idle, per
        call at the calls' median period (the calls laid by time, no sample read). Whole counter
        periods of the window's own calls: no cut at either end. None without a logged step.
        Sharp as the meter's edges are: a step a slow read blurred is placed up to ~8 ms off,
        2-4% of a 0.2-0.4 s span, which read as the span's own scatter.
        """
        m = self.m
        if m is None or self.mode not in WINDOW_MODES or not self.unit.get("step_log") or not m.in_work:
            return None
        from nvmeter.meter.series import CounterSeries
        from nvmeter.meter.span import sharp

        t_a, e_a, _ = m.start.edge_step(m.work_t1_s)  # the window's start step (Measurement._edges)
        polls = [CounterSeries.from_dict(d) for d in self.unit["step_log"]]
        found = [p.edge_step() for p in polls if sharp(p)]
        later = [(t, e) for t, e, _ in found if t_a < t <= m.work_t1_s]
        starts = np.concatenate([[m.work_t0_s], np.asarray(m.call_ends_s, dtype=float)])
        if not later or len(starts) < 3:
            return None
        t_b, e_b = later[-1]
        calls = (t_b - t_a) / float(np.median(np.diff(starts)))
        per_call_mj = ((e_b - e_a) / 1e3 - m.idle.power_w * (t_b - t_a)) * 1e3 / calls - m.control_mj
        return per_call_mj / self.expected_mj - 1

    @property
    def start_phase(self) -> float | None:
        """Where the start step fell within the call it cut: 0 at the call's start, 1 at its end.

        A diagnostic for work whose power moves within a call (the duty-cycled kind): the
        samples' cut from the work's start to the step then splits a call's on and off parts.
        From the trial's call times, laid end to end from the work's start. None unless the
        window's start step was inside its calls.
        """
        m = self.m
        call_s = np.asarray(self.unit.get("call_ms") or (), dtype=float) / 1e3
        if m is None or self.mode not in WINDOW_MODES or not m.in_work or not len(call_s):
            return None
        ends_s = m.work_t0_s + np.cumsum(call_s)
        step_s = m.edge_steps_s[0]
        i = int(np.searchsorted(ends_s, step_s))
        if i >= len(call_s):
            return None
        return float(1 - (ends_s[i] - step_s) / call_s[i])

    @property
    def contains(self) -> bool | None:
        """The stated bound holds the reference (None for Zeus)."""
        if self.per_call_mj_err is None:
            return None
        return bool(abs(self.per_call_mj - self.expected_mj) <= self.per_call_mj_err)


@dataclass(frozen=True)
class KindData:
    """A kind's references and trials, rebuilt."""

    name: str
    work: dict
    idle: object
    idle_spans: int
    refs: tuple[Ref, ...]
    trials: tuple[Trial, ...]
    part: dict


def kind_data(rec: dict, name: str, model_version: int | None = None) -> KindData:
    """Rebuild one kind of a record: idle, references, trials matched to them."""
    part = rec["kinds"][name]
    idle = idle_of(part)
    refs, raw_trials = [], []
    by_id = {u["id"]: u for u in part["units"]}
    for u in part["units"]:
        if u["type"] == "ref":
            m = measurement(u["raw"], _ref_idle(u, idle), model_version)
            refs.append(
                Ref(
                    u["id"],
                    (u["t0_s"] + u["t1_s"]) / 2,
                    _ref_temps(u, by_id),
                    m.per_call_mj,
                    m.per_call_mj_err,
                    m.work_s / m.calls * 1e3,
                    u,
                )
            )
        elif "raw" in u or u["type"] == "zeus":
            raw_trials.append(u)
    steady = [r for r in refs if not r.isolated]
    isolated = [r for r in refs if r.isolated]
    trials = tuple(_trial(u, steady, idle, model_version) for u in raw_trials)
    if isolated:  # the same single calls, read against what an isolated call costs
        trials += tuple(
            _trial(u, isolated, idle, model_version, "single_iso", own_idle=True)
            for u in raw_trials
            if u["type"] == "single"
        )
    return KindData(name, part.get("work") or {}, idle, len(part["idle_spans"]), tuple(refs), trials, part)


def _trial(u: dict, refs: list[Ref], idle, model_version, mode: str | None = None, own_idle=False) -> Trial:
    """``u`` read against the reference :func:`match` picks of ``refs``.

    With ``own_idle``, a reference that has quiescent spans of its own (``--iso-idle``) gives the
    trial its idle too, so that trial and reference are read alike.
    """
    mode = mode or u["type"]
    t = (u["t0_s"] + u["t1_s"]) / 2
    temps = _temps(u)
    ref, dt, temp_ok = match(t, statistics.fmean(temps) if temps else None, refs, u.get("run"), u)
    if own_idle and ref is not None and ref.unit.get("idle_spans"):
        idle = idle_of(ref.unit)
    if mode == "zeus":
        m = None
        pcm = (u["gross_j"] - idle.power_w * u["time_s"]) * 1e3 / u["calls"]
        bound = None
    else:
        m = measurement(_with_call_ends(u), idle, model_version)
        pcm, bound = m.per_call_mj, m.per_call_mj_err
    key = {"single": "single", "single_iso": "single", "measure": "measure"}.get(mode, u.get("window_s"))
    share = u.get("single_share", 1.0) if mode == "single" else 1.0
    expected = ref.per_call_mj * share if ref else math.nan
    return Trial(u, mode, key, m, pcm, bound, ref, dt, temp_ok, expected)


def match(
    t_s: float, temp_c: float | None, refs: list[Ref], run: int | None = None, unit: dict | None = None
) -> tuple[Ref | None, float, bool | None]:
    """The reference for a trial at ``t_s`` and ``temp_c``: nearest in time of those that match.

    Only references of the same ``run`` count (when given): a resumed record's clocks
    may restart between runs. A reference whose span holds the trial's ``unit`` (an
    enclosing reference) is taken before any other that matches.

    Returns:
        (reference, |time apart| s, temperature matched: True/False, None when unknown).
    """
    if run is not None:  # a resumed record: each run has its own clock
        refs = [r for r in refs if r.unit.get("run", run) == run]
    if not refs:
        return None, math.inf, None

    def temp_ok(r: Ref) -> bool | None:
        if temp_c is None or not r.temps:
            return None
        return min(r.temps) - REF_TEMP_C <= temp_c <= max(r.temps) + REF_TEMP_C

    near = [r for r in refs if abs(r.t_s - t_s) <= REF_WINDOW_S]
    good = [r for r in near if temp_ok(r) is not False]
    enclosing = [r for r in good if unit is not None and r.encloses(unit)]
    pool = enclosing or good or near or refs
    best = min(pool, key=lambda r: abs(r.t_s - t_s))
    return best, abs(best.t_s - t_s), temp_ok(best)


def _share(flags) -> float | None:
    flags = [f for f in flags if f is not None]
    return float(np.mean(flags)) if flags else None


def row_stats(trials: list[Trial]) -> dict:
    """Figures of one row, over trials with a good reference (and counts of the rest)."""
    ok = [t for t in trials if t.ref_ok and math.isfinite(t.err)]
    errs = np.array([t.err for t in ok])
    out = {
        "n": len(ok),
        "n_without_ref": len(trials) - len(ok),
        "median_err": float(np.median(errs)) if ok else None,
        "median_abs_err": float(np.median(np.abs(errs))) if ok else None,
        "max_abs_err": float(np.max(np.abs(errs))) if ok else None,
        "within_1pct": _share([abs(e) <= 0.01 for e in errs]),
        "within_2pct": _share([abs(e) <= 0.02 for e in errs]),
        "bound_contains": _share([t.contains for t in ok]),
        # a reference coarser than a target cannot judge it (isolated references of ~15 calls)
        "median_ref_bound_rel": (
            float(np.median([t.ref.per_call_mj_err / abs(t.ref.per_call_mj) for t in ok])) if ok else None
        ),
        # each trial's error and stated bound, both relative to its reference, and whether the bound
        # held (None for Zeus): what the pool counts and draws
        "trials": [[t.err, _bound_rel(t), t.contains] for t in ok],
    }
    if ok and ok[0].per_call_mj_err is not None:
        out["median_bound_rel"] = float(np.median([t.per_call_mj_err / abs(t.per_call_mj) for t in ok]))
        out["unreliable"] = sum(1 for t in ok if not t.m.reliable)
        out["median_window_s"] = float(np.median([t.m.window_s for t in ok]))
        out["median_work_s"] = float(np.median([t.m.work_s for t in ok]))
    out.update(_against_call_time(ok))
    out.update(_against_sm_clock(ok))
    out.update(_lag1(ok))
    out.update(_against_samples(ok))
    out.update(_against_start_phase(ok))
    out.update(_step_log(ok))
    everyone = [t for t in trials if t.ref is not None and math.isfinite(t.err)]
    if len(everyone) > len(ok):  # the same figures with the trials lacking a good reference
        out["all"] = {
            "n": len(everyone),
            "max_abs_err": float(np.max(np.abs([t.err for t in everyone]))),
            "within_1pct": _share([abs(t.err) <= 0.01 for t in everyone]),
            "bound_contains": _share([t.contains for t in everyone]),
        }
    return out


def _bound_rel(t: Trial) -> float | None:
    """A trial's stated bound relative to its reference, as its error is (None for Zeus: no bound).

    So ``abs(error) <= bound`` is :attr:`Trial.contains`.
    """
    if t.per_call_mj_err is None or not t.expected_mj:
        return None
    return t.per_call_mj_err / abs(t.expected_mj)


def _against_call_time(ok: list[Trial]) -> dict:
    """How the windows' errors follow their calls' length against the reference's (a diagnostic).

    At the power cap a window whose calls ran slower ran at lower clocks, and costs less per
    call (energy per operation falls with the clock): its "error" against a 10 s reference is
    partly the work's own variation, not the meter's. The least-squares slope (error per unit
    of call-time deviation) and Pearson's r; nothing is corrected with them.
    """
    return _follows([(t.err, t.call_time_dev) for t in ok if t.call_time_dev is not None], "call_time")


def _against_sm_clock(ok: list[Trial]) -> dict:
    """How the windows' errors follow their mean SM clock (a diagnostic, where the record has it).

    Each window's clock is the mean of the board's clock samples inside it, against the
    row's median window.
    """
    clocks = [(t, t.sm_clock_mhz) for t in ok if t.sm_clock_mhz is not None]
    if not clocks:
        return {}
    typical = float(np.median([c for _, c in clocks]))
    return _follows([(t.err, c / typical - 1) for t, c in clocks], "sm_clock")


def _step_log(ok: list[Trial]) -> dict:
    """What the trials' step logs say (``run --step-log``; a diagnostic, nothing is corrected).

    ``span_*``: the counter alone over the steps inside each logged window (:attr:`Trial.span_err`)
    against the reference, beside nvmeter's own figure for the same windows (``logged_*``); and
    nvmeter's figure on the windows that did not log (``unlogged_*``): the log polls 15-17% of the
    time, so the two sets tell its cost (its polling artefact) from the windows' scatter.
    """
    logged = [t for t in ok if t.unit.get("step_log") is not None]
    if not logged:
        return {}
    spans = [(t.err, t.span_err) for t in logged if t.span_err is not None]
    unlogged = [t.err for t in ok if t.unit.get("step_log") is None]

    def figures(errs, name) -> dict:
        errs = np.asarray(errs, dtype=float)
        if not len(errs):
            return {}
        return {
            f"{name}_n": len(errs),
            f"{name}_median_err": float(np.median(errs)),
            f"{name}_within_1pct": float(np.mean(np.abs(errs) <= 0.01)),
            f"{name}_max_abs_err": float(np.max(np.abs(errs))),
        }

    return {
        # logged windows whose log found no step inside them: counted, not read
        "logged_without_span_n": len(logged) - len(spans),
        **figures([e for e, _ in spans], "logged"),
        **figures([s for _, s in spans], "span"),
        **figures(unlogged, "unlogged"),
    }


def _against_samples(ok: list[Trial]) -> dict:
    """What the sample buffer says of the same windows (a diagnostic; nothing is corrected).

    The sample buffer reads each window without nvmeter's counter edges. Where both readings
    move together away from the reference (``err_vs_samples_r`` near 1, ``samples_err_sd``
    near the error's own SD) the window's calls really cost that much more or less than the
    reference's: variation of the work over 0.5 s, which no meter can remove. Where they
    disagree (``counter_vs_samples_sd``) one of them is wrong: an upper bound on the
    meter's own scatter, unless the samples alias the work (a duty-cycled call).
    """
    pairs = [(t.err, t.samples_err) for t in ok if t.samples_err is not None]
    if len(pairs) < 5:
        return {}
    err, samples = np.array(pairs).T
    out = {
        "err_sd": float(err.std(ddof=1)),
        "samples_err_sd": float(samples.std(ddof=1)),
        "counter_vs_samples_sd": float(((1 + err) / (1 + samples) - 1).std(ddof=1)),
    }
    if np.ptp(err) > 0 and np.ptp(samples) > 0:
        out["err_vs_samples_r"] = float(np.corrcoef(err, samples)[0, 1])
    return out


def _against_start_phase(ok: list[Trial]) -> dict:
    """Mean error of the windows whose start step fell early in a call, and late (a diagnostic).

    ``err_start_early`` (phase under 0.2: the call's first fifth) and ``err_start_late``
    (over 0.8), each ``{"n", "mean"}``, where both have at least 3 windows. Apart by more
    than their scatter, the cut at the start splits the calls' power wrongly: the 20 ms
    samples cannot place a step of power inside them.
    """
    pairs = [(t.err, t.start_phase) for t in ok if t.start_phase is not None]
    early = [e for e, p in pairs if p < 0.2]
    late = [e for e, p in pairs if p > 0.8]
    if min(len(early), len(late)) < 3:
        return {}
    return {
        "err_start_early": {"n": len(early), "mean": float(np.mean(early))},
        "err_start_late": {"n": len(late), "mean": float(np.mean(late))},
    }


# A spread of relative figures under this is rounding: a simulated board's calls, all alike, spread
# ~1e-15 and gave a slope of -1.3e9; real boards' call times spread 0.1-1.5% (fold.py's MAX_CALL_CV note).
ROUNDING_REL = 1e-9


def _follows(pairs: list[tuple[float, float]], name: str) -> dict:
    """``{name}_dev_sd``, ``err_vs_{name}_slope`` and ``_r`` of (error, deviation) pairs.

    Empty with under 5 pairs or when either has no spread beyond rounding.
    """
    if len(pairs) < 5:
        return {}
    err, dev = np.array(pairs).T
    if np.ptp(dev) <= ROUNDING_REL or np.ptp(err) <= ROUNDING_REL:
        return {}
    return {
        f"{name}_dev_sd": float(dev.std(ddof=1)),
        f"err_vs_{name}_slope": float(np.polyfit(dev, err, 1)[0]),
        f"err_vs_{name}_r": float(np.corrcoef(dev, err)[0, 1]),
    }


def _lag1(ok: list[Trial]) -> dict:
    """Lag-1 correlation of consecutive windows' errors in one run of calls (a diagnostic).

    Consecutive warm windows share an edge: the energy one edge gives the wrong side makes
    them anti-correlated. Errors that follow each other (positive) move over seconds, which
    per-window edge errors do not: the work's cost, or something in the meter as slow.
    Pairs are windows of the row next to each other in time (others may lie between them when
    the stream mixes lengths) that took the same reference (one unbroken stream).
    """
    runs = sorted((t for t in ok if t.mode == "warm"), key=lambda t: t.unit["t0_s"])
    pairs = [(a.err, b.err) for a, b in itertools.pairwise(runs) if a.ref is b.ref]
    if len(pairs) < 5:
        return {}
    x, y = np.array(pairs).T
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return {}
    return {"err_lag1_r": float(np.corrcoef(x, y)[0, 1]), "err_lag1_pairs": len(pairs)}


def _dist(values) -> dict | None:
    v = np.array([x for x in values if x is not None], dtype=float)
    if not v.size:
        return None
    return {
        "n": int(v.size),
        "median": float(np.median(v)),
        "p95": float(np.percentile(v, 95)),
        "max": float(v.max()),
    }


def _within(g: dict) -> str:
    share = g.get("nvmeter_within_5ms")
    return "within 5 ms: -" if share is None else f"within 5 ms: {share:.0%}"


def _parts(g: dict) -> str:
    """The entry's and the exit's parts' medians and maxima, ms, where the record timed them."""
    text = ""
    for key, name in (("enter_parts_ms", "entry"), ("exit_parts_ms", "exit")):
        parts = g.get(key) or {}
        shown = [f"{k.removesuffix('_ms')} {d['median']:.2f}/{d['max']:.2f}" for k, d in parts.items() if d]
        text += f"; {name}'s parts, median/max ms: {', '.join(shown)}" if shown else ""
    return text


def _part_dists(warm: list[dict], key: str, parts: tuple[str, ...]) -> dict:
    """Each part's distribution over the windows that timed it (none before the record did)."""
    timed = [u[key] for u in warm if key in u]
    return {part: _dist(t[part] for t in timed) for part in parts} if timed else {}


def gaps(kd: KindData) -> dict:
    """Warm windows: the gap before entry and nvmeter's own time at entry and exit, ms."""
    warm = [t.unit for t in kd.trials if t.mode == "warm"]
    meter = [u["enter_ms"] + u["exit_ms"] for u in warm]
    gap = [u.get("gap_before_entry_ms") for u in warm]
    return {
        "gap_before_entry_ms": _dist(gap),
        "gap_within_10ms": _share([g <= 10.0 for g in gap if g is not None]),
        "enter_ms": _dist(u["enter_ms"] for u in warm),
        "exit_ms": _dist(u["exit_ms"] for u in warm),
        "nvmeter_ms": _dist(meter),
        "nvmeter_within_5ms": _share([x <= 5.0 for x in meter]),
        # where the entry's time went (records from before the parts were timed have none)
        "enter_parts_ms": _part_dists(
            warm, "enter_parts_ms", ("sync_ms", "idle_ms", "samples_ms", "edge_ms")
        ),
        "exit_parts_ms": _part_dists(warm, "exit_parts_ms", ("sync_ms", "edge_ms")),
        "unbroken_lead_s_min": min((u.get("unbroken_s", 0.0) for u in warm), default=None),
        "lead_calls_total": sum(u.get("lead_calls", 0) for u in warm),
    }


def overhead(kd: KindData) -> dict:
    """Work time per call in warm windows against the references (and calls outside windows)."""
    warm = [t for t in kd.trials if t.mode == "warm"]
    if not warm or not kd.refs:
        return {}
    win_ms = sum(t.m.work_s for t in warm) / sum(t.m.calls for t in warm) * 1e3
    ref_work = [r.unit for r in kd.refs if not r.isolated]
    ref_ms = sum(u["t1_s"] - u["t0_s"] for u in ref_work) / sum(u["calls"] for u in ref_work) * 1e3
    call_in = [x for t in warm for x in t.unit.get("call_ms", [])]
    call_ref = [x for u in ref_work for x in u.get("call_ms", [])]
    free = kd.part.get("free_call_ms") or []
    return {
        "ms_per_call_windows": win_ms,
        "ms_per_call_refs": ref_ms,
        "overhead": win_ms / ref_ms - 1,
        "call_ms_median_windows": float(np.median(call_in)) if call_in else None,
        "call_ms_median_refs": float(np.median(call_ref)) if call_ref else None,
        "call_ms_median_outside": float(np.median(free)) if free else None,
    }


def board_state(kd: KindData) -> dict:
    """Temperatures, SM clocks and how often the power cap held the clocks, over every window edge."""
    states = [
        s
        for u in kd.part["units"]
        for s in (u.get("state_before"), u.get("state_after"))
        if isinstance(s, dict) and s
    ]
    temps = [s["temperature_c"] for s in states if isinstance(s.get("temperature_c"), (int, float))]
    clocks = [s["sm_clock_mhz"] for s in states if isinstance(s.get("sm_clock_mhz"), (int, float))]
    reasons = [s["clock_event_reasons"] for s in states if isinstance(s.get("clock_event_reasons"), int)]
    return {
        "edges": len(states),
        "temperature_c": [min(temps), max(temps)] if temps else None,
        "sm_clock_mhz_median": float(np.median(clocks)) if clocks else None,
        "power_cap_share": _share([r >= 0 and bool(r & SW_POWER_CAP) for r in reasons]) if reasons else None,
    }


def detector(kd: KindData) -> dict | None:
    """How the Measurement's own ``transient`` flag agrees with the trial type (None if it has none)."""
    out: dict = {}
    for t in kd.trials:
        flag = getattr(t.m, "transient", None) if t.m is not None else None
        if flag is None or t.mode == "zeus":
            continue
        cell = out.setdefault(t.mode, {"transient": 0, "steady": 0})
        cell["transient" if flag else "steady"] += 1
    return out or None


def summarize_kind(kd: KindData) -> dict:
    """Every figure of one kind."""
    rows: dict = {}
    for mode in MODES:
        keys = sorted({t.key for t in kd.trials if t.mode == mode}, key=str)
        for key in keys:
            trials = [t for t in kd.trials if t.mode == mode and t.key == key]
            rows[f"{mode}@{key}"] = {"mode": mode, "window": key, **row_stats(trials)}
    ref_mj = [r.per_call_mj for r in kd.refs if not r.isolated]
    return {
        "work": kd.work,
        "idle": {"power_w": kd.idle.power_w, "err_w": kd.idle.err_w, "spans": kd.idle_spans},
        "references": [
            {
                "id": r.id,
                "t_s": r.t_s - kd.refs[0].t_s,
                "per_call_mj": r.per_call_mj,
                "bound_rel": r.per_call_mj_err / abs(r.per_call_mj),
                "temperature_c": list(r.temps),
                "work_ms_per_call": r.work_ms_per_call,
                "isolated": r.isolated,
                "encloses": len(r.unit.get("encloses", [])),
            }
            for r in kd.refs
        ],
        "reference_spread": float(np.ptp(ref_mj) / np.mean(ref_mj)) if len(ref_mj) > 1 else None,
        "trials": len(kd.trials),
        "trials_without_ref": sum(1 for t in kd.trials if not t.ref_ok),
        "rows": rows,
        "pooled_windows": row_stats(
            [t for t in kd.trials if t.mode in WINDOW_MODES and 0.25 <= (t.key or 0) <= 4.0]
        ),
        "gaps": gaps(kd),
        "overhead": overhead(kd),
        "state": board_state(kd),
        "detector": detector(kd),
        "skipped": len(kd.part.get("skipped", [])),
        "errors": [e.get("error") for e in kd.part.get("errors", [])],
        "done": kd.part.get("done", False),
    }


def analyze(paths: list[Path], model_version: int | None = None) -> dict:
    """Summaries of every kind in every file: ``{"files": {path: {"board", "kinds": {...}}}}``."""
    out: dict = {"files": {}}
    for path in paths:
        rec = load(path)
        kinds = {}
        for name, part in rec["kinds"].items():
            if not part["idle_spans"]:
                continue
            kinds[name] = summarize_kind(kind_data(rec, name, model_version))
        out["files"][str(path)] = {
            "board": rec["board"].get("uuid"),
            "zeus": rec["runs"][-1].get("zeus") if rec.get("runs") else None,
            # the trials' window exit (references always wait); files before it waited
            "exit": ",".join(sorted({r.get("config", {}).get("exit", "wait") for r in rec.get("runs", [])})),
            "kinds": kinds,
        }
    return out


def _pct(x, digits: int = 2) -> str:
    return "-" if x is None else f"{x * 100:.{digits}f}%"


def _frac(share, n) -> str:
    return "-" if share is None else f"{round(share * n)}/{n}"


def _without_ref(kind: dict) -> str:
    """How many trials had no reference to judge them, and in which rows (``"0"``, ``"20 (single)"``)."""
    rows = {
        f"{r['mode']} {r['window']:g} s" if isinstance(r["window"], float) else r["mode"]: r["n_without_ref"]
        for r in kind["rows"].values()
        if r["n_without_ref"]
    }
    total = kind["trials_without_ref"]
    return f"{total} ({', '.join(f'{n} {row}' for row, n in rows.items())})" if rows else str(total)


def _call_time_note(row: dict) -> str:
    if "err_vs_call_time_r" not in row:
        return ""
    return (
        f" Warm 0.5 s errors against the windows' call time (per call, against the reference's; SD "
        f"{_pct(row['call_time_dev_sd'])}): slope {row['err_vs_call_time_slope']:+.2f}, r "
        f"{row['err_vs_call_time_r']:+.2f}"
        + (f"; from one window to the next: r {row['err_lag1_r']:+.2f}" if "err_lag1_r" in row else "")
        + (
            f"; against their mean SM clock (SD {_pct(row['sm_clock_dev_sd'])}): slope "
            f"{row['err_vs_sm_clock_slope']:+.2f}, r {row['err_vs_sm_clock_r']:+.2f}"
            if "err_vs_sm_clock_r" in row
            else ""
        )
        + "."
        + (
            f" The sample buffer read the same windows with SD {_pct(row['samples_err_sd'])} against"
            f" the reference (nvmeter: {_pct(row['err_sd'])}; r {row['err_vs_samples_r']:+.2f}); the"
            f" two readings differ by SD {_pct(row['counter_vs_samples_sd'])}."
            if "err_vs_samples_r" in row
            else ""
        )
        + (
            f" Windows whose start step fell in a call's first fifth read"
            f" {row['err_start_early']['mean'] * 100:+.2f}% on average ({row['err_start_early']['n']}),"
            f" in its last fifth"
            f" {row['err_start_late']['mean'] * 100:+.2f}% ({row['err_start_late']['n']})."
            if "err_start_early" in row
            else ""
        )
        + _step_log_note(row)
    )


def _step_log_note(row: dict) -> str:
    n_none = row.get("logged_without_span_n", 0)
    one = n_none == 1
    without = f" {n_none} logged window{'' if one else 's'} found no step inside {'it' if one else 'them'}."
    without = without if n_none else ""
    if "logged_n" not in row:
        return f" Step log:{without}" if without else ""
    span = (
        f" the counter alone over the steps inside them {_frac(row['span_within_1pct'], row['span_n'])}"
        f" (max {_pct(row['span_max_abs_err'])})"
        if "span_n" in row
        else ""
    )
    n_off = row.get("unlogged_n")
    unlogged = (
        f"; the {n_off} that did not log: {_frac(row['unlogged_within_1pct'], n_off)},"
        f" median {row['unlogged_median_err'] * 100:+.2f}%"
        if n_off
        else ""
    )
    n = row["logged_n"]
    return (
        f" Step log: within ±1%, of {n} logged windows nvmeter {_frac(row['logged_within_1pct'], n)}"
        f" (median {row['logged_median_err'] * 100:+.2f}%),{span}{unlogged}.{without}"
    )


def markdown(summary: dict) -> str:
    """One table per kind for docs/window-log.md (median / max |error|; bounds holding; within ±1%)."""
    lines = []
    for path, f in summary["files"].items():
        for name, k in f["kinds"].items():
            lines += [
                f"### {name} ({path}, board {f['board'][:12]}…, exit {f.get('exit', 'wait')})",
                "",
                f"{k['work'].get('description', '')}; references: {len(k['references'])}, spread "
                f"{_pct(k['reference_spread'])}; idle {k['idle']['power_w']:.1f} ± "
                f"{k['idle']['err_w']:.2f} W.",
                "",
                "| trials | window | n | median / max \\|error\\| | median error | bound holds "
                "| within ±1% | median bound | reference's bound |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            ]
            for row in k["rows"].values():
                n = row["n"]
                window = f"{row['window']:g} s" if isinstance(row["window"], float) else row["window"]
                lines.append(
                    f"| {row['mode']} | {window} | {n} "
                    f"| {_pct(row['median_abs_err'])} / {_pct(row['max_abs_err'])} "
                    f"| {_pct(row['median_err'])} | {_frac(row['bound_contains'], n)} "
                    f"| {_frac(row['within_1pct'], n)} "
                    f"| {_pct(row.get('median_bound_rel'))} | {_pct(row.get('median_ref_bound_rel'))} |"
                )
            g, o = k["gaps"], k["overhead"]
            meter = g.get("nvmeter_ms") or {}
            gap = g.get("gap_before_entry_ms") or {}
            warm = (
                f"Warm windows: gap before entry median {gap['median']:.2f} ms (max {gap['max']:.2f}); "
                f"nvmeter's own time at entry and exit median {meter.get('median', math.nan):.2f} ms "
                f"(max {meter.get('max', math.nan):.2f}; {_within(g)}){_parts(g)}. "
                if "median" in gap
                else "No warm windows. "  # a run of measure() alone (--only measure)
            )
            lines += [
                "",
                f"{warm}Overhead {_pct(o.get('overhead'), 3)} (work ms per call in windows against the "
                f"references). Trials without a reference within 60 s and ±1 °C: {_without_ref(k)}."
                + _call_time_note(k["rows"].get("warm@0.5", {})),
                "",
            ]
    return "\n".join(lines)


# the cells of issue 10's targets, pooled across boards: the label and the summary row behind it
_POOLED_CELLS = (
    ("windows 0.25-4 s", "pooled_windows"),
    ("warm 0.5 s", "warm@0.5"),
    ("single call", "single@single"),
    ("single call, isolated reference", "single_iso@single"),
    ("measure()", "measure@measure"),
)


def pooled(summary: dict, fit_files: tuple[str, ...] = ()) -> dict:
    """Per kind and cell, trials summed over every file but ``fit_files`` (the out-of-sample boards).

    Returns {kind: {cell: {"n", "bound", "within_1pct", "within_2pct", "max_abs_err", "boards", "trials"}}}:
    counts of trials with a reference (within 60 s and ±1 °C), the largest |error| among them, the
    boards, and each trial's [error, bound, bound held, board] (error and bound relative).
    """
    trials: dict[str, dict[str, list]] = {}
    for path, f in summary["files"].items():
        if Path(path).name in fit_files or path in fit_files:
            continue
        for kind, k in f["kinds"].items():
            for label, key in _POOLED_CELLS:
                row = k["pooled_windows"] if key == "pooled_windows" else k["rows"].get(key)
                if row and row.get("n"):
                    cell = trials.setdefault(kind, {}).setdefault(label, [])
                    cell += [[*tr, f["board"]] for tr in row["trials"]]
    return {kind: {label: _pooled_cell(c) for label, c in cells.items()} for kind, cells in trials.items()}


def _pooled_cell(trials: list) -> dict:
    """One pooled cell's counts from its trials ([error, bound, bound held, board] each)."""
    errs = np.abs([tr[0] for tr in trials])
    return {
        "n": len(trials),
        "bound": sum(1 for tr in trials if tr[2]),
        "within_1pct": int(np.sum(errs <= 0.01)),
        "within_2pct": int(np.sum(errs <= 0.02)),
        "max_abs_err": float(errs.max()),
        "boards": list(dict.fromkeys(tr[3] for tr in trials)),
        "trials": trials,
    }


def pooled_markdown(pool: dict) -> str:
    """The pooled table: per kind and cell, trials, boards, bounds held, within ±1% and ±2%, max |error|."""
    lines = [
        "| kind | cell | trials | boards | bound holds | within ±1% | within ±2% | median error "
        "| max \\|error\\| |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind, cells in pool.items():
        for label, c in cells.items():
            n = c["n"]
            median = f"{float(np.median([tr[0] for tr in c['trials']])) * 100:+.2f}%"
            lines.append(
                f"| {kind} | {label} | {n} | {len(c['boards'])} | {c['bound']}/{n} ({c['bound'] / n:.0%}) "
                f"| {c['within_1pct']}/{n} | {c['within_2pct']}/{n} | {median} | {_pct(c['max_abs_err'])} |"
            )
    return "\n".join(lines)
