"""`run_command`: the child's whole life inside one window per board."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from nvmeter import errors, provenance
from nvmeter.arguments import flag
from nvmeter.boards.profile import BoardProfile, resolve_profile
from nvmeter.boards.protocol import Board
from nvmeter.command.life import Life, RealLife, SimulatedLife
from nvmeter.command.process import (
    Forwarding,
    LateSignals,
    kill_everything,
    resolve_command,
    spawn,
    survivors,
)
from nvmeter.command.record import BoardRun, CommandRun
from nvmeter.descendants import marked, reap_orphans
from nvmeter.meter.baseline import IdleBaseline, given_idle, quiet_idle
from nvmeter.meter.window import EnergyWindow

# How often the wait loop looks at the child, s: the window may close up to this much
# after the child exits (idle time, inside the bound's idle term).
POLL_S = 0.05
# A command stopped this long is said once (a Ctrl-Z's stop and nvmeter's own resume of it pass sooner).
STOPPED_SAY_S = 1.0


def _baseline(board: Board, idle, profile: BoardProfile) -> IdleBaseline:
    """The idle a board's window subtracts (``idle``: "measure", a probe file, or W)."""
    if isinstance(idle, str) and idle == "measure":
        return quiet_idle(board, profile)
    # a command's whole life, its CUDA context's start and end too: the idle without a context
    return given_idle(idle, board, "no_context", profile.polling_artefact_w)


def _idle_label(idle) -> dict:
    if isinstance(idle, str) and idle == "measure":
        return {"kind": "before", "path": None}
    if isinstance(idle, (int, float)) and not isinstance(idle, bool):
        return {"kind": "given", "path": None}
    return {"kind": "probe", "path": str(idle)}


def _context_pids(board: Board) -> tuple[int, ...] | None:
    try:
        return tuple(board.compute_pids())
    except errors.TelemetryError:
        return None


def _wait(
    proc: subprocess.Popen, windows: list[EnergyWindow], life: Life, on_note: Callable[[str], None]
) -> errors.TelemetryError | None:
    """Wait for the child, reading each board's sample buffer as it goes.

    A telemetry failure stops the reading (it is returned), not the wait. A child that stays
    stopped is said once through ``on_note`` (again if it stops again after running).
    """
    failure = None
    stopped_since: float | None = None
    said = False
    child = _process(proc.pid)
    while True:
        try:
            proc.wait(timeout=POLL_S)
            return failure
        except subprocess.TimeoutExpired:
            pass
        life.tick()
        reap_orphans()  # what the command orphaned and nvmeter adopted, once it has ended
        if _stopped(child):
            if stopped_since is None:
                stopped_since = time.monotonic()
            if not said and time.monotonic() - stopped_since >= STOPPED_SAY_S:
                # a command that stopped itself (kill -STOP $$) held nvmeter without a word
                # (an adversarial review)
                on_note(
                    f"the command (pid {proc.pid}) is stopped (SIGSTOP, or a debugger holds it) and still "
                    f"metered: `kill -CONT {proc.pid}` resumes a SIGSTOP; Ctrl-C ends it"
                )
                said = True
        else:
            stopped_since, said = None, False
        if failure is None:
            try:
                for w in windows:
                    w.tick()
            except errors.TelemetryError as exc:
                failure = exc


def _process(pid: int):
    """The child as psutil sees it, made once for the wait's looks (None: already gone)."""
    import psutil

    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _stopped(child) -> bool:
    """True while ``child`` (:func:`_process`) is stopped by a signal or a tracer; False once it is gone."""
    import psutil

    try:
        return child is not None and child.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except psutil.Error:
        return False


def run_command(
    argv: Sequence[str],
    boards: Sequence[Board],
    *,
    idle: str | Path | float = "measure",
    method: str = "auto",
    life: Life | None = None,
    late: LateSignals | None = None,
    on_note: Callable[[str], None] | None = None,
    others_idle: bool = False,
) -> CommandRun:
    """Run ``argv`` as a child and meter ``boards`` for its whole life.

    Args:
        argv: The command and its arguments.
        boards: The boards to meter (one window each, opened in order, closed in reverse).
        idle: ``"measure"`` (each board's idle measured just before, with no CUDA context
            of nvmeter's own), a probe file (its ``no_context`` idle; same board), or W.
        method: The windows' reading (:class:`~nvmeter.meter.window.EnergyWindow`).
        life: Hooks around the child's life (:class:`SimulatedLife` for a simulated board).
        late: Where signals that come once the command and its windows have ended are noted
            instead of acted on, until the caller releases them (the CLI: after the record).
        on_note: Called with a line to say while the command runs (the CLI prints it): now,
            that the command has stayed stopped for :data:`STOPPED_SAY_S`.
        others_idle: Other processes' contexts on the boards did no work
            (:class:`~nvmeter.meter.window.EnergyWindow`): without it, a board where one holds a
            context at the command's start or end is not reliable.

    Returns:
        The :class:`CommandRun`; the command's exit status is ``result.exit_status``.

    Raises:
        UsageError, CommandNotFound, CommandNotExecutable: before anything is measured.
        RecordError: a probe file of another board. TelemetryError: NVML failed (a failure
            while the command runs is raised once it has ended; nothing is measured).
    """
    resolve_command(argv)
    flag(others_idle, "others_idle", errors.UsageError)  # before the idle is measured for seconds
    if not boards:
        raise errors.UsageError("no board to meter")
    life = life or RealLife()
    others = [_context_pids(b) for b in boards]
    # the idle's probe file is the board's profile too, as a window given it as idle= reads it
    profiles = [resolve_profile(None, b.identity(), idle) for b in boards]
    common = {"sync": "none", "calls": 1, "method": method, "others_idle": others_idle}
    windows = [
        EnergyWindow(b, idle=_baseline(b, idle, p), profile=p, **common)
        for b, p in zip(boards, profiles, strict=True)
    ]
    for w in windows:
        w.__enter__()
    started_utc = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    # open before the child exists: a signal once it runs (and may say it is ready) is its
    # a marker that whatever the command starts inherits, wherever it goes (nvmeter.descendants)
    env, token = marked(os.environ)
    with Forwarding(late) as forwarding:
        proc = spawn(argv, env)
        try:
            forwarding.attach(proc)
            life.started(proc.pid, t0)
            failure = _wait(proc, windows, life, on_note or (lambda _line: None))
            wall_s = time.perf_counter() - t0
            life.ended()
            if failure is not None:
                raise type(failure)(
                    f"{failure} (while the command ran; it ended with exit status "
                    f"{proc.returncode}; nothing measured)"
                )
            for w in reversed(windows):
                w.__exit__(None, None, None)
            # after the windows: the look reads every process's environment, not the command's work
            left = survivors(proc, token)
        finally:
            if proc.poll() is None:  # nvmeter failed: leave nothing of the command behind
                forwarding.detach()  # a signal's SIGCONT would undo the kill's stop of the group
                kill_everything(proc, token)
    return CommandRun(
        argv=tuple(argv),
        pid=proc.pid,
        returncode=proc.returncode,
        wall_s=wall_s,
        signals=tuple(forwarding.received),
        idle=_idle_label(idle),
        boards=tuple(BoardRun(w.result, o) for w, o in zip(windows, others, strict=True)),
        started_utc=started_utc,
        simulated=life.to_dict() if isinstance(life, SimulatedLife) else None,
        left_running=left,
        provenance=provenance.collect(),
    )
