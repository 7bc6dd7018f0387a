"""`DistributedWindow`: one window over every rank of a torch.distributed job.

Every rank opens the window around the same steps. The ranks talk through
torch.distributed only (imported when a window is made), over a gloo process group:
a side group of the caller's ranks made for the meter (its own even in a gloo job, so
a time-out breaks the meter's group, not the job's). Why gloo for the meter's few
messages even in an NCCL job:

* ``monitored_barrier`` exists only on gloo, and it is what turns a rank that never
  arrives into an error naming that rank (on rank 0) after ``timeout_s``, on every rank,
  instead of a hang. NCCL collectives have no per-call timeout; their watchdog aborts
  the process after the group's (default 10 min) one.
* The readings are Python objects on the host; gloo moves them without touching a GPU,
  a CUDA stream or the job's NCCL communicator.

The protocol (four barriers and two object gathers, all on the host):

1. entry: each rank synchronises its own work; a monitored barrier; the ranks exchange
   their boards (host, UUID) or the error opening them. Any error ends the window on
   every rank, naming the rank. Each board is metered by the lowest rank on it.
2. each rank enters the windows of the boards it meters (at once, one thread each,
   :class:`~nvmeter.meter.job.JobWindow`); a monitored barrier, so no rank starts work
   while a board's idle span is measured.
3. exit: synchronise; a monitored barrier (every rank's work has ended); the end edges;
   a monitored barrier (no rank resumes work while a board's idle span after is measured);
   the readings are gathered (``all_gather_object``, or ``gather_object`` to one rank).
"""

from __future__ import annotations

import contextlib
import gc
import math
import numbers
import os
import re
import socket
import sys
import time
import warnings
from collections.abc import Mapping
from datetime import timedelta

from nvmeter import errors
from nvmeter.boards.factory import open_boards
from nvmeter.boards.protocol import cuda_index
from nvmeter.meter.job import JobWindow
from nvmeter.meter.jobmeasurement import BoardPart, JobMeasurement, RankRecord
from nvmeter.meter.sync import Sync, resolve

# Default wait for the other ranks at each barrier, s. A data-parallel job's ranks reach
# the window's edges within a step of each other; two minutes also covers a slow start.
TIMEOUT_S = 120.0

# gloo groups made by this process for the meter, by the ranks of the caller's group
_CONTROL: dict[tuple[int, ...], object] = {}
# the longest timeout_s of this process's windows so far, s (a new group waits out the old windows')
_longest_s = 0.0


def _dist():
    """torch.distributed, initialised.

    Raises:
        UsageError: torch.distributed is not available or not initialised.
    """
    try:
        import torch.distributed as dist
    except ImportError as exc:  # pragma: no cover - torch is a dependency
        raise errors.UsageError("DistributedWindow needs torch.distributed") from exc
    if not (dist.is_available() and dist.is_initialized()):
        raise errors.UsageError(
            "torch.distributed is not initialised: call torch.distributed.init_process_group first "
            "(or use JobWindow for the boards of one process)"
        )
    return dist


def control_group(group=None, timeout_s: float = TIMEOUT_S):
    """The meter's own gloo group over ``group``'s ranks, made once per process and reused.

    Made with a collective call: every rank of ``group`` makes its window at the same point,
    as it must anyway. Its own even when ``group`` is gloo: a time-out closes gloo's
    connections for good, and it is then the meter's group that is lost, not the job's
    (an adversarial review, 2026-12-06: the job's next ``all_reduce`` failed on both ranks).
    A window that loses it forgets it (:func:`_forget`), so the next window makes a new one.
    Its timeout bounds its making and the object gathers (the barriers take each window's
    own): twice the longest ``timeout_s`` of this process's windows so far, because a rank that
    left a window early makes the next window's group while the others still wait out the old
    window's timeout, which may be longer than the new one's (a review, 2026-12-07).
    """
    global _longest_s
    _longest_s = max(_longest_s, timeout_s)
    dist = _dist()
    ranks = _ranks(dist, group)
    world = group is None or group is dist.group.WORLD
    if ranks not in _CONTROL:
        timeout = timedelta(seconds=2 * _longest_s)
        if world:
            _CONTROL[ranks] = dist.new_group(backend="gloo", timeout=timeout)
        else:  # only the members call: the others never make a window on this group
            _CONTROL[ranks] = dist.new_group(
                list(ranks), backend="gloo", timeout=timeout, use_local_synchronization=True
            )
    return _CONTROL[ranks]


def _ranks(dist, group) -> tuple[int, ...]:
    if group is None or group is dist.group.WORLD:
        return tuple(range(dist.get_world_size()))
    return tuple(dist.get_process_group_ranks(group))


def _forget(dist, group, ctrl) -> None:
    """Forget the meter's group ``ctrl`` over ``group``'s ranks: a time-out or a rank's exit broke it.

    Every rank forgets it on the same windows (those that raised an exception inside the block
    or met a failed exchange), so every rank makes its next window's group at the same point.
    """
    ranks = _ranks(dist, group)
    if _CONTROL.get(ranks) is ctrl:
        del _CONTROL[ranks]
        # its connections are closed or closing: let it go, so a job that keeps catching
        # failures does not keep one dead group per failure (a review)
        with contextlib.suppress(Exception):
            dist.destroy_process_group(ctrl)


class DistributedWindow:
    """One window over every rank of a job: ``with DistributedWindow() as w: ...; w.call()``.

    Each rank makes the window around the same steps; ``w.call()`` counts this rank's
    steps. The job's boards are keyed by (host, UUID): a board several ranks run on (or
    MIG instances of one parent, opened by the parent's UUID) is metered by the lowest
    of them and counted once.

    Args:
        devices: This rank's boards: None (its current CUDA device if torch has
            initialised CUDA, else ``LOCAL_RANK``), ``"all"``, or a list of CUDA indices,
            ``GPU-…`` UUIDs or :class:`Board` objects.
        group: The process group whose ranks share the window (None: the default one).
            The meter talks over a gloo group of its own over these ranks (module
            docstring: why).
        timeout_s: Longest wait for the other ranks at any edge, s: past it every
            waiting rank raises :class:`~nvmeter.errors.DistributedError`, rank 0 naming
            the ranks that did not arrive.
        result_on: ``"all"`` (every rank holds the result) or one rank of ``group``.
        host: The host name this rank's boards are recorded under (default: this
            host's; two containers sharing a board need one name).
        sync: This rank's work's synchronisation (default: every CUDA device the rank
            holds a context on).
        **window_kwargs: ``idle``, ``method``, ``calls``, ``tail_s``, ``profile``,
            ``max_rel_err``, ``available``, as for :class:`~nvmeter.meter.job.JobWindow`.

    After the block, ``w.result`` is the :class:`JobMeasurement` on the ranks that hold it
    (None elsewhere, and None if the block raised on this rank).

    Raises:
        UsageError: torch.distributed not initialised, or bad arguments.
        DistributedError: at entry, a rank could not open its boards (every rank
            raises, naming it); at any edge, a rank did not arrive within ``timeout_s``.
    """

    def __init__(
        self,
        devices=None,
        *,
        group=None,
        timeout_s: float = TIMEOUT_S,
        result_on: str | int = "all",
        host: str | None = None,
        sync: str | Sync | None = None,
        **window_kwargs,
    ) -> None:
        dist = _dist()
        if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise errors.UsageError(f"timeout_s must be > 0 s, not {timeout_s!r}")
        self._dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        if result_on != "all" and not (isinstance(result_on, int) and 0 <= result_on < self.world_size):
            raise errors.UsageError(
                f"result_on must be 'all' or a rank 0-{self.world_size - 1}, not {result_on!r}"
            )
        self.timeout_s = float(timeout_s)
        self.result_on = result_on
        self.host = host or socket.gethostname()
        self._sync, self.sync_name = resolve("torch_all" if sync is None else sync)
        self._ctrl = control_group(group, self.timeout_s)
        self._kw = dict(window_kwargs)
        self._job: JobWindow | None = None
        self._open_error: errors.NvmeterError | None = None
        try:
            wanted = _default_devices() if devices is None else devices
            self.boards = open_boards(wanted, available=self._kw.pop("available", None))
            # made now so bad arguments fail before any rank waits; entered later, per owner
            JobWindow(self.boards, sync="none", host=self.host, **self._kw)
        except errors.NvmeterError as exc:
            self.boards, self._open_error = [], exc
        self._ranks_on: dict[tuple[str, str], tuple[int, ...]] = {}
        self.timing_s: dict[str, float] = {}
        self.result: JobMeasurement | None = None

    # -- the block -------------------------------------------------------------
    def __enter__(self) -> DistributedWindow:
        self._sync()
        self._barrier("entry")
        mine = [(self.host, b.identity().uuid) for b in self.boards]
        error = None if self._open_error is None else f"{type(self._open_error).__name__}: {self._open_error}"
        statuses = self._all_gather(
            {
                "rank": self.rank,
                "host": self.host,
                "boards": mine,
                "error": error,
                "result_on": self.result_on,
                "max_rel_err": self._kw.get("max_rel_err"),
                "pid": os.getpid(),
            }
        )
        self._refuse_failures(statuses)
        self._refuse_mixed(statuses)
        for status in statuses:
            for key in status["boards"]:
                self._ranks_on.setdefault(tuple(key), ())
                self._ranks_on[tuple(key)] += (status["rank"],)
        owned = [b for b, key in zip(self.boards, mine, strict=True) if min(self._ranks_on[key]) == self.rank]
        for line in shared_simulated(owned, self.host, self._ranks_on):
            warnings.warn(line, errors.NvmeterWarning, stacklevel=2)
        # the job's ranks on this host: their contexts on a board this rank meters are the job's work
        ranks_here = tuple(s["pid"] for s in statuses if s["host"] == self.host and s["rank"] != self.rank)
        kw = {**self._kw, "own_pids": (*ranks_here, *self._kw.get("own_pids", ()))}
        self._job = JobWindow(owned, sync="none", host=self.host, **kw)
        self._job.__enter__()
        self._barrier("entry edges")
        return self

    def call(self, n: int = 1) -> None:
        """Declare ``n`` more calls (steps) of this rank."""
        self._job.call(n)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:  # this rank leaves; the others' exit barrier names it after timeout_s
            _forget(self._dist, self.group, self._ctrl)
            return
        self._sync()
        self.timing_s["exit_barrier_s"] = self._timed(lambda: self._barrier("exit"))
        self._job.exit_boards()
        self.timing_s["exit_skew_s"] = self._timed(lambda: self._barrier("exit edges"))
        payload = {
            "rank": self.rank,
            "host": self.host,
            "calls": self._job.calls,
            "devices": [b.identity().uuid for b in self.boards],
            "timing_s": dict(self.timing_s),
            "parts": self._job.parts(self.rank, self._ranks_on),
        }
        t0 = time.perf_counter()
        gathered = self._gather(payload)
        gather_s = time.perf_counter() - t0
        self.timing_s["gather_s"] = gather_s
        if gathered is not None:
            self.result = _combine(gathered, self._kw.get("max_rel_err"), gather_s)

    # -- talking to the other ranks --------------------------------------------
    def _barrier(self, edge: str) -> None:
        dist = self._dist
        try:
            dist.monitored_barrier(
                group=self._ctrl, timeout=timedelta(seconds=self.timeout_s), wait_all_ranks=True
            )
        except RuntimeError as exc:  # gloo: a timeout, or a peer's connection closed
            raise self._lost(edge, exc) from exc

    def _lost(self, edge: str, exc: Exception) -> errors.DistributedError:
        _forget(self._dist, self.group, self._ctrl)
        return errors.DistributedError(self._explain(edge, exc))

    def _explain(self, edge: str, exc: Exception) -> str:
        text = str(exc)
        named = re.search(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier", text)
        where = f"the window's {edge} (rank {self.rank} of {self.world_size}, host {self.host})"
        if named:
            return f"rank(s) {named.group(1).strip()} did not reach {where} within {self.timeout_s:g} s"
        if "successfully reached monitoredBarrier" in text:
            return (
                f"not every rank reached {where} within {self.timeout_s:g} s: "
                "rank 0's error names the missing ones"
            )
        if re.search(r"[Cc]onnection (closed|reset)", text):
            return f"a rank left the job before {where}: its connection closed (it ended or raised)"
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return (
            f"{where}: not every rank arrived within {self.timeout_s:g} s "
            f"(rank 0 names the missing ones) ({first})"
        )

    def _all_gather(self, obj) -> list:
        out = [None] * self.world_size
        try:
            with _gc_paused():
                self._dist.all_gather_object(out, obj, group=self._ctrl)
        except RuntimeError as exc:
            raise self._lost("gather", exc) from exc
        return out

    def _gather(self, obj) -> list | None:
        if self.result_on == "all":
            return self._all_gather(obj)
        dist = self._dist
        dst = dist.get_global_rank(self._ctrl, self.result_on)
        out = [None] * self.world_size if self.rank == self.result_on else None
        try:
            with _gc_paused():
                dist.gather_object(obj, out, dst=dst, group=self._ctrl)
        except RuntimeError as exc:
            raise self._lost("gather", exc) from exc
        return out

    def _refuse_failures(self, statuses: list[dict]) -> None:
        failed = [s for s in statuses if s["error"]]
        if not failed:
            return
        text = "; ".join(
            f"rank {s['rank']} (host {s['host']}) cannot meter its boards: {s['error']}" for s in failed
        )
        raise errors.DistributedError(text) from self._open_error

    @staticmethod
    def _refuse_mixed(statuses: list[dict]) -> None:
        """Refuse ranks that would gather or judge the job's result differently, on every rank at once.

        Ranks given different ``result_on`` waited for the process group's time-out at the end
        (30 min by default) and then named no rank; given different ``max_rel_err``, one job's
        figure read NOT RELIABLE on one rank and reliable on another (adversarial reviews,
        2026-12-06). Every rank sees the same statuses, so all refuse here.
        """
        for name in ("result_on", "max_rel_err"):
            given = {s["rank"]: s[name] for s in statuses}
            if len({_same(v) for v in given.values()}) > 1:
                said = ", ".join(f"rank {rank}: {value!r}" for rank, value in sorted(given.items()))
                raise errors.UsageError(f"the ranks gave different {name} ({said}): give every rank the same")

    @staticmethod
    def _timed(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0


def _same(value):
    """A setting as ranks compare it: a number by value (NumPy's 0.02 is Python's), else by its repr."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return repr(value)


@contextlib.contextmanager
def _gc_paused():
    """Python's cyclic collector paused while readings are unpickled.

    Unpickling a few thousand objects can set off a full collection, which in a process
    holding torch took 0.1-0.5 s on our CPU test machine and would land on the window's
    exit at random; the collection runs later instead, as it would have without the window.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def shared_simulated(boards, host: str, ranks_on: Mapping[tuple[str, str], tuple[int, ...]]) -> list[str]:
    """A line for each simulated board of ``boards`` that several ranks opened under one UUID.

    Ranks on one host that open one UUID share that board, and one of them meters it: right for a
    GPU, but each process's simulated board is its own simulation, and every process's first
    ``SimulatedBoard()`` takes the same UUID. A new user's two ranks, at 300 W and 100 W, so read
    as one board: 29,994 mJ a step for ~40,000, without a word.
    """
    out = []
    for b in boards:
        ident = b.identity()
        ranks = ranks_on.get((host, ident.uuid), ())
        if ident.simulated and len(ranks) > 1:
            out.append(
                f"ranks {', '.join(map(str, ranks))} each opened a simulated board {ident.uuid}: "
                f"metered once, by rank {min(ranks)}, as one shared board; give each rank's "
                "SimulatedBoard a UUID of its own (SimConfig(uuid=...)) to meter them apart"
            )
    return out


def _default_devices():
    """This rank's CUDA device: torch's current one once CUDA is initialised, else LOCAL_RANK.

    Raises:
        UsageError: LOCAL_RANK is set to anything but a CUDA index in ASCII digits.
    """
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return [torch.cuda.current_device()]
    # as --device reads an index: a bare int() raised ValueError past the ranks' shared error
    # (one rank gone, the others left waiting) and took other scripts' digits ("١")
    local_rank = os.environ.get("LOCAL_RANK", "0")
    index = cuda_index(local_rank)
    if index is None:
        raise errors.UsageError(
            f"LOCAL_RANK is {local_rank!r}, not a CUDA index (ASCII digits, as torchrun sets it): "
            "set it so, or give DistributedWindow devices="
        )
    return [index]


def _combine(payloads: list[Mapping], max_rel_err: float | None, gather_s: float) -> JobMeasurement:
    parts: list[BoardPart] = [p for payload in payloads for p in payload["parts"]]
    parts.sort(key=lambda b: (b.host, b.rank, b.device.uuid))
    ranks = tuple(
        RankRecord(p["rank"], p["host"], p["calls"], tuple(p["devices"]), dict(p["timing_s"]))
        for p in sorted(payloads, key=lambda p: p["rank"])
    )
    return JobMeasurement(tuple(parts), ranks, max_rel_err, gather_s if math.isfinite(gather_s) else math.nan)
