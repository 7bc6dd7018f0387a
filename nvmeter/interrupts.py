"""Ctrl-C, SIGTERM, SIGHUP and the rest of :data:`ENDING`, held back while nvmeter ends what it started.

The console turns these signals into ``KeyboardInterrupt`` (:mod:`nvmeter.cli.guard`), so that a
command's cleanup runs. One landing *inside* that cleanup would cut it short: a worker whose
group was frozen (the probe's idle with the process stopped) and interrupted before its SIGCONT
stays stopped for ever, its group orphaned already, and what it started outside its group runs
on (tests/test_worker.py). :func:`held` keeps such signals out of the stretch: each is noted,
the stretch can ask whether one came (to skip what is only courtesy, such as waiting for a worker
to exit by itself), and they go to the handlers that were there once the stretch is over, even if
it raised. A second Ctrl-C is held too: the way out of a cleanup that hangs is that none can.
Every wait in it has a limit (:mod:`nvmeter.descendants`: ``FREEZE_GIVE_UP_S``, ``GRACE_S``,
``KILL_WAIT_S``, ``REAP_WAIT_S``), reached only when a process is stuck in the kernel or is
another user's; otherwise the stretch takes about a second.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

# The signals whose default action ends a process, other than SIGINT, that nvmeter answers as SIGTERM:
# cleanup runs, finished records are kept, one line says so. SIGUSR1, SIGUSR2 and SIGALRM ended
# `nvmeter run` without a word, its record lost and its command left running (an adversarial review,
# 2026-12-06). SIGQUIT keeps its default: the way out of a shutdown that hangs. nvmeter._entry keeps
# its own copy (it must not import the package; tests/test_cli.py checks the two agree).
ENDING = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)
HELD = (signal.SIGINT, *ENDING)


def not_ignored(signums) -> tuple[int, ...]:
    """Those of ``signums`` this process does not ignore.

    One ignored (``nohup``, a script's background job) stays ignored, for nvmeter and for what it
    starts (a new user's trial: ``nohup nvmeter probe`` ended on SIGHUP, and ``nohup nvmeter run``
    passed it on to its command).
    """
    return tuple(s for s in signums if signal.getsignal(s) is not signal.SIG_IGN)


class Held:
    """The signals that came while held (``signums``, in order); true once one has."""

    def __init__(self) -> None:
        self.signums: list[int] = []
        self._previous: dict[int, object] = {}

    def __bool__(self) -> bool:
        return bool(self.signums)

    def _hold(self) -> None:
        for signum in HELD:
            if signal.getsignal(signum) is not signal.SIG_IGN:  # an ignored one stays ignored
                self._previous[signum] = signal.signal(signum, self._note)

    def _release(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)

    def _note(self, signum: int, _frame) -> None:
        self.signums.append(signum)

    def _deliver(self) -> None:
        """The signals held, in order, each to the handler it would have gone to.

        A handler that raises (the console's KeyboardInterrupt) ends the delivery there.
        """
        for signum in self.signums:
            _deliver(signum, self._previous[signum])


@contextlib.contextmanager
def held() -> Iterator[Held]:
    """Hold back SIGINT and the signals of :data:`ENDING` through the block; deliver them after it.

    Only in the main thread (Python runs signal handlers there; elsewhere the block runs as
    it is, and the signals go where they would have). After the block, raised or not, the
    handlers are restored and the held signals go to their handlers, in order: a Python handler
    is called (the console's raises KeyboardInterrupt, which ends the delivery there and replaces
    an exception the block raised, keeping it as its ``__context__``); a default one is re-raised
    on this process (SIGTERM's default then ends it, as it would have). Where the stretch is
    itself the cleanup of an interruption already under way (a KeyboardInterrupt propagating
    around it: the console's Ctrl-C, SIGTERM or SIGHUP), the held signals are not delivered: the
    first one ends the command, and says how (130 for Ctrl-C, 143 for SIGTERM).
    """
    got = Held()
    if threading.current_thread() is not threading.main_thread():
        yield got
        return
    ending = isinstance(sys.exc_info()[1], KeyboardInterrupt)
    try:
        got._hold()
        yield got
    finally:
        got._release()
        if not ending:
            got._deliver()


def _deliver(signum: int, handler) -> None:
    if callable(handler):
        handler(signum, None)
    elif handler in (signal.SIG_DFL, None):  # None: set outside Python, restored as the default
        os.kill(os.getpid(), signum)
