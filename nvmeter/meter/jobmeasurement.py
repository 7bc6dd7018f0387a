"""`JobMeasurement`: one job's energy over several boards and ranks, each board counted once.

A job's boards are keyed by (host, UUID): several ranks on one board (or on MIG instances
of one parent board) share its one energy counter, so the board is metered by one rank
(the lowest on it) and counted once; :attr:`BoardPart.ranks` says which ranks ran on it.

The combined bound is the plain sum of the boards' bounds. Each board's bound is a sum of
worst cases (:attr:`~nvmeter.meter.measurement.Measurement.err_j`), not a standard
deviation, and its terms are not independent across boards: the state term (temperature
drift, the clocks' ramp after idle) moves every board of a lockstep job the same way, so
adding them in quadrature would claim a precision the model does not have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from nvmeter import records, verify
from nvmeter.boards.profile import BoardProfile
from nvmeter.boards.protocol import BoardIdentity
from nvmeter.meter.measurement import Measurement
from nvmeter.meter.reasons import figure_reason, mj_text
from nvmeter.meter.windowcheck import check_dict

KIND = "job"


def tag(device: BoardIdentity) -> str:
    """``H200 GPU-2e13…b34c``: the name without the vendor, the UUID's first and last digits."""
    uuid = device.uuid if len(device.uuid) <= 16 else f"{device.uuid[:8]}…{device.uuid[-4:]}"
    return f"{device.name.removeprefix('NVIDIA ')} {uuid}"


@dataclass(frozen=True)
class BoardPart:
    """One board's part of a job.

    Attributes:
        host: The host the board is on.
        device: The board's identity.
        rank: The rank that metered it (the lowest rank whose window named it).
        ranks: Every rank whose window named it, ascending.
        measurement: Its window's readings (None when it could not be metered).
        error: Why it could not be metered (None when it was).
    """

    host: str
    device: BoardIdentity
    rank: int
    ranks: tuple[int, ...]
    measurement: Measurement | None
    error: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        """(host, UUID): what makes two readings the same board."""
        return (self.host, self.device.uuid)

    @property
    def label(self) -> str:
        """``host/H200 GPU-2e13…b34c``: the UUID's first and last digits tell apart boards of one model."""
        return f"{self.host}/{tag(self.device)}"

    @property
    def above_idle_j(self) -> float:
        """Energy above idle, J (nan when not metered)."""
        return self.measurement.above_idle_j if self.measurement else math.nan

    @property
    def err_j(self) -> float:
        """Bound on :attr:`above_idle_j`, J (nan when not metered)."""
        return self.measurement.err_j if self.measurement else math.nan

    @property
    def problem(self) -> str | None:
        """Why this board's figure cannot be trusted, or None."""
        if self.measurement is None:
            return (
                f"{self.label} (rank {self.rank}) was not metered ({self.error}): "
                "its energy is unknown, not 0 J"
            )
        # the job judges the bound as a whole; a board's own relative bound is no fault
        reason = replace(self.measurement, max_rel_err=None).reason
        return f"{self.label} (rank {self.rank}): {reason}" if reason else None

    def to_dict(self) -> dict:
        """JSON form: the board's raw readings (its Measurement's) and its profile."""
        m = self.measurement
        return {
            "host": self.host,
            "device": self.device.to_dict(),
            "rank": self.rank,
            "ranks": list(self.ranks),
            "error": self.error,
            "measurement": m.to_dict() if m else None,
            "profile": m.profile.to_dict() if m else None,
            "model_version": m.model_version if m else None,
        }

    @classmethod
    def from_dict(cls, d: dict) -> BoardPart:
        """Inverse of :meth:`to_dict` (derived figures recomputed)."""
        m = None
        if d["measurement"] is not None:
            m = Measurement.from_dict(d["measurement"])
            m = replace(m, profile=BoardProfile.from_dict(d["profile"]), model_version=d["model_version"])
        return cls(
            d["host"], BoardIdentity.from_dict(d["device"]), d["rank"], tuple(d["ranks"]), m, d["error"]
        )


@dataclass(frozen=True)
class RankRecord:
    """One rank of the job, as it reported itself at the window's exit.

    Attributes:
        rank: Its rank in the window's process group.
        host: Its host.
        calls: Calls (steps) it declared.
        devices: UUIDs of the boards its window named (metered by it or by a lower rank).
        timing_s: Its exit's distributed costs, s of the host's clock (``exit_barrier_s``:
            waiting for every rank's work to end; ``exit_skew_s``: waiting for every
            rank's end edges).
    """

    rank: int
    host: str
    calls: int
    devices: tuple[str, ...]
    timing_s: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return {**self.__dict__, "devices": list(self.devices)}

    @classmethod
    def from_dict(cls, d: dict) -> RankRecord:
        """Inverse of :meth:`to_dict`."""
        return cls(d["rank"], d["host"], d["calls"], tuple(d["devices"]), dict(d.get("timing_s") or {}))


@dataclass(frozen=True)
class JobMeasurement:
    """A job's energy above idle over every board it ran on, each board once, per step.

    Attributes:
        boards: One part per board, in (host, rank, UUID) order.
        ranks: One record per rank, by rank.
        max_rel_err: The caller's accepted relative bound on the per-step figure (None: any).
        gather_s: Time this rank spent in the gather of the ranks' readings, s (nan:
            a window of one process, nothing gathered).
    """

    boards: tuple[BoardPart, ...]
    ranks: tuple[RankRecord, ...]
    max_rel_err: float | None = None
    gather_s: float = math.nan

    # -- steps -------------------------------------------------------------
    @property
    def calls_agree(self) -> bool:
        """True when every rank declared the same number of calls."""
        return len({r.calls for r in self.ranks}) <= 1

    @property
    def calls(self) -> int:
        """The job's steps: the ranks' common call count (the largest, when they disagree)."""
        return max((r.calls for r in self.ranks), default=0)

    # -- energy ------------------------------------------------------------
    @property
    def metered(self) -> tuple[BoardPart, ...]:
        """The boards that were metered."""
        return tuple(b for b in self.boards if b.measurement is not None)

    @property
    def measured_above_idle_j(self) -> float:
        """Energy above idle of the metered boards alone, J."""
        return sum(b.above_idle_j for b in self.metered)

    @property
    def above_idle_j(self) -> float:
        """The job's energy above idle over all its boards, J (nan if any board was not metered)."""
        return self.measured_above_idle_j if len(self.metered) == len(self.boards) else math.nan

    @property
    def energy_j(self) -> float:
        """Gross energy over the boards' windows, J (nan if any board was not metered)."""
        if len(self.metered) != len(self.boards):
            return math.nan
        return sum(b.measurement.energy_j for b in self.metered)

    @property
    def err_j(self) -> float:
        """Bound on :attr:`above_idle_j`: the boards' bounds summed (module docstring: why), J."""
        return sum(b.err_j for b in self.boards) if self.boards else math.nan

    @property
    def window_s(self) -> float:
        """The longest of the boards' windows, s."""
        return max((b.measurement.window_s for b in self.metered), default=math.nan)

    @property
    def per_step_mj(self) -> float:
        """Energy above idle per step over all boards, mJ (the headline)."""
        return self.above_idle_j * 1e3 / self.calls if self.calls else math.nan

    @property
    def per_step_mj_err(self) -> float:
        """Bound on :attr:`per_step_mj`, mJ."""
        return self.err_j * 1e3 / self.calls if self.calls else math.nan

    @property
    def shared(self) -> dict[str, tuple[int, ...]]:
        """Boards that several ranks ran on: label -> ranks (each counted once)."""
        return {b.label: b.ranks for b in self.boards if len(b.ranks) > 1}

    # -- judgement -----------------------------------------------------------
    @property
    def problems(self) -> tuple[str, ...]:
        """Every fault seen: boards not metered or unreliable, disagreeing ranks, a UUID on two hosts."""
        out = [p for p in (b.problem for b in self.boards) if p]
        if not self.calls_agree:
            counts = ", ".join(f"rank {r.rank} {r.calls}" for r in self.ranks)
            out.append(
                f"the ranks disagree on their call counts ({counts}); per-step figures use the largest"
            )
        hosts: dict[str, set[str]] = {}
        for b in self.boards:
            if not b.device.simulated:
                hosts.setdefault(b.device.uuid, set()).add(b.host)
        for uuid, on in sorted(hosts.items()):
            if len(on) > 1:
                out.append(
                    f"{uuid} is metered on hosts {', '.join(sorted(on))}: one board seen from several "
                    "containers is counted once per host (give every rank the same host=)"
                )
        return tuple(out)

    @property
    def reason(self) -> str | None:
        """Why the job's figure is not reliable, or None."""
        if not self.boards:
            return "no board was metered"
        if self.problems:
            return "; ".join(self.problems)
        if not self.calls:
            return "no calls were declared (w.call() or calls=)"
        return figure_reason(self.per_step_mj, self.per_step_mj_err, self.max_rel_err, "a step")

    @property
    def reliable(self) -> bool:
        """True when nothing in :attr:`reason` applies."""
        return self.reason is None

    def __repr__(self) -> str:
        text = (
            f"{mj_text(self.per_step_mj)} ± {mj_text(self.per_step_mj_err)} mJ/step above idle over "
            f"{len(self.boards)} board(s), {len(self.ranks)} rank(s) "
            f"({self.calls} steps, {self.window_s:.2f} s)"
        )
        # a note several boards share is said once, with its boards (each board's said it again),
        # and the boards once for all the notes they share (a new user's trial: a list per note)
        boards_of: dict[str, list[str]] = {}
        for b in self.boards:
            for note in b.measurement.notes if b.measurement else ():
                boards_of.setdefault(note, []).append(b.label)
        notes_of: dict[tuple[str, ...], list[str]] = {}
        for note, who in boards_of.items():
            notes_of.setdefault(tuple(who), []).append(note)
        if notes_of:
            text += " [" + "; ".join(f"{', '.join(who)}: {'; '.join(n)}" for who, n in notes_of.items()) + "]"
        return text if self.reliable else f"{text} NOT RELIABLE: {self.reason}"

    # -- tables --------------------------------------------------------------
    def board_rows(self) -> list[dict]:
        """One row per board: who metered it, who ran on it, its energy above idle and bound."""
        rows = []
        for b in self.boards:
            m = b.measurement
            rows.append(
                {
                    "board": b.label,
                    "model": b.device.name,
                    "metered_by": b.rank,
                    "ranks": list(b.ranks),
                    "window_s": m.window_s if m else math.nan,
                    "idle_w": m.idle_w if m else math.nan,
                    "above_idle_j": b.above_idle_j,
                    "err_j": b.err_j,
                    "per_step_mj": b.above_idle_j * 1e3 / self.calls if self.calls else math.nan,
                    "profile": m.profile.source if m else None,
                    "status": b.problem or "ok",
                }
            )
        return rows

    def rank_rows(self) -> list[dict]:
        """One row per rank; a shared board's energy is split evenly among the ranks on it."""
        rows = []
        for r in self.ranks:
            mine = [b for b in self.boards if r.rank in b.ranks]
            share_j = sum(b.above_idle_j / len(b.ranks) for b in mine)
            rows.append(
                {
                    "rank": r.rank,
                    "host": r.host,
                    "calls": r.calls,
                    "boards": [tag(b.device) for b in mine],
                    "metered": [tag(b.device) for b in mine if b.rank == r.rank],
                    "share_per_step_mj": share_j * 1e3 / self.calls if self.calls else math.nan,
                    **{k: v for k, v in r.timing_s.items()},
                }
            )
        return rows

    def table(self) -> str:
        """The headline, then the per-board and per-rank tables, as markdown."""
        lines = [repr(self), "", "| board | model | metered by | ranks | window s | J above idle | mJ/step |"]
        lines.append("| --- | --- | --- | --- | --- | --- | --- |")
        for row in self.board_rows():
            lines.append(
                f"| {row['board']} | {row['model']} | {row['metered_by']} | {row['ranks']} | "
                f"{row['window_s']:.2f} | {row['above_idle_j']:,.1f} ± {row['err_j']:,.1f} | "
                f"{row['per_step_mj']:,.1f} |"
            )
        lines += [
            "",
            "| rank | host | calls | boards | metered | share mJ/step |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for row in self.rank_rows():
            lines.append(
                f"| {row['rank']} | {row['host']} | {row['calls']} | {', '.join(row['boards'])} | "
                f"{', '.join(row['metered']) or '-'} | {row['share_per_step_mj']:,.1f} |"
            )
        return "\n".join(lines)

    # -- JSON ----------------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON form: every rank's raw readings (per board), the ranks, and the derived figures."""
        return {
            "boards": [b.to_dict() for b in self.boards],
            "ranks": [r.to_dict() for r in self.ranks],
            "max_rel_err": self.max_rel_err,
            "gather_s": self.gather_s,
            "derived": {
                "calls": self.calls,
                "above_idle_j": self.above_idle_j,
                "measured_above_idle_j": self.measured_above_idle_j,
                "err_j": self.err_j,
                "per_step_mj": self.per_step_mj,
                "per_step_mj_err": self.per_step_mj_err,
                "window_s": self.window_s,
                "shared": {k: list(v) for k, v in self.shared.items()},
                "reliable": self.reliable,
                "reason": self.reason,
            },
        }

    @classmethod
    def from_dict(cls, d: dict) -> JobMeasurement:
        """Inverse of :meth:`to_dict` (derived figures recomputed, not read)."""
        gather = d.get("gather_s")
        return cls(
            tuple(BoardPart.from_dict(b) for b in d["boards"]),
            tuple(RankRecord.from_dict(r) for r in d["ranks"]),
            d.get("max_rel_err"),
            math.nan if gather is None else gather,
        )

    def save(self, path: Path) -> None:
        """Write a ``job`` record (atomic; :mod:`nvmeter.records`).

        Raises:
            UsageError: the path is not writable.
        """
        records.write_json(path, {**records.header(KIND), **self.to_dict()})

    @classmethod
    def load(cls, path: Path, parsed: dict | None = None) -> JobMeasurement:
        """Read a ``job`` record, its figures verified against its raw readings.

        ``parsed``: the file's JSON, where the caller has parsed it already.

        Raises:
            RecordError: missing, not a job record, another schema version, damaged (a field of
                the wrong type, a board's raw series that cannot be real), or a stored figure, the
                job's or a board's, that differs from its recomputation.
        """
        path = Path(path)
        data = records.read_json(path, KIND, parsed)
        with records.building(path, KIND):
            boards = records.items(data["boards"], "boards", records.mapping)
            for i, b in enumerate(boards):
                if b["measurement"] is not None:
                    check_dict(b["measurement"], f"boards[{i}].measurement")
            job = cls.from_dict(data)
            fresh = job.to_dict()  # inside: a raw series that breaks the arithmetic is this record's damage
        checks = [("derived", data.get("derived"), fresh["derived"])]
        checks += [
            (f"boards[{i}].measurement.derived", b["measurement"].get("derived"), f["measurement"]["derived"])
            for i, (b, f) in enumerate(zip(boards, fresh["boards"], strict=True))
            if b["measurement"] is not None
        ]
        verify.check(path, checks)
        return job
