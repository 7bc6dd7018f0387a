"""The console script: Ctrl-C while the CLI's imports load is one line too, not a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    """Console entry point (``nvmeter``); exit 130 on Ctrl-C anywhere."""
    try:
        from nvmeter.cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        print("nvmeter: interrupted; nothing written", file=sys.stderr, flush=True)
        sys.exit(130)
