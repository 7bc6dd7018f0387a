"""The simulated worker: acts on a :class:`~nvmeter.boards.simulated.SimulatedBoard`'s virtual time."""

from __future__ import annotations

import math
from dataclasses import replace

from nvmeter.boards.simulated import SimulatedBoard
from nvmeter.worker.protocol import CHUNK, MarkedRun, MatmulRun, check_matmul

# A real worker's start, as `nvmeter probe --simulate` models it (s). The committed quick probes
# (results/probe-h200-quick.json, probe-h200-quick-84564389.json) show the context on the board
# 3.30 and 3.41 s after the parent asked for a worker (process start, imports, torch, CUDA
# initialisation; read from the power samples' step) and its reply 0.19 s later; the full probe
# (results/probe-h200.json, the machine's first run) took 5.06 s in all. How those seconds
# split between the import (which preload() overlaps) and CUDA's initialisation (which it cannot)
# was not measured: 2.3 s and 1.0 s are assumptions, and bench/device/probe_speed.sh times both.
REAL_START_S = 2.3
REAL_CONTEXT_S = 1.0


# --------------------------------------------------------------------------
# The simulated worker
# --------------------------------------------------------------------------
class _SimJob:
    def __init__(self, worker: SimWorker, run: MatmulRun, per_s: float) -> None:
        self._worker = worker
        self._clock = worker.board.clock
        self._run = run
        self._per_s = per_s

    def done(self) -> bool:
        return self._clock.now() >= self._run.t1_s

    def result(self) -> MatmulRun:
        self._clock.advance_to(self._run.t1_s)
        run = self._run
        if isinstance(run, MarkedRun):  # a real worker marks each chunk's end
            done = (*range(CHUNK, run.matmuls, CHUNK), run.matmuls)
            marks_s = tuple(run.t0_s + k * self._per_s for k in done)
            run = replace(run, mark_t_s=marks_s, mark_products=done)
        return run

    def stop(self) -> None:
        """End the job at the first product boundary from now (the real one ends after its chunk)."""
        now, run = self._clock.now(), self._run
        if now >= run.t1_s:
            return
        count = max(1, math.ceil((now - run.t0_s) / self._per_s))
        if count >= run.matmuls:
            return
        t1 = run.t0_s + count * self._per_s
        board = self._worker.board
        board.cancel_load_change(run.t1_s)
        board.set_load(0.0, at_s=t1)
        self._worker._busy_until_s = t1
        self._run = replace(run, t1_s=t1, matmuls=count, flops=2.0 * run.n**3 * count)


class SimWorker:
    """A worker acting on a simulated board's virtual time. Implements :class:`Worker`.

    Args:
        board: The board it loads.
        start_s: Virtual time the process takes to start and import torch, s; :meth:`preload`
            lets it pass while the caller measures, :meth:`open_context` waits for what is left.
        context_s: Virtual time of creating the context itself, s.

    The defaults (0 and 0.5 s) keep the virtual timings that tests of windows and the scorer
    were written against; :data:`REAL_START_S` and :data:`REAL_CONTEXT_S` model a real worker.
    """

    backend = "sim"

    def __init__(self, board: SimulatedBoard, start_s: float = 0.0, context_s: float = 0.5) -> None:
        self.board = board
        self.frozen = False
        self._busy_until_s = board.clock.now()
        self.start_s = start_s
        self.context_s = context_s
        self._ready_at_s: float | None = None

    def __enter__(self) -> SimWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def preload(self) -> None:
        """Start the import now: it is over ``start_s`` later, whatever the caller does meanwhile."""
        if self._ready_at_s is None:
            self._ready_at_s = self.board.clock.now() + self.start_s

    def open_context(self) -> str | None:
        """Wait for the import (all of ``start_s`` without :meth:`preload`), then ``context_s``."""
        self.preload()
        self.board.clock.advance_to(max(self.board.clock.now(), self._ready_at_s))
        self.board.clock.sleep(self.context_s)
        self.board.set_context(True)
        return self.board.identity().uuid

    def seconds_per_matmul(self, n: int) -> float:
        """From the model's TFLOP/s for constant operands."""
        return 2 * n**3 / (self.board.config.tflops_per_matmul_s["constant"] * 1e12)

    def matmul(
        self,
        n: int,
        operands: str,
        *,
        seconds: float = 0.0,
        count: int = 0,
        check: bool = False,
        dtype: str = "fp32",
        marks: bool = False,
    ) -> _SimJob:
        """Schedule the load on the board and return its job (bf16: the model's ``bf16`` load)."""
        check_matmul(operands, dtype)
        config = self.board.config
        key = operands if dtype == "fp32" else dtype
        rate = config.tflops_per_matmul_s[key] * 1e12
        per = 2 * n**3 / rate
        count = count or max(1, round(seconds / per))
        t0 = max(self.board.clock.now(), self._busy_until_s) + 50e-6  # launch latency
        t1 = t0 + count * per
        self.board.set_load(config.load_above_idle_w[key], at_s=t0)
        self.board.set_load(0.0, at_s=t1)
        self._busy_until_s = t1
        err = 0.0 if check and operands == "constant" and dtype == "fp32" else None
        run = MatmulRun(t0, t1, count, n, 2.0 * n**3 * count, err)
        if marks:
            run = MarkedRun(**run.__dict__, dtype=dtype)
        return _SimJob(self, run, per)

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
