"""Counter edges found inside the work: a poller watches for the next step while the calls run.

An edge polled at entry, before the work, idles the board for up to a counter period, and
on a board at its power limit that pause alone restarts the limiter's overshoot. So the
window's start edge (and ``measure()``'s sub-window edges) are polled by a second thread
while the caller's calls keep the board busy. NVML's ctypes calls release the GIL, so the
poller costs the caller little; its reads draw the polling artefact, which the bound holds.

A simulated board runs on a virtual clock that moves only with its caller, so no thread
can poll it; its poller asks the board afterwards which reads a thread would have made
(:meth:`~nvmeter.boards.simulated.SimulatedBoard.replay_counter_reads`).
"""

from __future__ import annotations

import threading
from typing import Protocol

from nvmeter.boards.protocol import Board
from nvmeter.meter.series import CounterSeries
from nvmeter.meter.span import aligned_edge


class StepPoll(Protocol):
    """A counter poll under way."""

    t0_s: float

    def done(self) -> bool:
        """True once the reads are in (never blocks)."""
        ...

    def result(self) -> CounterSeries:
        """Wait for the reads and return them. Raises what the poll raised (TelemetryError)."""
        ...


class _ThreadPoll:
    """Polls a real board from a daemon thread."""

    def __init__(self, board: Board, timeout_s: float) -> None:
        self.t0_s = board.clock.now()
        self._timeout_s = timeout_s
        self._reads: CounterSeries | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(board,), name="nvmeter-edge", daemon=True)
        self._thread.start()

    def _run(self, board: Board) -> None:
        try:
            self._reads = aligned_edge(board, board.clock, self._timeout_s)
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self) -> CounterSeries:
        # a read that hangs in the driver must not hang the caller for ever
        self._thread.join(self._timeout_s + 30.0)
        if self._error is not None:
            raise self._error
        if self._reads is None:
            from nvmeter import errors

            raise errors.TelemetryError(
                "the energy counter did not answer within 30 s of its edge's time-out"
            )
        return self._reads


class _ReplayPoll:
    """Asks a virtual-clock board, when the result is needed, what a poller would have read."""

    def __init__(self, board, timeout_s: float) -> None:
        self.t0_s = board.clock.now()
        self._board, self._timeout_s = board, timeout_s
        self._reads: CounterSeries | None = None

    def done(self) -> bool:
        return self._board.clock.now() >= self.t0_s + self._timeout_s

    def result(self) -> CounterSeries:
        if self._reads is None:
            t0s, t1s, values = self._board.replay_counter_reads(self.t0_s, self._timeout_s)
            self._reads = CounterSeries(t0s, t1s, values)
        return self._reads


def poll_in_background(board: Board, timeout_s: float) -> StepPoll:
    """Start polling ``board``'s counter for its next step; the caller goes on working.

    Args:
        board: The board.
        timeout_s: Give up after this long without a step, s (the profile's ``edge_timeout_s``).

    Returns:
        The poll; ``result()`` gives the reads, from the first to the first changed value.

    """
    if hasattr(board, "replay_counter_reads"):
        return _ReplayPoll(board, timeout_s)
    return _ThreadPoll(board, timeout_s)
