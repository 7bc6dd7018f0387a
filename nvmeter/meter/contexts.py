"""Which processes hold a CUDA context on a window's board, and which of them are not the window's.

The counter sums everything the board draws: another process's kernels inside a window read as
the window's own calls. On the simulated board, 0.1-0.3 s bursts of another process's work inside
0.5 s windows of 300 W calls read +21% median as reliable figures, 29 of 30 (an expert review,
2026-12-07). A window therefore reads the board's compute processes (:func:`read`) at its entry
and at its end: after the end step where the exit waits for it, at the work's end where the step
is found in later work (``exit="return"``, whose energy ends there). One with a context that is
not its own is not reliable unless its caller says those processes did no work
(``EnergyWindow(others_idle=True)``). NVML's list says who holds a context, not who ran kernels:
an idle one refuses the window too.

NVML names a process by its pid in the driver's view, the host's pid namespace. Where this
process is in it (its namespace the host's, or, where /proc cannot say, its pid listed), the
window's own processes (this one, its descendants, ``own_pids`` and theirs) are told from the
others by each listed pid's parents. Inside a container with a pid namespace of its own they
cannot be: only contexts beyond the number of the window's own processes that have loaded the
CUDA driver are certainly others' (``unattributed``), so a container's contention between its
own processes goes unseen, and so does another container's context on a board where the window's
own processes (a job's ranks on the other boards) hold none: they are counted as holders wherever
their contexts are (a breaker, 2026-12-07). A process that opens a context and ends between the
two reads is not seen either.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import psutil

from nvmeter import errors
from nvmeter.boards.protocol import Board

# The inode of the host's (the initial) pid namespace: PROC_PID_INIT_INO in the Linux kernel's
# include/linux/proc_ns.h. A process whose /proc/self/ns/pid has it sees the pids NVML lists.
INIT_PID_NS_INO = 0xEFFFFFFC


class ContextRead(NamedTuple):
    """The board's compute processes at one edge of a window.

    Attributes:
        t_s: Board clock time of the read, s.
        pids: The processes NVML lists (the driver's pids), or None where the board does not say.
        others: Those that are not this process or its descendants, where that can be told.
        unattributed: Contexts beyond the number of the window's own processes, where pids
            cannot be told apart (a pid namespace of the window's own), else 0.
    """

    t_s: float
    pids: tuple[int, ...] | None
    others: tuple[int, ...] = ()
    unattributed: int = 0

    @property
    def other_n(self) -> int:
        """Contexts on the board that are certainly not the window's."""
        return len(self.others) + self.unattributed

    @property
    def own_n(self) -> int | None:
        """Contexts on the board that may be the window's own (None: the board did not list them)."""
        return None if self.pids is None else len(self.pids) - self.other_n

    def to_dict(self) -> dict:
        """JSON form."""
        pids = None if self.pids is None else list(self.pids)
        return {"t_s": self.t_s, "pids": pids, "others": list(self.others), "unattributed": self.unattributed}

    @classmethod
    def from_dict(cls, d: dict) -> ContextRead:
        """Inverse of :meth:`to_dict` (types checked by :mod:`nvmeter.meter.sanity`)."""
        pids = None if d["pids"] is None else tuple(d["pids"])
        return cls(d["t_s"], pids, tuple(d["others"]), d["unattributed"])


def read(board: Board, own_pids: tuple[int, ...] = ()) -> ContextRead:
    """The board's compute processes now, this process's own told from the others.

    ``own_pids``: other processes whose work is the window's too (a distributed job's ranks on
    this host), as this host numbers them.

    Returns:
        The read: one NVML query. Where a pid other than this process's is listed, its parents
        are read (0.42 ms for one pid on a 2-core machine of 69 processes), not the whole process
        table (1.0 ms there, and it grows with the host's processes: results/contexts-read-cost.txt).
        Never raises for the process list: a board that does not give it, or gives pids no
        process can have (:func:`nvmeter.boards.protocol.checked_pids`), reads as not known
        (``pids`` None).
    """
    t_s = board.clock.now()
    try:
        pids = tuple(sorted(set(board.compute_pids())))
    except errors.TelemetryError:  # not supported, or the driver's list not readable: not known
        return ContextRead(t_s, None)
    me = os.getpid()
    host = _host_namespace()
    if host or (host is None and me in pids):
        if all(pid == me for pid in pids):  # the common case: no process table read at all
            return ContextRead(t_s, pids)
        # pid 1 is every process's ancestor: as the window's own it would make every process so
        own = {me, *(pid for pid in own_pids if pid != 1)}
        return ContextRead(t_s, pids, tuple(pid for pid in pids if _other(pid, own)))
    # the driver's pids are the host's: count the window's own processes that may hold a context;
    # nvmeter run's own process, which holds none, had hidden one other process's so (a breaker's
    # trial, 2026-12-07). One context listed and this process's CUDA loaded: it is this one's, as in
    # every window of a one-process container, without the process table read at each edge.
    if len(pids) == 1 and _may_hold_context(me):
        return ContextRead(t_s, pids)
    holders = [pid for pid in _own_tree() | set(own_pids) if _may_hold_context(pid)]
    return ContextRead(t_s, pids, unattributed=max(0, len(pids) - len(holders)))


def _other(pid: int, own: set[int]) -> bool:
    """True where ``pid`` runs and neither is nor descends from a process of ``own``.

    A process that has ended holds no context that can run work (the driver may list it a moment
    longer: a command at ``nvmeter run``'s exit). One that cannot be read is taken as another's.
    """
    if pid in own:
        return False
    try:
        return not any(parent.pid in own for parent in psutil.Process(pid).parents())
    except psutil.NoSuchProcess:  # ended, or hidden: /proc mounted hidepid=2 hides other users'
        return _runs(pid)
    except psutil.Error:
        return True


def _runs(pid: int) -> bool:
    """True where ``pid`` names a running process, seen or not.

    Another user's process under hidepid=2 read as ended, and its work as the window's (a
    breaker's trial, 2026-12-07).
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it runs, and is not ours to signal
        return True
    return True


def _may_hold_context(pid: int) -> bool:
    """False where ``pid`` has not loaded the CUDA driver (libcuda), so holds no context; True if unknown.

    The lenient way where unsure: a process forked from one that had (a DataLoader's worker) maps
    it too, and one whose map cannot be read (another uid's), and each is counted as a holder,
    which can hide as many other processes' contexts (docs/failures.md).
    """
    if pid in _CUDA_LOADED:
        return True
    try:
        with open(f"/proc/{pid}/maps", "rb") as maps:
            loaded = any(b"libcuda.so" in line for line in maps)
    except OSError:
        return True
    if loaded and pid == os.getpid():  # never unloaded: read once (0.57 ms, results/contexts-read-cost.txt)
        _CUDA_LOADED.add(pid)
    return loaded


# This process, once its map has shown libcuda (by pid: a forked child reads its own map again).
_CUDA_LOADED: set[int] = set()


def others(reads: tuple[ContextRead, ...]) -> tuple[tuple[int, ...], int]:
    """(the other processes' pids seen at any read, the most others' contexts at one read)."""
    pids = sorted({pid for r in reads for pid in r.others})
    return tuple(pids), max((r.other_n for r in reads), default=0)


def _own_tree() -> set[int]:
    """This process and its descendants, as this host's process table shows them."""
    me = psutil.Process()
    try:
        return {me.pid, *(p.pid for p in me.children(recursive=True))}
    except psutil.Error:  # a child gone while the table was read: this process alone is certain
        return {me.pid}


def _host_namespace() -> bool | None:
    """True where this process is in the host's pid namespace, whose pids NVML lists; None: unknown.

    Decided before any pid is compared: a container's own pid can be a host pid by chance.
    """
    try:
        return os.stat("/proc/self/ns/pid").st_ino == INIT_PID_NS_INO
    except OSError:  # no /proc (another OS): this process's pid among the listed says it
        return None
