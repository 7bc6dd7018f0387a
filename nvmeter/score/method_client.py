"""The scorer's side of the worker that runs a method (:mod:`nvmeter.score.method_host` is the other).

:class:`MethodWorker` starts a fresh worker process (one per run: nothing is shared
between runs but what the records show), which holds the CUDA context, imports the
method and calls it. It implements :class:`nvmeter.worker.Worker` too, so the J/TFLOP
reference runs in the same process and context through :mod:`nvmeter.probes.reference`.

:class:`SimMethodWorker` couples a real worker (torch on CPU) to the simulated board:
the method really runs, is timed and judged; the board's virtual clock moves by the time
the calls really took, and carries a modelled load while they ran.
"""

from __future__ import annotations

from pathlib import Path

from nvmeter.boards.simulated import SimulatedBoard
from nvmeter.score.config import CALL_TIMEOUT_S
from nvmeter.score.target import Target
from nvmeter.worker.process import Reply, WorkerProcess
from nvmeter.worker.simulated import SimWorker

# Starting torch, the harness and a CUDA context takes ~5-10 s on a cold machine
# (nvmeter.worker.process); no code of the method runs then. The method's import runs
# under --call-timeout-s instead (docs/score.md).
_START_TIMEOUT_S = 120.0
# Building one draw takes ~0.03 s on the H200's host and ~0.4 s on a slow 2-core machine;
# loading a dataset's pool ~2-4 s.
_DRAW_TIMEOUT_S = 10.0
# The simulated board has no model of a method's power: while the worker's real calls
# run, it carries these loads above idle. Round figures, not measurements.
SIM_METHOD_W = 200.0
SIM_NULL_W = 10.0


class MethodWorker:
    """A worker process hosting one method. Use as a context manager.

    Args:
        backend: ``"cuda"`` (the board's GPU) or ``"cpu"`` (tests, the simulated board).
        device_uuid: The board's UUID (the child sees only that GPU).
        call_timeout_s: A call that takes longer is a hang: the worker is killed.

    Raises:
        WorkerError: the worker died, hung, sent garbage, or the method raised.
        UsageError: the method could not be loaded or returned bad output.

    """

    def __init__(
        self, backend: str = "cuda", device_uuid: str | None = None, call_timeout_s: float = CALL_TIMEOUT_S
    ) -> None:
        self._proc = WorkerProcess(backend, device_uuid, handlers="nvmeter.score.method_host")
        self.backend = backend
        self.pid = self._proc.pid
        self.call_timeout_s = call_timeout_s
        self._uuid: str | None = None
        self._opened = False

    def __enter__(self) -> MethodWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MethodWorker(pid={self.pid}, backend={self.backend})"

    @property
    def frozen(self) -> bool:
        """True while SIGSTOPped."""
        return self._proc.frozen

    def open_context(self) -> str | None:
        """Open the CUDA context (once; later calls return the same UUID; None on CPU)."""
        if not self._opened:
            self._uuid = self._proc.request("context", timeout_s=_START_TIMEOUT_S)["uuid"]
            self._opened = True
        return self._uuid

    def load(self, target: Target) -> None:
        """Import the method in the worker, within ``call_timeout_s`` (a method's import is its code too).

        Raises:
            UsageError: it cannot be loaded.
            WorkerError: the import hung past ``call_timeout_s`` (the worker is killed) or the worker died.

        """
        self._proc.request("load", timeout_s=self.call_timeout_s, **target.load_request())

    def prepare(self, draws: list[tuple[str, int]], split_seed: int, root: str | None) -> Reply:
        """Build and keep draws in the worker (returns at once; ``result()`` waits)."""
        timeout = _START_TIMEOUT_S + _DRAW_TIMEOUT_S * len(draws)
        return self._proc.submit(
            "prepare", timeout_s=timeout, draws=[list(d) for d in draws], split_seed=split_seed, root=root
        )

    def call(self, dataset: str, seed: int, split_seed: int, root: str | None, out: Path | None) -> float:
        """One timed call on a draw the worker builds first; labels to ``out`` (.npy). Returns ms.

        The draw is built by its own request, so the call's time limit covers the call alone.
        """
        self.prepare([(dataset, seed)], split_seed, root).result()
        reply = self._proc.request(
            "call",
            timeout_s=self.call_timeout_s,
            dataset=dataset,
            seed=seed,
            split_seed=split_seed,
            root=root,
            out=str(out) if out else None,
            drop=True,
        )
        return float(reply["ms"])

    def calls(
        self,
        kind: str,
        seconds: float,
        min_calls: int,
        draws: list[tuple[str, int]],
        split_seed: int,
        root: str | None,
        out: Path | None,
    ) -> Reply:
        """Calls back to back for ``seconds`` (and at least ``min_calls``); returns at once.

        ``result()`` gives ``t0_s``, ``t1_s`` (the shared monotonic clock) and ``ms``.
        """
        timeout = seconds + (min_calls + 1) * self.call_timeout_s
        return self._proc.submit(
            "calls",
            timeout_s=timeout,
            kind=kind,
            seconds=seconds,
            min_calls=min_calls,
            draws=[list(d) for d in draws],
            split_seed=split_seed,
            root=root,
            out=str(out) if out else None,
        )

    # -- the Worker protocol, for the reference ------------------------------------
    def seconds_per_matmul(self, n: int) -> float:
        """Time of one n x n FP32 product, s."""
        return self._proc.seconds_per_matmul(n)

    def matmul(self, n: int, operands: str, *, seconds: float = 0.0, count: int = 0, check: bool = False):
        """FP32 products (TF32 off whatever the method set); see :class:`nvmeter.worker.Worker`."""
        return self._proc.matmul(n, operands, seconds=seconds, count=count, check=check)

    def freeze(self) -> None:
        """SIGSTOP the worker's process group and what the method started out of it (WorkerProcess.freeze)."""
        self._proc.freeze()

    def resume(self) -> None:
        """SIGCONT them."""
        self._proc.resume()

    def close(self) -> None:
        """Resume, stop and reap the worker and its process group. Idempotent."""
        self._proc.close()


class _VirtualReply:
    """A reply already in, that the virtual clock reaches at ``t1_s``."""

    def __init__(self, board: SimulatedBoard, reply: dict) -> None:
        self._clock = board.clock
        self._reply = reply

    def done(self) -> bool:
        return self._clock.now() >= self._reply["t1_s"]

    def wait(self, timeout_s: float) -> bool:
        self._clock.sleep_until(min(self._clock.now() + timeout_s, self._reply["t1_s"]))
        return self.done()

    def result(self) -> dict:
        self._clock.advance_to(self._reply["t1_s"])
        return self._reply


class SimMethodWorker:
    """A real worker on CPU, coupled to the simulated board's virtual clock.

    Timed calls run for real and are judged. A window's calls run for real too; the
    board then carries ``method_w`` (``null_w`` for null calls) above idle for as long as
    they really took, on its virtual clock. Freezing stops the real process and the
    board's context alike. The reference's products are simulated (:class:`SimWorker`).

    Args:
        board: The simulated board.
        real: The CPU worker hosting the method.
        method_w, null_w: Modelled load above idle while method / null calls run, W.

    """

    backend = "sim"

    def __init__(
        self,
        board: SimulatedBoard,
        real: MethodWorker,
        method_w: float = SIM_METHOD_W,
        null_w: float = SIM_NULL_W,
    ) -> None:
        self.board = board
        self.real = real
        self.pid = real.pid
        self.call_timeout_s = real.call_timeout_s
        self._loads = {"method": method_w, "null": null_w}
        self._sim = SimWorker(board)
        self._opened = False

    def __enter__(self) -> SimMethodWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def frozen(self) -> bool:
        """True while frozen."""
        return self.real.frozen

    def open_context(self) -> str | None:
        """Open the real worker's (CPU) context and the simulated one, held by the worker's pid."""
        if not self._opened:
            self.real.open_context()
            self.board.clock.sleep(0.5)  # as SimWorker: a context costs virtual time
            self.board.set_context(True, pid=self.real.pid)
            self._opened = True
        return self.board.identity().uuid

    def load(self, target: Target) -> None:
        """As :meth:`MethodWorker.load`."""
        self.real.load(target)

    def prepare(self, draws, split_seed, root):
        """As :meth:`MethodWorker.prepare`."""
        return self.real.prepare(draws, split_seed, root)

    def call(self, dataset, seed, split_seed, root, out) -> float:
        """As :meth:`MethodWorker.call` (host time; the virtual clock does not move)."""
        return self.real.call(dataset, seed, split_seed, root, out)

    def calls(self, kind, seconds, min_calls, draws, split_seed, root, out) -> _VirtualReply:
        """Run the calls for real, then put their load on the board's virtual timeline."""
        reply = self.real.calls(kind, seconds, min_calls, draws, split_seed, root, out).result()
        took = reply["t1_s"] - reply["t0_s"]
        t0 = self.board.clock.now() + 50e-6  # launch latency, as SimWorker
        self.board.set_load(self._loads[kind], at_s=t0)
        self.board.set_load(0.0, at_s=t0 + took)
        return _VirtualReply(self.board, {**reply, "t0_s": t0, "t1_s": t0 + took})

    def seconds_per_matmul(self, n: int) -> float:
        """From the simulated board's model."""
        return self._sim.seconds_per_matmul(n)

    def matmul(self, n: int, operands: str, *, seconds: float = 0.0, count: int = 0, check: bool = False):
        """Simulated products on the board."""
        return self._sim.matmul(n, operands, seconds=seconds, count=count, check=check)

    def freeze(self) -> None:
        """SIGSTOP the real worker; the board sees its context's process stopped."""
        self.real.freeze()
        self._sim.freeze()

    def resume(self) -> None:
        """SIGCONT it; the board sees it running."""
        self._sim.resume()
        self.real.resume()

    def close(self) -> None:
        """Close the real worker and the simulated context."""
        try:
            self.real.close()
        finally:
            self._sim.resume()
            self.board.set_context(False)
