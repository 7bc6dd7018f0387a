"""Every process started under a child of nvmeter, found and ended, whatever group or session it moved to.

nvmeter stops a child it started (a score's worker, ``nvmeter run``'s command) by its process
group: the child leads a session of its own, and one ``killpg`` reaches at once all it started
there. A process that the child's code started in a session or group of its own
(``subprocess.Popen(..., start_new_session=True)``, ``os.setsid()``, a daemon's double fork)
is out of reach of ``killpg`` and used to outlive the run. :class:`Descendants` finds those too:

* by the process tree (psutil), looked at while the child still lives: once a process has
  died, the kernel gives its children to init (or the nearest subreaper), and they are no
  longer found under it. Hence :meth:`Descendants.note` before the child is stopped, and
  each look also takes in what the processes already known have started since;
* by a marker in the environment (:func:`marked`), for what had left the tree before any
  look: the children of a child that died by itself (``os._exit`` in a method), a double
  fork's grandchild. Only processes started under the child inherit it (a process that
  clears its environment loses it; the tree still finds it while the child lives).

Each look is one reading of the process table (each process's parent, and the marker of each
not noted yet), and both ways find what they find in that one reading.

The same looks stop them for a frozen idle span (:meth:`Descendants.stop`, which
``WorkerProcess.freeze`` calls once the worker's group is stopped) and continue exactly those
stopped (:meth:`Descendants.cont`): a process in a session of its own would otherwise go on
running, and drawing power, through an idle span measured as frozen.

A process is named by a psutil ``Process``, which carries its start time: a pid that the
kernel has since given to another process reads as not running, and psutil refuses to signal
it, so a process that is not ours is never stopped, continued or ended.

:func:`end_tree` is the one way a child and all it started are ended: its group stopped,
looked under, killed, then every process found out of the group ended, then the child reaped.

A process that has cleared its environment and whose parent died before any look carries
neither: the kernel gave it to init. The console script closes that hole (Linux only): it makes
nvmeter its descendants' subreaper (:func:`adopt_orphans`), so such an orphan is given to
nvmeter instead, and each look takes in nvmeter's children that it did not start itself (the
roots of its :class:`Descendants`). nvmeter then reaps those that end (:func:`reap_orphans`).
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import secrets
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Mapping
from typing import ClassVar, NamedTuple

import psutil

from nvmeter import errors

# The environment variable that marks every process started under one child (its value a
# random token, one per child).
MARKER = "NVMETER_PROCESS_TREE"
# SIGTERM first, so a descendant can clean up (a server its socket file, a tool its
# temporary files); whatever still runs this long after is SIGKILLed.
GRACE_S = 1.0
# After SIGKILL, how long to wait for the kernel to end them (a process in an uninterruptible
# wait, D, ends only once the wait is over).
KILL_WAIT_S = 5.0
# A freeze gives up after this long, s: a process that may not be stopped (another user's)
# and forks on would keep its looks finding new ones for ever.
FREEZE_GIVE_UP_S = 5.0
# The leader is reaped within this, s, after its group's SIGKILL; one stuck in the kernel (D) is
# left unreaped and named, not waited on for ever.
REAP_WAIT_S = 5.0
_POLL_S = 0.02
# How long to wait for a process to show as stopped after SIGSTOP (one stuck in the kernel may not).
_STOP_WAIT_S = 0.2


# prctl(2)'s option that makes a process the subreaper of its descendants (Linux 3.4 and later):
# an orphan below it is given to it, not to init.
_PR_SET_CHILD_SUBREAPER = 36


class _Adoption:
    """Whether this process adopts its descendants' orphans, and which of its children are not orphans."""

    on = False
    # psutil compares pid and start time. The children it started itself (the roots of every
    # Descendants made here, and own_child's), reaped by their Popen ...
    own: ClassVar[set[psutil.Process]] = set()
    # ... and those it had when it began to adopt (a wrapper's helper, before its exec): no orphans
    # of its children, but nothing else waits for them, so reap_orphans reaps them as they end
    inherited: ClassVar[set[psutil.Process]] = set()


def adopt_orphans() -> bool:
    """Make this process the subreaper of all it starts, for good; True if it now is (Linux only).

    An orphan anywhere under it (its parent ended, whatever its session or environment) is then
    given to this process, not to init, and :class:`Descendants` finds it among this process's
    children (:func:`_adopted` says which are). Meant for a command's own process (the console
    script), not a library's caller. The children it has already (a helper a wrapper script
    started before it ``exec``'d nvmeter) are never orphans; nor is any process of its own
    session, where nothing under a :class:`Descendants` root can go (each root leads a session of
    its own, and a process can only leave a session for a new one). This process must reap the
    orphans that end (:func:`reap_orphans`).
    """
    if not _Adoption.on and sys.platform.startswith("linux"):
        with contextlib.suppress(psutil.Error):
            _Adoption.inherited.update(psutil.Process().children())
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            _Adoption.on = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _Adoption.on


def own_child(pid: int) -> None:
    """Note ``pid`` as a child this process started itself (a :class:`Descendants` root is noted so)."""
    with contextlib.suppress(psutil.Error):
        _Adoption.own.add(psutil.Process(pid))


def _adopted(entry_ppid: int, process: psutil.Process) -> bool:
    """True for an orphan this process adopted: its child, neither its own nor of its own session.

    A wrapper's helper, started before the wrapper ``exec``'d nvmeter, is in nvmeter's session
    (and its orphans too, unless they left it): an adversarial review found such a helper frozen,
    ended and named in ``left_running`` as the command's, before both checks.
    """
    if not (_Adoption.on and entry_ppid == os.getpid()):
        return False
    if process in _Adoption.own or process in _Adoption.inherited:
        return False
    session = _session(process.pid)  # None: ended (or another user's), not one to take in
    return session is not None and session != os.getsid(0)


def reap_orphans() -> tuple[int, ...]:
    """Reap the adopted orphans (and inherited children) that have ended; their pids.

    Never a child this process started itself (its ``Popen`` reaps it). Call it from the thread
    that starts children, between their starts and their waits: a ``subprocess.run`` waiting in
    another thread on a child not noted as its own would lose its status (ECHILD reads as 0).

    Nothing else waits for them: left, each would stay a zombie until this process ends. Each
    is found by a system call that reaps nothing (``waitid`` with ``WNOWAIT``), so a call when
    none has ended costs one system call; only while a child of this process's own lies ended,
    unreaped, in front of them (its ``Popen`` is about to reap it) are they looked for among
    all its children.
    """
    if not _Adoption.on:
        return ()
    reaped: list[int] = []
    while True:
        try:
            found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # no child at all
            found = None
        if found is None:
            return tuple(reaped)
        if _own_pid(found.si_pid):
            return (*reaped, *_reap_behind_own())
        with contextlib.suppress(ChildProcessError):
            os.waitpid(found.si_pid, os.WNOHANG)
        reaped.append(found.si_pid)


def _own_pid(pid: int) -> bool:
    """True when ``pid`` is one of this process's own children (its unreaped zombie keeps the pid)."""
    if all(p.pid != pid for p in _Adoption.own):  # most often: no process read for it
        return False
    try:
        return psutil.Process(pid) in _Adoption.own
    except psutil.Error:
        return False


def _reap_behind_own() -> tuple[int, ...]:
    """The ended orphans, among all this process's children, reaped; their pids."""
    reaped = []
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children():
            with contextlib.suppress(psutil.Error, ChildProcessError):
                ended = child not in _Adoption.own and child.status() == psutil.STATUS_ZOMBIE
                if ended and os.waitpid(child.pid, os.WNOHANG)[0]:
                    reaped.append(child.pid)
    return tuple(reaped)


def marked(env: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """``env`` with a new marker added, and the marker's token (for :class:`Descendants`)."""
    token = secrets.token_hex(16)
    return {**env, MARKER: token}, token


def _session(pid: int) -> int | None:
    """``pid``'s session id, or None once it has ended (or is not this user's to ask about)."""
    try:
        return os.getsid(pid)
    except OSError:
        return None


def running(process: psutil.Process) -> bool:
    """True while ``process`` (that very process, not a later one with its pid) runs; a zombie has ended."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _stopped(process: psutil.Process) -> bool:
    try:
        return process.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except psutil.Error:
        return True  # ended


def _started(process: psutil.Process) -> tuple[float, int]:
    """A sort key, parents before their children: a process starts after its parent."""
    try:
        return process.create_time(), process.pid
    except psutil.Error:
        return 0.0, process.pid


def _signal(process: psutil.Process, signum: int) -> bool:
    """Send ``signum``; False if it was not sent: ``process`` has ended, or is not this user's to signal."""
    # psutil checks the start time first: a pid reused by another process is never signalled
    try:
        process.send_signal(signum)
    except psutil.Error:  # NoSuchProcess, or AccessDenied (another user's: a sudo under the child)
        return False
    return True


def _with_ppid(process: psutil.Process) -> tuple[psutil.Process, int]:
    """``process`` (or the process now at its pid) and its parent's pid.

    Raises:
        psutil.Error: no process at its pid now, or its parent cannot be read.

    """
    try:
        return process, process.ppid()
    except psutil.NoSuchProcess:
        # psutil's table keeps a pid's earlier process until it sees the pid reused (its ppid()
        # looks, and raises): the process at that pid now is read at once, not a look later
        process = psutil.Process(process.pid)
        return process, process.ppid()


class _Entry(NamedTuple):
    """One process as a reading of the process table found it."""

    process: psutil.Process
    ppid: int
    marker: str | None  # its environment's MARKER, if read and set


class Descendants:
    """The processes started under ``root_pid``, noted while it lives, so they can all be ended.

    Args:
        root_pid: The child nvmeter started. This class never signals it: it is stopped by its
            process group (by its owner, or :func:`end_tree`) and reaped by its owner.
        token: The marker's token the child was started with (:func:`marked`), if any.
        reaped: The child has been reaped already (to find what carries its marker only).
        on_hold: Called with each process :meth:`stop` is about to hold stopped, before its
            SIGSTOP (the worker's guardian is told so: :mod:`nvmeter.worker.guardian`).

    """

    def __init__(
        self, root_pid: int, token: str | None = None, on_hold=None, *, reaped: bool = False
    ) -> None:
        self.root_pid = root_pid
        self._token = token
        self._on_hold = on_hold or (lambda process: None)
        self._root: psutil.Process | None = None
        # a reaped child's pid may be another process's now: never looked under, nor noted as a child
        with contextlib.suppress(psutil.Error):  # gone already: its children are init's now
            self._root = None if reaped else psutil.Process(root_pid)
        if self._root is not None:
            _Adoption.own.add(self._root)  # started here: never one of the orphans adopted
        self._known: dict[int, psutil.Process] = {}
        # what a SIGSTOP from here stopped while it ran, until cont() continues it (or end() ends it)
        self._held: set[psutil.Process] = set()

    def _add(self, process: psutil.Process) -> bool:
        """Note ``process``; True if it is new (a pid noted before may be a new process now)."""
        if process.pid in (self.root_pid, os.getpid()):
            return False
        if self._known.get(process.pid) == process:  # psutil compares pid and start time
            return False
        self._known[process.pid] = process
        return True

    def note(self) -> None:
        """Note every process now under the child, under those noted before, or carrying the child's marker.

        Call it while the child lives, just before stopping it: a process whose parent has
        died is no longer under the child (the marker may still find it).
        """
        self._look()

    def _look(self) -> bool:
        """Note, from one reading of the process table, what is under the child or carries its marker.

        A reading lists the pids, then reads each: a double fork's middle process that ends
        before it is read, after starting its grandchild past the listing, leaves both out.
        The grandchild, out of the tree, is in the next reading (by the marker): hence one
        more look, once one found nothing new, before all counts as found.

        Returns:
            True if a process was noted for the first time.

        """
        table = self._read_table()
        # the marker first: what it finds is looked under in the same reading
        marked_new = self._note_marked(table)
        return self._note_tree(table) or marked_new

    def _read_table(self) -> list[_Entry]:
        """Every process with its parent's pid and marker, in one pass over the process table.

        One that ends before its parent's pid is read is left out. Its marker is read only
        where it may be new (a token, a process not noted yet); it reads None where it cannot
        be read: another user's process (AccessDenied), a zombie, a kernel thread, one that
        ended just after its parent's pid was read.
        """
        table = []
        for process in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                process, ppid = _with_ppid(process)
                table.append(_Entry(process, ppid, self._marker(process)))
        return table

    def _marker(self, process: psutil.Process) -> str | None:
        """The marker in ``process``'s environment, if it may be new here; None where it cannot be read."""
        if not self._token or self._known.get(process.pid) == process:  # none to find, or noted already
            return None
        try:
            return process.environ().get(MARKER)
        except psutil.Error:
            return None

    def _note_tree(self, table: list[_Entry]) -> bool:
        """Note the processes of ``table`` under the child or under one noted before; True if one is new."""
        now = {entry.process.pid: entry.process for entry in table}
        children: dict[int, list[psutil.Process]] = collections.defaultdict(list)
        for entry in table:
            children[entry.ppid].append(entry.process)
        # Only a parent that is still that process (psutil compares pid and start time): a pid
        # reused by another process would make that process's children ours. A child's ppid
        # and the process at that pid come from one reading, so start times are not compared
        # (psutil's are clock times, cached when first read: a clock step in between misorders them).
        parents = [self._root] if self._root is not None else []
        parents += self._known.values()
        stack = [p for p in parents if now.get(p.pid) == p]
        looked_under: set[int] = set()
        new = False
        for entry in table:  # what the kernel gave this process when its parent ended
            if _adopted(entry.ppid, entry.process):
                new = self._add(entry.process) or new
                stack.append(entry.process)
        while stack:
            parent = stack.pop()
            if parent.pid in looked_under:
                continue
            looked_under.add(parent.pid)
            for child in children[parent.pid]:
                new = self._add(child) or new
                stack.append(child)
        return new

    def _note_marked(self, table: list[_Entry]) -> bool:
        """Note the processes of ``table`` that carry the child's marker; True if one is new."""
        new = False
        for entry in table:
            if self._token and entry.marker == self._token:
                new = self._add(entry.process) or new
        return new

    def left_running(self, session_id: int) -> tuple[int, ...]:
        """What a child that has ended left running, wherever it went, from one reading of the process table.

        The processes that still run (not the child) and are in ``session_id`` (the session the
        child led), carry the child's marker (a session of their own), or were orphaned to this
        process (:func:`adopt_orphans`; one that cleared its environment too).
        """
        found = []
        for entry in self._read_table():
            process = entry.process
            if process.pid == self.root_pid or not running(process):
                continue
            marked = self._token is not None and entry.marker == self._token
            if marked or _adopted(entry.ppid, process) or _session(process.pid) == session_id:
                found.append(process.pid)
        return tuple(sorted(found))

    def pids(self) -> tuple[int, ...]:
        """The processes noted so far that still run."""
        return tuple(sorted(p.pid for p in self._known.values() if running(p)))

    def _freeze(self) -> list[psutil.Process]:
        """SIGSTOP every noted process that runs, then look again (tree and marker), until none is new.

        A stopped process starts no other, so the processes returned (all that run, stopped unless stuck
        in the kernel or not this user's to signal) are everything under the child: none can slip out of
        the tree between the last look and the signal that ends its parent. It returns once two looks in
        a row found none new to stop and every process signalled shows as stopped (a reading may miss a
        double fork: :meth:`_look`; a process still running after its SIGSTOP may be mid-fork). Those
        that were not stopped already when signalled are held (for :meth:`cont`); one found stopped (by
        job control, a debugger, its own code) is not this object's to continue. One that refuses the
        signal (another user's, a ``sudo`` under the child) is neither stopped nor held, and what it
        starts meanwhile does not keep the looks going: it would, for ever, while it forks. Nor does
        anything after ``FREEZE_GIVE_UP_S``.
        """
        stopped: set[psutil.Process] = set()
        pending: set[psutil.Process] = set()  # sent SIGSTOP, not yet seen stopped
        quiet = False  # the look before found none new to stop
        give_up = time.monotonic() + FREEZE_GIVE_UP_S
        while True:
            self._look()
            alive = [p for p in self._known.values() if running(p)]
            new = [p for p in alive if p not in stopped]
            sent = []
            for process in new:
                if not _stopped(process):
                    self._held.add(process)  # before the signal: an exception in between leaves it held
                    self._on_hold(process)
                if _signal(process, signal.SIGSTOP):
                    sent.append(process)
                else:  # ended, or not this user's to stop
                    self._held.discard(process)
                stopped.add(process)
            pending = {p for p in pending | set(sent) if running(p) and not _stopped(p)}
            if (not sent and not pending and quiet) or time.monotonic() >= give_up:
                return alive
            quiet = not sent and not pending
            # SIGSTOP takes effect once the process next runs: wait for it (a fork it was making
            # is then done, and its child is in the next look)
            until = time.monotonic() + _STOP_WAIT_S
            while time.monotonic() < until and any(running(p) and not _stopped(p) for p in pending):
                time.sleep(0.001)

    def stop(self) -> tuple[int, ...]:
        """SIGSTOP every process under the child that runs, by the tree and the marker, for a frozen span.

        Call it once the child is stopped (by its process group, so that it starts no more):
        what it started there is stopped already; this reaches what left the group or session.
        Each is stopped and looked under again until no new one is found (:meth:`_freeze`). A
        process found stopped stays stopped, until :meth:`cont` and after: it is not continued
        by this object. One that is not this user's to signal runs on.

        Returns:
            The pids of every process held stopped (by this call and any earlier one since
            the last :meth:`cont`): what :meth:`cont` will continue.

        """
        self._freeze()
        return tuple(sorted(p.pid for p in self._held))

    def cont(self) -> tuple[int, ...]:
        """SIGCONT exactly the processes :meth:`stop` held, each after its parent; returns their pids.

        Parents first (by start time: a process starts after its parent), so that no process
        runs again while the one it waits on (its parent, reading its pipe or its answer) is
        still stopped. One that has ended since, or whose pid is another process's, is not
        signalled.
        """
        held = sorted(self._held, key=_started)
        self._held = set()
        for process in held:
            _signal(process, signal.SIGCONT)
        return tuple(p.pid for p in held)

    def end(self, grace_s: float = GRACE_S) -> tuple[int, ...]:
        """SIGTERM every descendant noted or found now, and SIGKILL what still runs after ``grace_s``.

        Call it once the child has been stopped (so it starts no more), before it is reaped
        (its pid cannot then be another process's). All are stopped (SIGSTOP) and looked at
        again before each signal, so none starts a process between the last look and its
        parent's end; during the grace, when a SIGTERM handler may run, they are looked at
        every ``_POLL_S``, and what they started is ended too.

        Returns:
            The pids still running when it gave up (``KILL_WAIT_S`` after the SIGKILL): none,
            unless one is stuck in the kernel or is not this user's to signal.

        """
        termed: set[psutil.Process] = set()
        alive = self._freeze()  # which looks first
        term_until = time.monotonic() + grace_s
        while alive and time.monotonic() < term_until:
            for process in alive:
                if process not in termed:
                    _signal(process, signal.SIGTERM)
                    termed.add(process)
                # continued, a process with a handler runs it (one without is already ending);
                # SIGCONT also resumes one that was stopped before (a frozen worker's group)
                _signal(process, signal.SIGCONT)
            time.sleep(_POLL_S)
            self._look()  # what they started meanwhile (a cleanup may start processes)
            alive = [p for p in self._known.values() if running(p)]
        kill_until = time.monotonic() + KILL_WAIT_S
        while True:
            alive = self._freeze()  # two looks in a row found none new (unless it gave up)
            if not alive:
                self._held = set()  # ended: none is left for cont()
                return ()
            if time.monotonic() >= kill_until:
                self._held = set()
                return tuple(sorted(p.pid for p in alive))
            for process in alive:
                _signal(process, signal.SIGKILL)
            time.sleep(_POLL_S)


def end_tree(leader: subprocess.Popen, descendants: Descendants) -> tuple[int, ...]:
    """SIGKILL the process group ``leader`` leads, end every process under it wherever it went, reap it.

    The leader started in a session of its own, so its pid is its group's id; ``descendants``
    is its :class:`Descendants`. The group is stopped first, so that nothing in it starts a
    process between the look and the kill; the look comes before the kill, so that what the
    group started is found under it while it lives (a leader that may have ended by itself
    is looked under by its owner before: once it has died, its children are init's). What
    left the group is ended after (:meth:`Descendants.end`), before the leader is reaped:
    until then its zombie holds its pid and its group's id, so no signal here reaches
    another process.

    Returns:
        The pids still running when :meth:`Descendants.end` gave up, and the leader's if it was
        not reaped within ``REAP_WAIT_S``: none, unless one is stuck in the kernel or is not
        this user's to signal; each is named in an :class:`~nvmeter.errors.NvmeterWarning`.

    """
    _signal_group(leader, signal.SIGSTOP)
    descendants.note()
    _signal_group(leader, signal.SIGKILL)
    left = descendants.end()
    try:
        leader.wait(timeout=REAP_WAIT_S)
    except subprocess.TimeoutExpired:  # stuck in the kernel: a hung driver call holds off SIGKILL
        left = (*left, leader.pid)
    reap_orphans()  # those ended here that were given to this process
    if left:
        warnings.warn(
            f"process(es) {', '.join(map(str, left))} could not be ended (stuck in the kernel, or "
            "another user's): they may still run",
            errors.NvmeterWarning,
            stacklevel=2,
        )
    return left


def _signal_group(leader: subprocess.Popen, signum: int) -> None:
    if leader.returncode is None:  # once reaped, its group's id may be another group's
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader.pid, signum)
