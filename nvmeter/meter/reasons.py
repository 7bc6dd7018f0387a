"""Why a window's figure is not reliable, and what its reader should know, in words.

The Measurement's :attr:`~nvmeter.meter.measurement.Measurement.reason`, ``notes`` and repr are
read here from its figures: the first reason that applies of the readings themselves, the
caller's given figures, the telemetry's plausibility (:mod:`nvmeter.meter.sanity`), the idle,
and then the figure against its bound (:func:`figure_reason`, which every result with a bound
shares). Numbers are said with :func:`mj_text`, so a tiny figure never reads "0.0 ± 0.0".
"""

from __future__ import annotations

import math

from nvmeter.boards.profile import default_profile
from nvmeter.meter import contexts
from nvmeter.meter.sanity import SAMPLES_COUNTER_RATIO, plausible_w

# A tail and its profile's compared to a microsecond: both pass through JSON and the caller's arithmetic
TAIL_SLACK_S = 1e-6


def figure_reason(value: float, err: float, max_rel_err: float | None, unit: str) -> str | None:
    """Why a figure with its bound is not reliable, or None (shared by every result that has one).

    Args:
        value: The figure, mJ.
        err: Its bound, mJ.
        max_rel_err: The caller's accepted relative bound (None: any).
        unit: What the figure is per, for the message (``"a call"``, ``"a step"``).
    """
    if not (math.isfinite(value) and math.isfinite(err)):
        return "the figure or its bound is not a number (an idle or a control given is not one)"
    if err < 0:
        return "the bound is negative (an idle's or a control's given bound)"
    if value < -err:
        return f"{value:,.1f} mJ {unit} is below minus its bound: a control subtracted is more than it costs"
    rel = abs(err / value) if value else math.inf
    if max_rel_err is not None and rel > max_rel_err:
        shown, accepted = _percent(rel), _percent(max_rel_err)
        if shown == accepted:  # "bound 1.0% exceeds the accepted 1.0%" (a new user's trial, 2026-12-07)
            shown, accepted = f"{rel:.3%}", f"{max_rel_err:.3%}"
        # which setting accepted it, and the bound in mJ: ±1.3 mJ on calls that draw ~0 read as a
        # failure without either (a new user's trial, 2026-12-06)
        return (
            f"bound {shown} exceeds the accepted {accepted} (EnergyWindow's "
            f"max_rel_err, measure()'s target_rel_err): ±{mj_text(err)} mJ {unit}"
        )
    return None


def mj_text(value: float) -> str:
    """A figure in mJ to 0.1, or to three figures under 0.05 or past a billion J.

    10^12 calls read "0.0 ± 0.0" (a breaker's trial); a budget of 10^300 mJ printed 300 digits.
    """
    return f"{value:.3g}" if 0 < abs(value) < 0.05 or abs(value) >= 1e12 else f"{value:,.1f}"


def _percent(share: float) -> str:
    """A share as a percent with enough digits to tell it from 0 (0.01% read "0.0%": a breaker's trial)."""
    digits = 1 if share >= 0.001 or share == 0 else min(6, 1 - math.floor(math.log10(share * 100)))
    return f"{share:.{digits}%}"


def reason(m) -> str | None:
    """Why the Measurement ``m``'s figure is not reliable, or None.

    The first that applies of: the readings themselves, the caller's given figures, the
    telemetry's plausibility, the idle, then the figure against its bound.
    """
    for check in (_reading, _given, _telemetry, _idle, _others):
        if (why := check(m)) is not None:
            return why
    reason = figure_reason(m.per_call_mj, m.per_call_mj_err, m.max_rel_err, "a call")
    return reason and reason + _fixed_note(m) + _control_note(m)


def _reading(m) -> str | None:
    """The window's own readings: problems met, no calls, no time, no energy."""
    if m.problems:
        return "; ".join(m.problems)
    if not m.calls:
        return "no calls were declared (w.call() or calls=)"
    if m.model_version >= 2 and not m.work_s > 0:
        # the window's own length holds its edges' waits: "0.20 s" beside "no time passed" read as a
        # contradiction (a new user's trial)
        return (
            f"no time passed on the board's clock between the work's start and end (the window's "
            f"{m.window_s:.2f} s are its edges' waits; on a simulated board the work must spend virtual "
            "time, e.g. board.clock.sleep(s))"
        )
    if not math.isfinite(m.energy_j):
        return (
            "the sample buffer does not cover the window, or leaves a gap in it (it holds a few seconds: "
            "mark the calls with w.call(), which reads it between them; a call longer than that leaves "
            "a gap anyway: read it from the counter, method='aligned')"
            if m.method == "samples" or not math.isfinite(m.head_j + m.tail_j)
            else "the energy counter went backwards inside the window"
        )
    return None


def _given(m) -> str | None:
    """The caller's figures: a negative bound, a control that would add energy, a tail cut short."""
    if m.idle.err_w < 0 or m.control_err_mj < 0:
        return "a bound is negative (the idle's or the control's given bound)"
    if (short := _short_tail(m)) is not None:
        return short
    if m.control_mj + m.control_err_mj < 0:
        return (
            f"the control is negative ({m.control_mj:,.1f} ± {m.control_err_mj:,.1f} mJ a call): "
            "subtracting it adds energy the calls did not draw"
        )
    return None


def _short_tail(m) -> str | None:
    """A window whose energy runs past the work's end, ending sooner after it than its profile's tail.

    Error model 15. The profile's ``tail_s`` is the counter's step delay and the power's fall to
    idle: an end sooner loses the work's trailing energy, and the samples past it that tell a board
    running on. With ``tail_s=0`` single 20 ms calls at 550 W on the simulated H200 read -31 to -52%
    under method='samples', 7 of 8 outside their bounds and reliable (a breaker's trial,
    2026-12-07). An aligned or plain end polls on to the counter's next step, which may come late
    enough: that step, not the tail asked for, is what counts (a review: aligned windows with
    ``tail_s=0`` held their bounds). No committed window ended sooner.
    """
    if not m.model.tail_checked or m.end_found_in_work:
        return None
    waited_s = m.window_t1_s - m.work_t1_s  # method="samples" ends at the tail asked for
    if waited_s >= m.profile.tail_s - TAIL_SLACK_S:
        return None
    return (
        f"the window ended {waited_s * 1e3:.0f} ms after the work, sooner than the {m.profile.tail_s:g} s "
        f"its board's power takes to fall and its counter to follow ({m.profile.source}): the work's "
        f"trailing energy is not counted; leave tail_s at its default ({m.profile.tail_s:g} s) or longer"
    )


def _telemetry(m) -> str | None:
    """Counter and samples that no board reads: damaged records, a jumping counter."""
    most_w = plausible_w(m.device)
    if m.method != "samples" and m.power_w > most_w:
        return (
            f"the counter reads {m.power_w:,.0f} W over the window, more than this board can draw "
            f"({most_w:,.0f} W: twice its power limit): the counter jumped"
        )
    # every figure leans on the samples too (the edges' cuts, the samples' reading): an adversarial
    # review's samples x1000 (379 kW on a 700 W board) read as a reliable figure
    sample_w = max((s.power_w for s in m.samples), default=0.0)
    if sample_w > most_w:
        return (
            f"a power sample reads {sample_w:,.0f} W, more than this board can draw ({most_w:,.0f} W: "
            "twice its power limit): the samples are damaged"
        )
    ratio = m.samples_to_counter
    if ratio is not None and not 1 / SAMPLES_COUNTER_RATIO <= ratio <= SAMPLES_COUNTER_RATIO:
        return (
            f"the power samples read {ratio:.2f} times what the counter does between the window's "
            "steps: one sensor cannot disagree with itself so, the record is damaged"
        )
    return m._coverage_reason()


def _idle(m) -> str | None:
    """An idle that is not this board's: measured busy, above what the window or the lead-in drew."""
    if m.idle.busy:
        return (
            f"the idle was measured while the GPU ran kernels ({m.idle.busy_pct:.0f}% busy at the "
            f"end of a quiescent span: unsynchronised work, or another process's): "
            f"{m.idle_w:.1f} W is not this board's idle; synchronise first, or give the idle "
            "(idle=, nvmeter run --idle, pytest --energy-idle)"
        )
    # every model: model 1's records were judged without the figure checks, and a forged one
    # read -20,047.7 ± 503.7 mJ a call as a reliable PASS of its budget (an adversarial
    # review); none of the 216 committed model-1 windows moves
    if m.above_idle_j < -(m.err_j - m.under_level_held_j):  # model 14's under-idle part left out
        return (
            f"energy above idle {m.above_idle_j:.3f} J is below minus its bound: the idle "
            f"baseline ({m.idle_w:.1f} W, {m.idle.source}) is above what the window drew"
        )
    if (busy := _busy_after(m)) is not None:
        return busy
    if (below := m.quiet_below_idle) is not None:
        t_s, span_s, quiet_w = below
        where = (
            "before the window" if t_s < m.first_read_s
            else "inside the window" if t_s < m.work_t1_s else "after the window's work"
        )  # fmt: skip
        return (
            f"the board drew {quiet_w:.1f} W for {span_s:.2f} s {where}, under the idle "
            f"subtracted ({m.idle_w:.1f} ± {m.idle.err_w:.1f} W, {m.idle.source}): that idle is "
            "not this board's now (one with a CUDA context, for a process without one? a context opened "
            "just before the window reads so too: let it settle); measure it around the window (the "
            "default idle) or give the right one"
        )
    if m.lead_level_under_w > 0:  # error model 14: a steady level, shorter or shallower than the above
        level_w, length_s = m.lead_level
        return (
            f"the board drew {level_w:.1f} W steadily for {length_s:.1f} s before the window, under the idle "
            f"given ({m.idle.samples_w:.1f} ± {m.idle.err_w:.1f} W, {m.idle.source}): that idle is not this "
            "board's now; measure it around the window (the default idle) or give the right one"
        )
    return None


def _busy_after(m) -> str | None:
    """The board ran on past the work's end, in the window's energy (``Measurement.ran_on_after_work``)."""
    if not m.ran_on_after_work:
        return None
    after_w, work_w = m.after_work_w
    return (
        f"the board still drew {after_w:,.1f} W above idle from {m.profile.tail_s * 1e3:.0f} ms after the "
        f"work's end to the window's end (the work's own: {work_w:,.1f} W), and the window counts that as "
        "its calls: work it did not wait for (sync='none', another stream or device) or another process's; "
        "synchronise at the exit, or end the window inside the run of calls (exit='return')"
    )


def _others(m) -> str | None:
    """Other processes' contexts on the board at the window's entry or exit (:mod:`.contexts`)."""
    if m.others_idle or not (seen := _others_seen(m)):
        return None
    return (
        f"{seen} held a CUDA context on the board at the window's entry or exit: the counter counts "
        "their work as this window's; if they did none, say so (others_idle=True, nvmeter run "
        "--others-idle, pytest --energy-others-idle)"
    )


def _others_seen(m) -> str:
    """The other processes seen, in words ("" for none)."""
    pids, most = contexts.others(m.contexts)
    if not most:
        return ""
    if pids:
        return f"other process{'es' if len(pids) > 1 else ''} ({', '.join(map(str, pids))})"
    return f"{most} more process{'es' if most > 1 else ''} than this one and its children that loaded CUDA"


def _fixed_note(m) -> str:
    """Where the parts of the bound no run length narrows exceed an accepted bound, a note naming them.

    The error model's floor for a run of sub-windows and the idle's bound: calls that draw ~0
    above idle read "bound 2271%" with no word of why, or of what would not help, and a run
    that measure() stopped for them named neither (reviews, 2026-12-06). The control's has its
    own note.
    """
    figure = abs(m.per_call_mj)
    if m.max_rel_err is None or not figure > 0:
        return ""
    if m.subwindow_halfwidth_w is not None:
        floor = m.floor_rel
    else:  # a window's least state share is the run level where larger (model 13), whatever its length
        floor = m.run_level_rel if m.run_level_rel > m.model.state_rel else 0.0
    level = floor > m.model.state_floor_rel  # the board's run level set the floor (error model 13)
    if floor > m.max_rel_err:
        if level:
            alone = f"the board's run level alone, {floor:.1%}, is over the target at any run length"
            return f" ({alone}; {_level_source(m)})"
        return f" (under the error model's floor of {floor:.1%} for a run of sub-windows, at any length)"
    idle_rel = m.idle_part_mj / figure
    if floor + idle_rel <= m.max_rel_err:
        return ""
    idle = f"the idle's own bound, ±{m.idle_bound_w:.2f} W, {idle_rel:.1%} of the figure,"
    name = "the board's run level" if level else "the error model's floor"
    parts = f"{idle} and {name}, {floor:.1%}, exceed" if floor else f"{idle} exceeds"
    too_little = ": the calls draw too little above idle for it" if idle_rel > m.max_rel_err else ""
    source = f"; {_level_source(m)}" if level else ""
    return f" ({parts} the target at any run length{too_little}{source})"


def _level_source(m) -> str:
    """Where the run level came from (new users' trials and a breaker's, 2026-12-07)."""
    prof, family = m.profile, default_profile(m.device.name).run_level_rel
    if prof.run_level_rel in (None, family):
        return (
            "the run level is the family's default, the largest seen on its boards; a run-level probe "
            "widens it on a board with a larger one, and cannot narrow it (docs/probe.md)"
        )
    if "run_levels" in _probes_named(prof.source) and prof.run_level_rel > family:
        return "the run level is this board's own, probed, wider than its family's: runs differed that much"
    return f"the run level is the given profile's ({prof.source})"


def _probes_named(source: str) -> set[str]:
    """The probes a probe's profile says it took figures from (its source ends ``: name, name``).

    A profile file's is its writer's claim (taken as it stands), and a path may hold any word:
    only the list after the last colon counts (a breaker named a file ``my_run_levels.json``).
    """
    if "taken as it stands" in source:
        return set()
    return {name.strip() for name in source.rsplit(": ", 1)[-1].rstrip(")").split(",")}


def _control_note(m) -> str:
    """Where the control's bound alone takes most of an accepted bound, a note that says so."""
    figure = abs(m.per_call_mj)
    if m.max_rel_err is None or not figure > 0 or m.control_err_mj <= m.max_rel_err * figure / 2:
        return ""
    return (
        f" (the control's own bound is {m.control_err_mj / figure:.1%}: a lighter null call, "
        "or a looser target)"
    )


def describe(m) -> str:
    """The Measurement ``m`` in one line: figure, bound, calls, window, board, notes, and why not reliable."""
    # with no calls the per-call figure is nan: the window's whole energy is still worth saying
    figure = (
        f"{mj_text(m.per_call_mj)} ± {mj_text(m.per_call_mj_err)} mJ/call above idle "
        if m.calls
        else f"{m.above_idle_j:,.1f} ± {m.err_j:,.1f} J above idle in all, no calls declared "
    )
    calls = f"{m.calls:,} call{'' if m.calls == 1 else 's'}"
    text = figure + f"({calls}, {m.window_s:.2f} s, {m.device.short}"
    if m.method != "aligned":
        text += f", {m.method}"
    if m.transient:
        text += ", transient: " + _transient_note(m)
    if m.limited:
        limiting = next(s for s in m.states if s.limited)
        text += ", " + "+".join(limiting.reasons)
        if _cap_note(m):  # error model 10 set the state part: say from whose spread
            text += " (spread: " + ("probed" if m.profile.cap_spread else "family default") + ")"
    text += ")"
    changes = _given_level_note(m) + _change_notes(m)
    if changes:
        text += " [" + "; ".join(changes) + "]"
    why = m.reason  # every check of the window: once
    return text if why is None else f"{text} NOT RELIABLE: {why}"


def notes(m) -> tuple[str, ...]:
    """What a reader of the figure should know that its bound already covers, in words.

    Why the window is transient, how the board's state changed across it, and a
    significant drift: the warnings the repr carries, for summaries that show several
    Measurements on one line (a job's boards).
    """
    transient = ("transient: " + _transient_note(m),) if m.transient else ()
    return transient + _cap_note(m) + _given_level_note(m) + _change_notes(m)


def _given_level_note(m) -> tuple[str, ...]:
    """A run level given under the family's (a profile's owner's word, not a probe's), said where it narrowed.

    A breaker's trial (2026-12-07): a profile file with ``run_level_rel`` 0 switched error model 13
    off without a word, and a run at a second level read +2.58% at ±1.71%, reliable.
    """
    family = default_profile(m.device.name).run_level_rel or 0.0
    given = m.profile.run_level_rel
    if not m.model.run_level or given is None or given >= family:
        return ()
    return (f"run level {given:.1%} as the profile gives it, under the family's {family:.1%}",)


def _cap_note(m) -> tuple[str, ...]:
    """Where a limited window's state part came from (error model 10), when the spread set it."""
    model = m.model
    least = max(model.state_rel, m.run_level_rel)  # what the window's part is without the cap
    if m.calls == 0 or m.subwindow_halfwidth_w is not None or not m.state_rel > least:
        return ()
    measured = bool(m.profile.cap_spread)
    whose = (
        "this board's, probed"
        if measured
        else "the family's default; `nvmeter probe --cap-spread` measures it"
    )
    return (
        f"limited: state part ±{100 * m.state_rel:.1f}%, {model.cap_spread_k:g} x the spread at the "
        f"cap of a {m.work_s:.2f} s window ({whose})",
    )


def _change_notes(m) -> tuple[str, ...]:
    drift = m.drift
    significant = (repr(drift),) if drift is not None and drift.significant else ()
    drawn_j = m.profile.polling_artefact_w * m.foreign_read_s
    foreign = (
        (
            f"this process's other meters read the board's counter for {m.foreign_read_s:.2f} s "
            f"inside it: up to {drawn_j:,.1f} J of polling in the figure, held by its bound",
        )
        if m.foreign_read_s > 0
        else ()
    )
    others = _others_seen(m) if m.others_idle else ""
    said = (f"{others} held a context, taken as idle (others_idle=True)",) if others else ()
    if any(r.pids is None for r in m.contexts):  # MIG without the rights, some vGPUs (a review)
        said += (
            "other processes not checked: the board does not list its compute processes "
            "(or lists pids no process has)",
        )
    return tuple(m.state_changes) + significant + foreign + said + _idle_stretch_note(m)


# The share of the bound the quiet stretch's offset must take before a window's line names it: a
# chosen share (not fitted), where it is the largest part of a light call's bound or close to it.
IDLE_STRETCH_NOTE_SHARE = 0.25


def _idle_stretch_note(m) -> tuple[str, ...]:
    """Where the quiet stretch before the window (error model 12) takes much of the bound, what it is.

    And always where a steady level further from a given idle widened it (error model 14).
    """
    held_j = m.idle_stretch_w * m.window_s  # 0 before error model 12
    if m.lead_level_gap_w > abs(m.quiet_offset_w):  # error model 14's level, said whatever its share
        level_w, length_s = m.lead_level
        return (
            f"the board drew {level_w:,.1f} W steadily for {length_s:.1f} s before the window, "
            f"{level_w - m.idle.samples_w:+,.1f} W off the idle given: an idle that moved since, or "
            f"other work; {held_j:,.1f} J of the bound holds both (a fresh idle narrows it: idle='measure', "
            "an EnergyMonitor's measure_idle())",
        )
    if not held_j >= IDLE_STRETCH_NOTE_SHARE * m.err_j > 0:
        return ()
    how = (
        "calls that light, or an idle that moved: not moved" if m.drift_ambiguous else "the idle moved by it"
    )
    return (
        f"the board read {m.quiet_offset_w:+.1f} W against the idle right before the window ({how}); "
        f"{held_j:,.1f} J of the bound holds either reading",
    )


def _transient_note(m) -> str:
    """Why the window is transient, in a few words.

    ``gap 0.74 s`` after a pause; ``cold (idle >= 2.36 s)`` when no work shows in the history;
    ``a pause ended 1.77 s before the start`` when the work ran on since (model 6).
    """
    gap, since = m.gap_s, m.since_pause_s
    if not m.cold and not gap > m.model.pause_gap_s and since is not None:
        return f"a pause ended {since:.2f} s before the start"
    if not gap > 0:
        return "cold"
    if m._last_busy_s() is None:  # the whole sample history before the start was idle
        return f"cold (idle >= {gap:.2f} s)"
    return f"gap {gap:.2f} s"
