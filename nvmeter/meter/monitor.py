"""`EnergyMonitor`: named windows opened and closed by name, for code shaped like ZeusMonitor.

Code written for Zeus's ``ZeusMonitor`` (``begin_window(key)`` ... ``end_window(key)``,
docs/facts.md) marks a window's start and end in different places, often in different
functions, with windows that overlap or nest (an epoch around its steps). ``EnergyMonitor``
keeps that shape: ``begin(name)`` opens a window, ``end(name)`` closes it and returns its
:class:`~nvmeter.meter.measurement.Measurement`. Each named window is its own
:class:`~nvmeter.meter.window.EnergyWindow`, so it gets the same aligned edges and bound as
a ``with`` block. docs/everyday.md maps each ZeusMonitor call to its nvmeter call.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nvmeter import errors
from nvmeter.arguments import flag
from nvmeter.boards.factory import open_board
from nvmeter.boards.profile import BoardProfile, resolve_profile
from nvmeter.boards.protocol import Board
from nvmeter.meter.baseline import IdleBaseline, quiet_idle
from nvmeter.meter.measurement import Measurement
from nvmeter.meter.sync import Sync
from nvmeter.meter.window import EnergyWindow


class EnergyMonitor:
    """Named energy windows on one board that may overlap and nest.

    ``meter.begin("step")`` opens a window named ``"step"``; ``meter.end("step")`` closes
    it and returns its Measurement. Names are unique among open windows; a closed name can
    be opened again. ``meter.call("step", n)`` declares calls inside a window; a window that
    declared none (and was begun without ``calls=``) counts as one call, so its per-call
    figure is the whole window's.

    How overlapping windows' edges interact: each window is its own ``EnergyWindow``, and
    no two windows share an edge. On a quiet board ``begin`` polls the energy counter until
    it steps (up to one counter period, ~100 ms on the H200, docs/facts.md); with work
    running it returns at once and a thread finds the step inside the work. ``end``
    synchronises, waits the profile's ``tail_s`` and polls until the next step. That waiting
    happens on the caller's thread, so it falls inside every other window open at the time:

    * an outer window's time includes its inner windows' edges (the device idles while the
      caller waits, so they add time, not energy above idle, apart from the polling's own
      draw: +2.8 W while the counter is polled, results/probe-h200.json, about 0.1-0.35 J an
      inner edge, which the outer window's bound holds: its ``foreign_read_s``,
      :mod:`nvmeter.meter.polling`);
    * two windows begun one after the other on a quiet board start on different counter steps
      (the second waits for the next step; with work running both may start on one), and of
      two windows ended one after the other the later one also holds the earlier one's tail
      and end edge;
    * work inside an overlap counts in every window that spans it: do not add the figures
      of overlapping windows.

    Meter spans of many steps rather than each short step: every window costs about
    ``tail_s`` plus a counter period at each edge.

    Args:
        device: CUDA index or ``GPU-…`` UUID (default 0), or a :class:`Board`.
        idle: ``"measure"`` (the default: one quiescent span of
            :data:`~nvmeter.meter.baseline.IDLE_SPAN_S` now, at construction, shared by
            every window, so no window stops the caller for idle spans; :meth:`measure_idle`
            measures it again; a window begun after a process opened or closed a compute
            context on the board is not reliable, and says so), a probe file path (same
            board), a float in W, or an :class:`IdleBaseline`.
        sync: As for :class:`EnergyWindow` (torch when it is in use).
        method: As for :class:`EnergyWindow`.
        tail_s: As for :class:`EnergyWindow`.
        profile: As for :class:`EnergyWindow`.
        others_idle: As for :class:`EnergyWindow`: other processes' contexts on the board did no work.

    Raises:
        UsageError: bad arguments (also from :meth:`begin`, :meth:`end`, :meth:`call`:
            a name already open, or not open); the GPU ran kernels while the idle was
            measured. TelemetryError: NVML failed.
        RecordError: an idle probe file of another board or schema.
    """

    def __init__(
        self,
        device: int | str | Board | None = 0,
        *,
        idle: str | Path | float | IdleBaseline = "measure",
        sync: str | Sync | None = None,
        method: str = "auto",
        tail_s: float | None = None,
        profile: BoardProfile | None = None,
        others_idle: bool = False,
    ) -> None:
        flag(others_idle, "others_idle", errors.UsageError)  # now, not at the first begin() (a breaker)
        self.board = open_board(device)
        self._profile = resolve_profile(profile, self.board.identity(), idle)
        # compute contexts on the board when the idle was measured (None: not measured here)
        self._idle_contexts: int | None = None
        if isinstance(idle, str) and idle == "measure":
            self.idle, self._idle_contexts = self._quiet_idle(
                "make the monitor once the work is synchronised, or give idle= (a probe file or watts)"
            )
        else:
            self.idle = idle
        self._window_kwargs = {
            "sync": sync, "method": method, "tail_s": tail_s, "profile": profile, "others_idle": others_idle
        }  # fmt: skip
        self._open: dict[str, EnergyWindow] = {}
        self._counted: dict[str, int] = {}
        self._declared: set[str] = set()  # open windows begun with calls=
        self._problems: dict[str, str | None] = {}  # an open window's idle problem, found at begin

    def measure_idle(self) -> IdleBaseline:
        """Measure the idle again now, for the windows begun after (the caller must be quiescent).

        The monitor's idle is one span at construction. A board's idle moves (with temperature:
        0.85-1.06 W/°C on two H100s, docs/window-log.md) and a CUDA context opened after it adds ~40 W;
        call this with the board quiet, after the model is on the GPU or between epochs. Windows
        already open keep the idle they began with.

        Returns:
            The new idle.

        Raises:
            UsageError: the GPU ran kernels while it was measured (the idle is left as it was).
            TelemetryError: NVML failed, or two idle spans in a row could not be real.
        """
        self.idle, self._idle_contexts = self._quiet_idle(
            "synchronise the work first; the monitor keeps its idle"
        )
        return self.idle

    def _quiet_idle(self, remedy: str) -> tuple[IdleBaseline, int | None]:
        """A quiescent idle measured now and the compute contexts on the board as it was; refused busy.

        A busy idle is said where the mistake is, not by every window after (a new user's trial;
        at construction, an adversarial review).
        """
        contexts = self._contexts()
        idle = quiet_idle(self.board, self._profile)
        if idle.busy:
            raise errors.UsageError(
                f"the GPU ran kernels while the monitor's idle was measured ({idle.busy_pct:.0f}% busy, "
                f"{idle.power_w:.1f} W): {remedy}"
            )
        return idle, contexts

    def _contexts(self) -> int | None:
        """Processes holding a compute context on the board now (None: NVML cannot say)."""
        try:
            return self.board.compute_process_count()
        except errors.TelemetryError:
            return None

    def _idle_problem(self, when: str) -> str | None:
        """Why the monitor's measured idle is not this board's now, if its contexts tell.

        The first context on a board raises its idle (~40 W); a second process's adds little, so
        only none against some is compared. Where NVML lists no processes (MPS, some containers)
        the count never moves and this cannot tell.
        """
        now = self._contexts() if self._idle_contexts is not None else None
        if now is None or (now > 0) == (self._idle_contexts > 0):
            return None
        had = "without a compute context" if self._idle_contexts == 0 else "with a compute context"
        holders = "no process" if now == 0 else f"{now} process{'es' if now > 1 else ''}"
        return (
            f"the monitor's idle was measured {had} on the board, but at this window's {when} {holders} "
            "held one (the first CUDA context adds ~40 W): create the EnergyMonitor once the model is on "
            "the GPU, or call measure_idle() with the board quiet"
        )

    @property
    def open_windows(self) -> tuple[str, ...]:
        """Names of the windows open now, oldest first."""
        return tuple(self._open)

    def begin(self, name: str, *, calls: int | None = None) -> None:
        """Open the window ``name`` (synchronises, then waits for a counter step).

        Args:
            name: The window's name, unique among open windows.
            calls: Calls the window will hold (else declare them with :meth:`call`).

        Raises:
            UsageError: ``name`` is not a non-empty str, is already open, or bad ``calls``.
        """
        if not (isinstance(name, str) and name.strip()):
            raise errors.UsageError(f"a window's name must be a non-empty str, not {name!r}")
        if name in self._open:
            raise errors.UsageError(f"window {name!r} is already open; end it first or use another name")
        window = EnergyWindow(self.board, idle=self.idle, calls=calls, **self._window_kwargs)
        problem = self._idle_problem("start")
        self._refresh()
        window.__enter__()
        self._open[name] = window
        self._problems[name] = problem
        self._counted[name] = 0
        if calls is not None:
            self._declared.add(name)

    def call(self, name: str, n: int = 1) -> None:
        """Declare ``n`` more calls in the open window ``name``.

        Raises:
            UsageError: no window ``name`` is open.
        """
        self._window(name).call(n)
        self._counted[name] += n
        self._refresh()

    def end(self, name: str) -> Measurement:
        """Close the window ``name`` and return its Measurement.

        Raises:
            UsageError: no window ``name`` is open. TelemetryError: NVML failed at the edge.
        """
        window = self._window(name)
        del self._open[name]
        # a window begun with calls= holds them; one that counted none is one call
        if not self._counted.pop(name) and name not in self._declared:
            window.call(1)
        self._declared.discard(name)
        begun = self._problems.pop(name, None)
        self._refresh()
        window.__exit__(None, None, None)
        m = window.result
        # a context opened inside the window (model.cuda() after begin) changes the idle too; asked
        # once the window has closed, so the query falls outside it
        problem = begun or self._idle_problem("end")
        return m if problem is None else dataclasses.replace(m, problems=(*m.problems, problem))

    def cancel(self, name: str) -> None:
        """Drop the open window ``name`` without measuring it (no edge is read).

        Raises:
            UsageError: no window ``name`` is open.
        """
        self._window(name).cancel()
        del self._open[name]
        self._problems.pop(name, None)
        del self._counted[name]
        self._declared.discard(name)

    def _window(self, name: str) -> EnergyWindow:
        try:
            return self._open[name]
        except KeyError:
            opened = ", ".join(map(repr, self._open)) or "none"
            raise errors.UsageError(f"no window {name!r} is open (open: {opened})") from None

    def _refresh(self) -> None:
        """Let every open window read the sample buffer if a second has passed since its last read."""
        for window in self._open.values():
            window.tick()

    def __repr__(self) -> str:
        return f"EnergyMonitor({self.board.identity().short}, open: {list(self._open)})"
