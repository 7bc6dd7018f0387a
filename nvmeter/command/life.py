"""Hooks around the child's life: nothing for a real board, the imposed load for a simulated one."""

from __future__ import annotations

import time
from typing import Protocol

from nvmeter.boards.simulated import finite_load_w


class Life(Protocol):
    """Hooks around the child's life (the simulated board's driver; nothing for a real board)."""

    def started(self, pid: int, since_s: float) -> None:
        """The child has just been started; nvmeter began starting it at ``since_s`` (time.perf_counter)."""
        ...

    def tick(self) -> None:
        """Called about every :data:`nvmeter.command.meter.POLL_S` while the child lives."""
        ...

    def ended(self) -> None:
        """The child has just been reaped."""
        ...


class RealLife:
    """A real board needs nothing: its clock runs and the child drives its power."""

    def started(self, pid: int, since_s: float) -> None:
        """Nothing to do."""

    def tick(self) -> None:
        """Nothing to do."""

    def ended(self) -> None:
        """Nothing to do."""


class SimulatedLife:
    """``--simulate``: the child's life, imposed on a simulated board.

    While the child lives the board's virtual clock follows the host's real time (it is
    advanced to the real time elapsed since the child started, about every
    :data:`nvmeter.command.meter.POLL_S`), and the board holds a CUDA context for the child's pid plus
    ``load_w`` above context idle. Whatever the child really does, the board draws that.

    Args:
        board: A :class:`~nvmeter.boards.simulated.SimulatedBoard`.
        load_w: Load above context idle, W (default: the board's constant-operand matmul,
            295 W in the default model, from results/probe-h200.json).

    Raises:
        ValueError: ``load_w`` not a finite number of watts from 0 to the board's power limit
            (the record says the board drew it; over the limit, the board would not).
    """

    def __init__(self, board, load_w: float | None = None) -> None:
        self.board = board
        limit_w = board.config.power_limit_w
        self.load_w = finite_load_w(board.config.load_above_idle_w["constant"] if load_w is None else load_w)
        if self.load_w > limit_w:
            raise ValueError(
                f"load_w must be at most the board's power limit, {limit_w:g} W, not {self.load_w:g} W"
            )
        self.t0_s = self.t1_s = float("nan")
        self._real_t0_s = 0.0

    def started(self, pid: int, since_s: float) -> None:
        """Open a context for ``pid`` and apply the load from ``since_s``, the real time its start began.

        The virtual clock has not moved since (only :meth:`tick` moves it), so ``since_s`` is
        its now: the command's life counts from before its process was made, as its wall time
        does (a command of 10 ms had held the load for the 0.15 ms after the fork returned: a
        new user's trial, 2026-12-06).
        """
        self._real_t0_s = since_s
        self.t0_s = self.board.clock.now()
        self.board.set_context(True, pid)
        self.board.set_load(self.load_w)

    def tick(self) -> None:
        """Bring the virtual clock up to the real time the child has lived."""
        self.board.clock.advance_to(self.t0_s + time.perf_counter() - self._real_t0_s)

    def ended(self) -> None:
        """Catch up with real time, then drop the load and the context."""
        self.tick()
        self.t1_s = self.board.clock.now()
        self.board.set_load(0.0)
        self.board.set_context(False)

    def to_dict(self) -> dict:
        """What was imposed, for the record: load, the context's step and the virtual times."""
        c = self.board.config
        return {
            "load_w": self.load_w,
            "context_w": c.idle_context_w - c.idle_no_context_w,
            "t0_s": self.t0_s,
            "t1_s": self.t1_s,
        }
