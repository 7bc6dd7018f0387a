"""The worker side of ``nvmeter score``: load the method, build draws from seeds, call it.

This module runs inside the worker process (:mod:`nvmeter.worker.process` started with
``handlers="nvmeter.score.method_host"``), which holds the CUDA context. The scorer (the parent)
owns NVML, the energy windows' clock, the judge and the records. It sends seeds, never
arrays: the child builds each draw with :func:`nvmeter.workloads.task.draw`, which is
deterministic in its seeds, and writes the method's labels to a ``.npy`` file that the
parent reads and judges against its own copy of the draw.

Ops (request fields -> reply fields), added to the worker's own:

* ``context``: () -> ``uuid``. Opens the CUDA context without touching the TF32 flags, and
  starts the harness (torch and the bench).
* ``load``: ``method`` (a registered name) or ``file`` + ``function``; ``name`` -> ``name``.
  Imports the method alone (the scorer gives it ``--call-timeout-s``).
* ``prepare``: ``draws`` [[dataset, seed], ...], ``split_seed``, ``root`` -> ``count``.
  Builds and keeps draws, so that no call's time limit (and no window) includes building one.
* ``call``: ``dataset``, ``seed``, ``split_seed``, ``root``, ``out``, ``drop`` -> ``ms``. One timed
  call as :meth:`nvmeter.workloads.evaluate.Bench.call` makes it (inputs copied into the same
  tensors, checked, L2 flushed, CUDA events around the method alone); labels saved to ``out``
  (int64, shape (rows,)) unless ``out`` is null; the kept draw is dropped after if ``drop``.
* ``calls``: ``kind`` (``method`` or ``null``), ``seconds``, ``min_calls``, ``draws``,
  ``split_seed``, ``root``, ``out`` -> ``t0_s``, ``t1_s``, ``ms``. The same calls back to back
  over the prepared draws in turn until ``seconds`` have passed and ``min_calls`` are made;
  ``null`` calls run the harness around a method that returns at once (the round trip the
  control subtracts). Every call's labels come back to the host in both kinds, so the two
  round trips match; the method's are saved to ``out`` as int8, shape (calls, rows).
* ``matmul``, ``calibrate``: the worker's reference products with TF32 forced off (and the
  caller's settings restored after), whatever the method set.

Errors: a method that raises is :class:`~nvmeter.workloads.harness.MethodFailed` (exit code
4), bad output or a file that cannot be loaded a :class:`~nvmeter.errors.UsageError` (2); the
worker sends either back as one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

from nvmeter import errors


class _Host:
    """What the child keeps between requests: the method, the bench, the prepared draws."""

    def __init__(self) -> None:
        self.method = None
        self.name = "method"
        self.bench = None
        self.kept: dict[tuple, object] = {}

    def bench_for(self, backend: str):
        if self.bench is None:
            import torch

            from nvmeter.workloads.evaluate import Bench

            self.bench = Bench(torch.device("cuda", 0) if backend == "cuda" else torch.device("cpu"))
        return self.bench

    def draw(self, dataset: str, seed: int, split_seed: int, root: str | None):
        """A kept draw (see ``prepare``), else a new one."""
        key = (dataset, int(seed), int(split_seed), root)
        if key in self.kept:
            return self.kept[key]
        from nvmeter.workloads import task

        return task.draw(dataset, int(seed), split_seed=int(split_seed), root=root)


_HOST = _Host()


def _context(request: dict, engine) -> dict:
    if engine.backend == "cuda":
        import torch

        torch.cuda.set_device(0)
        torch.zeros(1, device="cuda:0")
        torch.cuda.synchronize()
        engine.uuid = f"GPU-{torch.cuda.get_device_properties(0).uuid}"
    # the harness (torch, the bench) starts here, under the start's time limit, so that
    # ``load`` imports the method alone, under the method's (--call-timeout-s)
    _HOST.bench_for(engine.backend)
    return {"uuid": engine.uuid}


def load_file(file: str, function: str):
    """Import ``file`` under a private module name and return its ``function``.

    The file's folder goes first on ``sys.path`` so that it can import its neighbours.

    Raises:
        UsageError: the file cannot be imported, lacks ``function``, or it is not callable.

    """
    path = Path(file).resolve()
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    module_name = f"_nvmeter_method_{digest}"  # cannot clash with the file's own imports
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise errors.UsageError(f"{path}: not a Python file that can be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        sys.modules.pop(module_name, None)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise errors.UsageError(f"{path} failed to import: {type(exc).__name__}: {first[:300]}") from exc
    fn = getattr(module, function, None)
    if fn is None:
        raise errors.UsageError(f"{path} has no function {function!r}")
    if not callable(fn):
        raise errors.UsageError(f"{path}:{function} is of type {type(fn).__name__}, not a function")
    return fn


def _load(request: dict, engine) -> dict:
    if request.get("method"):
        from nvmeter.workloads import methods

        fn = methods.spec(request["method"]).load()
    else:
        fn = load_file(request["file"], request["function"])
    _HOST.method = fn
    _HOST.name = request.get("name") or "method"
    _HOST.bench_for(engine.backend)
    return {"name": _HOST.name}


def _prepare(request: dict, engine) -> dict:
    from nvmeter.workloads import task

    split_seed, root = int(request["split_seed"]), request.get("root")
    for dataset, seed in request["draws"]:
        key = (dataset, int(seed), split_seed, root)
        if key not in _HOST.kept:
            _HOST.kept[key] = task.draw(dataset, int(seed), split_seed=split_seed, root=root)
    return {"count": len(_HOST.kept)}


def _method():
    if _HOST.method is None:
        raise errors.UsageError("no method loaded (the scorer sends 'load' first)")
    return _HOST.method


def _call(request: dict, engine) -> dict:
    method = _method()
    draw = _HOST.draw(request["dataset"], request["seed"], request["split_seed"], request.get("root"))
    if request.get("drop"):
        _HOST.kept.pop(
            (request["dataset"], int(request["seed"]), int(request["split_seed"]), request.get("root")), None
        )
    ms, labels = _HOST.bench_for(engine.backend).call(method, _HOST.name, draw)
    if request.get("out"):
        np.save(request["out"], labels.cpu().numpy(), allow_pickle=False)
    return {"ms": ms}


def null_method(train_x, train_y, test_x):
    """The control's call: labels at once, so a window of these costs only the harness.

    Returns:
        (m,) int64 zeros on test_x's device.

    """
    import torch

    return torch.zeros(test_x.shape[0], dtype=torch.int64, device=test_x.device)


def _calls(request: dict, engine) -> dict:
    kind = request["kind"]
    if kind not in ("method", "null"):
        raise errors.UsageError(f"calls: kind must be 'method' or 'null', not {kind!r}")
    method, name = (_method(), _HOST.name) if kind == "method" else (null_method, "null call")
    split_seed, root = request["split_seed"], request.get("root")
    draws = [_HOST.draw(d, s, split_seed, root) for d, s in request["draws"]]
    if not draws:
        raise errors.UsageError("calls: no draws given")
    seconds, min_calls = float(request["seconds"]), int(request["min_calls"])
    bench = _HOST.bench_for(engine.backend)
    ms: list[float] = []
    labels = []
    t0 = time.perf_counter()
    while True:
        call_ms, out = bench.call(method, name, draws[len(ms) % len(draws)])
        ms.append(call_ms)
        labels.append(out.cpu())  # both kinds: the control's round trip must match the method's
        if len(ms) >= min_calls and time.perf_counter() - t0 >= seconds:
            break
    t1 = time.perf_counter()
    if kind == "method" and request.get("out"):
        np.save(request["out"], np.stack([t.numpy().astype(np.int8) for t in labels]), allow_pickle=False)
    return {"t0_s": t0, "t1_s": t1, "ms": ms}


@contextlib.contextmanager
def _true_fp32(engine):
    """TF32 off for the reference, whatever the method set; the method's settings come back after."""
    if engine.backend != "cuda":
        yield
        return
    import torch

    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        # the precision first: setting it also sets the matmul flag, which then gets its own value
        torch.set_float32_matmul_precision(saved[2])
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]


def _matmul(request: dict, engine) -> dict:
    args = {k: request[k] for k in ("n", "operands", "seconds", "count", "check")}
    with _true_fp32(engine):
        return {"run": engine.matmul(**args)}


def _calibrate(request: dict, engine) -> dict:
    with _true_fp32(engine):
        return {"seconds": engine.calibrate(int(request["n"]))}


HANDLERS = {
    "context": _context,
    "load": _load,
    "prepare": _prepare,
    "call": _call,
    "calls": _calls,
    "matmul": _matmul,
    "calibrate": _calibrate,
}
