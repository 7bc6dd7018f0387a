"""The energy counter's steps inside a trial's window, polled sparsely (``run --step-log``).

A diagnostic for the next error model, not part of the meter. A window's figure takes the
counter between two steps and cuts the rest from the ~20 ms samples; on the duty-cycled
call those cuts carry the scatter (docs/window.md, "Noticed, not used"). The counter alone
over a span of whole counter periods *inside* the window would need the steps between its
edges, which the meter does not poll for. This log does, sparsely: after the window's own
start poll is done it sleeps until ``GUARD_S`` before the next step is due (the steps come
every ``period_s``, results/probe-h200.json) and polls back to back only until the step, so
it polls ~15% of the time and draws that share of the polling artefact (2.8 W on the H200
when polled back to back, results/probe-h200.json). The bench logs every other warm trial,
so the analysis can tell the log's own cost from the windows' scatter.

A simulated board's virtual clock moves only with its caller, so its log is replayed
afterwards (``SimulatedBoard.replay_counter_reads``), the reads a thread would have made.
"""

from __future__ import annotations

import threading

from nvmeter.meter.series import CounterSeries
from nvmeter.meter.span import aligned_edge

# Wake this long before the next step is due, s: the H200's steps come 103-104 ms apart with
# a jitter of a few ms (results/probe-h200.json); a late wake-up loses only that step.
GUARD_S = 0.012
# Give up on a step this long after waking, s (then poll on at once).
POLL_TIMEOUT_S = 0.06
# A replayed poll's last read may end this long past its time-out, s: one read (~3 ms on the
# H200, up to ~16 ms when slow: docs/facts.md; the simulated board's are the fast kind).
LAST_READ_S = 0.005
# Until two steps in a row give the board's own period, wake this share of the profile's
# period after a step: the profile's figure may be a family default wider than the board's.
FIRST_WAKE_SHARE = 0.75
# The start poll normally finds its step within a counter period; wait at most this long, s.
START_WAIT_S = 0.4


def start(board, window, period_s: float) -> StepLog:
    """A log of ``board``'s counter steps while ``window`` (an entered EnergyWindow) is open."""
    if hasattr(board, "replay_counter_reads") and hasattr(board.clock, "advance_to"):
        return _ReplayLog(board, window, period_s)
    return _ThreadLog(board, window, period_s)


class StepLog:
    """A running log; :meth:`stop` ends it and gives each step's reads as a CounterSeries dict."""

    def stop(self, t_end_s: float) -> list[dict]:
        """End the log at ``t_end_s`` (the block's end, s): the steps found before it."""
        raise NotImplementedError


def _start_step_s(window, otherwise_s: float) -> float:
    """The window's start step, s (``otherwise_s`` where its poll saw none or is not in)."""
    start_ = getattr(window, "_start", None)
    if start_ is not None and not isinstance(start_, CounterSeries):
        start_ = start_.result() if start_.done() else None
    step = start_.edge_step() if start_ is not None else None
    return step[0] if step else otherwise_s


def _start_done(window) -> bool:
    """True once the window's own start poll is in (two pollers would blur each other's reads)."""
    start_ = getattr(window, "_start", None)
    return start_ is None or isinstance(start_, CounterSeries) or start_.done()


def _next_wake_s(steps_s: list[float], profile_period_s: float) -> float:
    """When to wake for the step after ``steps_s`` (the steps found so far, the start's first), s.

    At the last two steps' spacing less ``GUARD_S`` once they are one period apart (neither
    closer than half the profile's period nor further than its one and a half), else early.
    """
    if len(steps_s) >= 2 and 0.5 < (steps_s[-1] - steps_s[-2]) / profile_period_s < 1.5:
        return steps_s[-1] + (steps_s[-1] - steps_s[-2]) - GUARD_S
    return steps_s[-1] + FIRST_WAKE_SHARE * profile_period_s


def _kept(polls: list[CounterSeries], t_end_s: float) -> list[dict]:
    """Each poll that saw a step ending before ``t_end_s``, as a CounterSeries dict."""
    return [p.to_dict() for p in polls if len(p.steps) and p.t1_s[-1] <= t_end_s]


class _ThreadLog(StepLog):
    def __init__(self, board, window, period_s: float) -> None:
        self._board, self._window, self._period_s = board, window, period_s
        self._polls: list[CounterSeries] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nvmeter-steplog", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        clock = self._board.clock
        waited = clock.now() + START_WAIT_S
        while not _start_done(self._window) and clock.now() < waited and not self._stop.is_set():
            self._stop.wait(0.001)
        steps_s = [_start_step_s(self._window, clock.now())]
        wake_s = _next_wake_s(steps_s, self._period_s)
        while not self._stop.wait(max(0.0, wake_s - clock.now())):
            reads = aligned_edge(self._board, clock, POLL_TIMEOUT_S)
            self._polls.append(reads)
            if len(reads.steps):
                steps_s.append(float(reads.steps.t_s[-1]))
                wake_s = _next_wake_s(steps_s, self._period_s)
            else:  # none within the time-out: poll on at once
                wake_s = clock.now()

    def stop(self, t_end_s: float) -> list[dict]:
        self._stop.set()
        self._thread.join(POLL_TIMEOUT_S + 1.0)
        return _kept(self._polls, t_end_s)


class _ReplayLog(StepLog):
    def __init__(self, board, window, period_s: float) -> None:
        self._board, self._window, self._period_s = board, window, period_s
        self._t0_s = board.clock.now()

    def stop(self, t_end_s: float) -> list[dict]:
        steps_s = [_start_step_s(self._window, self._t0_s)]
        t_s, polls = _next_wake_s(steps_s, self._period_s), []
        # only reads that end before the block's end (a read's cost at most past a poll's time-out):
        # replayed reads then never move the clock
        while t_end_s - t_s > 2 * LAST_READ_S:
            timeout_s = min(POLL_TIMEOUT_S, t_end_s - t_s - LAST_READ_S)
            reads = CounterSeries(*self._board.replay_counter_reads(t_s, timeout_s))
            polls.append(reads)
            if len(reads.steps):  # as the thread does
                steps_s.append(float(reads.steps.t_s[-1]))
                t_s = _next_wake_s(steps_s, self._period_s)
            else:
                t_s = reads.t1_s[-1]
        return _kept(polls, t_end_s)
