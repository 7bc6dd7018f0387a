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

import psutil

# How long dismiss() waits for the guardian to exit after its goodbye, s: a choice (it exits at
# once; a guardian that does not is killed, and acts on nothing).
_DISMISS_WAIT_S = 5.0
# The guardian's exit status: goodbye said (nothing done), or nvmeter gone (what it left ended).
DISMISSED, ACTED = 0, 1


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

    def hold(self, process: psutil.Process) -> None:
        """Tell the guardian that ``process`` is held stopped; never raises."""
        # OSError, ValueError: the guardian is gone or dismissed; psutil.Error: the process is
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            self._send(f"held {process.pid} {process.create_time()!r}\n")

    def dismiss(self, ended: bool = True) -> None:
        """Reap the guardian; idempotent, never raises.

        Args:
            ended: nvmeter ended the worker and all under it: goodbye, the guardian does
                nothing. False (the ending failed): no goodbye, so it ends what is left.
        """
        if ended:
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
    """The guardian's process: read until goodbye (:data:`DISMISSED`) or end of input (:data:`ACTED`)."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # only nvmeter's death ends its watch
    pgid, token = int(argv[0]), argv[1]
    held: list[tuple[int, float]] = []
    for line in sys.stdin:
        words = line.split()
        if words == ["bye"]:
            return DISMISSED
        if len(words) == 3 and words[0] == "held":
            held.append((int(words[1]), float(words[2])))
    _end(pgid, token, held)
    return ACTED


def _end(pgid: int, token: str, held: list[tuple[int, float]]) -> None:
    """SIGSTOP the marked processes and the worker's group, then SIGKILL them and the held ones.

    The group is signalled only while a process in it carries the worker's marker: once the
    group is empty its id may be another's.
    """
    from nvmeter.descendants import MARKER

    marked = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get(MARKER) == token:
                process.suspend()  # so that none forks between the look and the kill
                marked.append(process)
    ours = any(_group_of(p) == pgid for p in marked)
    with contextlib.suppress(OSError):
        if ours:
            os.killpg(pgid, signal.SIGSTOP)
            os.killpg(pgid, signal.SIGKILL)
    for process in marked:
        with contextlib.suppress(psutil.Error):
            process.kill()  # psutil checks the start time first: a reused pid is never signalled
    for pid, start_s in held:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if process.create_time() == start_s:  # computed as nvmeter computed it: the same process
                process.kill()  # SIGKILL ends a stopped process too


def _group_of(process: psutil.Process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except OSError:
        return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
