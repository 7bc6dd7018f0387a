"""`JobWindow`: one window across several boards, each board's edges found at once.

A JobWindow composes one :class:`~nvmeter.meter.window.EnergyWindow` per board and
enters and exits them concurrently, one thread per board
(:func:`nvmeter.clock.run_concurrently`): the entry's idle spans and counter edges of N
boards take the time of the slowest board alone, not their sum, so the work waits no longer
than in front of one window on that board. Boards differ only in where their counters step,
so that is at most about a counter period an edge more than the luckiest board. NVML is
thread-safe (docs/facts.md), and its calls release the GIL, so the threads poll at once.

While the work runs the JobWindow does what one EnergyWindow does: ``w.call()`` counts, and
about once a second reads the boards' sample buffers (all at once, from ``w.call()`` only).
"""

from __future__ import annotations

import math
import socket
from collections.abc import Mapping
from pathlib import Path

from nvmeter import errors
from nvmeter.arguments import flag
from nvmeter.boards.factory import open_boards
from nvmeter.boards.profile import BoardProfile
from nvmeter.boards.protocol import Board, BoardIdentity
from nvmeter.clock import Clock, VirtualClock, run_concurrently
from nvmeter.meter.baseline import IdleBaseline
from nvmeter.meter.jobmeasurement import BoardPart, JobMeasurement, RankRecord
from nvmeter.meter.sync import Sync, resolve
from nvmeter.meter.window import EnergyWindow, whole_calls

IdleSpec = str | Path | float | IdleBaseline
# The sample buffer holds ~2.4 s (docs/facts.md) and each window reads it when a second has
# passed since its own last read; asking every half second keeps each board's reads at most
# 1.5 s apart whatever the boards' reads drift to.
_ASK_EVERY_S = 0.5


class JobWindow:
    """Meter a block on several boards: ``with JobWindow(devices=[0, 1]) as w: ...; w.call()``.

    Args:
        devices: ``"all"`` (every board CUDA sees; CUDA_VISIBLE_DEVICES respected), or a
            list of CUDA indices, ``GPU-…`` UUIDs or :class:`Board` objects. Simulated
            boards of one job must share one :class:`~nvmeter.clock.VirtualClock`.
        idle: As for :class:`EnergyWindow`, or a mapping from UUID to it (probe files
            are per board).
        sync: The work's synchronisation, done once for all boards (default: every CUDA
            device this process holds a context on, when torch is in use).
        method, calls, tail_s: As for :class:`EnergyWindow`, for every board.
        profile: A :class:`BoardProfile` for every board, or a mapping from UUID or board
            name to one (mixed models); boards left out get their family's defaults.
        max_rel_err: Accepted relative bound on the job's per-step figure.
        host: The host name the boards are recorded under (default: this host's).
        available: Resolve indices, UUIDs and ``"all"`` among these boards instead of
            NVML's (a simulated host: :func:`nvmeter.simulated_host`).
        others_idle, own_pids: As for :class:`~nvmeter.meter.window.EnergyWindow`, on every board.

    After the block, ``w.result`` is a :class:`JobMeasurement` (None if the block raised).
    A board whose telemetry fails at an edge (no energy counter, GPU lost) is named in
    the result and leaves the job's total unknown; it is never counted as 0 J.

    Raises:
        UsageError: bad arguments, simulated boards on separate clocks.
        DeviceNotFound, NvmlUnavailable, NoGpu: a board named cannot be opened.
    """

    def __init__(
        self,
        devices="all",
        *,
        idle: IdleSpec | Mapping[str, IdleSpec] = "measure",
        sync: str | Sync | None = None,
        method: str = "auto",
        calls: int | None = None,
        tail_s: float | None = None,
        profile: BoardProfile | Mapping[str, BoardProfile] | None = None,
        max_rel_err: float | None = None,
        host: str | None = None,
        available: list[Board] | None = None,
        others_idle: bool = False,
        own_pids: tuple[int, ...] = (),
    ) -> None:
        if max_rel_err is not None and not (
            isinstance(max_rel_err, (int, float))
            and not isinstance(max_rel_err, bool)
            and 0 < max_rel_err < 1
        ):
            raise errors.UsageError(f"max_rel_err is a fraction in (0, 1), 0.01 for 1%; not {max_rel_err!r}")
        flag(others_idle, "others_idle", errors.UsageError)  # also where no board is open (a breaker)
        self.boards: list[Board] = [] if _is_empty(devices) else open_boards(devices, available=available)
        self.clock = shared_clock(self.boards)
        self._sync, self.sync_name = resolve("torch_all" if sync is None else sync)
        self.host = host or socket.gethostname()
        self._idents: list[BoardIdentity] = [b.identity() for b in self.boards]
        self._windows = [
            EnergyWindow(
                b,
                idle=_for_board(idle, ident, "idle"),
                sync="none",  # synchronised once for every board, by self._sync
                method=method,
                calls=calls,
                tail_s=tail_s,
                profile=_for_board(profile, ident, "profile"),
                others_idle=others_idle,
                own_pids=own_pids,
            )
            for b, ident in zip(self.boards, self._idents, strict=True)
        ]
        self._calls = calls
        self._counted = 0
        self._max_rel_err = max_rel_err
        self._failed: list[str | None] = [None] * len(self.boards)
        self._last_ask_s = -math.inf
        self.result: JobMeasurement | None = None

    # -- the block -------------------------------------------------------------
    def __enter__(self) -> JobWindow:
        self._sync()
        self._failed = run_concurrently(self.clock, [self._guard(w.__enter__) for w in self._windows])
        self._last_ask_s = self.clock.now()
        return self

    def call(self, n: int = 1) -> None:
        """Declare ``n`` more calls; about once a second, reads every board's sample buffer at once.

        Raises:
            UsageError: ``n`` not a whole number >= 1.
        """
        self._counted += whole_calls(n)
        now = self.clock.now()
        if now - self._last_ask_s >= _ASK_EVERY_S:
            self._last_ask_s = now
            self._on_live_boards(lambda w: w.tick())

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return  # the caller's exception propagates unchanged; no measurement
        self.exit_boards()
        self.result = self.local_result()

    # -- pieces the distributed window uses too -------------------------------
    def exit_boards(self) -> None:
        """Synchronise the work, then find every live board's end edge at once."""
        self._sync()
        calls = self.calls

        def close(w: EnergyWindow):
            if calls:
                w.call(calls)
            w.__exit__(None, None, None)

        self._on_live_boards(close)

    @property
    def calls(self) -> int:
        """Calls declared so far (``calls=`` if given)."""
        return self._calls if self._calls is not None else self._counted

    def parts(
        self, rank: int = 0, ranks: Mapping[tuple[str, str], tuple[int, ...]] | None = None
    ) -> list[BoardPart]:
        """This process's boards as parts of a job (after :meth:`exit_boards`)."""
        out = []
        for w, ident, failed in zip(self._windows, self._idents, self._failed, strict=True):
            key = (self.host, ident.uuid)
            on = (ranks or {}).get(key, (rank,))
            out.append(BoardPart(self.host, ident, rank, on, None if failed else w.result, failed))
        return out

    def local_result(self) -> JobMeasurement:
        """The job of this one process (rank 0)."""
        record = RankRecord(0, self.host, self.calls, tuple(i.uuid for i in self._idents))
        return JobMeasurement(tuple(self.parts()), (record,), self._max_rel_err)

    def _on_live_boards(self, fn) -> None:
        """``fn(window)`` on every board still metered, at once; a board whose telemetry fails drops out."""
        live = [i for i, failed in enumerate(self._failed) if failed is None]
        if not live:
            return
        outcome = run_concurrently(self.clock, [self._guard(lambda w=self._windows[i]: fn(w)) for i in live])
        for i, failed in zip(live, outcome, strict=True):
            self._failed[i] = failed

    @staticmethod
    def _guard(fn):
        """Run ``fn``; a telemetry fault becomes the board's one-line reason instead of the job's end."""

        def guarded() -> str | None:
            try:
                fn()
            except errors.TelemetryError as exc:
                return f"{type(exc).__name__}: {exc}"
            return None

        return guarded


def shared_clock(boards: list[Board]) -> Clock:
    """The one timeline of a job's boards: a shared VirtualClock, or the host's clock.

    Raises:
        UsageError: simulated boards on separate virtual clocks, or simulated and real boards mixed.
    """
    if not boards:
        from nvmeter.clock import RealClock

        return RealClock()
    clocks = {id(b.clock): b.clock for b in boards}
    virtual = [c for c in clocks.values() if isinstance(c, VirtualClock)]
    if virtual and len(clocks) > 1:
        raise errors.UsageError(
            "the simulated boards of one window must share one VirtualClock "
            "(SimulatedBoard(config, clock), or nvmeter.simulated_host(n) for n boards on one)"
        )
    return boards[0].clock


def _is_empty(devices) -> bool:
    return isinstance(devices, (list, tuple)) and not devices


def _for_board(value, ident: BoardIdentity, what: str):
    """A per-board value: the value itself, or its entry by UUID (or, for profiles, by name)."""
    if not isinstance(value, Mapping):
        return value
    if ident.uuid in value:
        return value[ident.uuid]
    if what == "profile":
        return value.get(ident.name)
    return value.get("default", "measure")
