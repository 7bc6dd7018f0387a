"""The child process: found, started, and sent the signals nvmeter receives."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Collection, Sequence
from pathlib import Path

from nvmeter import errors, interrupts

# The signal that kills the command's whole group, when it ignored the ones before it.
KILL_AFTER_SIGNALS = 3
# The signals that ask nvmeter to end: each is passed on to the command and recorded, and the
# window stays open until the command has ended (a terminal hangup or Ctrl-\ loses nothing).
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# Passed on as they come, neither noted nor counted: a terminal's resize, and the signals a command
# may use for its own ends (a checkpoint on SIGUSR1). Their default would end nvmeter alone, the
# record lost and the command left running (an adversarial review, 2026-12-06).
PASSED_ON = (signal.SIGWINCH, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)


def resolve_command(argv: Sequence[str]) -> str:
    """The program ``argv[0]`` names, found as the child's exec would find it.

    Raises:
        UsageError: no command. CommandNotFound: no such program (exit 127).
        CommandNotExecutable: a folder or a file without execute permission (exit 126).
    """
    if not argv:
        raise errors.UsageError("nothing to run: give the command after --, e.g. nvmeter run -- python x.py")
    name = argv[0]
    if not name:  # a shell finds no such command either (exit 127); "command not found: " named nothing
        raise errors.CommandNotFound(
            "the command is empty ('' after --): name the program to run, e.g. nvmeter run -- python x.py"
        )
    if "/" in name:
        path = Path(name)
        if not path.exists():
            dangling = " (a symbolic link to nothing, or a loop of links)" if path.is_symlink() else ""
            raise errors.CommandNotFound(f"command not found: {name}{dangling}")
        if path.is_dir():  # a shell says 126 too ("Is a directory")
            raise errors.CommandNotExecutable(f"{name} is a folder, not a program")
        if not os.access(path, os.X_OK):
            raise errors.CommandNotExecutable(f"{name} is not executable")
        return name
    found = shutil.which(name)
    if found is None:
        raise errors.CommandNotFound(f"command not found: {name} (not on PATH)")
    return found


def _missing(program: str) -> str:
    """Why exec found no ``program`` (it raises nothing): none there, or, the file there, its interpreter."""
    found = shutil.which(program) if "/" not in program else program
    if found is None or not Path(found).is_file():
        return f"command not found: {program}"
    with contextlib.suppress(OSError), open(found, "rb") as f:
        first = f.readline(256)
        words = first[2:].split() if first.startswith(b"#!") else []
        interpreter = words[0].decode(errors="replace") if words else ""
        if interpreter and first.rstrip(b"\n").endswith(b"\r"):  # the kernel looks for "sh\r"
            return f"{program} cannot be run: its #! line ends in a Windows line ending (\\r)"
        if interpreter and not Path(interpreter).exists():
            return f"{program} cannot be run: its interpreter {interpreter} (its #! line) was not found"
    return f"{program} cannot be run: a program or library it needs was not found"


def spawn(argv: Sequence[str], env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``argv`` with this process's standard streams, in a session of its own.

    ``env``: its environment (default: this process's); nvmeter run adds the marker that
    finds what the command starts wherever it goes (:func:`nvmeter.descendants.marked`).

    A session (not just a process group) so that the whole tree the command starts can be
    signalled and killed at once (:func:`signal_group`), and so that a command reading the
    terminal is not stopped: a background group of nvmeter's session would get SIGTTIN or
    SIGTTOU, but a terminal that is not the command's controlling one has no job control.
    The price: the command has no ``/dev/tty``, and the terminal's signals reach only
    nvmeter, which passes them on (:class:`Forwarding`).

    Raises:
        CommandNotFound, CommandNotExecutable, UsageError: it could not be started.
    """
    from nvmeter.descendants import own_child

    try:
        proc = subprocess.Popen(list(argv), start_new_session=True, env=env)
    except FileNotFoundError as exc:
        raise errors.CommandNotFound(_missing(argv[0])) from exc
    except PermissionError as exc:
        raise errors.CommandNotExecutable(f"{argv[0]} is not executable") from exc
    except OSError as exc:
        if exc.errno == errno.ENOEXEC:  # no format the kernel runs: a shell says 126 too
            raise errors.CommandNotExecutable(f"{argv[0]} is not executable: {exc.strerror}") from exc
        raise errors.UsageError(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc
    own_child(proc.pid)  # started here: never an orphan nvmeter adopted
    return proc


def signal_group(proc: subprocess.Popen | None, signum: int) -> None:
    """Send ``signum`` to the command's process group (its id is the command's pid).

    Not before the command exists (``None``), nor once it is reaped: its id could then name
    another process's group. Until then the unreaped leader holds the id, so no other group
    can have it.
    """
    if proc is not None and proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signum)


def kill_everything(proc: subprocess.Popen, token: str | None = None) -> None:
    """SIGKILL the command's process group, end every process under it wherever it went, reap it.

    For nvmeter's own failure while the command runs: nothing of the command may be left
    behind, and what it started in a group or session of its own (``start_new_session=True``,
    ``setsid``) is out of the group's reach; :class:`~nvmeter.descendants.Descendants` finds those
    by the process tree, looked at while the command still lives (once it has died, its
    children are init's), and by ``token``, the marker its environment carried (a double
    fork's grandchild). Not for a command that ended by itself: what it left running stays
    running, as a shell leaves it (:func:`survivors` names it). The sequence (stop the group,
    look, kill it, end the rest, reap) is :func:`~nvmeter.descendants.end_tree`'s.
    """
    from nvmeter.descendants import Descendants, end_tree

    end_tree(proc, Descendants(proc.pid, token))


def survivors(proc: subprocess.Popen, token: str | None = None) -> tuple[int, ...]:
    """Processes the command started and left running when it exited, wherever they went.

    The command led a session of its own (:func:`spawn`), so whatever it started and did not
    wait for carries its session id, the command's pid, until it ends or starts its own; what
    started its own session (``setsid``, a daemon's double fork) still carries ``token``, the
    marker of the command's environment, unless it cleared its environment; and where nvmeter
    adopts orphans (:func:`~nvmeter.descendants.adopt_orphans`), what was orphaned under the
    command is nvmeter's child. A zombie has ended (killed with its group, say): it is not named.
    """
    from nvmeter.descendants import Descendants

    return Descendants(proc.pid, token, reaped=True).left_running(session_id=proc.pid)


class LateSignals:
    """Signals after the command ended, while its figures are said and its record written: noted only.

    The command's status and record are complete by then; a SIGTERM that ended nvmeter there
    would lose both (an adversarial review: 1 in 6 signals sent in that half second).
    :meth:`release` puts back the handlers :class:`Forwarding` found, or has some of them
    ignored from then on (the console's: once the record is written, its process only exits).
    """

    def __init__(self) -> None:
        self.received: list[str] = []
        self._saved: dict[int, object] = {}

    def take_over(self, saved: dict[int, object]) -> None:
        """Note the forwarded signals from now on; ``saved`` are the handlers to put back."""
        self._saved = dict(saved)
        for sig, handler in self._saved.items():
            signal.signal(sig, self._note if sig in FORWARDED or sig in interrupts.ENDING else handler)

    def _note(self, signum: int, _frame) -> None:
        self.received.append(signal.Signals(signum).name)

    def release(self, ignoring: Collection[int] = ()) -> None:
        """Put back the handlers found before the command (no-op if nothing was taken over).

        Those in ``ignoring`` are ignored instead: each goes from noted to ignored in one
        ``signal.signal``, so no signal finds the handler found before in between.
        """
        for sig, handler in self._saved.items():
            signal.signal(sig, signal.SIG_IGN if sig in ignoring else handler)
        self._saved = {}


class Forwarding:
    """While open: the signals that reach nvmeter go on to the command's process group.

    Those in :data:`FORWARDED` are remembered, in order, and the third kills the group;
    those in :data:`PASSED_ON` (SIGWINCH, SIGUSR1, SIGUSR2, SIGALRM) are passed on; SIGTSTP (Ctrl-Z) stops
    the group, then nvmeter. Opened before the
    command is started and given it by :meth:`attach`: a signal in between (the command may
    run, and say it is ready, before ``Popen`` returns) is remembered and passed on once
    attached, never left to nvmeter's own handler, which would end nvmeter alone.
    """

    def __init__(self, late: LateSignals | None = None) -> None:
        self._late = late
        self._proc: subprocess.Popen | None = None
        self.received: list[str] = []
        self._pending: list[int] = []
        self._saved: dict[int, object] = {}

    def __enter__(self) -> Forwarding:
        if threading.current_thread() is threading.main_thread():
            handlers = {sig: self._handle for sig in FORWARDED}
            handlers |= {sig: self._pass_on for sig in PASSED_ON} | {signal.SIGTSTP: self._suspend}
            for sig in interrupts.not_ignored(handlers):  # one ignored stays so, for the command too
                self._saved[sig] = signal.signal(sig, handlers[sig])
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if self._late is not None and exc_type is None:
            self._late.take_over(self._saved)  # the command has ended: what comes now waits
            return
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)

    def attach(self, proc: subprocess.Popen) -> None:
        """From now on, signals go to ``proc``'s group; those received before go there now."""
        self._proc = proc
        pending, self._pending = self._pending, []
        for signum in pending:
            self._send(signum)

    def detach(self) -> None:
        """From now on, signals are noted and not passed on: nvmeter is killing the command's group.

        :func:`kill_everything` stops the group before it looks under it; a signal passed on
        then (with its SIGCONT) would let the group run, and fork out of reach, through the look.
        """
        self._proc = None

    def _handle(self, signum: int, _frame) -> None:
        self.received.append(signal.Signals(signum).name)
        if self._proc is None:
            self._pending.append(signum)
        else:
            self._send(signum)

    def _send(self, signum: int) -> None:
        # the command has no terminal, so a Ctrl-C reached it only through us: always send
        kill = len(self.received) >= KILL_AFTER_SIGNALS
        signal_group(self._proc, signal.SIGKILL if kill else signum)
        # a stopped command (SIGSTOP, a debugger) holds the signal pending until it runs again:
        # without this, nvmeter waited on it through every signal short of the third
        signal_group(self._proc, signal.SIGCONT)

    def _pass_on(self, signum: int, _frame) -> None:
        # a terminal resize (a full-screen command), or the command's own (a checkpoint on SIGUSR1):
        # before the command exists, kept for it, not counted
        if self._proc is None:
            self._pending.append(signum)
        else:
            signal_group(self._proc, signum)

    def _suspend(self, _signum: int, _frame) -> None:
        # SIGSTOP, not SIGTSTP: the command's group is orphaned (its parent is in another
        # session), and the kernel discards SIGTSTP's default stop in an orphaned group
        signal_group(self._proc, signal.SIGSTOP)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # returns once continued (at once if we are orphaned too)
        signal.signal(signal.SIGTSTP, self._suspend)
        signal_group(self._proc, signal.SIGCONT)
