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

The same looks stop them for a frozen idle span (:meth:`Descendants.stop`, which
``WorkerProcess.freeze`` calls once the worker's group is stopped) and continue exactly those
stopped (:meth:`Descendants.cont`): a process in a session of its own would otherwise go on
running, and drawing power, through an idle span measured as frozen.

A process is named by a psutil ``Process``, which carries its start time: a pid that the
kernel has since given to another process reads as not running, and psutil refuses to signal
it, so a process that is not ours is never stopped, continued or ended.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from collections.abc import Mapping

import psutil

# The environment variable that marks every process started under one child (its value a
# random token, one per child).
MARKER = "NVMETER_PROCESS_TREE"
# SIGTERM first, so a descendant can clean up (a server its socket file, a tool its
# temporary files); whatever still runs this long after is SIGKILLed.
GRACE_S = 1.0
# After SIGKILL, how long to wait for the kernel to end them (a process in an uninterruptible
# wait, D, ends only once the wait is over).
KILL_WAIT_S = 5.0
_POLL_S = 0.02
# How long to wait for a process to show as stopped after SIGSTOP (one stuck in the kernel may not).
_STOP_WAIT_S = 0.2


def marked(env: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """``env`` with a new marker added, and the marker's token (for :class:`Descendants`)."""
    token = secrets.token_hex(16)
    return {**env, MARKER: token}, token


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


def _signal(process: psutil.Process, signum: int) -> None:
    # psutil checks the start time first: a pid reused by another process is never signalled
    with contextlib.suppress(psutil.Error):
        process.send_signal(signum)


class Descendants:
    """The processes started under ``root_pid``, noted while it lives, so they can all be ended.

    Args:
        root_pid: The child nvmeter started. It is never signalled here: its owner stops it
            (by its process group) and reaps it.
        token: The marker's token the child was started with (:func:`marked`), if any.

    """

    def __init__(self, root_pid: int, token: str | None = None) -> None:
        self.root_pid = root_pid
        self._token = token
        try:
            self._root: psutil.Process | None = psutil.Process(root_pid)
        except psutil.Error:  # gone already (and reaped): its children, if any, are init's now
            self._root = None
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
        """Note every process now under the child, and under those noted before.

        Call it while the child lives, just before stopping it: a process whose parent has
        died is no longer under the child (the marker may still find it).
        """
        found_under: set[int] = set()
        parents = [self._root] if self._root is not None else []
        parents += [p for p in self._known.values() if running(p)]
        for parent in parents:
            if parent.pid in found_under:  # already under one looked at in this pass
                continue
            with contextlib.suppress(psutil.Error):  # ended, or its pid is another process's now
                for process in parent.children(recursive=True):
                    found_under.add(process.pid)
                    self._add(process)

    def _note_marked(self) -> bool:
        """Note the processes that carry the child's marker; True if any was new."""
        if not self._token:
            return False
        new = False
        for process in psutil.process_iter():
            if self._known.get(process.pid) == process:  # noted already
                continue
            # another user's process (AccessDenied), a zombie or one that ended: not ours to end
            with contextlib.suppress(psutil.Error):
                if process.environ().get(MARKER) == self._token:
                    new = self._add(process) or new
        return new

    def marked_pids(self) -> tuple[int, ...]:
        """The processes that carry the child's marker and still run (none without a marker).

        For what a child that has ended left running, wherever it went: its group, its session
        or a session of its own.
        """
        self._note_marked()
        return tuple(sorted(p.pid for p in self._known.values() if running(p) and p.pid != self.root_pid))

    def pids(self) -> tuple[int, ...]:
        """The processes noted so far that still run."""
        return tuple(sorted(p.pid for p in self._known.values() if running(p)))

    def _freeze(self) -> list[psutil.Process]:
        """SIGSTOP every noted process that runs, then look again, until no new one is found.

        A stopped process starts no other, so the processes returned (all that run, stopped
        unless stuck in the kernel) are everything under the child: none can slip out of the
        tree between the last look and the signal that ends its parent. Those that were not
        stopped already when signalled are held (for :meth:`cont`); one found stopped (by job
        control, a debugger, its own code) is not this object's to continue.
        """
        stopped: set[psutil.Process] = set()
        while True:
            self.note()
            alive = [p for p in self._known.values() if running(p)]
            new = [p for p in alive if p not in stopped]
            if not new:
                return alive
            for process in new:
                if not _stopped(process):
                    self._held.add(process)
                _signal(process, signal.SIGSTOP)
                stopped.add(process)
            # SIGSTOP takes effect once the process next runs: wait for it (a fork it was making
            # is then done, and its child is in the next look)
            until = time.monotonic() + _STOP_WAIT_S
            while time.monotonic() < until and any(running(p) and not _stopped(p) for p in new):
                time.sleep(0.001)

    def stop(self) -> tuple[int, ...]:
        """SIGSTOP every process under the child that runs, by the tree and the marker, for a frozen span.

        Call it once the child is stopped (by its process group, so that it starts no more):
        what it started there is stopped already; this reaches what left the group or session.
        Each is stopped and looked under again until no new one is found (:meth:`_freeze`),
        then the marker is looked for once more: a double fork made before its parent was
        stopped is out of the tree. A process found stopped stays stopped, until :meth:`cont`
        and after: it is not continued by this object.

        Returns:
            The pids of every process held stopped (by this call and any earlier one since
            the last :meth:`cont`): what :meth:`cont` will continue.

        """
        self._note_marked()
        while True:
            self._freeze()
            if not self._note_marked():  # all stopped: nothing found now can start more
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
        every ``_POLL_S`` (and for the marker once all have ended), and what they started is
        ended too.

        Returns:
            The pids still running when it gave up (``KILL_WAIT_S`` after the SIGKILL): none,
            unless one is stuck in the kernel.

        """
        self._note_marked()
        termed: set[psutil.Process] = set()
        alive = self._freeze()  # which looks at the tree first
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
            self.note()  # what they started meanwhile (a cleanup may start processes)
            alive = [p for p in self._known.values() if running(p)]
        kill_until = time.monotonic() + KILL_WAIT_S
        while True:
            alive = self._freeze()
            # all ended: a last look for the marker, for a double fork's grandchild started meanwhile
            if not alive and not self._note_marked():
                self._held = set()  # ended: none is left for cont()
                return ()
            if time.monotonic() >= kill_until:
                self._held = set()
                return tuple(sorted(p.pid for p in alive))
            for process in alive:
                _signal(process, signal.SIGKILL)
            time.sleep(_POLL_S)
