"""`EnergyWindow`: per-call millijoules above idle, with an honest bound.

Three readings of one window (``method``):

* ``"aligned"`` (the default, ``"auto"``): at entry, synchronise and let the work run
  while a poller finds the counter's next step inside the work; the sample buffer covers
  the work from its start to that step. At exit (``exit="wait"``, the default),
  synchronise, wait ``tail_s`` for the power to come down, and poll until the next step.
  Between two steps the energy is what the counter says; the board is never idled at
  entry, so a window inside a run of calls stays warm (a pause at entry restarts a
  power-capped board's overshoot).

  With ``exit="return"`` the exit only synchronises and returns: a poller finds the next
  step inside whatever the caller runs next, and the sample buffer's integral from the
  work's end to that step is taken off. The caller's next calls then follow without a
  pause; ``w.result`` waits for the step (about a counter period) when asked for first,
  ``w.end_found()`` says whether it would.
* ``"samples"``: integrate the driver's ~20 ms power samples over the work and its
  tail. On the H200 it read single ~19 ms calls to a median 2.8% but up to 23%,
  where aligned edges erred by up to 12% (results/window-accuracy-h200.json), so it is a
  cross-check, not the default.
* ``"plain"``: read the counter once at each edge, as most tools do; kept for
  comparison, with the bound that deserves (a period of power at each edge).

Between the edges nvmeter reads only the sample buffer, at most once per the profile's
``sample_every_s`` and only from ``w.call()``, ``w.mark()`` and the exit, so its history
never rolls over unnoticed. Every telemetry figure comes from the board's profile
(:mod:`nvmeter.boards.profile`).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from nvmeter import errors
from nvmeter.arguments import finite, flag
from nvmeter.boards.factory import open_board
from nvmeter.boards.profile import BoardProfile, resolve_profile
from nvmeter.boards.protocol import Board, BoardState, PowerSample
from nvmeter.meter import contexts, fold, polling
from nvmeter.meter.baseline import (
    IdleBaseline,
    context_level,
    given_idle,
    idle_after,
    idle_of,
    longest_still_s,
    quiet_span,
    unstepped,
)
from nvmeter.meter.contexts import ContextRead
from nvmeter.meter.dither import PROCESS_DITHER
from nvmeter.meter.edges import StepPoll, poll_in_background
from nvmeter.meter.measurement import MAX_TAIL_S, Measurement
from nvmeter.meter.sanity import MAX_CALLS
from nvmeter.meter.series import CounterSeries, Step, integrate_samples_j, merge_samples, went_back
from nvmeter.meter.span import sharp_edge
from nvmeter.meter.sync import Sync, resolve

METHODS = ("auto", "aligned", "samples", "plain")
EXITS = ("wait", "return")
# An end found in later work adds back the work's trailing power (the sensor's lag) at the
# power of the samples in the two spacings before the work's end; a shorter block than this
# many spacings has no such samples (a single ~20 ms call after a pause read -76% on the
# simulated board without this), so its exit waits.
RETURN_MIN_SPACINGS = 5

_EMPTY = CounterSeries((), (), ())
# A board is quiet at entry when its samples over the last QUIET_S read within
# max(QUIET_MARGIN_W, QUIET_MARGIN_REL x idle) of idle: the sample noise is ~0.3 W at idle and
# any work lifts an H200 by tens of watts (results/probe-h200.json: idle samples' SD 0.30 W;
# a context alone adds 42 W). 0.1 s holds five samples.
QUIET_S = 0.1
QUIET_MARGIN_W = 10.0
QUIET_MARGIN_REL = 0.05


def _finite(value, name: str, *, minimum: float = -math.inf, maximum: float = math.inf) -> float:
    """``value`` as a float, or UsageError naming it (:func:`nvmeter.arguments.finite`)."""
    return finite(value, name, minimum=minimum, maximum=maximum, error=errors.UsageError)


# The parts of a window's entry, timed in ``EnergyWindow.entry_parts_s``: the caller's sync, the
# idle baseline (a quiescent span under idle="measure"), the sample buffer's read, the start edge
# (a poller's thread started inside work; on a quiet board, the foreground reads to a step).
ENTRY_PARTS = ("sync_s", "idle_s", "samples_s", "edge_s")
# The parts of a window's exit, timed in ``EnergyWindow.exit_parts_s``: the caller's sync, and the
# end edge (with exit="return", starting the poller's thread; with "wait", the tail, the edge's
# reads to a step and the sample buffer's read, the idling the exit exists for).
EXIT_PARTS = ("sync_s", "edge_s")


def whole_calls(n) -> int:
    """``n`` as declared calls of ``w.call(n)``.

    Raises:
        UsageError: ``n`` not a whole number from 1 to :data:`MAX_CALLS`.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CALLS:
        raise errors.UsageError(f"w.call(n) takes a whole number of calls from 1 to {MAX_CALLS:,}, not {n!r}")
    return n


class EnergyWindow:
    """Meter a block of code: ``with EnergyWindow(...) as w: ...; w.call()``.

    Each window is entered once; make a new one for each block.

    Args:
        device: CUDA index or ``GPU-…`` UUID (default 0), or a :class:`Board`.
        idle: ``"measure"`` (1 s quiescent spans before and after, the default), a
            probe file path (same board, UUID checked), a float in W, or an
            :class:`IdleBaseline`.
        sync: ``"torch"``, ``"cupy"``, ``"jax"``, ``"none"``, a callable, or None for
            torch when it is in use.
        method: ``"auto"``, ``"aligned"``, ``"samples"`` or ``"plain"``.
        calls: Calls the block will make (else count them with :meth:`call`).
        control_mj, control_err_mj: Per-call round-trip cost to subtract and its bound, mJ.
        max_rel_err: Relative bound above which the result is marked not reliable.
        tail_s: Wait after the work before the end edge, s (default: the profile's; a shorter one
            makes a window whose energy runs past the work's end not reliable).
        profile: A :class:`BoardProfile`, a probe or profile file of this board, or None for
            the probe file given as ``idle``, else the one ``nvmeter probe`` cached for this
            board, else its family's defaults.
        devices: Several boards (CUDA indices, UUIDs, Boards, or ``"all"``): the window is then a
            :class:`~nvmeter.meter.job.JobWindow` over them (``device`` is ignored).
        exit: ``"wait"`` (the default): the exit idles the board for ``tail_s`` and a counter
            step, so the work's trailing power is counted by the counter. ``"return"``: the
            exit returns once synchronised and the end step is found inside the caller's
            later work (aligned readings only; one board). A block shorter than
            :data:`RETURN_MIN_SPACINGS` sample spacings (100 ms on the H200) waits anyway; the
            Measurement's ``end_in_work`` says which.
        dither: On a quiet board, wait a share of the counter period after the start step
            before the block runs, the shares spread evenly over successive windows
            (:mod:`nvmeter.meter.dither`): repeated windows of a block shorter than the
            period then fall all over it, not at one place where the board's response is a
            bias of its own. Up to one period (~0.1 s) more at entry; an entry inside the
            work never waits. Off by default: on two H200s, dithered single ~20 ms calls
            scattered more than undithered ones against the same references in five of six
            kind-board cells (max |error| 8-21% against 7-12%), and only FP32 8192²'s median
            came nearer (docs/window-log.md, calls 25-26).
        others_idle: The board's other compute processes did no work inside the window. By
            default a window that finds another process's CUDA context on its board at its
            entry or exit is not reliable: the counter counts that process's kernels as this
            window's calls (:mod:`nvmeter.meter.contexts`). True makes it a note.
        own_pids: Processes besides this one and its descendants whose contexts are the
            window's own work (a :class:`~nvmeter.meter.distributed.DistributedWindow` passes
            its ranks on this host), as this host numbers them.

    After the block, ``w.result`` is a :class:`Measurement` (None if the block raised:
    the exception propagates unchanged). With ``exit="return"`` its first read waits for
    the end step, unless :meth:`end_found` says it is in. ``w.entry_parts_s`` and
    ``w.exit_parts_s`` say where the entry's and the exit's own time went, s by
    :data:`ENTRY_PARTS` and :data:`EXIT_PARTS`.

    Raises:
        UsageError: bad arguments, or the window used out of order. TelemetryError: NVML
            failed at an edge (naming the board). RecordError: an idle or profile file of
            another board or schema.
    """

    def __new__(cls, device=0, *, devices=None, **kwargs):
        """An EnergyWindow, or a JobWindow when ``devices`` names several boards."""
        if devices is not None:  # several boards: one JobWindow (it imports this module, so lazily)
            from nvmeter.meter.job import JobWindow

            if kwargs.keys() & {"control_mj", "control_err_mj"}:
                raise errors.UsageError(
                    "a window on several boards takes no control_mj: subtract it per board"
                )
            if kwargs.pop("dither", False):
                raise errors.UsageError("dither meters one board: a window on several boards does not wait")
            if kwargs.pop("exit", "wait") != "wait":
                raise errors.UsageError("exit='return' meters one board: a window on several boards waits")
            return JobWindow(devices, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        device: int | str | Board | None = 0,
        *,
        devices: None = None,
        idle: str | Path | float | IdleBaseline = "measure",
        sync: str | Sync | None = None,
        method: str = "auto",
        calls: int | None = None,
        control_mj: float = 0.0,
        control_err_mj: float = 0.0,
        max_rel_err: float | None = None,
        tail_s: float | None = None,
        profile: BoardProfile | str | Path | None = None,
        exit: str = "wait",
        dither: bool = False,
        others_idle: bool = False,
        own_pids: tuple[int, ...] = (),
    ) -> None:
        if method not in METHODS:
            raise errors.UsageError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
        if exit not in EXITS:
            raise errors.UsageError(f"exit must be one of {', '.join(EXITS)}, not {exit!r}")
        if exit == "return" and method not in ("auto", "aligned"):
            raise errors.UsageError(
                f"exit='return' finds the end step in later work, which method {method!r} does not read"
            )
        whole = isinstance(calls, int) and not isinstance(calls, bool)
        if calls is not None and not (whole and 0 <= calls <= MAX_CALLS):
            raise errors.UsageError(f"calls must be a whole number from 0 to {MAX_CALLS:,}, not {calls!r}")
        flag(dither, "dither", errors.UsageError)
        flag(others_idle, "others_idle", errors.UsageError)
        if not (isinstance(own_pids, (tuple, list)) and all(type(p) is int and p > 0 for p in own_pids)):
            raise errors.UsageError(f"own_pids is a tuple of process ids, not {own_pids!r}")
        if max_rel_err is not None and not 0 < _finite(max_rel_err, "max_rel_err") < 1:
            raise errors.UsageError(f"max_rel_err is a fraction in (0, 1), 0.01 for 1%; not {max_rel_err!r}")
        self._control = (
            _finite(control_mj, "control_mj"),
            _finite(control_err_mj, "control_err_mj", minimum=0),
        )
        self.board = open_board(device)
        self.clock = self.board.clock
        self.profile = resolve_profile(profile, self.board.identity(), idle)
        self._tail_s = (
            self.profile.tail_s
            if tail_s is None
            else _finite(tail_s, "tail_s", minimum=0, maximum=MAX_TAIL_S)
        )
        self._sync, self.sync_name = resolve(sync)
        self._idle_spec = idle
        self.method = method
        self._calls = calls
        self._counted = 0
        # when each call ended, while every call is marked on its own (w.call() with n=1)
        self._call_ends: list[float] | None = []
        self._max_rel_err = max_rel_err
        self._reads: list[tuple[PowerSample, ...]] = []
        self._last_read_s = -math.inf
        self._states: list[BoardState | StepPoll] = []  # a poll reads its edge's state itself
        self.entry_parts_s: dict[str, float] = {}
        self.exit_parts_s: dict[str, float] = {}
        self._inner: list[StepPoll] = []
        # (board s, calls declared) at each mark: where a provisional window ends
        self._marks: list[tuple[float, int]] = []
        self._exit = exit
        self._dither = dither
        self._others_idle = others_idle
        self._own_pids = tuple(own_pids)
        self._contexts: list[ContextRead] = []  # the board's compute processes at entry and exit
        self._pending: tuple | None = None  # (end poll, build args) until an end in later work is in
        self._phase = "new"
        self._result: Measurement | None = None
        self._failure: BaseException | None = None  # what the end in later work failed with

    # -- the block -------------------------------------------------------------
    def __enter__(self) -> EnergyWindow:
        if self._phase != "new":
            raise errors.UsageError("this EnergyWindow was entered already: make a new one for each window")
        self._phase = "open"
        self._owner = polling.new_owner()
        try:
            with polling.owned_by(self._owner):
                self._enter()
        except BaseException:
            self._phase = "failed"
            polling.release(self._owner)
            raise
        return self

    def _enter(self) -> None:
        """Sync, the idle before, the lead-in's samples and the start edge (the entry's parts, timed)."""
        marks = [self.clock.now()]
        self._sync()
        marks.append(self.clock.now())
        self._idle_before = self._baseline_before()
        self._contexts.append(contexts.read(self.board, self._own_pids))
        # from here on, other meters' counter reads fall inside this window
        self._foreign_from = polling.snapshot(self.board, self._owner)
        marks.append(self.clock.now())
        self._read_samples()  # the lead-in: what the board did just before the work
        marks.append(self.clock.now())
        self._start = self._start_edge()
        self._dither_start()
        self._t0 = self.clock.now()
        # where the entry's time went (the bench's record of nvmeter's own time)
        marks.append(self._t0)
        self.entry_parts_s = {k: b - a for k, a, b in zip(ENTRY_PARTS, marks, marks[1:], strict=False)}

    def call(self, n: int = 1) -> None:
        """Declare ``n`` more calls; reads the sample buffer when its interval has passed.

        Raises:
            UsageError: outside the ``with`` block, ``n`` not a whole number >= 1, or the
                window's calls past :data:`MAX_CALLS` in all.
        """
        self._require_open("w.call()")
        n = whole_calls(n)
        if self._counted + n > MAX_CALLS:  # the limit is the window's, not one call()'s
            raise errors.UsageError(
                f"w.call({n:,}) would make {self._counted + n:,} calls in this window; at most {MAX_CALLS:,}"
            )
        self._counted += n
        self._mark_call(n)
        self.tick()

    def _mark_call(self, n: int) -> None:
        """Keep when this call ended, for the folded cuts (error model 7), while each is marked alone."""
        if self._call_ends is None:
            return
        if n != 1 or len(self._call_ends) >= fold.MAX_MARKS:
            self._call_ends = None  # calls not marked one by one: their ends are unknown
            return
        self._call_ends.append(self.clock.now())

    def tick(self) -> None:
        """Read the sample buffer if its interval has passed, declaring no call.

        For a caller that waits on long work inside the window: the buffer holds only a few
        seconds (results/probe-h200.json: 2.36 s), so read it at least once a second.
        """
        self._require_open("w.tick()")
        if self.clock.now() - self._last_read_s >= self.profile.sample_every_s:
            self._read_samples()

    def mark(self) -> None:
        """Start a sub-window here: a poller finds the counter's next step inside the work.

        ``measure()`` marks its uninterrupted run every ``min_window_s``; the spread of the
        sub-windows between those steps is the bound's state part.
        """
        self._require_open("w.mark()")
        mark = (self.clock.now(), self._counted)
        self._inner.append(self._poll())
        # kept once its poll is made: a poll that failed (its state read, on a virtual clock)
        # must not leave a mark behind that shifts the later ones' polls by one
        self._marks.append(mark)
        self.tick()

    def mark_found(self) -> bool:
        """True once the latest :meth:`mark`'s step is in (or no mark was made); never blocks."""
        self._require_open("w.mark_found()")
        return not self._inner or self._inner[-1].done()

    @property
    def idle_at_entry(self) -> tuple[float, float]:
        """(idle W, its bound W) as known at entry (the span measured before, or the idle given)."""
        self._require_open("w.idle_at_entry")
        idle = self._idle_before
        return (idle.power_w, idle.err_w) if isinstance(idle, IdleBaseline) else (idle.power_w, 0.0)

    def inner_steps(self) -> list[Step]:
        """The in-work steps found so far (finished polls only), in time order."""
        self._require_open("w.inner_steps()")
        found = []
        polls = self._inner if isinstance(self._start, CounterSeries) else [self._start, *self._inner]
        for poll in polls:
            step = poll.result().edge_step() if poll.done() else None
            if step is not None:
                found.append(step)
        return found

    def estimate(self) -> dict:
        """A running estimate while the window is open: samples so far, W and J."""
        self._require_open("w.estimate()")
        self._read_samples()
        samples = merge_samples(*self._reads)
        now = min(self.clock.now(), samples[-1].t_s) if samples else self.clock.now()
        try:
            energy = integrate_samples_j(samples, self._t0, now)
        except ValueError:
            return {"window_s": now - self._t0, "energy_j": math.nan, "power_w": math.nan}
        return {"window_s": now - self._t0, "energy_j": energy, "power_w": energy / max(now - self._t0, 1e-9)}

    def provisional(self) -> Measurement | None:
        """The window as if it had ended at its latest found sub-window step: a Measurement, or None.

        For ``measure()``'s stopping rule: the bound the window's own Measurement computes
        (cuts, power lag, fold shift and all) on the calls declared before that step's mark,
        with the idle known at entry. Reads the sample buffer (an NVML call). None while no
        mark with a call before it has its step found.
        """
        self._require_open("w.provisional()")
        start = self._start
        found = [i for i, p in enumerate(self._inner) if p.done()]
        if not found or not (isinstance(start, CounterSeries) or start.done()):
            return None
        t1, calls = self._marks[found[-1]]
        if not calls:
            return None
        ends = tuple(self._call_ends[:calls]) if self._call_ends and len(self._call_ends) >= calls else ()
        t1 = ends[-1] if ends else t1  # the last call's end where it is known
        self._read_samples()
        inner = tuple(self._inner[i].result() for i in found[:-1])
        start = start if isinstance(start, CounterSeries) else start.result()
        end = self._inner[found[-1]].result()
        # other meters' reads so far; the idle known at entry
        m = self._build(
            t1, start, end, inner, self._foreign_read_s(), idle=self._entry_baseline(), calls=calls
        )
        # a caller's calls= counts the whole window: its check belongs to the final Measurement
        problems = tuple(p for p in m.problems if p != self._calls_problem())
        return dataclasses.replace(m, end_in_work=True, call_ends_s=ends, problems=problems)

    def _entry_baseline(self) -> IdleBaseline:
        idle = self._idle_before
        if isinstance(idle, IdleBaseline):
            return idle
        return idle_of([idle], self.profile, local=True)

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._phase != "open":
            return
        self._phase = "closed"
        if exc_type is not None:
            polling.release(self._owner)
            return  # the caller's exception propagates unchanged; no measurement
        t_exit = self.clock.now()
        self._sync()
        t1 = self.clock.now()
        try:
            with polling.owned_by(self._owner):
                self._end_edge(t1)
        finally:
            # the window's own reads end here but an end poll's in later work, outside its energy
            # (their reads count as nobody's); a token kept would grow the ledger window by window
            polling.release(self._owner)
            self.exit_parts_s = dict(zip(EXIT_PARTS, (t1 - t_exit, self.clock.now() - t1), strict=True))

    def cancel(self) -> None:
        """Close the open window without an end edge or a result (``EnergyMonitor.cancel``).

        Its start's poll, if still running, ends on its own; nothing more is read for it.
        """
        if self._phase == "open":
            self._phase = "failed"
            polling.release(self._owner)

    def _end_edge(self, t1: float) -> None:
        """The end edge after the work's synchronised end ``t1``: in later work (return), or idled for."""
        spacing_s = self.profile.sample_spacing_s
        if self._exit == "return" and t1 - self._t0 < RETURN_MIN_SPACINGS * spacing_s:
            self._exit = "wait"  # too short for its samples to tell the work's trailing power
        if self._exit == "return":
            # its energy ends at the work's end: others' reads to it; the sample covering the end
            # step lands up to one spacing (~20 ms) after the step
            self._contexts.append(contexts.read(self.board, self._own_pids))
            self._pending = (self._poll(1.5 * spacing_s), t1, self._foreign_read_s())
            return
        self._states.append(self.board.state())
        start = self._start if isinstance(self._start, CounterSeries) else self._start.result()
        inner = tuple(p.result() for p in self._inner)
        self.clock.sleep_until(t1 + self._tail_s)
        end = self._edge()
        # after the tail and the end step, which the window's energy holds: a process that began
        # work in them had read as the window's (+36-40%, reliable: a breaker's trial, 2026-12-07)
        self._contexts.append(contexts.read(self.board, self._own_pids))
        foreign_s = self._foreign_read_s()  # its energy ends at the end step: others' reads to it
        # the sample covering the end step lands up to one spacing (~20 ms) after it; timed from the
        # tail's end instead, 20 of 30 simulated windows read none, and their samples went unchecked
        # against the counter (a code review, 2026-12-06)
        last_s = end.t1_s[-1] if len(end) else t1 + self._tail_s
        self.clock.sleep_until(max(t1 + self._tail_s, last_s) + 1.5 * self.profile.sample_spacing_s)
        self._read_samples()
        self._result = self._build(t1, start, end, inner, foreign_s)

    @property
    def result(self) -> Measurement | None:
        """The window's Measurement once it has closed (None if the block raised).

        With ``exit="return"`` the first read waits for the end step if it is not in yet.

        Raises:
            UsageError: read before the window has closed (:meth:`estimate` gives a running
                figure inside it).
            TelemetryError: NVML failed while an edge inside the work was polled (on every
                read: a later one must not read as a block that raised).
        """
        if self._phase in ("new", "open"):
            raise errors.UsageError(
                "w.result is the closed window's: read it after the `with EnergyWindow(...)` block "
                "(inside it, w.estimate() gives a running figure)"
            )
        if self._pending is not None:
            end_poll, t1, foreign_s = self._pending
            self._pending = None
            try:
                start = self._start if isinstance(self._start, CounterSeries) else self._start.result()
                inner = tuple(p.result() for p in self._inner)
                end = end_poll.result()
                self._reads.append(end_poll.samples())
                self._result = self._build(t1, start, end, inner, foreign_s)
            except BaseException as exc:
                self._failure = exc
                raise
        if self._failure is not None:
            raise self._failure
        return self._result

    def end_found(self) -> bool:
        """True when :attr:`result` is ready without waiting (always, after an ``exit="wait"``).

        Raises:
            UsageError: the window has not closed yet.
        """
        if self._phase not in ("closed", "failed"):
            raise errors.UsageError("w.end_found() belongs after the `with EnergyWindow(...)` block")
        return self._pending is None or self._pending[0].done()

    # -- pieces ----------------------------------------------------------------
    def _require_open(self, what: str) -> None:
        if self._phase != "open":
            raise errors.UsageError(f"{what} belongs inside `with EnergyWindow(...) as w:`, while it is open")

    def _start_edge(self) -> StepPoll | CounterSeries:
        """Aligned: a poll inside the work, or before it on a quiet board; plain: one read; samples: none.

        A board that is already idle loses nothing by waiting for a step before the work,
        and an edge at idle is placed at idle power, not the work's: cold windows and
        single calls read far better so (results/window-accuracy-h200.json, singles).
        """
        if self.method in ("auto", "aligned") and not self._quiet():
            # the buffer read once the sample covering the step has landed: the head cut's samples
            # are kept even when no w.call() reads the buffer again before it rolls over (one 2.8 s
            # call read its head from a sample 0.5 s later, -6 to -13%: an adversarial review)
            return self._poll(1.5 * self.profile.sample_spacing_s)
        self._states.append(self.board.state())
        return self._edge()

    def _poll(self, samples_after_s: float | None = None) -> StepPoll:
        """A poll for the next step inside the work, which also reads the board's state (edges' docstring)."""
        poll = poll_in_background(
            self.board, self.profile.edge_timeout_s, samples_after_s, with_state=True, owner=self._owner
        )
        self._states.append(poll)
        return poll

    def _board_states(self) -> tuple[BoardState, ...]:
        """The states read at the edges so far, in the order read (a poll's once its thread has read it).

        By time, not by edge: a poller's thread may read its state after the caller's later
        read (a very short block on a busy machine), and the first and last states are compared.
        """
        states = (s if isinstance(s, BoardState) else s.state() for s in self._states)
        return tuple(sorted(states, key=lambda s: s.t_s))

    def _dither_start(self) -> None:
        """After a start step polled on a quiet board, wait the dither's next share of a period."""
        polled_quiet = isinstance(self._start, CounterSeries) and self._start.edge_step() is not None
        if self._dither and self.method in ("auto", "aligned") and polled_quiet:
            self.clock.sleep(PROCESS_DITHER.next_delay_s(self.profile.counter_period_s))

    def _quiet(self) -> bool:
        """True when the last ``QUIET_S`` of samples read within ``QUIET_MARGIN`` of idle."""
        idle = self._idle_before
        idle_w = idle.samples_w if isinstance(idle, IdleBaseline) else idle.samples_power_w
        now = self.clock.now()
        recent = [s.power_w for s in self._reads[-1] if s.t_s >= now - QUIET_S]
        margin_w = max(QUIET_MARGIN_W, QUIET_MARGIN_REL * idle_w)
        return bool(recent) and math.isfinite(idle_w) and max(recent) <= idle_w + margin_w

    def _edge(self) -> CounterSeries:
        """The reads at one edge: until a step (aligned), one read (plain), none (samples)."""
        if self.method == "samples":
            return _EMPTY
        if self.method == "plain":
            return self._one_read()
        return sharp_edge(self.board, self.clock, self.profile.edge_timeout_s)

    def _one_read(self) -> CounterSeries:
        t0, t1, value = polling.read_energy(self.board, self.clock)
        return CounterSeries((t0,), (t1,), (value,))

    def _read_samples(self) -> None:
        self._reads.append(self.board.power_samples())
        self._last_read_s = self.clock.now()

    def _baseline_before(self):
        if isinstance(self._idle_spec, str) and self._idle_spec == "measure":
            return quiet_span(self.board, self.profile)
        return given_idle(
            self._idle_spec, self.board, context_level(self.board), self.profile.polling_artefact_w
        )

    def _baseline(self) -> tuple[IdleBaseline, tuple[str, ...]]:
        """The idle the window subtracts, and the problem its span after the window had (if one)."""
        if isinstance(self._idle_before, IdleBaseline):
            return self._idle_before, ()
        return idle_after(self.board, self._idle_before, self.profile, "window", local=True)

    def _problems(
        self, start: CounterSeries, end: CounterSeries, method: str, idle: IdleBaseline
    ) -> tuple[str, ...]:
        problems = []
        if self._calls is not None and self._counted and self._counted != self._calls:
            problems.append(self._calls_problem())
        if method != "samples" and went_back(start, end):
            problems.append("the energy counter went backwards or reset inside the window")
        if method == "aligned" and not (len(start.steps) and len(end.steps)):
            problems.append("no counter step at an edge: the edge is known only to a period")
        problems.extend(unstepped(idle.spans))
        if method == "plain":
            problems.extend(self._slow_counter(idle))
        return tuple(problems)

    def _slow_counter(self, idle: IdleBaseline) -> tuple[str, ...]:
        """Plain edges bounded at a counter period that the idle spans' edges saw the counter outlast.

        A read's value is up to a period old, and the bound takes the profile's: a 400 ms counter
        under Hopper's 0.12 s read 24 of 30 reliable windows outside their bounds (an adversarial
        review, 2026-12-07). The spans' edges see it go that long without an update (on the H200s'
        100 ms counter at most 96 ms: :attr:`~nvmeter.meter.series.CounterSeries.longest_still_s`).
        """
        still_s, period_s = longest_still_s(idle.spans), self.profile.counter_period_s
        if still_s <= period_s:
            return ()
        # a profile from this board's quick probe may hold one short gap of a slow counter: "probe the
        # board" alone read as advice to do what had been done (a breaker's trial, 2026-12-07)
        probed = "cadence" in self.profile.source  # its period came from this board's cadence probe
        aligned = "read the window aligned (method='aligned'), which places its edges on the counter's steps"
        advice = (
            f"its probe saw a shorter gap; {aligned}"
            if probed
            else f"probe the board (nvmeter probe), or {aligned}"
        )
        return (
            f"the counter went {still_s:.3f} s without an update at an idle span's edge, longer than the "
            f"{period_s:g} s period its plain edges are bounded at ({self.profile.source}): {advice}",
        )

    def _calls_problem(self) -> str:
        return f"calls={self._calls} was given, but w.call() counted {self._counted}"

    def _start_samples(self) -> tuple[tuple[PowerSample, ...], ...]:
        """The buffer the start's poll read after its step (none for an edge polled before the work).

        Called once the poll's result is in, which holds its samples.
        """
        return () if isinstance(self._start, CounterSeries) else (self._start.samples(),)

    def _foreign_read_s(self) -> float:
        """Seconds of other meters' counter reads of this board since the entry (:mod:`.polling`)."""
        return polling.foreign_s(self._foreign_from, polling.snapshot(self.board, self._owner))

    def _build(
        self,
        t1: float,
        start: CounterSeries,
        end: CounterSeries,
        inner,
        foreign_s: float,
        idle=None,
        calls=None,
    ) -> Measurement:
        """The Measurement; ``foreign_s``: other meters' read seconds inside it (:meth:`_foreign_read_s`)."""
        if calls is None:
            calls = self._calls if self._calls is not None else self._counted
        method = "aligned" if self.method == "auto" else self.method
        idle, idle_problems = self._baseline() if idle is None else (idle, ())
        return Measurement(
            device=self.board.identity(),
            method=method,
            calls=calls,
            work_t0_s=self._t0,
            work_t1_s=t1,
            start=start,
            end=end,
            samples=merge_samples(*self._reads, *self._start_samples()),
            idle=idle,
            control_mj=self._control[0],
            control_err_mj=self._control[1],
            max_rel_err=self._max_rel_err,
            problems=idle_problems + self._problems(start, end, method, idle),
            tail_s=self._tail_s,
            profile=self.profile,
            inner=inner,
            states=self._board_states(),
            end_in_work=self._exit == "return",
            call_ends_s=tuple(self._call_ends) if self._call_ends and len(self._call_ends) == calls else (),
            foreign_read_s=foreign_s,
            contexts=tuple(self._contexts),
            others_idle=self._others_idle,
        )
