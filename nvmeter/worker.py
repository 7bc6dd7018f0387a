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

A child can serve more than the matrix products: ``handlers="some.module"`` makes it
import that module and answer the ops in its ``HANDLERS`` dict (``nvmeter score``
loads and calls the user's method this way, :mod:`nvmeter.methodhost`). The child
writes the protocol to a private copy of its stdout and points file descriptor 1 at
stderr, so whatever the loaded code prints can never corrupt a reply.
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
class Reply:
    """A request in flight: :meth:`done` never blocks, :meth:`result` waits for the reply dict."""

    def __init__(self, worker: WorkerProcess, request_id: int, op: str, timeout_s: float) -> None:
        self._worker = worker
        self._id = request_id
        self._op = op
        self._timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s

    def done(self) -> bool:
        """True once the reply is in (or the worker is gone: :meth:`result` then raises)."""
        try:
            self._worker._pump(0.0)
        except errors.WorkerError:
            return True
        return self._id in self._worker._replies

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the reply; True as soon as it is in.

        Also True once the worker is gone or the deadline has passed: :meth:`result` then raises.
        """
        left = self._deadline - time.monotonic()
        if self._id in self._worker._replies or left <= 0:
            return True
        try:
            self._worker._pump(min(timeout_s, left))
        except errors.WorkerError:
            return True
        return self._id in self._worker._replies

    def result(self) -> dict:
        """The reply. Raises WorkerError (UsageError for a request the child calls bad input)."""
        return self._worker._wait(self._id, self._deadline, self._op, self._timeout_s)


class _ProcessJob(Reply):
    def result(self) -> MatmulRun:
        return MatmulRun(**super().result()["run"])


class WorkerProcess:
    """A real worker child process. Use as a context manager.

    Args:
        backend: ``"cuda"`` (torch on the GPU) or ``"cpu"`` (numpy; for tests).
        device_uuid: The board's UUID; the child sees only that GPU
            (``CUDA_VISIBLE_DEVICES``), so CUDA and NVML agree on the device.
        handlers: A module the child imports; its ``HANDLERS`` dict (op -> function of
            the request dict and the child's engine, returning the reply dict) adds or
            replaces ops.

    Raises:
        WorkerError: the child cannot start, dies, returns garbage, or hangs (a hung
            child is killed with its whole process group).

    """

    def __init__(
        self, backend: str = "cuda", device_uuid: str | None = None, handlers: str | None = None
    ) -> None:
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
        argv = [sys.executable, "-m", "nvmeter.worker", "--backend", backend, "--parent", str(os.getpid())]
        if handlers:
            argv += ["--handlers", handlers]
        self._proc = subprocess.Popen(
            argv,
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
                status = self._exit_status(5.0)
                raise errors.WorkerError(
                    f"the worker exited (status {status if status is not None else 'unknown'}): "
                    f"{self._stderr_tail()}"
                )
            self._buffer += chunk
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            try:
                reply = json.loads(line)
                self._replies[int(reply["id"])] = reply
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.WorkerError(f"the worker sent garbage: {line[:80]!r}") from exc

    def _wait(self, request_id: int, deadline: float, op: str = "request", timeout_s: float = 0.0) -> dict:
        while request_id not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()  # a hung child will not read an exit request: no point asking
                raise errors.WorkerError(
                    f"the worker did not answer {op!r} within {timeout_s:,.0f} s; it was killed"
                )
            try:
                self._pump(min(left, 0.5))
            except errors.WorkerError:
                self.kill()  # garbage or an exit: whatever is left of its group goes too
                raise
        reply = self._replies.pop(request_id)
        if "error" in reply:
            # the child says what kind of failure it was by the exit code of its error
            if reply.get("exit_code") == errors.UsageError.exit_code:
                raise errors.UsageError(reply["error"])
            if reply.get("exit_code") == errors.WorkerError.exit_code:
                raise errors.WorkerError(reply["error"])
            raise errors.WorkerError(f"the worker failed: {reply['error']}")
        return reply

    def _call(self, op: str, timeout_s: float = _START_TIMEOUT_S, **args) -> dict:
        return self._wait(self._send(op, **args), time.monotonic() + timeout_s, op, timeout_s)

    def request(self, op: str, *, timeout_s: float = _START_TIMEOUT_S, **args) -> dict:
        """Send ``op`` with JSON-able ``args`` and wait for the reply dict.

        Raises:
            WorkerError: the child failed the request, died, sent garbage, or did not
                answer within ``timeout_s`` (it is then killed).
            UsageError: the child refused the request as bad input.

        """
        return self._call(op, timeout_s, **args)

    def submit(self, op: str, *, timeout_s: float, **args) -> Reply:
        """Send ``op`` and return at once; the :class:`Reply` waits at most ``timeout_s`` from now."""
        return Reply(self, self._send(op, **args), op, timeout_s)

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
        return _ProcessJob(self, request_id, "matmul", seconds + _JOB_MARGIN_S)

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

    def kill(self) -> None:
        """SIGKILL the worker's whole process group at once and reap it. Idempotent."""
        if not self._closed:
            # never reaped before close(), so the group id is still ours
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
        self.close()

    def close(self) -> None:
        """Resume (if frozen), ask to exit, then kill and reap its process group. Idempotent.

        Anything the loaded code started in the worker's group dies with it: the leader
        is left unreaped (a zombie still holds the group's id) until the group is killed.
        """
        if self._closed:
            return
        self._closed = True
        if self._exit_status(0.0) is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGCONT)
            self.frozen = False
            try:
                self._proc.stdin.write(b'{"id": 0, "op": "exit"}\n')
                self._proc.stdin.flush()
            except OSError:
                pass
            if self._exit_status(5.0) is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
        # the leader is a zombie (or reaped already): the group id cannot have been reused
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        self.frozen = False
        self._selector.close()
        for stream in (self._proc.stdin, self._proc.stdout, self._stderr):
            # a child that closed its end leaves unsent bytes behind: closing must not raise
            # (BrokenPipeError here used to replace the WorkerError that says what happened)
            with contextlib.suppress(OSError):
                stream.close()

    def _exit_status(self, timeout_s: float) -> int | None:
        """The leader's exit status (-N: killed by signal N) once it has exited, else None.

        Waits up to ``timeout_s`` without reaping it: until close() reaps it, the zombie
        keeps the process group's id, so killing the group can never hit a stranger.
        """
        end = time.monotonic() + timeout_s
        while True:
            if self._proc.returncode is not None:  # reaped already
                return self._proc.returncode
            try:
                found = os.waitid(os.P_PID, self._proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return self._proc.returncode
            if found is not None:
                return found.si_status if found.si_code == os.CLD_EXITED else -found.si_status
            if time.monotonic() >= end:
                return None
            time.sleep(0.005)


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
# The child's reply channel (a private copy of its stdout), set by main().
_PROTOCOL = None


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


def _serve(backend: str, handlers: dict | None = None, out=None, inp=None) -> None:
    engine = _Engine(backend)
    handlers = handlers or {}
    out = out or sys.stdout
    for line in inp or sys.stdin:
        request = json.loads(line)
        op, rid = request.get("op"), request.get("id")
        try:
            if op == "exit":
                return
            if op in handlers:
                reply = handlers[op](request, engine)
            elif op == "ping":
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
        except errors.NvmeterError as exc:  # its message is already one line for a user
            reply = {"error": str(exc), "exit_code": exc.exit_code}
        except Exception as exc:  # report, don't die: the parent decides
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps({"id": rid, **reply}) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the child: ``python -m nvmeter.worker --backend B --parent PID``."""
    import argparse

    parser = argparse.ArgumentParser(prog="nvmeter.worker")
    parser.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--handlers", default=None, help="module whose HANDLERS dict adds ops")
    args = parser.parse_args(argv)
    _die_with_parent(args.parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C
    # the protocol gets a private copy of stdout; fd 1 (print, C libraries) goes to stderr
    global _PROTOCOL
    _PROTOCOL = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    # the requests come on a private copy of stdin; fd 0 reads nothing, so a method that reads
    # its stdin gets end-of-file instead of the protocol
    requests = os.fdopen(os.dup(0), "r")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull)  # noqa: SIM115 (the child's stdin for its whole life)
    handlers = None
    if args.handlers:
        import importlib

        handlers = importlib.import_module(args.handlers).HANDLERS
    _serve(args.backend, handlers, _PROTOCOL, requests)


if __name__ == "__main__":
    main()
