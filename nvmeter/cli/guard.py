"""What runs around each command: Ctrl-C and the ending signals, nvmeter's errors and warnings, a lost stdout.

:func:`guarded` wraps every command: an :class:`~nvmeter.errors.NvmeterError` becomes one
line on stderr and its exit code, Ctrl-C one line and exit 130 (SIGTERM, SIGHUP and the rest
of :data:`nvmeter.interrupts.ENDING`: 128 + N). The state here (:data:`_CONSOLE`,
:data:`_SIGNALLED`) is module state: the other modules read it at each use (``guard._CONSOLE``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import signal
import sys
import threading
import warnings

import typer

from nvmeter import errors, interrupts
from nvmeter.cli.console import OutputLost, say_line, stdout_lost


def guarded(fn):
    """Turn nvmeter errors and Ctrl-C into one line on stderr and an exit code.

    While the command runs, Ctrl-C is Python's KeyboardInterrupt, so its cleanup runs
    (before and after, :mod:`nvmeter._entry` answers it with one line).
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _python_sigint():
            return run_guarded(fn, *args, **kwargs)

    return wrapper


# True in the console script (and python -m nvmeter.cli), False when a test invokes the app in-process
_CONSOLE = False


def adopt_console_orphans() -> None:
    """In the console script, for the commands that start processes: adopt what they orphan.

    Not in a process that invokes the app (a test): the adoption is for good
    (:func:`nvmeter.descendants.adopt_orphans`), and ``nvmeter show`` starts nothing, so it does
    not pay for psutil.
    """
    if _CONSOLE:
        from nvmeter.descendants import adopt_orphans

        adopt_orphans()


# What the console ignores once a command is done: its outcome is final, the process only exits
_SETTLED = interrupts.HELD


@contextlib.contextmanager
def _python_sigint():
    """Python's own SIGINT handler while a command runs; afterwards, what was there before.

    In the console script the process is about to exit once the command is done (its
    output complete), so a late Ctrl-C, SIGTERM, SIGHUP (or SIGUSR1, SIGUSR2, SIGALRM) is ignored
    rather than reported as an interruption, or left to end the process silently with 128 + N.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _SIGNALLED.clear()
    # `timeout`, a batch system or a closed terminal ends a command as Ctrl-C does: cleanup runs,
    # finished records are kept, and one line says so (nvmeter run forwards these itself)
    taken = interrupts.not_ignored(interrupts.HELD)
    saved = {sig: signal.signal(sig, _interrupted) for sig in taken}
    hook, sys.unraisablehook = sys.unraisablehook, _unraisable(sys.unraisablehook)
    try:
        yield
    finally:
        sys.unraisablehook = hook
        # not the entry's handlers: their "nothing written" would no longer be true
        for sig, handler in saved.items():
            signal.signal(sig, signal.SIG_IGN if _CONSOLE else handler)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, SIGHUP or another of :data:`nvmeter.interrupts.ENDING` while a command ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# The signals _interrupted raised for: compiled code can swallow the exception (a Ctrl-C during
# numpy.random's first import went nowhere, and the command ran on as if never interrupted), so
# the commands look here before they start anything that outlives them (raise_if_signalled).
_SIGNALLED: list[int] = []


def _interruption(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else _Terminated(signum)


def _interrupted(signum, _frame) -> None:
    _SIGNALLED.append(signum)
    raise _interruption(signum)


def raise_if_signalled() -> None:
    """Raise now for a signal whose exception something swallowed."""
    if _SIGNALLED:
        signum = _SIGNALLED[-1]
        _SIGNALLED.clear()
        raise _interruption(signum)


def _unraisable(python_s):
    """An unraisable hook that keeps quiet about our own interruptions (they are in _SIGNALLED)."""

    def hook(unraisable) -> None:
        if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and _SIGNALLED):
            python_s(unraisable)

    return hook


def _one_line_warnings(python_s):
    """A ``showwarning`` that prints each NvmeterWarning as one line and leaves the rest to ``python_s``."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if issubclass(category, errors.NvmeterWarning):
            say_line(f"nvmeter: warning: {message}")
        else:
            python_s(message, category, filename, lineno, file, line)

    return show


def _what_was_written() -> str:
    from nvmeter import records

    wrote = records.written()
    return f"{', '.join(map(str, wrote))} written before it" if wrote else "nothing written"


def run_guarded(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with nvmeter's errors, signals and warnings each one line; the exit code."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default", errors.NvmeterWarning)  # once per place it is raised
            warnings.showwarning = _one_line_warnings(warnings.showwarning)
            return fn(*args, **kwargs)
    except errors.NvmeterError as exc:
        say_line(f"nvmeter: {exc}")
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt as exc:
        _SIGNALLED.clear()
        # score keeps the records of the runs it finished; the other commands write at the end,
        # and a signal may still come between that write and the exit
        kept = "records of finished runs kept" if fn.__name__ == "score" else _what_was_written()
        if isinstance(exc, _Terminated):
            say_line(f"nvmeter: ended by {signal.Signals(exc.signum).name}; {kept}")
            raise typer.Exit(128 + exc.signum) from None
        say_line(f"nvmeter: interrupted; {kept}")
        raise typer.Exit(130) from None
    except (BrokenPipeError, OutputLost) as exc:
        raise typer.Exit(stdout_lost(exc)) from None
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        # Python 3.11's Path.is_file() and is_symlink() raise it where 3.12 says False: any path
        # option could end in a traceback (a breaker's trial: a name of 260 bytes)
        from nvmeter.records import name_too_long

        say_line(f"nvmeter: {name_too_long(exc.filename)}")
        raise typer.Exit(errors.UsageError.exit_code) from None
