"""The ``nvmeter`` app: its commands in the order the help lists them, ``--version``, and :func:`main`."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from nvmeter.cli import check, console, data, guard, probe, run, score, show, summarize
from nvmeter.cli.console import OutputLost, say_line, stdout_lost
from nvmeter.cli.options import Command, Group, bool_flag

app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    help="What one call of GPU code really costs in energy, from NVML, with an honest error bar.",
)


def _show_version(value: bool) -> None:
    if value:
        from nvmeter import __version__

        print(f"nvmeter {__version__}", file=console.STDOUT)
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        bool_flag("--version", is_eager=True, callback=_show_version, help="Print the version and exit."),
    ] = False,
) -> None:
    pass


# the help lists them in this order
app.command(cls=Command)(probe.probe)
app.command(cls=Command)(show.show)
app.command(cls=Command, context_settings={"allow_interspersed_args": False})(run.run)
app.command(cls=Command)(check.check)
app.command(cls=Command)(score.score)
app.command(cls=Command)(summarize.summarize)
app.add_typer(data.data_app, name="data")


def main() -> None:
    """Console entry point: Ctrl-C before and after the command's own code is one line too."""
    from nvmeter import _entry

    _entry.install()
    guard._CONSOLE = True
    try:
        code = app(standalone_mode=False, prog_name="nvmeter")
    except SystemExit as exc:
        # click and rich end their own output's lost reader (the help, --version: `| true`) with
        # exit 1, this command's "a check failed"
        if exc.code == 1 and _stdout_quieted():
            sys.exit(console.STDOUT_GONE)
        raise
    except (OutputLost, OSError) as exc:  # --version's line or typer's help (commands': guard.run_guarded)
        if getattr(exc, "filename", None) is not None:  # a named file's error, not standard output's
            raise
        sys.exit(stdout_lost(exc))
    except Exception as exc:  # click's, which typer may vendor: known by name, not by module
        sys.exit(_parse_failure(exc))
    sys.exit(code if isinstance(code, int) else 0)


def _stdout_quieted() -> bool:
    """True once click (its flush wrapper) or rich (/dev/null over the descriptor) quieted a lost stdout."""
    if type(sys.stdout).__name__ == "PacifyFlushWrapper":
        return True
    try:
        return os.path.samestat(os.fstat(sys.stdout.fileno()), os.stat(os.devnull))
    except (OSError, ValueError, AttributeError):
        return False


def _parse_failure(exc: Exception) -> int:
    """One line for an argument click refused (it would draw a box of several); the exit code."""
    kinds = {c.__name__ for c in type(exc).__mro__}
    ctx = getattr(exc, "ctx", None)
    if "NoArgsIsHelpError" in kinds:  # typer has shown the help already
        return 2
    if "UsageError" in kinds:
        where = getattr(ctx, "command_path", None) or "nvmeter"
        say_line(f"nvmeter: {exc.format_message().rstrip('.')} (see '{where} --help')")
        return exc.exit_code
    if "ClickException" in kinds:
        say_line(f"nvmeter: {exc.format_message()}")
        return exc.exit_code
    if "Abort" in kinds:
        say_line("nvmeter: interrupted; nothing written")
        return 130
    raise exc
