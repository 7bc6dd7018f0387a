"""A `Rig`: one board, its clock, and the worker that holds (or not) a context on it.

Probes, windows and the scorer take a rig, so the same code runs on a real GPU
(NVML + a worker process) and on the simulated board (virtual time + SimWorker).
"""

from __future__ import annotations

from collections.abc import Callable

from nvmeter import errors
from nvmeter.boards.factory import open_board
from nvmeter.boards.protocol import Board
from nvmeter.worker.process import WorkerProcess
from nvmeter.worker.protocol import Worker
from nvmeter.worker.simulated import SimWorker


class Rig:
    """A board and the context-holding worker on it. Use as a context manager.

    Args:
        board: The board's telemetry.
        make_worker: Starts a fresh worker (without a context yet).
        on_phase: Called with a short text at each phase of a probe (progress display).

    The rig holds at most one worker. :meth:`context` opens one if needed;
    :meth:`no_context` ends it, because the only way to close a CUDA context for
    certain is to end its process.

    """

    def __init__(
        self,
        board: Board,
        make_worker: Callable[[], Worker],
        on_phase: Callable[[str], None] | None = None,
    ) -> None:
        self.board = board
        self.clock = board.clock
        self._make_worker = make_worker
        self._worker: Worker | None = None
        self._has_context = False
        self.on_phase = on_phase or (lambda _text: None)

    @classmethod
    def open(cls, device: int | str | None = None, *, simulate: bool = False, config=None) -> Rig:
        """A rig on a real GPU (``device``: CUDA index or UUID) or on the simulated board.

        Raises:
            NvmlUnavailable, NoGpu, DeviceNotFound, NotSupported: as :func:`open_board`.

        """
        return cls.around(open_board(device, simulate=simulate, config=config))

    @classmethod
    def around(cls, board: Board) -> Rig:
        """A rig on a board already open: a simulated one gets the simulated worker."""
        if board.identity().simulated:
            from nvmeter.worker.simulated import REAL_CONTEXT_S, REAL_START_S

            return cls(board, lambda: SimWorker(board, start_s=REAL_START_S, context_s=REAL_CONTEXT_S))
        uuid = board.identity().uuid
        return cls(board, lambda: WorkerProcess("cuda", uuid))

    @property
    def simulated(self) -> bool:
        """True on the simulated board."""
        return self.board.identity().simulated

    def __enter__(self) -> Rig:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def has_context(self) -> bool:
        """True while the rig's worker holds a context on the board."""
        return self._has_context

    def worker(self) -> Worker:
        """The current worker, started (without a context) if there is none."""
        if self._worker is None:
            self._worker = self._make_worker()
        return self._worker

    def start_worker(self) -> None:
        """Start the worker and its import of torch now, without a context and without waiting.

        A probe calls this before it measures the board without a context, so that the
        seconds of process start and import pass meanwhile; no CUDA call is made until
        :meth:`context`.
        """
        preload = getattr(self.worker(), "preload", None)  # a scorer's worker may not have it
        if preload is not None:
            preload()

    def context(self) -> Worker:
        """A worker holding a context on this board (opened once, then reused).

        Raises:
            WorkerError: the context ran on another device than the board.

        """
        worker = self.worker()
        if not self._has_context:
            uuid = worker.open_context()
            expected = self.board.identity().uuid
            if uuid is not None and uuid != expected:
                self.close()
                raise errors.WorkerError(f"the worker's CUDA device is {uuid}, not the board {expected}")
            self._has_context = True
        return worker

    def no_context(self) -> None:
        """End the worker, and with it any context it holds."""
        if self._worker is not None:
            self._worker.close()
        self._worker = None
        self._has_context = False

    def close(self) -> None:
        """Resume and reap the worker. Safe to call twice."""
        self.no_context()
