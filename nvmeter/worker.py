"""The GPU worker: a child process that owns the CUDA context and runs the load.

The measuring process owns NVML, timing and the records; the worker owns the
context, so the parent can freeze it (SIGSTOP of its process group), resume it,
time it out and reap it. The worker dies with its parent (``PR_SET_PDEATHSIG``),
so a SIGKILLed probe never leaves a frozen context behind.

Two workers share one interface (:class:`Worker`):

* :class:`WorkerProcess`, a real child process speaking JSON lines over a pipe;
  backend ``"cuda"`` (torch on the board) or ``"cpu"`` (numpy, for tests).
* :class:`SimWorker`, which drives a :class:`~nvmeter.simboard.SimulatedBoard`
  on its virtual clock.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Protocol

import psutil

from nvmeter import errors
from nvmeter.clock import VirtualClock
from nvmeter.simboard import SimulatedBoard

# Replies to quick commands (context, calibration) should come within this; a CUDA
# context and torch import take ~5-10 s on a cold machine.
_START_TIMEOUT_S = 120.0
# Margin over a job's own duration before the worker counts as hung.
_JOB_MARGIN_S = 60.0
# Time to wait after SIGSTOP/SIGCONT for the kernel to report the new state.
_SIGNAL_WAIT_S = 5.0


@dataclass(frozen=True)
class MatmulRun:
    """What the worker did for one job.

    Attributes:
        t0_s, t1_s: Start and end on the shared monotonic clock (device synchronised), s.
        matmuls: Number of n x n x n matrix products.
        n: Matrix size.
        flops: Floating-point operations, 2 n^3 per product.
        max_abs_err: For constant operands 2^-6, max |C - n 2^-12| of the last product
            (0 = exact; at n = 4096 every entry is exactly 1).

    """

    t0_s: float
    t1_s: float
    matmuls: int
    n: int
    flops: float
    max_abs_err: float | None = None

    @property
    def duration_s(self) -> float:
        """Wall time of the job, s."""
        return self.t1_s - self.t0_s

    @property
    def tflops(self) -> float:
        """Achieved rate, TFLOP/s."""
        return self.flops / self.duration_s / 1e12 if self.duration_s > 0 else 0.0


class Job(Protocol):
    """A submitted worker job."""

    def done(self) -> bool:
        """True once the result is in (never blocks)."""
        ...

    def result(self) -> MatmulRun:
        """Wait for and return the result. Raises WorkerError."""
        ...


class Worker(Protocol):
    """What probes, windows and the scorer ask of the process holding the context."""

    backend: str

    def open_context(self) -> str | None:
        """Create the device context; return the device UUID it runs on (None on CPU)."""
        ...

    def seconds_per_matmul(self, n: int) -> float:
        """Measured time of one n x n product, s."""
        ...

    def matmul(
        self, n: int, operands: str, *, seconds: float = 0.0, count: int = 0, check: bool = False
    ) -> Job:
        """Start products back to back for ``seconds`` (or exactly ``count`` of them)."""
        ...

    def freeze(self) -> None:
        """SIGSTOP the worker's process group (or the simulated equivalent)."""
        ...

    def resume(self) -> None:
        """SIGCONT it; a no-op when not frozen."""
        ...

    def close(self) -> None:
        """Resume, stop and reap the worker. Safe to call twice."""
        ...


# --------------------------------------------------------------------------
# Parent side of a real worker process
# --------------------------------------------------------------------------
class _ProcessJob:
    def __init__(self, worker: WorkerProcess, request_id: int, timeout_s: float) -> None:
        self._worker = worker
        self._id = request_id
        self._deadline = time.monotonic() + timeout_s

    def done(self) -> bool:
        self._worker._pump(0.0)
        return self._id in self._worker._replies

    def result(self) -> MatmulRun:
        reply = self._worker._wait(self._id, self._deadline)
        return MatmulRun(**reply["run"])


class WorkerProcess:
    """A real worker child process. Use as a context manager.

    Args:
        backend: ``"cuda"`` (torch on the GPU) or ``"cpu"`` (numpy; for tests).
        device_uuid: The board's UUID; the child sees only that GPU
            (``CUDA_VISIBLE_DEVICES``), so CUDA and NVML agree on the device.

    Raises:
        WorkerError: the child cannot start, dies, returns garbage, or hangs.

    """

    def __init__(self, backend: str = "cuda", device_uuid: str | None = None) -> None:
        if backend not in ("cuda", "cpu"):
            raise errors.UsageError(f"unknown worker backend {backend!r} (cuda or cpu)")
        self.backend = backend
        self.device_uuid = device_uuid
        self.frozen = False
        env = dict(os.environ)
        if device_uuid:
            env["CUDA_VISIBLE_DEVICES"] = device_uuid
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        # A session of its own: Ctrl-C at the terminal reaches only the parent, which
        # resumes and reaps the worker; SIGSTOP can target the worker's group alone.
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "nvmeter.worker", "--backend", backend, "--parent", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            start_new_session=True,
        )
        self.pid = self._proc.pid
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._proc.stdout, selectors.EVENT_READ)
        self._buffer = b""
        self._replies: dict[int, dict] = {}
        self._next_id = 0
        self._closed = False

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "frozen" if self.frozen else ("closed" if self._closed else "running")
        return f"WorkerProcess(pid={self.pid}, backend={self.backend}, {state})"

    # -- transport -----------------------------------------------------------
    def _send(self, op: str, **args) -> int:
        if self._closed:
            raise errors.WorkerError("the worker is closed")
        self._next_id += 1
        line = json.dumps({"id": self._next_id, "op": op, **args}) + "\n"
        try:
            self._proc.stdin.write(line.encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise errors.WorkerError(f"the worker died: {self._stderr_tail()}") from exc
        return self._next_id

    def _pump(self, timeout_s: float) -> None:
        for _key, _ in self._selector.select(timeout_s):
            chunk = os.read(self._proc.stdout.fileno(), 1 << 16)
            if not chunk:
                raise errors.WorkerError(
                    f"the worker exited (status {self._proc.wait()}): {self._stderr_tail()}"
                )
            self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            try:
                reply = json.loads(line)
                self._replies[int(reply["id"])] = reply
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.WorkerError(f"the worker sent garbage: {line[:80]!r}") from exc

    def _wait(self, request_id: int, deadline: float) -> dict:
        while request_id not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise errors.WorkerError("the worker did not answer in time; it was killed")
            self._pump(min(left, 0.5))
        reply = self._replies.pop(request_id)
        if "error" in reply:
            raise errors.WorkerError(f"the worker failed: {reply['error']}")
        return reply

    def _call(self, op: str, timeout_s: float = _START_TIMEOUT_S, **args) -> dict:
        return self._wait(self._send(op, **args), time.monotonic() + timeout_s)

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        lines = self._stderr.read().decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else "no message"

    # -- the Worker interface -------------------------------------------------
    def open_context(self) -> str | None:
        """Create the CUDA context (torch, device 0 of the child's one visible GPU)."""
        return self._call("context")["uuid"]

    def seconds_per_matmul(self, n: int) -> float:
        """Median time of one n x n product, s."""
        return float(self._call("calibrate", n=n)["seconds"])

    def matmul(
        self, n: int, operands: str, *, seconds: float = 0.0, count: int = 0, check: bool = False
    ) -> _ProcessJob:
        """Start a job; see :class:`Worker`."""
        if operands not in ("constant", "random"):
            raise errors.UsageError(f"operands must be 'constant' or 'random', not {operands!r}")
        request_id = self._send("matmul", n=n, operands=operands, seconds=seconds, count=count, check=check)
        return _ProcessJob(self, request_id, seconds + _JOB_MARGIN_S)

    def ping(self) -> int:
        """Round trip; returns the child's pid."""
        return int(self._call("ping")["pid"])

    def _group_signal(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self._proc.pid, sig)
        except ProcessLookupError as exc:
            raise errors.WorkerError(f"the worker is gone: {self._stderr_tail()}") from exc

    def freeze(self) -> None:
        """SIGSTOP the worker's process group and wait until the kernel shows it stopped."""
        self._group_signal(signal.SIGSTOP)
        self.frozen = True
        self._wait_status(psutil.STATUS_STOPPED)

    def resume(self) -> None:
        """SIGCONT the worker's process group."""
        if self.frozen:
            self._group_signal(signal.SIGCONT)
            self.frozen = False

    def _wait_status(self, status: str) -> None:
        end = time.monotonic() + _SIGNAL_WAIT_S
        proc = psutil.Process(self._proc.pid)
        while proc.status() != status:
            if time.monotonic() > end:
                raise errors.WorkerError(f"the worker did not reach state {status!r}")
            time.sleep(0.001)

    def close(self) -> None:
        """Resume (if frozen), ask to exit, then terminate/kill and reap. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGCONT)
            self.frozen = False
            try:
                self._proc.stdin.write(b'{"id": 0, "op": "exit"}\n')
                self._proc.stdin.flush()
            except OSError:
                pass
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._selector.close()
        for stream in (self._proc.stdin, self._proc.stdout):
            stream.close()
        self._stderr.close()


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


# --------------------------------------------------------------------------
# Child side
# --------------------------------------------------------------------------
def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL us when the parent dies (Linux); SIGKILL also ends a stopped process."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


class _Engine:
    """Matrix products on torch/CUDA or numpy/CPU, inside the child."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.uuid: str | None = None
        self._operands: dict = {}

    def context(self) -> str | None:
        if self.backend == "cuda":
            import torch

            torch.backends.cuda.matmul.allow_tf32 = False  # the reference is true FP32
            torch.backends.cudnn.allow_tf32 = False
            torch.zeros(1, device="cuda:0")
            torch.cuda.synchronize()
            self.uuid = f"GPU-{torch.cuda.get_device_properties(0).uuid}"
        return self.uuid

    def _pair(self, n: int, operands: str):
        key = (n, operands)
        if key not in self._operands:
            if self.backend == "cuda":
                import torch

                if operands == "constant":
                    a = torch.full((n, n), 2.0**-6, device="cuda:0")
                    pair = (a, a.clone(), torch.empty_like(a))
                else:
                    g = torch.Generator(device="cuda:0").manual_seed(n)
                    a = torch.randn(n, n, device="cuda:0", generator=g)
                    pair = (a, torch.randn(n, n, device="cuda:0", generator=g), torch.empty_like(a))
            else:
                import numpy as np

                a = (
                    np.full((n, n), 2.0**-6, np.float32)
                    if operands == "constant"
                    else (np.random.default_rng(n).standard_normal((n, n), dtype=np.float32))
                )
                pair = (a, a.copy(), np.empty_like(a))
            self._operands = {key: pair}  # keep one pair only: memory stays bounded
        return self._operands[key]

    def _sync(self) -> None:
        if self.backend == "cuda":
            import torch

            torch.cuda.synchronize()

    def _product(self, a, b, out) -> None:
        if self.backend == "cuda":
            import torch

            torch.matmul(a, b, out=out)
        else:
            import numpy as np

            np.matmul(a, b, out=out)

    def matmul(self, n: int, operands: str, seconds: float, count: int, check: bool) -> dict:
        a, b, out = self._pair(n, operands)
        self._product(a, b, out)  # first product outside the timed job (lazy init)
        self._sync()
        t0 = time.perf_counter()
        done = 0
        chunk = max(1, min(count or 8, 8))
        while (count and done < count) or (not count and time.perf_counter() - t0 < seconds):
            for _ in range(min(chunk, count - done) if count else chunk):
                self._product(a, b, out)
                done += 1
            self._sync()
        t1 = time.perf_counter()
        err = None
        if check and operands == "constant":
            err = float(abs(out - n * 2.0**-12).max())
        return {
            "t0_s": t0,
            "t1_s": t1,
            "matmuls": done,
            "n": n,
            "flops": 2.0 * n**3 * done,
            "max_abs_err": err,
        }

    def calibrate(self, n: int) -> float:
        a, b, out = self._pair(n, "random")
        times = []
        for _ in range(7):
            self._sync()
            t0 = time.perf_counter()
            for _ in range(4):
                self._product(a, b, out)
            self._sync()
            times.append((time.perf_counter() - t0) / 4)
        return sorted(times)[len(times) // 2]


def _serve(backend: str) -> None:
    engine = _Engine(backend)
    for line in sys.stdin:
        request = json.loads(line)
        op, rid = request.get("op"), request.get("id")
        try:
            if op == "exit":
                return
            if op == "ping":
                reply = {"pid": os.getpid()}
            elif op == "context":
                reply = {"uuid": engine.context()}
            elif op == "calibrate":
                reply = {"seconds": engine.calibrate(int(request["n"]))}
            elif op == "matmul":
                args = {k: request[k] for k in ("n", "operands", "seconds", "count", "check")}
                reply = {"run": engine.matmul(**args)}
            else:
                reply = {"error": f"unknown op {op!r}"}
        except Exception as exc:  # report, don't die: the parent decides
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps({"id": rid, **reply}) + "\n")
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the child: ``python -m nvmeter.worker --backend B --parent PID``."""
    import argparse

    parser = argparse.ArgumentParser(prog="nvmeter.worker")
    parser.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--parent", type=int, required=True)
    args = parser.parse_args(argv)
    _die_with_parent(args.parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C
    _serve(args.backend)


if __name__ == "__main__":
    main()
