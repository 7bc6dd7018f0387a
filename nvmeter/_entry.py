"""The console script: Ctrl-C at any moment is one line on stderr and exit 130, not a traceback.

Until a command's own code runs (Python's imports, typer parsing the arguments, which would
otherwise turn Ctrl-C into a silent exit 130), SIGINT is handled here: one line, exit 130,
nothing written; SIGTERM, SIGHUP, SIGUSR1, SIGUSR2 and SIGALRM likewise (one line, exit
128 + N), where they ended the process without a word. While the command runs,
:func:`nvmeter.cli.guard.guarded` puts Python's own handler back, so Ctrl-C raises KeyboardInterrupt
and the command's cleanup runs (workers reaped, finished records kept). Only the ~30 ms in which
Python itself starts, before this module loads, are Python's.

The console script's ``run``, ``score`` and ``probe`` also adopt the orphans of all they start
(:func:`nvmeter.descendants.adopt_orphans`, through ``nvmeter.cli.guard``), so that what a command or a
worker leaves behind can still be found and ended.
"""

from __future__ import annotations

import os
import signal
import sys

_LINE = b"nvmeter: interrupted; nothing written\n"
# nvmeter.interrupts.ENDING, which this module must not import (the package's imports take seconds)
ENDING = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)


def _interrupted(signum, _frame) -> None:
    if signum == signal.SIGINT:
        os.write(2, _LINE)
    else:
        os.write(2, f"nvmeter: ended by {signal.Signals(signum).name}; nothing written\n".encode())
    os._exit(128 + signum)  # nothing of the command has run: nothing to clean up, nothing to keep


def install() -> None:
    """SIGINT and :data:`ENDING` go to :func:`_interrupted` (console script, ``python -m nvmeter.cli``)."""
    for sig in (signal.SIGINT, *ENDING):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # one ignored stays so (interrupts.not_ignored)
            signal.signal(sig, _interrupted)


def main() -> None:
    """Console entry point (``nvmeter``); exit 130 on Ctrl-C anywhere."""
    install()
    try:
        from nvmeter.cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        if sys.stderr is not None:  # closed (2>&-): print() would write to stdout
            print("nvmeter: interrupted; nothing written", file=sys.stderr, flush=True)
        sys.exit(130)
