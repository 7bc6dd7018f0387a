"""The simulated worker: acts on a :class:`~nvmeter.boards.simulated.SimulatedBoard`'s virtual time."""

from __future__ import annotations

from nvmeter.boards.simulated import SimulatedBoard
from nvmeter.clock import VirtualClock
from nvmeter.worker.protocol import MatmulRun


# --------------------------------------------------------------------------
# The simulated worker
# --------------------------------------------------------------------------
class _SimJob:
    def __init__(self, clock: VirtualClock, run: MatmulRun) -> None:
        self._clock = clock
        self._run = run

    def done(self) -> bool:
        return self._clock.now() >= self._run.t1_s

    def result(self) -> MatmulRun:
        self._clock.advance_to(self._run.t1_s)
        return self._run


class SimWorker:
    """A worker acting on a simulated board's virtual time. Implements :class:`Worker`."""

    backend = "sim"

    def __init__(self, board: SimulatedBoard) -> None:
        self.board = board
        self.frozen = False
        self._busy_until_s = board.clock.now()

    def __enter__(self) -> SimWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open_context(self) -> str | None:
        """Open the simulated context (costs 0.5 s of virtual time)."""
        self.board.clock.sleep(0.5)
        self.board.set_context(True)
        return self.board.identity().uuid

    def seconds_per_matmul(self, n: int) -> float:
        """From the model's TFLOP/s for constant operands."""
        return 2 * n**3 / (self.board.config.tflops_per_matmul_s["constant"] * 1e12)

    def matmul(
        self, n: int, operands: str, *, seconds: float = 0.0, count: int = 0, check: bool = False
    ) -> _SimJob:
        """Schedule the load on the board and return its job."""
        config = self.board.config
        rate = config.tflops_per_matmul_s[operands] * 1e12
        per = 2 * n**3 / rate
        count = count or max(1, round(seconds / per))
        t0 = max(self.board.clock.now(), self._busy_until_s) + 50e-6  # launch latency
        t1 = t0 + count * per
        self.board.set_load(config.load_above_idle_w[operands], at_s=t0)
        self.board.set_load(0.0, at_s=t1)
        self._busy_until_s = t1
        err = 0.0 if check and operands == "constant" else None
        return _SimJob(self.board.clock, MatmulRun(t0, t1, count, n, 2.0 * n**3 * count, err))

    def freeze(self) -> None:
        """Mark the context's process stopped."""
        self.frozen = True
        self.board.set_frozen(True)

    def resume(self) -> None:
        """Mark it running again."""
        if self.frozen:
            self.frozen = False
            self.board.set_frozen(False)

    def close(self) -> None:
        """Close the simulated context."""
        self.resume()
        self.board.set_context(False)
