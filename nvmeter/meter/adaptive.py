"""`measure()`: meter a call back to back until its bound reaches a target; `measure_many()`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from nvmeter import errors
from nvmeter.boards.factory import open_board
from nvmeter.boards.protocol import Board
from nvmeter.meter.baseline import IdleBaseline, measure_quiescent
from nvmeter.meter.measurement import Measurement
from nvmeter.meter.sync import Sync, resolve
from nvmeter.meter.window import EnergyWindow

# measure()'s unmetered calls before its windows: past the clocks' ~0.3 s ramp after idle,
# with margin (results/window-accuracy-h200.json).
WARMUP_S = 0.5
# Calls in a row that leave the board's clock where it was before measure() gives up.
_STUCK_CALLS = 10_000


def measure(
    fn: Callable[[], object],
    *,
    min_window_s: float = 0.5,
    target_rel_err: float = 0.01,
    max_window_s: float = 30.0,
    warmup_s: float = WARMUP_S,
    device: int | str | Board | None = 0,
    idle: str | Path | float | IdleBaseline = "measure",
    sync: str | Sync | None = None,
    control: bool | Callable[[], object] = False,
) -> Measurement:
    """Run ``fn`` back to back until the window's bound reaches ``target_rel_err``.

    Order: idle (``"measure"``: one quiescent span now and one at the end, so no window
    starts cold because of it), the control window, ``warmup_s`` of unmetered calls,
    then windows from ``min_window_s``, doubling (up to ``max_window_s``) while the
    bound is wider than ``target_rel_err`` of the per-call energy.

    Args:
        fn: The call to meter (no arguments).
        min_window_s: First window length, s.
        target_rel_err: Accepted relative bound on the per-call energy; it cannot go
            below the error model's ``state_rel`` (0.4% in model 1), the board's own
            window-to-window variation.
        max_window_s: Longest window tried, s.
        warmup_s: Unmetered calls for this long first, s (at least one call): the clocks
            ramp for ~0.3 s after idle (results/window-accuracy-h200.json).
        device: As for :class:`EnergyWindow`.
        idle: As for :class:`EnergyWindow`.
        sync: As for :class:`EnergyWindow`.
        control: Also meter a null call (``True``: ``lambda: None``; or the null call
            to use) and subtract its per-call cost.

    Returns:
        The last window's :class:`Measurement` (marked not reliable if the target was
        not reached by ``max_window_s``).

    Raises:
        UsageError: non-positive durations or error target.
    """
    if not (min_window_s > 0 and max_window_s >= min_window_s and target_rel_err > 0 and warmup_s >= 0):
        raise errors.UsageError(
            "measure needs min_window_s > 0, max_window_s >= min_window_s, target_rel_err > 0 "
            "and warmup_s >= 0"
        )
    board = open_board(device)
    sync_fn, _ = resolve(sync)
    before = measure_quiescent(board) if idle == "measure" else None
    window_idle = IdleBaseline.from_spans([before], "quiescent") if before else idle
    null = None
    if control:
        null_fn = control if callable(control) else (lambda: None)
        null = _run_window(null_fn, board, min_window_s, window_idle, sync, None, None)
    _warm_up(fn, board, warmup_s, sync_fn)
    window_s = min_window_s
    spans = [before]
    while True:
        result = _run_window(fn, board, window_s, window_idle, sync, null, target_rel_err)
        idled = before is not None and (result.reliable or window_s * 2 > max_window_s)
        if idled:
            # the idle after the work can widen the bound: judge the window with both spans
            spans.append(measure_quiescent(board))
            window_idle = IdleBaseline.from_spans(spans, "quiescent")
            null = null and replace(null, idle=window_idle)
            result = _with_control(replace(result, idle=window_idle), null)
        if result.reliable or window_s * 2 > max_window_s or result.problems:
            return result
        if idled:
            _warm_up(fn, board, warmup_s, sync_fn)  # the idle span cooled the board
        window_s *= 2


def _calls_for(fn, board: Board, seconds: float, on_call=lambda: None) -> None:
    """Call ``fn`` back to back (at least once) until ``seconds`` of the board's clock have passed.

    Raises:
        UsageError: ``fn`` does not advance the clock (a simulated board's virtual clock
            moves only when the call spends time on it), so the loop would never end.
    """
    now = board.clock.now()
    end = now + seconds
    stuck = 0
    while True:
        before = now
        fn()
        on_call()
        now = board.clock.now()  # one clock read a call, as a plain timed loop
        stuck = stuck + 1 if now == before else 0
        if stuck >= _STUCK_CALLS:
            raise errors.UsageError(
                f"{_STUCK_CALLS:,} calls did not advance the board's clock: on a simulated board the "
                "call (and a control's null call) must spend virtual time, e.g. board.clock.sleep(s)"
            )
        if now >= end:
            return


def _warm_up(fn, board: Board, warmup_s: float, sync_fn) -> None:
    _calls_for(fn, board, warmup_s)
    sync_fn()


def _with_control(result: Measurement, null: Measurement | None) -> Measurement:
    if null is None:
        return result
    return replace(result, control_mj=null.per_call_mj, control_err_mj=null.per_call_mj_err)


def _run_window(fn, board, window_s, idle, sync, null, max_rel_err) -> Measurement:
    with EnergyWindow(board, idle=idle, sync=sync, max_rel_err=max_rel_err) as w:
        _calls_for(fn, board, window_s, w.call)
    return _with_control(w.result, null)


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
