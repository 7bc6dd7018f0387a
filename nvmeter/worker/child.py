"""The child side of a worker process: ``python -m nvmeter.worker.child --backend B --parent PID``.

It dies with its parent (``PR_SET_PDEATHSIG``), answers JSON-line requests on a private
copy of stdin, and replies on a private copy of stdout, so whatever loaded code prints or
reads can never corrupt the protocol. ``--handlers MODULE`` adds the ops in that module's
``HANDLERS`` dict (``nvmeter score`` loads and calls methods this way).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from nvmeter import errors
from nvmeter.worker.protocol import CHUNK

# --------------------------------------------------------------------------
# Child side
# --------------------------------------------------------------------------
# The child's reply channel (a private copy of its stdout), set by main().
_PROTOCOL = None
# Set by SIGUSR1 (the parent's Job.stop()): the running matmul job ends after its current chunk.
# Cleared when a job starts, so a stop that lands between jobs never cuts the next one short.
_STOP = False


def _on_stop(_signum, _frame) -> None:
    global _STOP
    _STOP = True


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

    def preload(self) -> None:
        """Import torch without touching the GPU: no CUDA call, so no context exists yet.

        torch initialises CUDA lazily (on its first CUDA call), so the import costs host time
        only; the parent sends this while it still measures the board without a context.
        """
        if self.backend == "cuda":
            import torch  # noqa: F401

    def context(self) -> str | None:
        if self.backend == "cuda":
            import torch

            torch.backends.cuda.matmul.allow_tf32 = False  # the reference is true FP32
            torch.backends.cudnn.allow_tf32 = False
            torch.zeros(1, device="cuda:0")
            torch.cuda.synchronize()
            self.uuid = f"GPU-{torch.cuda.get_device_properties(0).uuid}"
        return self.uuid

    def _pair(self, n: int, operands: str, dtype: str = "fp32"):
        key = (n, operands, dtype)
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
                if dtype == "bf16":
                    pair = tuple(x.to(torch.bfloat16) for x in pair)
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

    def matmul(
        self,
        n: int,
        operands: str,
        seconds: float,
        count: int,
        check: bool,
        dtype: str = "fp32",
        marks: bool = False,
    ) -> dict:
        global _STOP
        _STOP = False
        if self.backend != "cuda" and dtype != "fp32":
            raise errors.UsageError(f"{dtype} products need a GPU; this worker runs numpy on the CPU")
        a, b, out = self._pair(n, operands, dtype)
        self._product(a, b, out)  # first product outside the timed job (lazy init)
        self._sync()
        t0 = time.perf_counter()
        done, mark_t, mark_n = 0, [], []
        chunk = max(1, min(count or CHUNK, CHUNK))
        while not _STOP and ((count and done < count) or (not count and time.perf_counter() - t0 < seconds)):
            for _ in range(min(chunk, count - done) if count else chunk):
                self._product(a, b, out)
                done += 1
            self._sync()
            if marks:
                mark_t.append(time.perf_counter())
                mark_n.append(done)
        t1 = time.perf_counter()
        err = None
        if check and operands == "constant" and dtype == "fp32":
            err = float(abs(out - n * 2.0**-12).max())
        run = {
            "t0_s": t0,
            "t1_s": t1,
            "matmuls": done,
            "n": n,
            "flops": 2.0 * n**3 * done,
            "max_abs_err": err,
        }
        if marks:
            run |= {"dtype": dtype, "mark_t_s": mark_t, "mark_products": mark_n}
        return run

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


def _preload(request: dict, engine: _Engine) -> dict:
    engine.preload()
    return {}


def _matmul(request: dict, engine: _Engine) -> dict:
    keys = ("n", "operands", "seconds", "count", "check", "dtype", "marks")
    return {"run": engine.matmul(**{k: request[k] for k in keys})}


# The worker's own ops: request -> reply fields (a --handlers module's ops come first).
_OPS = {
    "ping": lambda request, engine: {"pid": os.getpid()},
    "preload": _preload,
    "context": lambda request, engine: {"uuid": engine.context()},
    "calibrate": lambda request, engine: {"seconds": engine.calibrate(int(request["n"]))},
    "matmul": _matmul,
}


def _serve(backend: str, handlers: dict | None = None, out=None, inp=None) -> None:
    engine = _Engine(backend)
    ops = {**_OPS, **(handlers or {})}
    out = out or sys.stdout
    for line in inp or sys.stdin:
        request = json.loads(line)
        op, rid = request.get("op"), request.get("id")
        if op == "exit":
            return
        try:
            handler = ops.get(op)
            reply = handler(request, engine) if handler is not None else {"error": f"unknown op {op!r}"}
        except errors.NvmeterError as exc:  # its message is already one line for a user
            reply = {"error": str(exc), "exit_code": exc.exit_code}
        except Exception as exc:  # report, don't die: the parent decides
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps({"id": rid, **reply}) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the child: ``python -m nvmeter.worker.child --backend B --parent PID``."""
    import argparse

    parser = argparse.ArgumentParser(prog="nvmeter.worker.child")
    parser.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--handlers", default=None, help="module whose HANDLERS dict adds ops")
    args = parser.parse_args(argv)
    _die_with_parent(args.parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent owns Ctrl-C
    signal.signal(signal.SIGUSR1, _on_stop)  # the parent's Job.stop(); before any job can run
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
