"""The child process: found, started, and sent the signals nvmeter receives."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

from nvmeter import errors

# The signal that ends a child which ignored the ones before it.
KILL_AFTER_SIGNALS = 3
FORWARDED = (signal.SIGINT, signal.SIGTERM)


def resolve_command(argv: Sequence[str]) -> str:
    """The program ``argv[0]`` names, found as the child's exec would find it.

    Raises:
        UsageError: no command. CommandNotFound: no such program (exit 127).
        CommandNotExecutable: a folder or a file without execute permission (exit 126).
    """
    if not argv:
        raise errors.UsageError("nothing to run: give the command after --, e.g. nvmeter run -- python x.py")
    name = argv[0]
    if "/" in name:
        path = Path(name)
        if not path.exists():
            raise errors.CommandNotFound(f"command not found: {name}")
        if path.is_dir() or not os.access(path, os.X_OK):
            raise errors.CommandNotExecutable(f"{name} is not executable")
        return name
    found = shutil.which(name)
    if found is None:
        raise errors.CommandNotFound(f"command not found: {name} (not on PATH)")
    return found


def spawn(argv: Sequence[str]) -> subprocess.Popen:
    """Start ``argv`` with this process's standard streams, in this process group.

    Raises:
        CommandNotFound, CommandNotExecutable, UsageError: it could not be started.
    """
    try:
        return subprocess.Popen(list(argv))
    except FileNotFoundError as exc:
        raise errors.CommandNotFound(f"command not found: {argv[0]}") from exc
    except PermissionError as exc:
        raise errors.CommandNotExecutable(f"{argv[0]} is not executable") from exc
    except OSError as exc:
        raise errors.UsageError(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc


def _terminal_sent_it_too(child_pid: int) -> bool:
    """True when a Ctrl-C at our terminal also reached the child: same foreground group."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False  # no controlling terminal: the signal came from kill(2)
    try:
        foreground = os.tcgetpgrp(fd)
        return foreground == os.getpgrp() == os.getpgid(child_pid)
    except OSError:
        return False
    finally:
        os.close(fd)


class Forwarding:
    """While open: SIGINT and SIGTERM go on to the child and are remembered, in order."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self._proc = proc
        self.received: list[str] = []
        self._saved: dict[int, object] = {}

    def __enter__(self) -> Forwarding:
        if threading.current_thread() is threading.main_thread():
            for sig in FORWARDED:
                self._saved[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, _frame) -> None:
        self.received.append(signal.Signals(signum).name)
        if self._proc.returncode is not None:
            return  # already reaped: nothing to forward to
        with contextlib.suppress(ProcessLookupError):
            if len(self.received) >= KILL_AFTER_SIGNALS:
                os.kill(self._proc.pid, signal.SIGKILL)
            elif not (signum == signal.SIGINT and _terminal_sent_it_too(self._proc.pid)):
                os.kill(self._proc.pid, signum)
