"""The meter's energy-counter reads in this process, per board: what a window's bound holds of others'.

Each read draws the board's polling artefact (+2.8 W on the H200 polled back to back,
results/probe-h200.json). A window bounds its own edges' reads. The reads of another meter
inside it drew that artefact too: an EnergyWindow inside a pytest-energy window polls the
counter for its idle span and its edges, and the outer window read that as its calls' energy,
+18% and +26% as reliable figures (an adversarial review). So every counter read the meter
makes goes through :func:`read_energy`, which adds its time to the board's total, and to its
owner's where a window owns the thread (:func:`owned_by`); a window's foreign read time is the
total's growth over its life less its own.

Only this process's reads are seen: another process polling the board (a second nvmeter,
nvidia-smi, DCGM) is not.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator

from nvmeter.boards.protocol import Board
from nvmeter.clock import Clock

_lock = threading.Lock()
_local = threading.local()
_total_s: dict[str, float] = {}  # board UUID: seconds of counter reads, every owner's
_owned_s: dict[int, float] = {}  # owner token: seconds of its own reads
_tokens = itertools.count(1)


def _key(board: Board) -> str:
    """The board's UUID: two handles on one GPU (two windows' own) are one board."""
    return board.identity().uuid


def new_owner() -> int:
    """A token for a window's reads (:func:`owned_by`)."""
    token = next(_tokens)
    with _lock:
        _owned_s[token] = 0.0
    return token


def release(token: int) -> None:
    """Forget ``token``: its reads from now on are nobody's."""
    with _lock:
        _owned_s.pop(token, None)


@contextlib.contextmanager
def owned_by(token: int | None) -> Iterator[None]:
    """Reads made in this thread inside the block are ``token``'s (None: nobody's)."""
    before = getattr(_local, "owner", None)
    _local.owner = token
    try:
        yield
    finally:
        _local.owner = before


def read_energy(board: Board, clock: Clock | None = None) -> tuple[float, float, int]:
    """A counter read: (start s, end s on ``clock``; counter mJ), its time counted."""
    clock = board.clock if clock is None else clock
    t0 = clock.now()
    value = board.energy_mj()
    t1 = clock.now()
    key, owner = _key(board), getattr(_local, "owner", None)
    with _lock:
        _total_s[key] = _total_s.get(key, 0.0) + (t1 - t0)
        if owner in _owned_s:
            _owned_s[owner] += t1 - t0
    return t0, t1, value


def snapshot(board: Board, token: int) -> tuple[float, float]:
    """(seconds of every counter read of ``board`` so far, of ``token``'s own), under one lock.

    Two snapshots' differences give the reads of others between them; taken under two locks,
    a read could land in one sum and not the other.
    """
    with _lock:
        return _total_s.get(_key(board), 0.0), _owned_s.get(token, 0.0)


def foreign_s(before: tuple[float, float], after: tuple[float, float]) -> float:
    """Seconds of other owners' reads between two snapshots (:func:`snapshot`), 0 at least."""
    return max(0.0, (after[0] - before[0]) - (after[1] - before[1]))
