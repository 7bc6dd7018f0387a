"""``nvmeter run``: meter a whole command, from before it starts to after it exits.

The command runs as a child process with this process's standard streams. Before it starts,
each board's idle is measured (a quiescent span with no CUDA context of nvmeter's own; or
a probe file's no-context idle, or a figure given in W), and a window opens on every board
(aligned edges: the start edge waits for a counter step). The window stays open for the
child's whole life, start-up and CUDA context included, reading the sample buffer about
once a second, and closes on the first counter step after the child has exited. The
figures are the window's: gross energy, energy above that idle with its bound, mean power.

Signals: SIGINT and SIGTERM that reach nvmeter are forwarded to the child and remembered;
the window closes when the child exits, and the record says it was interrupted. A Ctrl-C
at a terminal already reaches the child (same foreground process group), so it is not sent
twice (as ``uv run`` decides, docs/facts.md). A third signal kills the child.

On the simulated board (``--simulate``) the child cannot drive the board's virtual clock,
so :class:`SimulatedLife` does: while the child lives, the virtual clock follows the host's
real time and the board holds a CUDA context plus a fixed load (docs/everyday.md says what
this does and does not test).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from nvmeter import __version__, errors, records, verify
from nvmeter.boards.protocol import Board
from nvmeter.meter.baseline import IdleBaseline, measure_quiescent
from nvmeter.meter.measurement import Measurement
from nvmeter.meter.window import EnergyWindow

# How often the wait loop looks at the child, s: the window may close up to this much
# after the child exits (idle time, inside the bound's idle term).
POLL_S = 0.05
# A command shorter than this also gets the sample buffer's reading beside the edges':
# at 0.25 s aligned windows read to 0.90% median, 1.49% max, against 1.08% / 2.94% for the
# samples on the H200 (results/window-accuracy-h200-run2.json), so the edges stay the figure
# and the samples are a cross-check.
SHORT_S = 1.0
# The signal that ends a child which ignored the ones before it.
KILL_AFTER_SIGNALS = 3
FORWARDED = (signal.SIGINT, signal.SIGTERM)


# -- the command --------------------------------------------------------------------------
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


def _spawn(argv: Sequence[str]) -> subprocess.Popen:
    try:
        return subprocess.Popen(list(argv))
    except FileNotFoundError as exc:
        raise errors.CommandNotFound(f"command not found: {argv[0]}") from exc
    except PermissionError as exc:
        raise errors.CommandNotExecutable(f"{argv[0]} is not executable") from exc
    except OSError as exc:
        raise errors.UsageError(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc


# -- what the simulated board needs ------------------------------------------------------
class Life(Protocol):
    """Hooks around the child's life (the simulated board's driver; nothing for a real board)."""

    def started(self, pid: int) -> None:
        """The child has just been started."""
        ...

    def tick(self) -> None:
        """Called about every :data:`POLL_S` while the child lives."""
        ...

    def ended(self) -> None:
        """The child has just been reaped."""
        ...


class RealLife:
    """A real board needs nothing: its clock runs and the child drives its power."""

    def started(self, pid: int) -> None:
        """Nothing to do."""

    def tick(self) -> None:
        """Nothing to do."""

    def ended(self) -> None:
        """Nothing to do."""


class SimulatedLife:
    """``--simulate``: the child's life, imposed on a simulated board.

    While the child lives the board's virtual clock follows the host's real time (it is
    advanced to the real time elapsed since the child started, about every
    :data:`POLL_S`), and the board holds a CUDA context for the child's pid plus
    ``load_w`` above context idle. Whatever the child really does, the board draws that.

    Args:
        board: A :class:`~nvmeter.boards.simulated.SimulatedBoard`.
        load_w: Load above context idle, W (default: the board's constant-operand matmul,
            295 W in the default model, from results/probe-h200.json).
    """

    def __init__(self, board, load_w: float | None = None) -> None:
        self.board = board
        self.load_w = board.config.load_above_idle_w["constant"] if load_w is None else float(load_w)
        self.t0_s = self.t1_s = float("nan")
        self._real_t0_s = 0.0

    def started(self, pid: int) -> None:
        """Open a context for ``pid`` and apply the load, now."""
        self._real_t0_s = time.perf_counter()
        self.t0_s = self.board.clock.now()
        self.board.set_context(True, pid)
        self.board.set_load(self.load_w)

    def tick(self) -> None:
        """Bring the virtual clock up to the real time the child has lived."""
        self.board.clock.advance_to(self.t0_s + time.perf_counter() - self._real_t0_s)

    def ended(self) -> None:
        """Catch up with real time, then drop the load and the context."""
        self.tick()
        self.t1_s = self.board.clock.now()
        self.board.set_load(0.0)
        self.board.set_context(False)

    def to_dict(self) -> dict:
        """What was imposed, for the record: load, the context's step and the virtual times."""
        c = self.board.config
        return {
            "load_w": self.load_w,
            "context_w": c.idle_context_w - c.idle_no_context_w,
            "t0_s": self.t0_s,
            "t1_s": self.t1_s,
        }


# -- signals ------------------------------------------------------------------------------
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


class _Forwarding:
    """While open: SIGINT and SIGTERM go on to the child and are remembered, in order."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self._proc = proc
        self.received: list[str] = []
        self._saved: dict[int, object] = {}

    def __enter__(self) -> _Forwarding:
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


# -- the record ---------------------------------------------------------------------------
@dataclass(frozen=True)
class BoardRun:
    """One board's window over the command.

    Attributes:
        window: The window, one call long (the command).
        other_pids: Processes holding a CUDA context on the board just before the command
            started (their draw is in the idle too); None where the board cannot say.
    """

    window: Measurement
    other_pids: tuple[int, ...] | None

    def derived(self) -> dict:
        """Gross J, J above idle and its bound, idle W, mean W, window s, reliability."""
        m = self.window
        return {
            "energy_j": m.energy_j,
            "above_idle_j": m.above_idle_j,
            "err_j": m.err_j,
            "idle_w": m.idle_w,
            "power_w": m.power_w,
            "window_s": m.window_s,
            "reliable": m.reliable,
            "reason": m.reason,
        }


@dataclass(frozen=True)
class CommandRun:
    """A metered command: what ran, how it ended, and one window per board.

    Attributes:
        argv: The command and its arguments.
        pid: The child's process id.
        returncode: As :class:`subprocess.Popen` gives it (negative: killed by that signal).
        wall_s: Host time from the child's start to its reaping, s.
        signals: Signals nvmeter received while the child lived or its window closed, in order.
        idle: Which idle: ``{"kind": "before" | "probe" | "given", "path": probe file or None}``.
        boards: One :class:`BoardRun` per board, in the order given.
        started_utc: ISO 8601 time the child started.
        simulated: What :class:`SimulatedLife` imposed (None on a real board).
    """

    argv: tuple[str, ...]
    pid: int
    returncode: int
    wall_s: float
    signals: tuple[str, ...]
    idle: dict
    boards: tuple[BoardRun, ...]
    started_utc: str
    simulated: dict | None = None

    @property
    def exit_status(self) -> int:
        """The command's exit status as a shell reports it (128 + N when killed by signal N)."""
        return self.returncode if self.returncode >= 0 else 128 - self.returncode

    @property
    def interrupted(self) -> bool:
        """True when nvmeter received SIGINT or SIGTERM while the command ran."""
        return bool(self.signals)

    def derived(self) -> dict:
        """The figures: exit status, interrupted, and each board's (:meth:`BoardRun.derived`)."""
        return {
            "exit_status": self.exit_status,
            "interrupted": self.interrupted,
            "boards": [b.derived() for b in self.boards],
        }

    def _idle_words(self) -> str:
        if self.idle["kind"] == "before":
            return "no CUDA context, measured before the command"
        if self.idle["kind"] == "probe":
            return f"no CUDA context, from {self.idle['path']}"
        return "given"

    def lines(self) -> list[str]:
        """What ``nvmeter run`` prints: how the command ended, then one line per board."""
        how = (
            f"exited {self.returncode}"
            if self.returncode >= 0
            else f"was killed by {_signal_name(-self.returncode)} (exit status {self.exit_status})"
        )
        shown = shlex.join(self.argv).replace("\n", "\\n")  # one line, whatever the arguments hold
        out = [f"{shown} {how} after {_seconds(self.wall_s)}"]
        if self.interrupted:
            got = ", ".join(self.signals)
            out.append(f"interrupted ({got}, passed on to the command); measured until it ended")
        for b in self.boards:
            out.append(self._board_line(b))
        return out

    def _board_line(self, b: BoardRun) -> str:
        m = b.window
        line = (
            f"{m.device.short}: {m.energy_j:,.1f} J, {m.above_idle_j:,.1f} ± {m.err_j:,.1f} J above idle "
            f"(idle {m.idle_w:.1f} W, {self._idle_words()}); mean {m.power_w:,.1f} W over {m.window_s:.2f} s"
        )
        if self.wall_s < SHORT_S:
            s = m.with_method("samples")
            line += f"; samples: {s.above_idle_j:,.1f} ± {s.err_j:,.1f} J above idle"
        if self.wall_s < m.profile.counter_period_s:
            line += (
                f"; the command lived under one counter period ({m.profile.counter_period_s * 1e3:.0f} ms): "
                "its energy is known only to the bound"
            )
        if b.other_pids:
            line += f"; other processes held a CUDA context ({', '.join(map(str, b.other_pids))})"
        return line if m.reliable else f"{line}; NOT RELIABLE: {m.reason}"

    def to_dict(self) -> dict:
        """The JSON record (kind ``run``): raw windows and the derived figures."""
        return {
            "kind": "run",
            "schema_version": records.CURRENT["run"],
            "started_utc": self.started_utc,
            "host": {
                "nvmeter": __version__,
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "command": list(self.argv),
            "pid": self.pid,
            "returncode": self.returncode,
            "wall_s": self.wall_s,
            "signals": list(self.signals),
            "idle": self.idle,
            "simulated": self.simulated,
            "boards": [
                {
                    "other_pids": None if b.other_pids is None else list(b.other_pids),
                    "window": b.window.to_dict(),
                }
                for b in self.boards
            ],
            "derived": self.derived(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> CommandRun:
        """Rebuild from :meth:`to_dict` (derived figures are recomputed, not read)."""
        return cls(
            argv=tuple(d["command"]),
            pid=d["pid"],
            returncode=d["returncode"],
            wall_s=d["wall_s"],
            signals=tuple(d["signals"]),
            idle=d["idle"],
            boards=tuple(
                BoardRun(
                    Measurement.from_dict(b["window"]),
                    None if b["other_pids"] is None else tuple(b["other_pids"]),
                )
                for b in d["boards"]
            ),
            started_utc=d["started_utc"],
            simulated=d.get("simulated"),
        )


def _seconds(value_s: float) -> str:
    return f"{value_s:.2f} s" if value_s >= 1 else f"{value_s * 1e3:.0f} ms"


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def load_run(path: Path) -> CommandRun:
    """Read a run record, every derived figure verified against its raw readings.

    Raises:
        RecordError: unreadable, another kind or schema, damaged, or a stored figure that
            differs from its recomputation.
    """
    data = records.read_json(path, "run")
    try:
        run = CommandRun.from_dict(data)
        fresh = [b.window.to_dict()["derived"] for b in run.boards]
        checks = [("derived", data.get("derived"), run.derived())]
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError) as exc:
        raise errors.RecordError(f"{path}: damaged run record ({type(exc).__name__}: {exc})") from exc
    checks += [
        (f"boards[{i}].window.derived", data["boards"][i]["window"].get("derived"), block)
        for i, block in enumerate(fresh)
    ]
    verify.check(path, checks)
    return run


# -- metering -----------------------------------------------------------------------------
def _baseline(board: Board, idle) -> IdleBaseline:
    """The idle a board's window subtracts (``idle``: "measure", a probe file, or W)."""
    if isinstance(idle, str) and idle == "measure":
        return IdleBaseline.from_spans([measure_quiescent(board)], "quiescent")
    if isinstance(idle, (int, float)) and not isinstance(idle, bool):
        return IdleBaseline.given(float(idle))
    return IdleBaseline.from_probe(Path(idle), board, level="no_context")


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


def _wait(proc: subprocess.Popen, windows: list[EnergyWindow], life: Life) -> errors.TelemetryError | None:
    """Wait for the child, reading each board's sample buffer as it goes.

    A telemetry failure stops the reading (it is returned), not the wait.
    """
    failure = None
    while True:
        try:
            proc.wait(timeout=POLL_S)
            return failure
        except subprocess.TimeoutExpired:
            pass
        life.tick()
        if failure is None:
            try:
                for w in windows:
                    w.call(0)
            except errors.TelemetryError as exc:
                failure = exc


def run_command(
    argv: Sequence[str],
    boards: Sequence[Board],
    *,
    idle: str | Path | float = "measure",
    method: str = "auto",
    life: Life | None = None,
) -> CommandRun:
    """Run ``argv`` as a child and meter ``boards`` for its whole life.

    Args:
        argv: The command and its arguments.
        boards: The boards to meter (one window each, opened in order, closed in reverse).
        idle: ``"measure"`` (each board's idle measured just before, with no CUDA context
            of nvmeter's own), a probe file (its ``no_context`` idle; same board), or W.
        method: The windows' reading (:class:`~nvmeter.meter.window.EnergyWindow`).
        life: Hooks around the child's life (:class:`SimulatedLife` for a simulated board).

    Returns:
        The :class:`CommandRun`; the command's exit status is ``result.exit_status``.

    Raises:
        UsageError, CommandNotFound, CommandNotExecutable: before anything is measured.
        RecordError: a probe file of another board. TelemetryError: NVML failed (a failure
            while the command runs is raised once it has ended; nothing is measured).
    """
    resolve_command(argv)
    if not boards:
        raise errors.UsageError("no board to meter")
    life = life or RealLife()
    others = [_context_pids(b) for b in boards]
    windows = [EnergyWindow(b, idle=_baseline(b, idle), sync="none", calls=1, method=method) for b in boards]
    for w in windows:
        w.__enter__()
    started_utc = datetime.now(timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    proc = _spawn(argv)
    try:
        with _Forwarding(proc) as forwarding:
            life.started(proc.pid)
            failure = _wait(proc, windows, life)
            wall_s = time.perf_counter() - t0
            life.ended()
            if failure is not None:
                raise type(failure)(
                    f"{failure} (while the command ran; it ended with exit status "
                    f"{proc.returncode}; nothing measured)"
                )
            for w in reversed(windows):
                w.__exit__(None, None, None)
    finally:
        if proc.poll() is None:  # nvmeter failed: leave no child behind
            proc.kill()
            proc.wait()
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
    )
