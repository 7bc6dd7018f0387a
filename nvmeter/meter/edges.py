"""Counter edges found inside the work: a poller watches for the next step while the calls run.

An edge polled at entry, before the work, idles the board for up to a counter period, and
on a board at its power limit that pause alone restarts the limiter's overshoot. So the
window's start edge (and ``measure()``'s sub-window edges) are polled by a second thread
while the caller's calls keep the board busy. NVML's ctypes calls release the GIL, so the
poller costs the caller little; its reads draw the polling artefact, which the bound holds.

A poller that finds a step blurred by a slow read polls on to the next one while its
time-out allows (:func:`~nvmeter.meter.span.sharp_edge`, as every edge does); the Measurement
takes an edge's sharpest step.

A simulated board runs on a virtual clock that moves only with its caller, so no thread
can poll it; its poller asks the board afterwards which reads a thread would have made
(:meth:`~nvmeter.boards.simulated.SimulatedBoard.replay_counter_reads`).

A poller can also read the board's state (clocks, temperature, clock-event reasons) before its
first read, so that the caller's thread makes no NVML call at an in-work edge but the sample
buffer's: on an H100 (GPU-adc46b01) the reads at warm windows' entries took 4.6-8.1 ms in 4 of
80 windows, and the bench's own state read just before them was as slow
(results/enclose/call30-97fe32f-h100b-enclose.json.gz: gap before entry and entry alike).

A window's end edge can be found the same way, inside the caller's later work
(``EnergyWindow(exit="return")``): the poller then also reads the sample buffer once the
sample covering the step has landed, since the window subtracts what the samples say was
drawn between the work's end and that step.
"""

from __future__ import annotations

import threading
from typing import Protocol

from nvmeter.boards.protocol import Board, BoardState, PowerSample
from nvmeter.meter import polling
from nvmeter.meter.series import CounterSeries
from nvmeter.meter.span import SHARP_READS, joined, sharp, sharp_edge

__all__ = ["SHARP_READS", "StepPoll", "poll_in_background", "sharp"]

# A read that hangs in the driver must not hang the caller for ever: the caller gives up on a
# poll's thread this long after the edge's time-out, s.
HUNG_S = 30.0


class StepPoll(Protocol):
    """A counter poll under way."""

    t0_s: float

    def done(self) -> bool:
        """True once the reads are in (never blocks)."""
        ...

    def result(self) -> CounterSeries:
        """Wait for the reads and return them. Raises what the poll raised (TelemetryError)."""
        ...

    def samples(self) -> tuple[PowerSample, ...]:
        """The sample buffer read ``samples_after_s`` after the step (empty when not asked for).

        Call after :meth:`result`.
        """
        ...

    def state(self) -> BoardState | None:
        """The board's state read as the poll began (None when not asked for); waits for that read only.

        Raises what that read raised (TelemetryError).
        """
        ...


class _ThreadPoll:
    """Polls a real board from a daemon thread."""

    def __init__(
        self,
        board: Board,
        timeout_s: float,
        samples_after_s: float | None = None,
        with_state: bool = False,
        owner: int | None = None,
    ) -> None:
        self.t0_s = board.clock.now()
        self._owner = owner
        self._timeout_s = timeout_s
        self._after_s = samples_after_s
        self._reads: CounterSeries | None = None
        self._samples: tuple[PowerSample, ...] = ()
        self._state: BoardState | None = None
        self._state_in = threading.Event()
        if not with_state:
            self._state_in.set()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(board,), name="nvmeter-edge", daemon=True)
        self._thread.start()

    def _run(self, board: Board) -> None:
        with polling.owned_by(self._owner):  # the window's own reads, not another meter's
            self._poll(board)

    def _poll(self, board: Board) -> None:
        try:
            if not self._state_in.is_set():
                try:
                    self._state = board.state()
                except BaseException as exc:
                    # noted before the event: a waiter woken by it must find the error, not None
                    self._error = exc
                    raise
                finally:
                    self._state_in.set()
            reads = sharp_edge(board, board.clock, self._timeout_s)
            if self._after_s is not None:
                board.clock.sleep_until(reads.t1_s[-1] + self._after_s)
                self._samples = board.power_samples()
            self._reads = reads
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self) -> CounterSeries:
        self._thread.join(self._timeout_s + HUNG_S)
        if self._error is not None:
            raise self._error
        if self._reads is None:
            # the read that hung: the state's, before the counter's, when it never came in
            what = "the energy counter" if self._state_in.is_set() else "the board's state"
            raise _hung(what)
        return self._reads

    def samples(self) -> tuple[PowerSample, ...]:
        return self._samples

    def state(self) -> BoardState | None:
        if not self._state_in.wait(self._timeout_s + HUNG_S):
            raise _hung("the board's state")
        if self._state is None and self._error is not None:
            raise self._error
        return self._state


def _hung(what: str):
    """The TelemetryError for a read that has not answered ``HUNG_S`` after its edge's time-out."""
    from nvmeter import errors

    return errors.TelemetryError(f"{what} did not answer within {HUNG_S:g} s of its edge's time-out")


class _ReplayPoll:
    """Asks a virtual-clock board, when the result is needed, what a poller would have read."""

    def __init__(
        self, board, timeout_s: float, samples_after_s: float | None = None, with_state: bool = False
    ) -> None:
        self.t0_s = board.clock.now()
        self._board, self._timeout_s, self._after_s = board, timeout_s, samples_after_s
        self._reads: CounterSeries | None = None
        self._samples: tuple[PowerSample, ...] = ()
        # a virtual clock stands still while nobody calls: the state now is the poll's first
        self._state = board.state() if with_state else None

    def done(self) -> bool:
        return self._board.clock.now() >= self.t0_s + self._timeout_s + (self._after_s or 0.0)

    def result(self) -> CounterSeries:
        if self._reads is None:
            end_s = self.t0_s + self._timeout_s
            reads = CounterSeries(*self._board.replay_counter_reads(self.t0_s, self._timeout_s))
            while len(reads.steps) and not sharp(reads) and reads.t1_s[-1] < end_s:
                more = self._board.replay_counter_reads(reads.t1_s[-1], end_s - reads.t1_s[-1])
                reads = joined(reads, CounterSeries(*more))
            if self._after_s is not None:
                self._samples = self._read_samples(reads.t1_s[-1] + self._after_s)
            self._reads = reads
        return self._reads

    def samples(self) -> tuple[PowerSample, ...]:
        return self._samples

    def state(self) -> BoardState | None:
        return self._state

    def _read_samples(self, at_s: float) -> tuple[PowerSample, ...]:
        """The buffer as the poller would have read it at ``at_s``.

        The caller waits for a time still ahead (as for a thread that is still sleeping); a
        time already past is replayed.
        """
        clock = self._board.clock
        if at_s > clock.now():
            clock.sleep_until(at_s)
            return self._board.power_samples()
        return self._board.replay_power_samples(at_s)


def poll_in_background(
    board: Board,
    timeout_s: float,
    samples_after_s: float | None = None,
    *,
    with_state: bool = False,
    owner: int | None = None,
) -> StepPoll:
    """Start polling ``board``'s counter for its next step; the caller goes on working.

    Args:
        board: The board.
        timeout_s: Give up after this long without a step, s (the profile's ``edge_timeout_s``).
        samples_after_s: Also read the sample buffer this long after the last read, s (None: not).
        with_state: Read the board's state first, in the poller's thread (``state()``).
        owner: Whose reads these are (:func:`nvmeter.meter.polling.owned_by`; None: nobody's).

    Returns:
        The poll; ``result()`` gives the reads, from the first to the first changed value,
        ``samples()`` the buffer read after them and ``state()`` the state read before them.

    """
    # a simulated board on a real clock (the simulated twins of a multi-process job) polls like a GPU
    if hasattr(board, "replay_counter_reads") and hasattr(board.clock, "advance_to"):
        return _ReplayPoll(board, timeout_s, samples_after_s, with_state)
    return _ThreadPoll(board, timeout_s, samples_after_s, with_state, owner)
