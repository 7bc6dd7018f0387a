"""The energy counter's steps inside a trial's window, polled sparsely (``run --step-log``).

A diagnostic for the next error model, not part of the meter. A window's figure takes the
counter between two steps and cuts the rest from the ~20 ms samples; on the duty-cycled
call those cuts carry the scatter (docs/window-log.md, "Noticed, not used"). The counter alone
over a span of whole counter periods *inside* the window would need the steps between its
edges, which the meter does not poll for. This log does, sparsely: after the window's own
start poll is done it sleeps until ``GUARD_S`` before the next step is due (the steps come
every ``period_s``, results/probe-h200.json) and polls back to back only until the step, so
it polls 15-17% of the time on the simulated board (2 s logs, five seeds) and draws that
share of the polling artefact (2.8 W on the H200 when polled back to back,
results/probe-h200.json). The bench logs every other warm trial,
so the analysis can tell the log's own cost from the windows' scatter.

A simulated board's virtual clock moves only with its caller, so its log is replayed
afterwards (``SimulatedBoard.replay_counter_reads``), the reads a thread would have made,
none of them moving the clock (the trial under test is the same with or without its log).

A read that fails in the thread fails the trial at :meth:`StepLog.stop`, as a replayed one
does: a log cut short by it would read as a log that found fewer steps.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from nvmeter import errors
from nvmeter.meter.series import CounterSeries
from nvmeter.meter.span import SHARP_READS, aligned_edge

# Wake this long before the next step is due, s: the H200's steps come 103-104 ms apart with
# a jitter of a few ms (results/probe-h200.json); a late wake-up loses only that step.
GUARD_S = 0.012
# Give up on a step this long after waking, s (then poll on at once).
POLL_TIMEOUT_S = 0.06
# stop() waits this long for the thread's last read, s: one read takes ~3 ms on the H200, up to
# ~16 ms when slow (docs/facts.md); one that has not returned by then hangs in the driver.
STOP_WAIT_S = 1.0
# Until two steps in a row give the board's own period, wake this share of the profile's
# period after a step: the profile's figure may be a family default wider than the board's.
FIRST_WAKE_SHARE = 0.75
# The start poll normally finds its step within a counter period; wait for it at most its own
# time-out (the window's profile's edge_timeout_s, 0.35-0.5 s) and this much more, s.
START_MARGIN_S = 0.05


def start(board, window, period_s: float) -> StepLog:
    """A log of ``board``'s counter steps while ``window`` (an entered EnergyWindow) is open."""
    if hasattr(board, "replay_counter_reads") and hasattr(board.clock, "advance_to"):
        return _ReplayLog(board, window, period_s)
    return _ThreadLog(board, window, period_s)


class StepLog:
    """A running log; :meth:`stop` ends it and gives each step's reads as a CounterSeries dict."""

    def stop(self, t_end_s: float) -> list[dict]:
        """End the log at ``t_end_s`` (the block's end, s): the steps found before it.

        Raises:
            TelemetryError: a read of the log failed, or hangs.
        """
        raise NotImplementedError

    def cancel(self) -> None:
        """End the log, keeping nothing and raising nothing (the block raised: its error tells)."""


# A step found: (time s, half-width s, sharp).
Step = tuple[float, float, bool]


def _found(reads: CounterSeries) -> Step | None:
    """A poll's step, its narrowest where it saw several; None without one.

    Sharp as the meter's edges are (:data:`nvmeter.meter.span.SHARP_READS`): a slow read blurs
    a step to ~±8 ms (docs/facts.md), most of ``GUARD_S``.
    """
    i = reads.narrowest_step()
    if i < 0:
        return None
    t_s, half_s = float(reads.steps.t_s[i]), float(reads.steps.half_width_s[i])
    return t_s, half_s, bool(half_s <= SHARP_READS * np.median(reads.read_cost_s))


def _start_step(window, otherwise_s: float) -> Step:
    """The window's start step; at ``otherwise_s``, not sharp, where its poll has none (or is not in)."""
    start_ = getattr(window, "_start", None)
    if start_ is not None and not isinstance(start_, CounterSeries):
        start_ = start_.result() if start_.done() else None
    step = _found(start_) if start_ is not None else None
    return step or (otherwise_s, 0.0, False)


def _start_done(window) -> bool:
    """True once the window's own start poll is in (two pollers would blur each other's reads)."""
    start_ = getattr(window, "_start", None)
    return start_ is None or isinstance(start_, CounterSeries) or start_.done()


def _next_wake_s(steps: list[Step], profile_period_s: float) -> float:
    """When to wake for the step after ``steps`` (those found so far, the start's first), s.

    ``GUARD_S`` before it is due, counted in whole periods from the last sharp step, once the
    last two sharp steps in a row are one period apart (neither closer than half the profile's
    period nor further than its one and a half); else early, from the earliest the last step
    can have been. A blurred step's midpoint is not counted from: its error took most of the
    guard (or of the early wake's margin), and the log then missed the next step.
    """
    period_s = _period_s(steps, profile_period_s)
    last_s, last_half_s, _ = steps[-1]
    if period_s is None:
        return last_s - last_half_s + FIRST_WAKE_SHARE * profile_period_s
    anchor_s = next(t_s for t_s, _, is_sharp in reversed(steps) if is_sharp)
    due_s = anchor_s + (round((last_s - anchor_s) / period_s) + 1) * period_s
    return due_s - GUARD_S


def _period_s(steps: list[Step], profile_period_s: float) -> float | None:
    """The board's own period: the spacing of the last two sharp steps in a row (None: not one period)."""
    for (a_s, _, a_sharp), (b_s, _, b_sharp) in reversed(list(itertools.pairwise(steps))):
        if a_sharp and b_sharp:
            return b_s - a_s if 0.5 < (b_s - a_s) / profile_period_s < 1.5 else None
    return None


def _kept(polls: list[CounterSeries], t_end_s: float) -> list[dict]:
    """Each poll that saw a step ending before ``t_end_s``, as a CounterSeries dict."""
    return [p.to_dict() for p in polls if len(p.steps) and p.t1_s[-1] <= t_end_s]


class _ThreadLog(StepLog):
    def __init__(self, board, window, period_s: float) -> None:
        self._board, self._window, self._period_s = board, window, period_s
        self._polls: list[CounterSeries] = []
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nvmeter-steplog", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._log()
        except BaseException as exc:  # raised by stop(): a thread's error is otherwise only printed
            self._error = exc

    def _log(self) -> None:
        clock = self._board.clock
        profile = getattr(self._window, "profile", None)
        waited = clock.now() + getattr(profile, "edge_timeout_s", 0.35) + START_MARGIN_S
        while not _start_done(self._window) and clock.now() < waited and not self._stop.is_set():
            self._stop.wait(0.001)
        steps = [_start_step(self._window, clock.now())]
        wake_s = _next_wake_s(steps, self._period_s)
        while not self._stop.wait(max(0.0, wake_s - clock.now())):
            # ends after the read in progress once stopped: the block's end waits for the thread
            # (two pollers would blur each other's reads at the exit edge), and so its calls after
            # the block are not held back (up to POLL_TIMEOUT_S) in the logged trials alone
            reads = aligned_edge(self._board, clock, POLL_TIMEOUT_S, until=self._stop.is_set)
            self._polls.append(reads)
            found = _found(reads)
            if found:
                steps.append(found)
                wake_s = _next_wake_s(steps, self._period_s)
            else:  # none within the time-out: poll on at once
                wake_s = clock.now()

    def stop(self, t_end_s: float) -> list[dict]:
        self._stop.set()
        self._thread.join(STOP_WAIT_S)
        if self._error is not None:
            raise self._error
        if self._thread.is_alive():  # still inside a read: it would poll beside the exit edge
            raise errors.TelemetryError(f"a read of the step log did not return within {STOP_WAIT_S:g} s")
        return _kept(self._polls, t_end_s)

    def cancel(self) -> None:
        self._stop.set()
        self._thread.join(STOP_WAIT_S)


class _ReplayLog(StepLog):
    def __init__(self, board, window, period_s: float) -> None:
        self._board, self._window, self._period_s = board, window, period_s
        self._t0_s = board.clock.now()

    def stop(self, t_end_s: float) -> list[dict]:
        steps = [_start_step(self._window, self._t0_s)]
        t_s, polls = _next_wake_s(steps, self._period_s), []
        while t_s < t_end_s:
            # a poller no one waits for: the clock stays (a slow last read moved it past the
            # block's end, up to ~10 ms, 4% of reads); a poll still under way at the end is
            # dropped, as the thread's is
            timeout_s = min(POLL_TIMEOUT_S, t_end_s - t_s)
            reads = CounterSeries(*self._board.replay_counter_reads(t_s, timeout_s, wait=False))
            polls.append(reads)
            found = _found(reads)
            if found:  # as the thread does
                steps.append(found)
                t_s = _next_wake_s(steps, self._period_s)
            else:
                t_s = reads.t1_s[-1]
        return _kept(polls, t_end_s)
