"""`measure()`: meter a call back to back until its bound reaches a target; `measure_many()`."""

from __future__ import annotations

import inspect
import math
import numbers
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nvmeter import errors
from nvmeter.arguments import finite, flag
from nvmeter.boards.factory import open_board
from nvmeter.boards.profile import BoardProfile, resolve_profile
from nvmeter.boards.protocol import Board
from nvmeter.meter import contexts, errormodel, spread
from nvmeter.meter.baseline import IdleBaseline, idle_after, idle_of, quiet_span, unstepped
from nvmeter.meter.measurement import Measurement
from nvmeter.meter.sync import Sync, resolve
from nvmeter.meter.window import EnergyWindow

# measure()'s unmetered calls before its window: the error model's look-back for a pause (2 s:
# a power-capped H200's limiter swings for ~2 s after one, errormodel history 6) plus its
# transient_s (the clocks' ~0.3 s ramp after idle, results/window-accuracy-h200.json, with
# margin), so that the first window starts warm (a warm-up of 1 s before model 6).
_MODEL = errormodel.model(errormodel.CURRENT)
WARMUP_S = _MODEL.pause_lookback_s + _MODEL.transient_s
# settle="temperature": the temperature must hold within this band, °C, for this long, s
# (the H200 read 56 -> 60 °C over 20 s at its power limit, docs/facts.md) ...
SETTLE_BAND_C = 1.0
SETTLE_HOLD_S = 5.0
# ... and waiting stops here, s; also the longest cool-down accepted.
SETTLE_MAX_S = 300.0
# The stopping rule's allowance for where an edge's step lies, s (the Measurement's bound uses
# each step's own bracket).
EDGE_ALLOWANCE_S = 0.005
# The share of the target the stopping rule's estimate may reach where it decides alone (no
# provisional look follows): the rest for the cuts, power lag and fold shift it leaves out
# (a chosen margin, not fitted; too little for the duty-cycled call at 0.5 s: two H200 runs at
# 2% that it stopped ended with bounds of 2.05% and 2.33%, docs/window-log.md, call 16; looks
# end only in runs of ~20 s or more, whose edges weigh less).
ESTIMATE_SHARE = 0.75
# The share of the target a provisional bound may reach before the run stops: the rest is for
# the end edge, whose cut and bracket differ from the provisional one's (a chosen margin, not fitted).
PROVISIONAL_SHARE = 0.9
# The most of a run's time the provisional looks may take (each holds the next call back) ...
LOOK_SHARE = 0.02
# ... and the longest one, s: under half the error model's 50 ms pause (a look grows with the
# window, ~0.9 ms per second of it on CI's CPU; after a longer one the estimate alone decides).
LOOK_MAX_S = 0.02
# The longest run or warm-up measure() accepts, s: an hour of calls states any per-call cost.
MAX_S = 3600.0
# The most sub-windows measure() may be asked for: at the shortest window (a counter period or
# so) more would not fit in MAX_S.
MAX_WINDOWS = 10_000
# Calls in a row that leave the board's clock where it was before measure() gives up, or real
# seconds of them (both choices): a simulated call that sleeps in real time (time.sleep, not the
# board's clock) ran 53 s at 4 ms a call before 10,000 of it were counted (a new user's trial).
_STUCK_CALLS = 10_000
_STUCK_REAL_S = 2.0
# Calls in a row that each move the clock less than _TINY_S: no GPU call is that short (a device
# sync alone takes microseconds), and a simulated call of 1 ns would need 5e8 calls for 0.5 s.
_TINY_CALLS = 1_000_000
_TINY_S = 1e-6


@dataclass(frozen=True)
class MeasureProgress:
    """Where a ``measure()`` run is, as its ``progress`` callback is told.

    Attributes:
        phase: ``"idle"`` (a quiescent span, before or after), ``"control"``, ``"settle"``,
            ``"warm-up"``, ``"run"`` (the metered calls, said at each sub-window) or
            ``"stop"`` (the run has ended: the estimate that ended it, or ``max_window_s``).
        elapsed_s: The board's seconds since ``measure()`` began.
        run_s: The run's own seconds so far (``"run"`` and ``"stop"``; else 0): ``max_window_s`` caps it.
        calls: The metered calls so far (``"run"`` and ``"stop"``; else 0).
        subwindows: The sub-windows marked so far (``"run"`` and ``"stop"``; else 0).
        rel_err: The stopping rule's latest estimate of the relative bound, or None before
            it has one. The result's own bound is computed afresh at the end, with the last
            edge and idle span: it may differ a little (a new user read 1.55% at the stop and
            1.67% in the result).
        stopped: Why the run ended (``"stop"`` only; else empty): ``"target"`` (the bound fits
            it), ``"max_window_s"``, or ``"unreachable"`` (the parts of the bound that no run
            length narrows exceed the target).
        target_rel_err: The bound asked for.
        max_window_s: The longest run, s.
    """

    phase: str
    elapsed_s: float
    run_s: float = 0.0
    calls: int = 0
    subwindows: int = 0
    rel_err: float | None = None
    target_rel_err: float = math.nan
    max_window_s: float = math.nan
    stopped: str = ""

    def __str__(self) -> str:
        head = f"measure(): {self.phase} at {self.elapsed_s:.1f} s"
        if self.phase not in ("run", "stop"):
            return head
        bound = "no estimate yet" if self.rel_err is None else f"estimated bound ~{self.rel_err:.2%}"
        why = {
            "target": ": within the target",
            "max_window_s": ": at max_window_s",
            "unreachable": ": the target is out of reach at any run length",
        }.get(self.stopped, "")
        # the result's bound takes the end edge and idle span too: a new user read 3.85% here and 4.08% in it
        after = "; the result's bound adds the end edge and the idle after" if self.phase == "stop" else ""
        return (
            f"{head}: {self.run_s:.1f} s of at most {self.max_window_s:g}, {self.calls:,} "
            f"call{'' if self.calls == 1 else 's'}, "
            f"{self.subwindows} sub-window{'' if self.subwindows == 1 else 's'}, {bound} "
            f"(target {self.target_rel_err:.2%}){why}{after}"
        )


def measure(
    fn: Callable[[], object],
    *,
    min_window_s: float = 0.5,
    target_rel_err: float = 0.05,
    max_window_s: float = 30.0,
    warmup_s: float = WARMUP_S,
    min_windows: int = 3,
    device: int | str | Board | None = 0,
    idle: str | Path | float | IdleBaseline = "measure",
    sync: str | Sync | None = None,
    control: bool | Callable[[], object] = False,
    profile: BoardProfile | str | Path | None = None,
    settle: float | str | None = None,
    progress: Callable[[MeasureProgress], object] | None = None,
    others_idle: bool = False,
) -> Measurement:
    """Run ``fn`` back to back, in one uninterrupted run, until the bound reaches ``target_rel_err``.

    Order: idle (``"measure"``: one quiescent span now and one at the end), the control
    window, the optional ``settle``, ``warmup_s`` of unmetered calls, then one window of
    calls marked every ``min_window_s`` into sub-windows whose edges a poller finds inside
    the work (nothing idles the board). The window ends once it holds ``min_windows``
    sub-windows and an estimate of the bound, with the sub-windows' Student-t spread as its
    state part, is within ``target_rel_err`` of the per-call energy, or at ``max_window_s``, or
    as soon as the parts of the bound that no run length narrows (the floor: the board's run
    level under error model 13, 3% on an unprobed Hopper board, never under model 2's 0.7%; the
    idle's bound; the control's) exceed the target at the top of the
    net power's interval: the figure is then not reliable and its reason names the part.
    ``min_windows`` sets the shortest run.
    Once the estimate fits, the window's own bound as if it ended at the latest sub-window
    (:meth:`EnergyWindow.provisional`) must fit too: the estimate alone leaves out the
    reading part's cuts, power lag and fold shift (2 of 3 duty-cycled H200 runs at 2% stopped
    early just over the target without it: docs/window-log.md, call 16).

    ``fn`` is the unit of repetition: the figure is the run's energy over its calls, and the
    bound's state part is the spread of the sub-windows' power, which does not see calls that
    cost differently in turn. Work whose cost cycles over calls (gradient accumulation: three
    40 ms micro-steps, then a 300 ms optimizer step) read +11% outside bounds of ±1.5-1.6% when the
    run stopped part-way through a cycle (an adversarial review, docs/window-log.md): pass one
    whole cycle as ``fn``.

    Args:
        fn: The call to meter (no arguments); each call alike in cost (above).
        min_window_s: Length of a sub-window, s.
        target_rel_err: Accepted relative bound on the per-call energy. 5% by default: the
            floor of a run's state part is the board's run level (error model 13), 3% under
            the Hopper defaults (the run-level probe only widens it), and the idle either side
            adds its own. A profile whose run level its owner sets lower (``profile=``, on a
            board known to run at one level) brings the floor down to it, or to the error
            model's 0.7% (model 2, fitted on an H200) at the least, and 2% within reach.
        max_window_s: Longest run, s (default 30); a target not reached by then leaves the
            figure marked not reliable, with the bound it reached as the reason.
        warmup_s: Unmetered calls for this long first, s (at least one call; ``WARMUP_S``,
            2.5 s): a window that starts within the error model's 2 s look-back of a pause
            or of idle is transient (the clocks ramp for ~0.3 s after idle, and a power-capped
            H200's limiter swings for ~2 s after a pause; errormodel history 6).
        min_windows: Fewest sub-windows (at least 3: a spread needs them).
        device: As for :class:`EnergyWindow`.
        idle: As for :class:`EnergyWindow`.
        sync: As for :class:`EnergyWindow`.
        control: Also meter a null call (``True``: ``lambda: None``; or the null call
            to use) and subtract its per-call cost.
        profile: As for :class:`EnergyWindow`.
        settle: Before the warm-up, ``None`` (nothing), seconds of idle cool-down, or
            ``"temperature"``: call ``fn`` until the board's temperature has held within
            ``SETTLE_BAND_C`` for ``SETTLE_HOLD_S`` (at most ``SETTLE_MAX_S``).
        progress: Called with a :class:`MeasureProgress` as each phase begins and once per
            sub-window of the run (``progress=print`` prints a line each time). It runs
            between two calls, so it should be quick.
        others_idle: As for :class:`EnergyWindow`: other processes' contexts on the board did
            no work (else a run that finds one at its start or end is not reliable).

    Returns:
        The :class:`Measurement` of the run (marked not reliable if the target was not
        reached by ``max_window_s``, or where calls longer than a sub-window left fewer than
        ``min_windows`` of them); its ``subwindow_mj`` and ``drift`` describe the spread.

    Raises:
        UsageError: ``fn`` not callable (or async, a generator function, or in need of arguments),
            ``min_window_s`` under :data:`MIN_WINDOW_PERIODS` of the board's counter periods,
            non-positive durations, a bad target, ``min_windows`` < 3
            or more than fit in ``max_window_s`` (``(min_windows + 1) * min_window_s``), a bad ``settle``.
    """
    _check_arguments(min_window_s, target_rel_err, max_window_s, warmup_s, min_windows, settle)
    if not callable(fn):
        raise errors.UsageError(f"measure() takes the call to meter, a function of no arguments, not {fn!r}")
    if not (isinstance(control, bool) or callable(control)):
        raise errors.UsageError(f"control must be True, False or a callable null call, not {control!r}")
    _check_callable(fn, "fn")
    if callable(control):
        _check_callable(control, "control")
    if progress is not None and not callable(progress):
        raise errors.UsageError(f"progress must be a callable (e.g. print), not {progress!r}")
    flag(others_idle, "others_idle", errors.UsageError)
    board = open_board(device)
    prof = resolve_profile(profile, board.identity(), idle)
    if min_window_s < MIN_WINDOW_PERIODS * prof.counter_period_s:
        raise errors.UsageError(
            f"min_window_s {min_window_s:g} s is under {MIN_WINDOW_PERIODS:g} of the board's counter periods "
            f"({prof.counter_period_s:g} s each, {prof.source}): give at least "
            f"{MIN_WINDOW_PERIODS * prof.counter_period_s:.2g} s (the default 0.5 s stops soonest)"
        )
    sync_fn, _ = resolve(sync)
    sync_fn()  # the caller's work queued before: not the idle's (an EnergyWindow's entry does the same)
    if not others_idle:
        _warn_of_others(board)
    said = _Said(board, progress, target_rel_err, max_window_s)
    said("idle" if idle == "measure" else None)
    before = quiet_span(board, prof) if idle == "measure" else None
    window_idle = idle_of([before], prof) if before else idle
    null = None
    if control:
        said("control")
        null_fn = control if callable(control) else (lambda: None)
        null = _run_window(null_fn, board, min_window_s, window_idle, sync, prof)
    said("settle" if settle is not None else None)
    _settle(fn, board, settle, sync_fn)
    # imported now: the stopping rule's first look (the Student-t quantile, the fold's F-test)
    # would import it between two calls of the run, a pause of 0.6-1.2 s on CI's CPU
    import scipy.stats  # noqa: F401

    said("warm-up")
    _warm_up(fn, board, warmup_s, sync_fn)
    control_mj = (null.per_call_mj, null.per_call_mj_err) if null else (0.0, 0.0)
    floor_rel = errormodel.floor_rel(
        errormodel.model(errormodel.CURRENT), prof.run_level_or(board.identity().name)
    )
    stop = _Stop(min_window_s, min_windows, target_rel_err, max_window_s, floor_rel, control_mj)
    result = _run(fn, board, window_idle, sync, prof, stop, said)
    result = replace(result, problems=result.problems + _too_few(result, min_windows, min_window_s))
    if before is not None:
        said("idle")
        window_idle, problems = idle_after(board, before, prof, "work")
        null = null and replace(null, idle=window_idle)
        # the span after, too: the windows' own problems held the one before
        problems += tuple(p for p in unstepped(window_idle.spans) if p not in result.problems)
        result = replace(result, idle=window_idle, problems=result.problems + problems)
    return replace(_with_control(result, null), others_idle=others_idle)


def _warn_of_others(board: Board) -> None:
    """Say now, not after a run of up to ``max_window_s``, that another process's context will refuse it.

    A new user's trial (2026-12-07): every progress line read as usual, and only the result said so.
    """
    seen_pids, most = contexts.others((contexts.read(board),))
    if most:
        who = (
            f"process(es) {', '.join(map(str, seen_pids))}"
            if seen_pids
            else f"{most} process(es) not this one's"
        )
        warnings.warn(
            f"measure(): {who} hold a CUDA context on the board now: if they still do when the run starts "
            "or ends, its figure is not reliable, unless they do no work and you say so (others_idle=True)",
            errors.NvmeterWarning,
            stacklevel=3,
        )


# Each sub-window ends on a counter step. On the simulated H200 (its counter steps every 0.1 s; its
# profile, Hopper's defaults, says 0.12 s), 4 seeds each:
# 0.01 s and 0.13 s ran the full 30 s and ended not reliable (a breaker's trial and a review,
# 2026-12-07); 0.2-0.36 s ran 30 s to a reliable figure; 0.5 s stopped at 4.9-17.9 s. Two periods
# is a chosen floor between the failures and the first reliable runs, not fitted.
MIN_WINDOW_PERIODS = 2.0


def _check_callable(fn, name: str) -> None:
    """Refuse, before any idle or warm-up, a callable whose call runs nothing or cannot be made.

    A coroutine or generator function returns an object without running its body (the simulated
    board alone caught it, after 10,000 empty calls; a GPU would have metered them), and one that
    needs arguments failed with a bare TypeError after the idle (a breaker's trial, 2026-12-07).

    Raises:
        UsageError: naming the callable and how to wrap it.
    """
    said = getattr(fn, "__qualname__", None) or repr(fn)
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise errors.UsageError(
            f"measure()'s {name} {said} is async: calling it runs nothing; wrap it, "
            f"e.g. lambda: asyncio.run({said}())"
        )
    if inspect.isgeneratorfunction(fn):
        raise errors.UsageError(
            f"measure()'s {name} {said} is a generator function: calling it runs nothing; wrap it, "
            f"e.g. lambda: list({said}())"
        )
    try:
        inspect.signature(fn).bind()
    except TypeError as exc:
        raise errors.UsageError(
            f"measure() calls its {name} with no arguments, and {said} takes some ({exc}): wrap it, "
            "e.g. lambda: step(batch)"
        ) from None
    except ValueError:  # no signature to read (some builtins): called as given
        pass


def _is_number(x) -> bool:
    # numbers.Real takes numpy's scalars too: np.int64(1) read as out of range (a breaker)
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def _check_arguments(min_window_s, target_rel_err, max_window_s, warmup_s, min_windows, settle) -> None:
    # one argument a message, named with what came (one message for all four left a new user
    # guessing which of them was wrong); a target of 1 would accept a bound as large as the figure
    if not (_is_number(target_rel_err) and 0 < target_rel_err < 1):
        raise errors.UsageError(
            f"target_rel_err is a fraction in (0, 1), 0.05 for 5%; not {target_rel_err!r}"
        )
    if not (_is_number(min_window_s) and min_window_s > 0):
        raise errors.UsageError(
            f"min_window_s is a sub-window's length in seconds, over 0; not {min_window_s!r}"
        )
    for name, value in (("max_window_s", max_window_s), ("warmup_s", warmup_s)):
        finite(value, name, kind="number of seconds", minimum=0, maximum=MAX_S, error=errors.UsageError)
    if (
        isinstance(min_windows, bool)
        or not isinstance(min_windows, int)
        or not 3 <= min_windows <= MAX_WINDOWS
    ):
        raise errors.UsageError(
            f"min_windows must be a whole number from 3 to {MAX_WINDOWS}, not {min_windows!r}"
        )
    if _run_s_for(min_windows, min_window_s) > MAX_S:  # no max_window_s would do: say what to shorten
        raise errors.UsageError(
            f"min_window_s {min_window_s:g} s with min_windows {min_windows} needs a run of "
            f"{_run_s_for(min_windows, min_window_s):g} s, over measure's longest ({MAX_S:g} s): give a "
            "shorter min_window_s or fewer min_windows"
        )
    # 1e-9 for round-off (7 x 0.1 s is over 0.7 s)
    if _run_s_for(min_windows, min_window_s) > max_window_s * (1 + 1e-9):
        raise errors.UsageError(
            f"min_window_s {min_window_s:g} s with min_windows {min_windows} needs a max_window_s of at "
            f"least {_run_s_for(min_windows, min_window_s):g} s, not {max_window_s:g} (or give a shorter "
            "min_window_s)"
        )
    cool_down = _is_number(settle) and 0 <= settle <= SETTLE_MAX_S
    if settle is not None and settle != "temperature" and not cool_down:
        raise errors.UsageError(
            f"settle must be None, 'temperature' or seconds of cool-down in [0, {SETTLE_MAX_S:g}], "
            f"not {settle!r}"
        )


def _settle(fn, board: Board, settle, sync_fn) -> None:
    """Cool down for ``settle`` seconds, or run ``fn`` until the temperature holds still."""
    if settle is None:
        return
    if settle != "temperature":
        board.clock.sleep(float(settle))
        return
    start = board.clock.now()
    readings: list[tuple[float, float]] = []
    while board.clock.now() - start < SETTLE_MAX_S:
        _calls_for(fn, board, 0.5)
        sync_fn()
        state = board.state()
        readings.append((state.t_s, state.temperature_c))
        recent = [c for t, c in readings if t >= state.t_s - SETTLE_HOLD_S]
        held = readings[0][0] <= state.t_s - SETTLE_HOLD_S
        if not math.isfinite(state.temperature_c) or (held and max(recent) - min(recent) <= SETTLE_BAND_C):
            return


@dataclass(frozen=True)
class _Stop:
    """When measure()'s run ends.

    Attributes:
        window_s: A sub-window's length, s.
        min_windows: The fewest sub-windows.
        target: The accepted relative bound on the per-call energy less the control.
        max_s: The longest run, s.
        floor_rel: The state part's floor, share of the net power (:func:`errormodel.floor_rel`).
        control_mj: The control's per-call cost and its bound, mJ ((0, 0) without one).
    """

    window_s: float
    min_windows: int
    target: float
    max_s: float
    floor_rel: float
    control_mj: tuple[float, float] = (0.0, 0.0)


class _Said:
    """Tells ``measure()``'s progress callback (if any) where the run is."""

    def __init__(self, board: Board, progress, target: float, max_s: float) -> None:
        self._board, self._progress = board, progress
        self._t0 = board.clock.now()
        self._fixed = {"target_rel_err": target, "max_window_s": max_s}

    def __call__(self, phase: str | None, **run) -> None:
        """Say ``phase`` (None: nothing to say), with the run's figures (as :class:`MeasureProgress`)."""
        if self._progress is not None and phase is not None:
            self._progress(MeasureProgress(phase, self._board.clock.now() - self._t0, **run, **self._fixed))


def _run(fn, board, idle, sync, prof, stop: _Stop, said: _Said) -> Measurement:
    """One window of calls, marked every ``stop.window_s``, ended when its spread allows."""
    control_mj, control_err_mj = stop.control_mj
    window = EnergyWindow(
        board, idle=idle, sync=sync, max_rel_err=stop.target, profile=prof,
        control_mj=control_mj, control_err_mj=control_err_mj,
    )  # fmt: skip
    with window as w:
        start = board.clock.now()
        marks = calls = 0
        unseen = False  # a mark whose step the stopping rule has not looked at
        looks = _Looks(board)

        def on_call() -> bool:
            nonlocal marks, calls, unseen
            w.call()
            calls += 1
            elapsed = board.clock.now() - start
            if elapsed >= (marks + 1) * stop.window_s:
                w.mark()
                marks += 1
                unseen = True
                said("run", run_s=elapsed, calls=calls, subwindows=marks, rel_err=looks.rel_err)
            if elapsed >= stop.max_s:
                looks.why = "max_window_s"
                return True
            # the rule looks once the mark's step is in, so that a provisional window ends there
            # (at the mark itself it would end one sub-window back)
            if not (unseen and w.mark_found()):
                return False
            unseen = False
            return marks >= stop.min_windows and _spread_within(w, stop, looks, elapsed / calls)

        _calls_until(fn, board, on_call)
        ran_s = board.clock.now() - start
    # the look that ended the run had no line of its own (a new user's trial, 2026-12-07); said
    # after the exit, so that the callback's time is not the window's
    said("stop", run_s=ran_s, calls=calls, subwindows=marks, rel_err=looks.rel_err, stopped=looks.why)
    return w.result


class _Looks:
    """How often the stopping rule may build a provisional Measurement between two calls.

    Each look holds the next call back for as long as it takes (~35 ms at 1,000 calls on
    CI's CPU, most of it the fold): at most ``LOOK_SHARE`` of the run's time goes to them.
    """

    def __init__(self, board: Board) -> None:
        self._clock = board.clock
        self._next_s = -math.inf
        self.ended = False
        self.rel_err: float | None = None  # the stopping rule's latest estimate (for progress)
        self.why = ""  # why the run ended, once it has (for progress)
        # the quiet stretch's offset before the run that its bound holds, W, once a look read it
        # (error model 12, light calls only; no estimate sees it: they ran to max_window_s, a review)
        self.stretch_w: float | None = None

    def due(self) -> bool:
        return not self.ended and self._clock.now() >= self._next_s

    def took(self, cost_s: float) -> None:
        # a look longer than LOOK_MAX_S is a pause in the work: no more of them (the estimate decides)
        self.ended = cost_s > LOOK_MAX_S
        self._next_s = self._clock.now() + cost_s / LOOK_SHARE


def _spread_within(w: EnergyWindow, stop: _Stop, looks: _Looks, call_s: float) -> bool:
    """True when the sub-windows found so far, with the idle's error and the model's floor, fit the target.

    A look at the finished polls only; the Measurement's own bound decides reliability. The
    estimate must fit ``ESTIMATE_SHARE`` of the target where it decides alone (the looks have
    ended), all of it where a provisional look then checks. ``call_s`` is the mean call so
    far, s: the control's per-call cost and bound are over it in W. True also when the parts
    of the bound that no run length narrows exceed the target (:func:`_unreachable`).
    """
    steps = w.inner_steps()
    if len(steps) < stop.min_windows + 1:
        return False
    idle_w, idle_err_w = w.idle_at_entry
    model = errormodel.model(errormodel.CURRENT)
    mean = statistics.fmean(a for a, _ in spread.powers_above(steps, idle_w))
    halfwidth = spread.state_halfwidth_w(steps, idle_w, model)
    control_w, control_err_w = (mj / 1e3 / call_s for mj in stop.control_mj)
    net = mean - control_w
    if halfwidth is None:
        return False
    # a quiet stretch before the run is light calls' only (heavier warm-up calls break it): no look,
    # which holds the next call back, for calls that draw more than the model's ambiguous rise
    light = mean < model.drift_ambiguous_k * model.local_idle_band_w
    first = _first_look(w, looks) if light and looks.stretch_w is None and looks.due() else None
    idle_err_w += looks.stretch_w or 0.0
    if _unreachable(stop.floor_rel * mean + idle_err_w + control_err_w, net + halfwidth, stop.target):
        looks.why = "unreachable"
        return True
    if not net > 0:
        return False
    # the start edge: its bracket at the work's power; the end edge at idle (~5 ms each:
    # an H200 counter read takes ~3 ms, results/probe-h200.json)
    span_s = steps[-1][0] - steps[0][0]
    edges_w = EDGE_ALLOWANCE_S * (mean + 2 * idle_w) / span_s
    # the idle span after the work often reads higher than the one before (a warm board):
    # allow twice the error known so far
    rel = (halfwidth + stop.floor_rel * mean + 2 * idle_err_w + edges_w + control_err_w) / net
    looks.rel_err = rel
    if looks.ended:
        within = rel <= ESTIMATE_SHARE * stop.target
    elif rel > stop.target or not (first is not None or looks.due()):
        return False
    else:  # the first look's Measurement, where it was just made: a second would hold the run back
        began = time.perf_counter()
        within = _bound_within(w, stop.target, first)
        if first is None:
            looks.took(time.perf_counter() - began)
        if within is None:
            looks.why = "unreachable"
            return True
    looks.why = "target" if within else ""
    return within


def _first_look(w: EnergyWindow, looks: _Looks) -> Measurement | None:
    """The first provisional look (None: no mark's step yet), which sets ``looks.stretch_w``.

    The quiet stretch's offset the window's bound holds (error model 12) is a part no estimate
    sees; the look's Measurement also serves that round's bound check, which a second look would
    have pushed back by its cost over ``LOOK_SHARE`` (runs at the shortest ``max_window_s`` went
    to it and ended not reliable: a review, 2026-12-07).
    """
    began = time.perf_counter()
    m = w.provisional()
    looks.took(time.perf_counter() - began)
    looks.stretch_w = None if m is None else m.idle_stretch_w
    return m


def _run_s_for(windows: int, window_s: float) -> float:
    """The run that holds ``windows`` sub-windows of ``window_s``, s: the first mark opens the first."""
    return (windows + 1) * window_s


def _too_few(m: Measurement, min_windows: int, window_s: float) -> tuple[str, ...]:
    """A problem where the run ended with fewer sub-windows than its spread needs, else none.

    Calls longer than a sub-window hold marks back to the next call's end: two 20 s calls ran
    past a 30 s limit with one sub-window, and the figure read reliable at the model's prior
    state part, no spread behind it (a new user's trial, 2026-12-06).
    """
    found = len(m.subwindow_mj)
    if found >= min_windows:
        return ()
    call_s = m.work_s / m.calls if m.calls else math.nan
    return (
        f"{found} sub-window{'' if found == 1 else 's'} of the {min_windows} its spread needs "
        f"(calls of {call_s:.2f} s in {m.work_s:.1f} s): a max_window_s of at least "
        f"{_run_s_for(min_windows, max(call_s, window_s)) + 1:.0f} s, or EnergyWindow for a figure "
        "without the spread",
    )


def _unreachable(fixed_w: float, net_top_w: float, target: float) -> bool:
    """True when the bound's fixed parts, W, exceed ``target`` even of the net power's interval top, W.

    The fixed parts are those no longer run narrows: the model's floor, the idle's bound (the
    span after the work only widens it: :meth:`IdleBaseline.from_spans`) and the control's. Calls
    that draw ~0 above idle otherwise ran to ``max_window_s`` (30 s) to end not reliable just the
    same (a review, 2026-12-06); the figure's reason then names the part that decided.
    """
    return fixed_w > target * max(net_top_w, 0.0)


def _bound_within(w: EnergyWindow, target: float, m: Measurement | None = None) -> bool | None:
    """True when the window's own bound, were it to end at its latest sub-window, fits ``target``.

    None when its parts no run length narrows exceed ``target`` already (:func:`_unreachable`):
    the quiet stretch before light calls (error model 12) is one the estimate cannot see, and
    such a run went on to ``max_window_s`` (a review, 2026-12-07).

    The estimate above leaves out the reading part's cuts, power lag and fold shift; without
    this check two of three duty-cycled H200 runs at 2% stopped after ~3 s with bounds of
    2.05% and 2.33% (docs/window-log.md, call 16). The idle's part is counted twice (the span
    after the work joins it, and often reads higher); ``PROVISIONAL_SHARE`` of the target
    leaves room for the end edge, which falls elsewhere. Per call, less the control. ``m``: the
    provisional Measurement, where one was just made.
    """
    m = m or w.provisional()
    if m is None:  # no mark with a call before it has its step: nothing to judge yet
        return False
    figure_mj = abs(m.per_call_mj)  # less the control, whose bound per_call_mj_err holds
    # the idle's part as the window reads it (the quiet stretch before it too, error model 12)
    fixed_mj = m.idle_part_mj + m.floor_rel * figure_mj + m.control_err_mj
    if _unreachable(fixed_mj, figure_mj + m.per_call_mj_err, target):
        return None
    bound_mj = m.per_call_mj_err + m.idle_part_mj
    return figure_mj > 0 and bound_mj <= PROVISIONAL_SHARE * target * figure_mj


def _calls_for(fn, board: Board, seconds: float, on_call=lambda: None) -> None:
    """Call ``fn`` back to back (at least once) until ``seconds`` of the board's clock have passed."""
    end = board.clock.now() + seconds

    def done() -> bool:
        on_call()
        return board.clock.now() >= end

    _calls_until(fn, board, done)


def _calls_until(fn, board: Board, done: Callable[[], bool]) -> None:
    """Call ``fn`` back to back (at least once) until ``done()``, called after each call, says so.

    Raises:
        UsageError: ``fn`` does not advance the clock (a simulated board's virtual clock
            moves only when the call spends time on it), so the loop would never end.
    """
    now = board.clock.now()
    stuck = tiny = 0
    stuck_since = None  # real time of the first call that left the clock where it was
    while True:
        before = now
        fn()
        finished = done()
        now = board.clock.now()
        stuck = stuck + 1 if now == before else 0
        stuck_since = (stuck_since or time.monotonic()) if stuck else None
        tiny = tiny + 1 if now - before < _TINY_S else 0
        if stuck and (stuck >= _STUCK_CALLS or time.monotonic() - stuck_since >= _STUCK_REAL_S):
            real_s = time.monotonic() - stuck_since
            raise _never_ends(f"{stuck:,} calls in a row ({real_s:.1f} s of real time) did not advance")
        if tiny >= _TINY_CALLS:
            raise _never_ends(f"{_TINY_CALLS:,} calls each advanced by under {_TINY_S * 1e6:g} us")
        if finished:
            return


def _never_ends(what: str) -> errors.UsageError:
    return errors.UsageError(
        f"{what} the board's clock: on a simulated board the call (and a control's null call) must "
        "spend virtual time, e.g. board.clock.sleep(s)"
    )


def _warm_up(fn, board: Board, warmup_s: float, sync_fn) -> None:
    _calls_for(fn, board, warmup_s)
    sync_fn()


def _with_control(result: Measurement, null: Measurement | None) -> Measurement:
    if null is None:
        return result
    return replace(result, control_mj=null.per_call_mj, control_err_mj=null.per_call_mj_err)


def _run_window(fn, board, window_s, idle, sync, prof) -> Measurement:
    with EnergyWindow(board, idle=idle, sync=sync, profile=prof) as w:
        _calls_for(fn, board, window_s, w.call)
    return w.result


def measure_many(boards: Sequence[Board], block: Callable[[], int], **kwargs) -> list[Measurement]:
    """Meter one block on several boards at once; ``block`` returns its call count.

    Each board gets its own window (edges polled board after board, so each window
    brackets the whole block).

    Returns:
        One Measurement per board, in order; sum their ``above_idle_j`` for the total.
    """
    windows = [EnergyWindow(b, **kwargs) for b in boards]
    for w in windows:
        w.__enter__()
    calls = block()
    for w in reversed(windows):
        w._calls = calls
        w.__exit__(None, None, None)
    return [w.result for w in windows]
