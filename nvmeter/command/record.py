"""The run record: what ran, how it ended, one window per board; derived figures and their check."""

from __future__ import annotations

import shlex
import signal
from dataclasses import dataclass
from pathlib import Path

from nvmeter import records, verify
from nvmeter.meter import windowcheck
from nvmeter.meter.measurement import Measurement
from nvmeter.provenance import Provenance

# A command shorter than this also gets the sample buffer's reading beside the edges':
# at 0.25 s aligned windows read to 0.90% median, 1.49% max, against 1.08% / 2.94% for the
# samples on the H200 (results/window-accuracy-h200-run2.json), so the edges stay the figure
# and the samples are a cross-check.
SHORT_S = 1.0


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
        left_running: Processes the command started and left running when it exited (its
            session's, and those that carry its environment's marker wherever they went):
            their draw after that is not in the window.
        provenance: Where the record came from (:mod:`nvmeter.provenance`); None when not known.
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
    left_running: tuple[int, ...] = ()
    provenance: Provenance | None = None

    @property
    def exit_status(self) -> int:
        """The command's exit status as a shell reports it (128 + N when killed by signal N)."""
        return self.returncode if self.returncode >= 0 else 128 - self.returncode

    @property
    def interrupted(self) -> bool:
        """True when nvmeter received a signal it forwards (INT, TERM, HUP, QUIT) while the command ran."""
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
        if self.left_running:
            n = len(self.left_running)
            pids = ", ".join(map(str, self.left_running[:SHOWN_PIDS]))
            pids += f" and {n - SHOWN_PIDS:,} more, all in the record" if n > SHOWN_PIDS else ""
            out.append(
                f"the command left {n:,} process{'es' if n > 1 else ''} it started running ({pids}): "
                "what they draw after it exited is not measured"
            )
        if self.simulated:
            out.append(
                f"simulated board: it drew a CUDA context (+{self.simulated['context_w']:.1f} W) and "
                f"{self.simulated['load_w']:.0f} W of load while the command lived, whatever the command did"
            )
        for b in self.boards:
            out.append(self._board_line(b))
        return out

    def _board_line(self, b: BoardRun) -> str:
        m = b.window
        line = (
            f"{m.device.short}: {m.energy_j:,.1f} J, {m.above_idle_j:,.1f} ± {m.err_j:,.1f} J above idle "
            f"(idle {m.idle_w:.1f}{f' ± {m.idle.err_w:.1f}' if m.idle.err_w >= 0.05 else ''} W, "
            f"{self._idle_words()}{_drift_words(m)}); mean {m.power_w:,.1f} W "
            f"over {m.window_s:.2f} s"
        )
        if self.wall_s < SHORT_S:
            s = m.with_method("samples")
            line += f"; samples: {s.above_idle_j:,.1f} ± {s.err_j:,.1f} J above idle"
        if self.wall_s < m.profile.counter_period_s:
            line += (
                f"; the command lived under one counter period ({m.profile.counter_period_s * 1e3:.0f} ms): "
                "its energy is known only to the bound"
            )
        # a window since Measurement v8 names the others it saw at its edges; one listed before the idle
        # that it did not name (ended since) may still have drawn in the idle (a review, 2026-12-07)
        named = {pid for r in m.contexts for pid in r.others}
        before = [pid for pid in b.other_pids or () if pid not in named]
        if before:
            line += f"; other processes held a CUDA context before the idle ({', '.join(map(str, before))})"
        if m.reliable and (notes := [n for n in m.notes if "taken as idle" in n]):
            line += "; " + notes[0].replace("(others_idle=True)", "(--others-idle)")
        return line if m.reliable else f"{line}; NOT RELIABLE: {m.reason}"

    def to_dict(self) -> dict:
        """The JSON record (kind ``run``): raw windows and the derived figures."""
        return {
            "kind": "run",
            "schema_version": records.CURRENT["run"],
            "started_utc": self.started_utc,
            "provenance": None if self.provenance is None else self.provenance.to_dict(),
            "command": list(self.argv),
            "pid": self.pid,
            "returncode": self.returncode,
            "wall_s": self.wall_s,
            "signals": list(self.signals),
            "idle": self.idle,
            "simulated": self.simulated,
            "left_running": list(self.left_running),
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
            left_running=tuple(d["left_running"]),
            provenance=None if d["provenance"] is None else Provenance.from_dict(d["provenance"]),
        )


# The left-running processes the line names; a command that left 1,000 had every pid on the line
# (an adversarial review's, run again here).
SHOWN_PIDS = 10


def _drift_words(m: Measurement) -> str:
    """How far the error model moved the idle by the board's drift before the window (none: nothing)."""
    drift_w = m.idle_drift_w
    return f", moved {drift_w:+.2f} W by the drift seen before the command" if abs(drift_w) >= 0.005 else ""


def _seconds(value_s: float) -> str:
    return f"{value_s:.2f} s" if value_s >= 1 else f"{value_s * 1e3:.0f} ms"


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def load_run(path: Path, parsed: dict | None = None) -> CommandRun:
    """Read a run record, every derived figure verified against its raw readings.

    ``parsed``: the file's JSON, where the caller has parsed it already (:func:`nvmeter.records.parse_json`).

    Raises:
        RecordError: unreadable, another kind or schema, damaged (a field of the wrong type
            or out of range, a raw series that cannot be real: :mod:`nvmeter.meter.sanity`),
            or a stored figure that differs from its recomputation.
    """
    data = records.read_json(path, "run", parsed)
    with records.building(path, "run"):
        check_run(data)
        run = CommandRun.from_dict(data)
        fresh = [b.window.to_dict()["derived"] for b in run.boards]
        checks = [("derived", data.get("derived"), run.derived())]
        checks += [
            (f"boards[{i}].window.derived", data["boards"][i]["window"].get("derived"), block)
            for i, block in enumerate(fresh)
        ]
    verify.check(path, checks)
    return run


_IDLE_KINDS = ("before", "probe", "given")


def check_run(d: dict) -> None:
    """A run record's fields have their types and ranges, and its raw series can be real.

    Raises:
        BadField: the first field that is wrong (named as a dotted path); KeyError for a
            missing one (both become a RecordError under :func:`nvmeter.records.building`).
    """
    records.items(d["command"], "command", records.text, empty=False)
    _pid(d["pid"], "pid")
    records.integer(d["returncode"], "returncode")
    records.number(d["wall_s"], "wall_s", at_least=0)
    records.items(d["signals"], "signals", records.text)
    idle = records.mapping(d["idle"], "idle")
    if idle.get("kind") not in _IDLE_KINDS:
        raise records.BadField(f"idle.kind is {idle.get('kind')!r}, not one of {', '.join(_IDLE_KINDS)}")
    records.text(idle.get("path"), "idle.path", none=True)
    records.text(d["started_utc"], "started_utc")
    _left_running(d["left_running"], d["pid"])
    records.mapping(d["provenance"], "provenance", none=True)
    records.items(d["boards"], "boards", records.mapping, empty=False)
    spans_s = []  # each board's window's work span, s
    for i, b in enumerate(d["boards"]):
        where = f"boards[{i}]"
        if b["other_pids"] is not None:
            records.items(b["other_pids"], f"{where}.other_pids", records.integer)
        window = windowcheck.check_dict(b["window"], f"{where}.window")
        spans_s.append(_wall_inside(d["wall_s"], window, where))
    _wall_fills(d["wall_s"], spans_s)
    if records.mapping(d.get("simulated"), "simulated", none=True) is not None:
        _simulated_life(d["simulated"], d["boards"])
    elif any(b["window"]["device"].get("simulated") for b in d["boards"]):
        # what the simulated board drew is what nvmeter run imposed: without it the figure stands alone
        raise records.BadField("a simulated board's run record without its `simulated` block")


# Linux's PID_MAX_LIMIT: the kernel gives no process a larger id (pid_max is at most this)
_PID_MAX = 2**22


def _pid(value, where: str) -> int:
    """``value`` if it can be a process id: an integer from 1 to :data:`_PID_MAX`, or BadField."""
    records.integer(value, where, at_least=1)
    if value > _PID_MAX:
        raise records.BadField(f"{where} is {value}, above Linux's largest process id ({_PID_MAX:,})")
    return value


def _left_running(pids, command_pid: int) -> None:
    """Processes the command left: each a process id, named once, and not the command's own.

    nvmeter lists them once the command has exited and been reaped (``survivors``,
    the command's pid excluded), each once.
    """
    records.items(pids, "left_running", _pid)
    if len(set(pids)) != len(pids):
        raise records.BadField(f"left_running names a process twice: {pids}")
    if command_pid in pids:
        raise records.BadField(f"left_running names the command itself (pid {command_pid}), which had exited")


def _simulated_life(sim: dict, boards: list) -> None:
    """What ``--simulate`` imposed (:class:`~nvmeter.command.life.SimulatedLife`) could have been.

    A simulated board, a load and a context step it can draw (0 to its power limit, as
    SimulatedLife allows), and the load's times inside the window it drove (the first board's).
    """
    device = boards[0]["window"]["device"]
    if device.get("simulated") is not True:
        raise records.BadField("simulated is set, but boards[0] is not a simulated board")
    limit_w = device["power_limit_w"]
    for key in ("load_w", "context_w"):
        watts = records.number(sim[key], f"simulated.{key}", at_least=0)
        if limit_w is not None and watts > limit_w:
            raise records.BadField(
                f"simulated.{key} is {watts:.6g} W, above the board's power limit ({limit_w:g} W)"
            )
    window = boards[0]["window"]
    t0_s, t1_s = (records.number(sim[key], f"simulated.{key}") for key in ("t0_s", "t1_s"))
    records.span_inside(
        "simulated", t0_s, t1_s, (window["work_t0_s"], window["work_t1_s"]), "boards[0]'s window"
    )


# The command's wall time is taken from before its start to after its end, both inside each
# board's window (opened before the start, closed after the end); a little slack for the clocks.
_WALL_SLACK_S = 0.5


def _wall_fills(wall_s: float, spans_s: list[float]) -> None:
    """The command's ``wall_s`` fills the shortest window (entered last, closed first), or BadField.

    That window was opened just before the command started and is closed just after it
    ended: an adversarial review's wall_s of 0 s in a 1.5 s window showed as "exited 0 after -0 ms".
    """
    span_s = min(spans_s)
    if wall_s < span_s - _WALL_SLACK_S:
        raise records.BadField(
            f"wall_s is {wall_s:.6g} s, shorter than the window that held the command ({span_s:.3f} s)"
        )


def _wall_inside(wall_s: float, window: dict, where: str) -> float:
    """The board's window's work span, s, in which the command's ``wall_s`` fits, or BadField."""
    span_s = records.number(window["work_t1_s"], f"{where}.window.work_t1_s") - records.number(
        window["work_t0_s"], f"{where}.window.work_t0_s"
    )
    if wall_s > span_s + _WALL_SLACK_S:
        raise records.BadField(
            f"wall_s is {wall_s:.6g} s, longer than {where}'s window ({span_s:.3f} s) that held the command"
        )
    return span_s
