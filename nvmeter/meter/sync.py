"""Device synchronisation for window edges: torch, cupy, jax, none, or any callable.

A window's edges must wait for the device, or the energy of queued work lands
outside the window. The default is torch's, when torch is already imported and
CUDA is initialised; nvmeter never imports a framework on its own.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from nvmeter import errors

Sync = Callable[[], None]


def _torch() -> None:
    import torch

    torch.cuda.synchronize()


def _torch_all() -> None:
    """Every CUDA device this process has a context on: a multi-board window's work may use several.

    Only devices that already hold a context are synchronised, since synchronising
    another would open one there (tens of watts of idle, docs/facts.md).
    """
    import torch

    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return
    has_context = getattr(torch._C, "_cuda_hasPrimaryContext", None)
    if has_context is None:  # not in every build: the current device at least
        torch.cuda.synchronize()
        return
    for index in range(torch.cuda.device_count()):
        if has_context(index):
            torch.cuda.synchronize(index)


def _cupy() -> None:
    import cupy

    cupy.cuda.Device().synchronize()


def _jax() -> None:
    import jax

    # block on every live array: jax has no device-wide synchronize
    for array in jax.live_arrays():
        array.block_until_ready()


def _none() -> None:
    return None


_BY_NAME = {"torch": _torch, "torch_all": _torch_all, "cupy": _cupy, "jax": _jax, "none": _none}


def _check_available(name: str) -> None:
    """A named framework must be importable (torch also with CUDA): else one line, not a traceback."""
    import importlib.util

    if name in ("none", "torch_all"):  # torch_all synchronises only devices already in use
        return
    if importlib.util.find_spec(name) is None:
        raise errors.UsageError(f"sync={name!r}, but {name} is not installed: pass sync='none' or a callable")
    if name == "torch":
        import torch

        if not torch.cuda.is_available():
            raise errors.UsageError(
                "sync='torch', but torch sees no CUDA device: pass sync='none' or a callable"
            )


def resolve(sync: str | Sync | None) -> tuple[Sync, str]:
    """The sync callable and its name.

    Args:
        sync: ``"torch"``, ``"torch_all"`` (every device with a context), ``"cupy"``,
            ``"jax"``, ``"none"``, a callable, or None for torch when it is imported with
            CUDA initialised, else none.

    Raises:
        UsageError: an unknown name or a non-callable.
    """
    if sync is None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            return _torch, "torch"
        return _none, "none"
    if callable(sync):
        return sync, getattr(sync, "__name__", "callable")
    if isinstance(sync, str) and sync in _BY_NAME:
        _check_available(sync)
        return _BY_NAME[sync], sync
    raise errors.UsageError(f"sync must be one of {', '.join(_BY_NAME)} or a callable, not {sync!r}")
