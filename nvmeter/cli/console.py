"""Standard output and standard error: the consoles every command writes through, and one-line messages.

stdout (:data:`out`, :data:`STDOUT`) ends a command cleanly when its reader goes or it fills;
stderr (:data:`err`, :func:`say_line`) is for progress and one-line messages, and a stderr that
cannot be written loses only them. Look :data:`out` and :data:`err` up here at each use
(``console.err``): tests put their own in their place.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

from rich.console import Console
from rich.table import Table

# The exit status once standard output's reader has gone: SIGPIPE's, as other tools end
STDOUT_GONE = 128 + signal.SIGPIPE


class OutputLost(Exception):
    """Standard output could not be written (a full disk, /dev/full): not a failed check."""


class ReaderGone(OutputLost):
    """Standard output's reader went away (`| head -1`), as rich's console saw it."""


class _Stream:
    """The current ``sys.stdout`` or ``sys.stderr`` (looked up at each write, as rich does)."""

    def __init__(self, name: str, lost=OutputLost) -> None:
        self._name, self._lost = name, lost

    def _call(self, what: str, *args):
        stream = getattr(sys, self._name)
        if stream is None:  # started with the descriptor closed (`>&-`): there is no reader
            return None
        try:
            return getattr(stream, what)(*args)
        except BrokenPipeError:
            if self._lost is None:  # stderr's reader went (`2>&1 | head -1`): the work goes on
                return None
            raise
        except OSError as exc:
            if self._lost is None:  # stderr: nowhere left to say it; the exit status still says what ran
                return None
            raise self._lost(exc.strerror or str(exc)) from exc

    def write(self, text: str):
        return self._call("write", text)

    def flush(self) -> None:
        self._call("flush")

    def __getattr__(self, name: str):
        return getattr(getattr(sys, self._name), name)


class _Stdout(Console):
    """rich's console, ending with SIGPIPE's conventional status when the reader goes away."""

    def on_broken_pipe(self) -> None:
        # `nvmeter show … | head`: rich ends with SystemExit(1), which reads as a failure and passes
        # every handler; the console is quiet from then on, and the guard ends the command with 141
        self.quiet = True
        raise ReaderGone("standard output's reader went away")


# plain text on standard output (markdown, JSON, a path) goes through it too: a full or broken
# stdout is then one line whatever wrote to it
STDOUT = _Stream("stdout")
out = _Stdout(file=STDOUT)
err = Console(file=_Stream("stderr", lost=None))


def printable_line(line: str) -> str:
    r"""``line`` with control characters and lone surrogates shown escaped (``\r``, ``\x1b``, ``\ud800``).

    A newline or a terminal escape in a file name, a command or a record's test id would
    otherwise split the line or drive the terminal, and a surrogate (a file name that was not
    UTF-8) cannot be written at all.
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


def note_line(line: str) -> None:
    """A line from the library while it works, said as nvmeter's."""
    say_line(f"nvmeter: {line}")


def say_line(line: str) -> None:
    """One unwrapped line on stderr (rich would wrap it at the terminal width), :func:`printable_line`."""
    line = printable_line(line)
    if sys.stderr is None:  # closed (2>&-): print() would write to stdout, into the command's output
        return
    with contextlib.suppress(OSError):  # a full stderr: the exit status still says what happened
        print(line, file=sys.stderr, flush=True)


def stdout_lost(exc: Exception) -> int:
    """Standard output went away: say so (unless its reader left), and the exit code.

    A reader that went away (`nvmeter show … | head`) ends it quietly, as SIGPIPE ends other
    tools; a full one (`> /dev/full`) is one line and exit 2. Either way stdout then points to
    /dev/null, so that Python's flush at exit does not fail again.
    """
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if isinstance(exc, (BrokenPipeError, ReaderGone)):
        return STDOUT_GONE
    say_line(f"nvmeter: cannot write standard output: {getattr(exc, 'strerror', None) or exc}")
    return 2


def make_table(title: str, rows: list[tuple[str, str]]) -> Table:
    """A two-column rich table ("what", "measured") of ``rows``."""
    table = Table(title=title, title_justify="left", show_header=True, header_style="bold")
    table.add_column("what")
    table.add_column("measured")
    for what, value in rows:
        table.add_row(what, value)
    return table
