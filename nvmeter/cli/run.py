"""``nvmeter run``: meter a board for a command's whole life, then settle before the exit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvmeter import errors
from nvmeter.cli import guard
from nvmeter.cli.console import note_line, say_line
from nvmeter.cli.guard import adopt_console_orphans, guarded, raise_if_signalled
from nvmeter.cli.options import DeviceOpt, bool_flag, parse_devices, parse_out_path


@guarded
def run(
    command: Annotated[
        list[str] | None,
        typer.Argument(help="The command and its arguments, after --.", metavar="-- COMMAND ARGS"),
    ] = None,
    device: DeviceOpt = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Also write the run record (JSON) to this file.", parser=parse_out_path),
    ] = None,
    idle: Annotated[
        str | None,
        typer.Option(
            "--idle",
            help="The idle subtracted, the board's idle without a CUDA context (the command's own "
            "context is part of its energy): a probe file of this board (its no-context idle), watts "
            "(78.7 or 78.7W on an H200), or measure (the default: measured for 1 s just before the "
            "command starts).",
        ),
    ] = None,
    simulate: Annotated[
        bool,
        bool_flag(
            "--simulate",
            help="Simulated board: its clock follows real time while the command lives, and it "
            "draws a CUDA context plus a fixed load (docs/everyday.md).",
        ),
    ] = False,
    others_idle: Annotated[
        bool,
        bool_flag(
            "--others-idle",
            help="Other processes holding a CUDA context on a board did no work: without it, such a "
            "board's figure is not reliable (their kernels would be counted as the command's).",
        ),
    ] = False,
    require_reliable: Annotated[
        bool,
        bool_flag(
            "--require-reliable",
            help="Exit 1 where the command succeeded but a board's figure is not reliable (for CI: "
            "without it nvmeter exits with the command's status whatever the figures).",
        ),
    ] = False,
) -> None:
    """Run a command and meter the board for its whole life: how it ended, then one line per board, on stderr.

    Each board's line: gross energy (J), energy above idle ± bound (J) with the idle named, mean W and
    the window's time. nvmeter exits with the command's own status (128 + N when a signal N
    ended it); SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGUSR1, SIGUSR2 and SIGALRM are passed
    on to the command, and what was measured is still printed and recorded. Exit 127: no such
    command; 126: not executable; with ``--require-reliable``, 1 where the command exited 0 and a
    board's figure is not reliable.
    """
    adopt_console_orphans()
    from nvmeter import command as cmd
    from nvmeter import records
    from nvmeter.boards.factory import open_board
    from nvmeter.meter.baseline import idle_spec

    argv = list(command or [])
    cmd.resolve_command(argv)
    idle_given = idle_spec(idle)
    claimed = None
    if json_path is not None:
        claimed = records.claim(
            json_path, inputs=(("--idle", idle_given if isinstance(idle_given, Path) else None),), kind="run"
        )
    boards = [open_board(d, simulate=simulate) for d in parse_devices(device)]
    life = cmd.SimulatedLife(boards[0]) if simulate else None
    late = cmd.LateSignals()
    raise_if_signalled()  # before the command starts: a signal lost in the setup's imports
    try:
        result = cmd.run_command(
            argv, boards, idle=idle_given, life=life, late=late, on_note=note_line, others_idle=others_idle
        )
        _finish_run(result, claimed)
    except BaseException:
        _unsettled(late)
        raise
    _settle(late)
    raise typer.Exit(_status(result, require_reliable))


def _status(result, require_reliable: bool) -> int:
    """The command's status, or 1 where it succeeded and ``--require-reliable`` finds a figure unreliable."""
    unreliable = [b.window.device.short for b in result.boards if not b.window.reliable]
    if not (require_reliable and result.exit_status == 0 and unreliable):
        return result.exit_status
    say_line(
        f"nvmeter: exit 1 (--require-reliable): not reliable on {', '.join(unreliable)}; the command exited 0"
    )
    return 1


def _settle(late) -> None:
    """The run's record is complete: from here to the process's exit no signal changes its status.

    In the console SIGINT, SIGTERM, SIGHUP and the rest of :data:`nvmeter.interrupts.ENDING` go from
    noted straight to ignored, for good: what
    follows (this line, typer's exit, atexit handlers, thread joins, the interpreter's
    finalisation) only ends the process, and a SIGTERM there ended it with 143, the record on
    disk (10 of 10 sent as the record appeared, 9 of them without a word). No Python handler
    could answer it: the interpreter puts SIG_DFL back in their place as it finalises, and
    leaves SIG_IGN. SIGQUIT keeps its default, the way to end a shutdown that hangs.
    """
    late.release(ignoring=guard._SETTLED if guard._CONSOLE else ())
    if late.received:
        say_line(f"nvmeter: {', '.join(late.received)} came after the command ended: its record is complete")


def _unsettled(late) -> None:
    """No record: the usual handlers say what was lost; a signal noted after the command ended is said too."""
    late.release()
    if late.received:
        names = ", ".join(late.received)
        say_line(f"nvmeter: {names} came after the command ended, before its record was written")


def _finish_run(result, claimed) -> None:
    """Say a finished run's lines, then write its claimed record (a failed write loses no figure)."""
    from nvmeter import records

    for line in result.lines():
        say_line(f"nvmeter: {line}")
    if claimed is not None:
        try:
            records.write_claimed(claimed, result.to_dict())
        except errors.NvmeterError as exc:  # nvmeter's own failure keeps its code; say the command's
            exc.args = (f"{exc} (the command's status was {result.exit_status}; its figures are above)",)
            raise
        say_line(f"nvmeter: wrote {claimed.given}")
