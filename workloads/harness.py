"""The method harness: check what goes into a method and what comes out.

A method is ``method(train_x, train_y, test_x) -> labels`` (docs/task.md):
train_x (n, 60) float32, train_y (n,) int64 in 0..9, test_x (m, 60) float32, all on one
device; it returns (m,) integer labels on that device. The harness turns every way of
getting this wrong into one line (:class:`UsageError`, or :class:`MethodFailed` when the
method itself raises), never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from nvmeter import errors
from nvmeter.workloads.task import CLASSES, COMPONENTS

Method = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8)


class MethodFailed(errors.NvmeterError):
    """The method raised (out of memory, a CUDA error, a bug); the message names it."""

    exit_code = 4


def _describe(t) -> str:
    if not isinstance(t, torch.Tensor):
        return type(t).__name__
    return f"{t.dtype} {tuple(t.shape)} on {t.device}"


def check_inputs(train_x, train_y, test_x, device: torch.device | str | None = None) -> None:
    """Check a method's inputs.

    Args:
        train_x: (n, 60) float32 tensor.
        train_y: (n,) int64 tensor in 0..9.
        test_x: (m, 60) float32 tensor.
        device: The device all three must be on (default: train_x's).

    Raises:
        UsageError: not tensors, wrong shapes or dtypes, on different devices, or labels
            out of 0..9. Checking the label range reads one scalar back from the device.

    """
    for name, t in (("train_x", train_x), ("train_y", train_y), ("test_x", test_x)):
        if not isinstance(t, torch.Tensor):
            raise errors.UsageError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    for name, t in (("train_x", train_x), ("test_x", test_x)):
        if t.dtype != torch.float32 or t.ndim != 2 or t.shape[1] != COMPONENTS or t.shape[0] == 0:
            raise errors.UsageError(f"{name} must be float32 (rows, {COMPONENTS}), got {_describe(t)}")
    if train_y.dtype != torch.int64 or train_y.shape != (train_x.shape[0],):
        raise errors.UsageError(f"train_y must be int64 ({train_x.shape[0]},), got {_describe(train_y)}")
    want = torch.device(device) if device is not None else train_x.device
    for name, t in (("train_x", train_x), ("train_y", train_y), ("test_x", test_x)):
        if t.device != want and not (want.type == t.device.type and want.index is None):
            raise errors.UsageError(f"{name} is on {t.device}, expected {want}")
    lo, hi = torch.aminmax(train_y)
    if int(lo) < 0 or int(hi) >= CLASSES:
        raise errors.UsageError(f"train_y holds labels {int(lo)}..{int(hi)}, outside 0..{CLASSES - 1}")


def check_output(labels, test_x: torch.Tensor, name: str = "method") -> torch.Tensor:
    """Check a method's output against its test input.

    Returns:
        The labels as int64 (a no-op if they already are).

    Raises:
        UsageError: not a tensor, not integer, not shape (m,), on another device, or
            labels outside 0..9.

    """
    if not isinstance(labels, torch.Tensor):
        raise errors.UsageError(f"{name} returned {type(labels).__name__}, not a torch.Tensor of labels")
    if labels.dtype not in _INT_DTYPES:
        raise errors.UsageError(f"{name} returned {labels.dtype} labels; it must return integers")
    if labels.shape != (test_x.shape[0],):
        raise errors.UsageError(f"{name} returned shape {tuple(labels.shape)}, expected ({test_x.shape[0]},)")
    if labels.device != test_x.device:
        raise errors.UsageError(f"{name} returned labels on {labels.device}, expected {test_x.device}")
    lo, hi = torch.aminmax(labels.long())
    if int(lo) < 0 or int(hi) >= CLASSES:
        raise errors.UsageError(f"{name} returned labels {int(lo)}..{int(hi)}, outside 0..{CLASSES - 1}")
    return labels.long()


def call(method: Method, train_x, train_y, test_x, name: str = "method") -> torch.Tensor:
    """Check the inputs, run ``method``, check its output.

    Returns:
        (m,) int64 labels on test_x's device.

    Raises:
        UsageError: bad inputs or a bad output (see :func:`check_inputs`, :func:`check_output`).
        MethodFailed: the method raised; the message names it and the error.

    """
    check_inputs(train_x, train_y, test_x)
    labels = run(method, train_x, train_y, test_x, name)
    return check_output(labels, test_x, name)


def run(method: Method, train_x, train_y, test_x, name: str = "method"):
    """Run ``method`` with no checks, turning whatever it raises into :class:`MethodFailed`."""
    try:
        return method(train_x, train_y, test_x)
    except errors.NvmeterError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise MethodFailed(f"{name} raised {type(exc).__name__}: {first[:300]}") from exc
