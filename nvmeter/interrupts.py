"""Ctrl-C, SIGTERM and SIGHUP held back while nvmeter ends the processes it started.

The console turns these signals into ``KeyboardInterrupt`` (:mod:`nvmeter.cli`), so that a
command's cleanup runs. A second one landing *inside* that cleanup would cut it short: a worker
whose group was frozen (the probe's idle with the process stopped) and interrupted before its
SIGCONT stays stopped for ever, its group orphaned already, and what it started outside its group
runs on (tests/test_worker.py). :func:`held` keeps them out of such a stretch: each is noted, the
stretch can ask whether one came (to skip what is only courtesy, such as waiting for a worker to
exit by itself), and the first is delivered to the handler that was there once the stretch is
over. The stretch itself is bounded (``descendants.KILL_WAIT_S`` and the worker's own waits), so
a held Ctrl-C is late by seconds at most, never lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Held:
    """The signals that came while held, in order (``signums``); true once one has."""

    def __init__(self) -> None:
        self.signums: list[int] = []

    def __bool__(self) -> bool:
        return bool(self.signums)

    def _note(self, signum: int, _frame) -> None:
        self.signums.append(signum)


@contextlib.contextmanager
def held() -> Iterator[Held]:
    """Hold back SIGINT, SIGTERM and SIGHUP through the block; then deliver the first that came.

    Only in the main thread (Python runs signal handlers there; elsewhere the block runs as
    it is, and the signals go where they would have). A signal that was ignored stays ignored.
    After the block the handlers are restored and the first held signal goes to its handler: a
    Python handler is called (the console's raises KeyboardInterrupt), a default one is
    re-raised on this process (SIGTERM's default then ends it, as it would have).
    """
    got = Held()
    if threading.current_thread() is not threading.main_thread():
        yield got
        return
    previous = {}
    try:
        for signum in HELD:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, got._note)
        yield got
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
    if got:
        _deliver(got.signums[0], previous[got.signums[0]])


def _deliver(signum: int, handler) -> None:
    if callable(handler):
        handler(signum, None)
    elif handler in (signal.SIG_DFL, None):  # None: set outside Python, restored as the default
        os.kill(os.getpid(), signum)
