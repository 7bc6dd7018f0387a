"""The parent side of a worker process: start it, talk to it, freeze, resume, time out, reap.

The measuring process owns NVML, timing and the records; the worker owns the CUDA
context, so the parent can freeze it (SIGSTOP of its process group, and of every process
under it that left the group: :mod:`nvmeter.descendants`), resume it, time it out and reap
it. The child (:mod:`nvmeter.worker.child`) dies with its parent, so a SIGKILLed probe never
leaves a frozen context behind, and its guardian (:mod:`nvmeter.worker.guardian`) then ends the
rest of its group and what a freeze held out of it. Requests and replies are JSON lines; backend ``"cuda"``
(torch on the board) or ``"cpu"`` (numpy, for tests).
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

import psutil

from nvmeter import errors, interrupts
from nvmeter.descendants import Descendants, end_tree, marked, reap_orphans
from nvmeter.worker.guardian import Guardian
from nvmeter.worker.protocol import MatmulRun, check_matmul, job_run

# Replies to quick commands (context, calibration) should come within this; a CUDA
# context and torch import take ~5-10 s on a cold machine.
_START_TIMEOUT_S = 120.0
# Margin over a job's own duration before the worker counts as hung.
_JOB_MARGIN_S = 60.0
# Time to wait after SIGSTOP/SIGCONT for the kernel to report the new state.
_SIGNAL_WAIT_S = 5.0
# close() waits this long for a worker asked to exit before killing its group, s (a Ctrl-C cuts it short).
_EXIT_WAIT_S = 5.0


def _guardian(pgid: int, token: str) -> Guardian | None:
    """The worker's guardian (:mod:`nvmeter.worker.guardian`), or None if it could not be started."""
    try:
        return Guardian(pgid, token)
    except OSError:  # out of processes or memory: the worker runs without one, as it did before
        return None


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
        return job_run(super().result()["run"])

    def stop(self) -> None:
        """End the job after its current chunk (at most 8 products): SIGUSR1 to the worker.

        A no-op once the job is done; :meth:`result` then reports the products that ran.
        """
        if not self.done():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._worker.pid, signal.SIGUSR1)


_DONE = object()  # WorkerProcess._preloaded once the import's reply is in


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
            child is killed with its whole process group, and every process under it).

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
        # a marker that whatever the loaded code starts inherits, so that close() finds it even
        # once it has left the worker's group and tree (nvmeter.descendants)
        env, token = marked(env)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        # A session of its own: Ctrl-C at the terminal reaches only the parent, which
        # resumes and reaps the worker; SIGSTOP can target the worker's group alone.
        argv = [
            sys.executable,
            "-m",
            "nvmeter.worker.child",
            "--backend",
            backend,
            "--parent",
            str(os.getpid()),
        ]
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
        # ends the rest of the worker's group, frozen or not, if this process dies before close()
        self._guardian = _guardian(self.pid, token)
        on_hold = self._guardian.hold if self._guardian else None
        self._descendants = Descendants(self.pid, token, on_hold=on_hold)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._proc.stdout, selectors.EVENT_READ)
        self._buffer = b""
        self._replies: dict[int, dict] = {}
        self._unanswered: set[int] = set()  # requests sent, not yet answered: the worker is busy
        self._next_id = 0
        self._closed = False
        self._preloaded: Reply | object | None = None

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
        self._unanswered.add(self._next_id)
        line = json.dumps({"id": self._next_id, "op": op, **args}) + "\n"
        try:
            self._proc.stdin.write(line.encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise errors.WorkerError(f"the worker died: {self._stderr_tail()}") from exc
        return self._next_id

    def _pump(self, timeout_s: float) -> None:
        # the orphans a method's code leaves end while nvmeter waits for it: reaped as they do
        # (one system call when none has), not left as zombies for the worker's life
        reap_orphans()
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
                self._unanswered.discard(int(reply["id"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.WorkerError(f"the worker sent garbage: {line[:80]!r}") from exc

    def _wait(self, request_id: int, deadline: float, op: str = "request", timeout_s: float = 0.0) -> dict:
        while request_id not in self._replies:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()  # a hung child will not read an exit request: no point asking
                raise errors.WorkerError(
                    f"the worker did not answer {op!r} within {timeout_s:g} s; it was killed"
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
    def preload(self, wait: bool = False) -> None:
        """Start importing torch in the child now, without any CUDA call; with ``wait``, until it is done.

        The import (seconds on a cold machine) then overlaps whatever the parent measures
        meanwhile; :meth:`open_context` waits for it and raises its error, if any.
        """
        if self._preloaded is None:
            self._preloaded = self.submit("preload", timeout_s=_START_TIMEOUT_S)
        if wait:
            self._preload_done()

    def _preload_done(self) -> None:
        """Wait for the import's reply once (a reply can be taken only once)."""
        if self._preloaded is not None and self._preloaded is not _DONE:
            preloaded, self._preloaded = self._preloaded, _DONE
            preloaded.result()

    def open_context(self) -> str | None:
        """Create the CUDA context (torch, device 0 of the child's one visible GPU)."""
        self._preload_done()
        return self._call("context")["uuid"]

    def seconds_per_matmul(self, n: int) -> float:
        """Median time of one n x n product, s."""
        return float(self._call("calibrate", n=n)["seconds"])

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
    ) -> _ProcessJob:
        """Start a job; see :class:`Worker`."""
        check_matmul(operands, dtype)
        request_id = self._send(
            "matmul",
            n=n,
            operands=operands,
            seconds=seconds,
            count=count,
            check=check,
            dtype=dtype,
            marks=marks,
        )
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
        """SIGSTOP the worker's process group, wait until the kernel shows it stopped, then all else under it.

        What the loaded code started in a group or session of its own (``start_new_session=True``,
        ``setsid``, a double fork) is out of the group's reach and would go on running, and
        drawing power, through an idle span measured as frozen: it is found by the process tree
        and the environment's marker, and stopped too (:meth:`Descendants.stop
        <nvmeter.descendants.Descendants.stop>`). The group first: stopped, the worker starts no
        more, so the looks that follow find everything. A process found stopped already is left
        as it is, and :meth:`resume` does not continue it.
        """
        self._group_signal(signal.SIGSTOP)
        self.frozen = True
        self._wait_status(psutil.STATUS_STOPPED)
        self._descendants.stop()

    def resume(self) -> None:
        """SIGCONT the worker's process group, then exactly those out of it that :meth:`freeze` stopped."""
        if self.frozen:
            # The group first, then the rest, each after its parent (Descendants.cont): the worker
            # is the root of every one of them, so no process runs again while its parent (reading
            # its pipe, or its answer) is still stopped. The other way round, a descendant
            # continued first could block on its stopped parent. In a finally: a worker gone
            # meanwhile (WorkerError) leaves nothing it started stopped.
            try:
                self._group_signal(signal.SIGCONT)
                self.frozen = False
            finally:
                self._descendants.cont()

    def _wait_status(self, status: str) -> None:
        end = time.monotonic() + _SIGNAL_WAIT_S
        proc = psutil.Process(self._proc.pid)
        while proc.status() != status:
            if time.monotonic() > end:
                raise errors.WorkerError(f"the worker did not reach state {status!r}")
            time.sleep(0.001)

    def kill(self) -> None:
        """SIGKILL the worker's whole process group at once, end all else under it, reap it. Idempotent.

        Not asked to exit first: a hung worker would not read the request. The group is
        stopped before the look and the kill (:func:`~nvmeter.descendants.end_tree`).
        """
        if not self._closed:
            self._closed = True
            with interrupts.held():  # a Ctrl-C now would leave the group stopped, or its strays running
                self._end()

    def close(self) -> None:
        """Resume (if frozen), ask to exit, kill its process group, end what it left, reap it. Idempotent.

        Anything the loaded code started in the worker's group dies with it: the leader
        is left unreaped (a zombie still holds the group's id) until the group is killed.
        What it started in a group or session of its own (``start_new_session=True``,
        ``setsid``) is out of the group's reach: those are found by the process tree, taken
        here while the worker still lives, and by the environment's marker (for those whose
        parent died first), then SIGTERMed and, after a short grace, SIGKILLed
        (:func:`~nvmeter.descendants.end_tree`, :meth:`Descendants.end
        <nvmeter.descendants.Descendants.end>`).
        """
        if self._closed:
            return
        self._closed = True
        # Held back to the end: interrupted before the SIGCONT, a frozen group would stay stopped
        # for ever (orphaned already, it gets no SIGCONT when the worker dies). One that comes
        # cuts the courtesy wait short; the kill and the look are never cut.
        with interrupts.held() as interrupted:
            # before the worker exits: its children then go to init and are no longer under it
            self._descendants.note()
            if self._exit_status(0.0) is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGCONT)
                self._descendants.cont()  # what freeze() stopped out of the group, in resume()'s order
                self.frozen = False
                try:
                    self._proc.stdin.write(b'{"id": 0, "op": "exit"}\n')
                    self._proc.stdin.flush()
                except OSError:
                    pass
                # a worker that has not exited by then is killed with its group; one busy with a
                # request (interrupted in a call) cannot read the request to exit: not waited for
                wait_s = 0.0 if self._busy() else _EXIT_WAIT_S
                self._exit_status(wait_s, give_up=lambda: bool(interrupted))
            self._end()

    def _end(self) -> None:
        """Kill the worker's group, end every process under it, reap it, close its pipes."""
        ended = False
        try:
            # never reaped before this, so the group's id is still the worker's
            end_tree(self._proc, self._descendants)
            ended = True
        finally:  # the pipes too when it fails: close() is not called twice (it is marked closed)
            if self._guardian is not None:
                self._guardian.dismiss(ended)  # no goodbye if the ending failed: it ends the rest
            self.frozen = False
            self._selector.close()
            for stream in (self._proc.stdin, self._proc.stdout, self._stderr):
                # a child that closed its end leaves unsent bytes behind: closing must not raise
                # (BrokenPipeError here used to replace the WorkerError that says what happened)
                with contextlib.suppress(OSError):
                    stream.close()

    def _busy(self) -> bool:
        """True while a request sent has had no reply (the replies in the pipe read first)."""
        with contextlib.suppress(errors.WorkerError, OSError, ValueError):
            self._pump(0.0)
        return bool(self._unanswered)

    def _exit_status(self, timeout_s: float, give_up=lambda: False) -> int | None:
        """The leader's exit status (-N: killed by signal N) once it has exited, else None.

        Waits up to ``timeout_s``, or until ``give_up()``, without reaping it: until close()
        reaps it, the zombie keeps the process group's id, so killing the group can never hit a
        stranger.
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
            if time.monotonic() >= end or give_up():
                return None
            time.sleep(0.005)
