"""The worker's guardian: ends what the worker leaves behind if nvmeter dies before it can.

The worker dies with nvmeter (its parent-death signal), but the rest of its process group does
not, nor what :meth:`Descendants.stop <nvmeter.descendants.Descendants.stop>` held outside the
group; and a frozen group stays stopped for ever. nvmeter SIGKILLed while its worker was frozen
left a process of the worker's group and one in a session of its own, both stopped, for good
(tests/test_worker.py). nvmeter's own cleanup cannot run then, so a small process of its own,
started with each worker, does it: it reads what it is told on its standard input, and when
that input ends without a goodbye (every copy of nvmeter's end closed: nvmeter has died), it
stops the worker's group and what carries the worker's marker, then SIGKILLs them and every
process it was told is held.

Its input, a line each:

* ``held PID START``: a process held stopped outside the group (``START``: its psutil
  ``create_time``, so that a reused pid is never signalled);
* ``bye``: nvmeter has ended the worker itself; the guardian exits and does nothing.

Run as ``python -m nvmeter.worker.guardian PGID TOKEN``; :class:`Guardian` is nvmeter's side.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

# A held process is the one told when psutil's start time agrees to this, s (the kernel counts
# start times in clock ticks of 10 ms).
_SAME_START_S = 0.01
# How long dismiss() waits for the guardian to exit after its goodbye, s.
_DISMISS_WAIT_S = 5.0


class Guardian:
    """nvmeter's side of the guardian of the worker whose group is ``pgid`` and marker ``token``.

    Raises:
        OSError: the guardian could not be started.
    """

    def __init__(self, pgid: int, token: str) -> None:
        from nvmeter.descendants import own_child

        self._proc = subprocess.Popen(
            [sys.executable, "-m", "nvmeter.worker.guardian", str(pgid), token],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # the terminal's Ctrl-C is nvmeter's to handle, not the guardian's
        )
        own_child(self._proc.pid)  # nvmeter's own child, never an orphan it adopted

    def hold(self, process) -> None:
        """Tell the guardian that ``process`` (a psutil Process) is held stopped; never raises."""
        import psutil

        # OSError, ValueError: the guardian is gone or dismissed; psutil.Error: the process is
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            self._send(f"held {process.pid} {process.create_time()!r}\n")

    def dismiss(self) -> None:
        """Say goodbye and reap the guardian (it does nothing more); idempotent, never raises."""
        with contextlib.suppress(OSError, ValueError):
            self._send("bye\n")
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=_DISMISS_WAIT_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def _send(self, line: str) -> None:
        self._proc.stdin.write(line.encode())
        self._proc.stdin.flush()


def main(argv: list[str]) -> int:
    """The guardian's process: read until goodbye (exit 0) or end of input (end the worker's rest)."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # only nvmeter's death ends its watch
    pgid, token = int(argv[0]), argv[1]
    held: list[tuple[int, float]] = []
    for line in sys.stdin:
        words = line.split()
        if words == ["bye"]:
            return 0
        if len(words) == 3 and words[0] == "held":
            held.append((int(words[1]), float(words[2])))
    _end(pgid, token, held)
    return 0


def _end(pgid: int, token: str, held: list[tuple[int, float]]) -> None:
    """SIGSTOP the worker's group and its marked processes, then SIGKILL them and the held ones.

    The group's id is not another group's: the stopped members that this exists for keep it
    in use, and without any the kill finds no group.
    """
    import psutil

    from nvmeter.descendants import MARKER

    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGSTOP)  # so that none forks between the look and the kill
    marked = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get(MARKER) == token:
                process.suspend()
                marked.append(process)
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)
    for process in marked:
        with contextlib.suppress(psutil.Error):
            process.kill()  # psutil checks the start time first: a reused pid is never signalled
    for pid, start_s in held:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if abs(process.create_time() - start_s) < _SAME_START_S:
                process.kill()  # SIGKILL ends a stopped process too


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
