"""`EnergyWindow`: per-call millijoules above idle, with an honest bound.

Three readings of one window (``method``):

* ``"aligned"`` (the default, ``"auto"``): at entry, poll the
  counter until it steps, then let the work run; at exit, synchronise, wait
  ``tail_s`` for the power to come down, and poll until the next step. The energy
  between two steps is what the counter says; the only timing uncertainty is the two
  reads around each step, where the board idles.
* ``"samples"``: integrate the driver's ~20 ms power samples over the work and its
  tail. On the H200 it read single ~19 ms calls to a median 2.8% but up to 23%,
  where aligned edges (which bracket the call at idle) erred by up to 12%
  (results/window-accuracy-h200.json), so it is a cross-check, not the default.
* ``"plain"``: read the counter once at each edge, as most tools do; kept for
  comparison, with the bound that deserves (a period of power at each edge).

Between the edges nvmeter reads only the sample buffer, at most once a second and
only from ``w.call()`` and the exit, so its ~2.4 s history never rolls over
unnoticed and no thread competes with the caller.

Constants below come from results/probe-h200.json unless said otherwise.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from nvmeter import errors
from nvmeter.board import Board, BoardIdentity, PowerSample
from nvmeter.idle import IdleBaseline, measure_quiescent
from nvmeter.series import (
    CounterSeries,
    integrate_samples_j,
    merge_samples,
    samples_from_dict,
    samples_to_dict,
)
from nvmeter.span import POLLING_ARTEFACT_W, AlignedSpan, aligned_edge
from nvmeter.sync import Sync, resolve

METHODS = ("auto", "aligned", "samples", "plain")
# Counter update period (H200: 100.0 ms median; A100: 100.5 ms).
COUNTER_PERIOD_S = 0.100
# Wait after the work before the end edge: the counter follows a load with a fitted
# delay of 10-11 ms and the samples after a burst fall to idle within ~60 ms.
TAIL_S = 0.06
# Samples taken before the work's start when integrating it (one sample spacing).
SAMPLE_LEAD_S = 0.02
# Sample buffer vs counter over seconds: +0.07% idle, +0.03% load on the H200.
SAMPLES_VS_COUNTER = 0.001
# Read the sample buffer from call() at most this often; it holds ~2.36 s.
SAMPLE_EVERY_S = 1.0
# The board's state: the same calls cost a little more or less from window to window
# (temperature, clocks), and a window started from idle reads low while the clocks
# ramp. Fitted by `python bench/window_accuracy.py fit results/window-accuracy-h200.json`
# (run 1, H200, no warm-up): the largest |error| beyond the reading bound of 2 s and
# 4 s windows, as a share of their energy above idle (0.38%) ...
STATE_REL = 0.004
# ... and, for windows whose lead-in was idle, the largest remaining |error| of the
# 0.25-1 s windows as a share of the energy above idle of their first 0.3 s (2.3%).
COLD_REL = 0.025
COLD_RAMP_S = 0.3
# The lead-in: sample buffer history just before the entry's first counter read.
LEAD_S = 0.3
# measure()'s unmetered calls before its windows: past the ramp, with margin.
WARMUP_S = 0.5
# Calls in a row that leave the board's clock where it was before measure() gives up.
_STUCK_CALLS = 10_000


@dataclass(frozen=True)
class Measurement:
    """One window's raw readings, with every figure derived on demand.

    Attributes:
        device: The board.
        method: ``"aligned"``, ``"samples"`` or ``"plain"``.
        calls: Calls the caller declared.
        work_t0_s, work_t1_s: The work's start (entry returned) and end (exit's sync
            returned), s on the board's clock.
        start, end: Counter reads at each edge (one read for ``plain``; empty for
            ``samples``).
        samples: The sample buffer over the window, merged from every read.
        idle: The baseline subtracted.
        control_mj: Per-call round-trip cost subtracted, mJ (0 if none).
        control_err_mj: Its bound, mJ.
        max_rel_err: The caller's accepted relative bound (None: any).
        problems: Faults seen (counter backwards, no step at an edge, …).
        tail_s: The wait after the work that the window (and the samples' integral) covers, s.
    """

    device: BoardIdentity
    method: str
    calls: int
    work_t0_s: float
    work_t1_s: float
    start: CounterSeries
    end: CounterSeries
    samples: tuple[PowerSample, ...]
    idle: IdleBaseline
    control_mj: float = 0.0
    control_err_mj: float = 0.0
    max_rel_err: float | None = None
    problems: tuple[str, ...] = field(default=())
    tail_s: float = TAIL_S

    # -- edges -------------------------------------------------------------
    @property
    def _edges(self) -> tuple[float, float, float, float, float, float]:
        """(t_a, t_b, E_a mJ, E_b mJ, half-width a, half-width b) for counter methods."""
        if self.method == "aligned" and self._span.aligned:
            span = self._span
            return (
                span.t_a_s,
                span.t_b_s,
                span.start.steps.energy_mj[0],
                span.end.steps.energy_mj[0],
                span.start.steps.half_width_s[0],
                span.end.steps.half_width_s[0],
            )
        mid = lambda s, i: (s.t0_s[i] + s.t1_s[i]) / 2  # noqa: E731
        # plain edges, or aligned ones that saw no step: the value may be up to a period old
        return (
            mid(self.start, 0),
            mid(self.end, -1),
            self.start.energy_mj[0],
            self.end.energy_mj[-1],
            COUNTER_PERIOD_S,
            COUNTER_PERIOD_S,
        )

    @property
    def _span(self) -> AlignedSpan:
        return AlignedSpan(self.start, self.end, self.samples)

    @property
    def window_s(self) -> float:
        """Length of the window the energy covers, s."""
        if self.method == "samples":
            return self.work_t1_s + self.tail_s - (self.work_t0_s - SAMPLE_LEAD_S)
        t_a, t_b, *_ = self._edges
        return t_b - t_a

    @property
    def energy_j(self) -> float:
        """Gross energy over the window, J (nan if the counter went backwards)."""
        if self.method == "samples":
            try:
                return integrate_samples_j(
                    self.samples, self.work_t0_s - SAMPLE_LEAD_S, self.work_t1_s + self.tail_s
                )
            except ValueError:
                return math.nan
        _, _, e_a, e_b, _, _ = self._edges
        return (e_b - e_a) / 1e3 if e_b >= e_a else math.nan

    @property
    def idle_w(self) -> float:
        """The idle power subtracted, W (the sample buffer's own figure for ``samples``)."""
        return self.idle.samples_w if self.method == "samples" else self.idle.power_w

    @property
    def power_w(self) -> float:
        """Mean gross power over the window, W."""
        return self.energy_j / self.window_s

    @property
    def above_idle_j(self) -> float:
        """Energy above idle, J."""
        return self.energy_j - self.idle_w * self.window_s

    @property
    def per_call_mj(self) -> float:
        """Energy above idle per call, less the control, mJ."""
        return self.above_idle_j * 1e3 / self.calls - self.control_mj if self.calls else math.nan

    @property
    def err_j(self) -> float:
        """Bound on ``above_idle_j`` as the calls' cost, J: reading plus board state."""
        return self.reading_err_j + self.state_err_j

    @property
    def work_s(self) -> float:
        """The work's own duration (entry returned to exit's sync returned), s."""
        return self.work_t1_s - self.work_t0_s

    @property
    def lead_w(self) -> float:
        """Mean sampled power over the ``LEAD_S`` before the window's first read, W (nan: none)."""
        t = self.start.t0_s[0] if len(self.start) else self.work_t0_s
        lead = [s.power_w for s in self.samples if t - LEAD_S <= s.t_s < t]
        return statistics.fmean(lead) if lead else math.nan

    @property
    def cold(self) -> bool:
        """True when the window started from idle: its lead-in drew under half the work's power.

        Unknown lead-ins (no samples) count as cold: the bound then errs wide.
        """
        work_w = self.above_idle_j / self.work_s if self.work_s > 0 else 0.0
        if not work_w > 0:
            return False
        return not self.lead_w - self.idle.samples_w >= 0.5 * work_w

    @property
    def state_err_j(self) -> float:
        """Bound on how far this window's calls may cost from the same calls in steady state, J.

        ``STATE_REL`` of the energy above idle, plus for a cold window ``COLD_REL`` of the
        energy above idle of its first ``COLD_RAMP_S`` (the clocks' ramp).
        """
        above = abs(self.above_idle_j)
        if not math.isfinite(above):
            return math.nan
        term = STATE_REL * above
        if self.cold and self.work_s > 0:
            term += COLD_REL * above * min(1.0, COLD_RAMP_S / self.work_s)
        return term

    @property
    def reading_err_j(self) -> float:
        """Bound on reading this window's energy above idle, J: each term a worst case, summed."""
        idle_term = self.idle.err_w * self.window_s
        if self.method == "samples":
            return idle_term + self._sampling_err_j() + SAMPLES_VS_COUNTER * abs(self.energy_j)
        _, _, _, _, hw_a, hw_b = self._edges
        # edges: the energy between steps is exact; the time is known to hw each side,
        # and it is idle time (plain edges: the work's power for up to a period)
        edge_power = self.idle_w if self.method == "aligned" and not self.problems else self.power_w
        # the end edge's polling draws a little power inside the window (the meter's cost)
        polling = POLLING_ARTEFACT_W * self._span.polled_s if len(self.end) else 0.0
        return idle_term + edge_power * (hw_a + hw_b) + polling + 2e-3

    def _sampling_err_j(self) -> float:
        """Samples ~20 ms apart place a rise or fall only to within half a spacing.

        Bound: one spacing x the highest sample above idle (half a spacing at each of
        two edges). On the H200 this covers the isolated-burst scatter the probe saw.
        """
        t = [s.t_s for s in self.samples]
        inside = [
            s.power_w
            for s in self.samples
            if self.work_t0_s - SAMPLE_LEAD_S <= s.t_s <= self.work_t1_s + self.tail_s
        ]
        if len(t) < 2 or not inside:
            return math.nan
        spacing = statistics.median(b - a for a, b in itertools.pairwise(t))
        return spacing * max(0.0, max(inside) - self.idle_w)

    @property
    def per_call_mj_err(self) -> float:
        """Bound on ``per_call_mj``, mJ."""
        return self.err_j * 1e3 / self.calls + self.control_err_mj if self.calls else math.nan

    @property
    def ticks(self) -> int:
        """Counter updates the window spans."""
        return round(self.window_s / COUNTER_PERIOD_S)

    @property
    def reason(self) -> str | None:
        """Why the result is not reliable, or None."""
        if self.problems:
            return "; ".join(self.problems)
        if not self.calls:
            return "no calls were declared (w.call() or calls=)"
        if not math.isfinite(self.energy_j):
            return (
                "the sample buffer does not cover the window"
                if self.method == "samples"
                else ("the energy counter went backwards inside the window")
            )
        rel = abs(self.per_call_mj_err / self.per_call_mj) if self.per_call_mj else math.inf
        if self.max_rel_err is not None and rel > self.max_rel_err:
            return f"bound {rel:.1%} exceeds the accepted {self.max_rel_err:.1%}"
        return None

    @property
    def reliable(self) -> bool:
        """True when nothing in :attr:`reason` applies."""
        return self.reason is None

    def __repr__(self) -> str:
        text = (
            f"{self.per_call_mj:,.1f} ± {self.per_call_mj_err:,.1f} mJ/call above idle "
            f"({self.calls} calls, {self.window_s:.2f} s, {self.device.short}"
        )
        text += f", {self.method})" if self.method != "aligned" else ")"
        return text if self.reliable else f"{text} NOT RELIABLE: {self.reason}"

    def to_dict(self) -> dict:
        """JSON form: raw readings and the derived figures."""
        return {
            "device": self.device.to_dict(),
            "method": self.method,
            "calls": self.calls,
            "work_t0_s": self.work_t0_s,
            "work_t1_s": self.work_t1_s,
            "start": self.start.to_dict(),
            "end": self.end.to_dict(),
            "samples": samples_to_dict(self.samples),
            "idle": {
                "power_w": self.idle.power_w,
                "err_w": self.idle.err_w,
                "source": self.idle.source,
                "samples_power_w": self.idle.samples_power_w,
            },
            "control_mj": self.control_mj,
            "control_err_mj": self.control_err_mj,
            "max_rel_err": self.max_rel_err,
            "problems": list(self.problems),
            "tail_s": self.tail_s,
            "derived": {
                "window_s": self.window_s,
                "energy_j": self.energy_j,
                "above_idle_j": self.above_idle_j,
                "per_call_mj": self.per_call_mj,
                "per_call_mj_err": self.per_call_mj_err,
                "reading_err_j": self.reading_err_j,
                "state_err_j": self.state_err_j,
                "cold": self.cold,
                "reliable": self.reliable,
                "reason": self.reason,
            },
        }

    @classmethod
    def from_dict(cls, d: dict) -> Measurement:
        """Rebuild from :meth:`to_dict` (derived figures are recomputed, not read)."""
        idle = IdleBaseline(
            d["idle"]["power_w"],
            d["idle"]["err_w"],
            d["idle"]["source"],
            d["idle"]["samples_power_w"] if d["idle"]["samples_power_w"] is not None else math.nan,
        )
        return cls(
            BoardIdentity.from_dict(d["device"]),
            d["method"],
            d["calls"],
            d["work_t0_s"],
            d["work_t1_s"],
            CounterSeries.from_dict(d["start"]),
            CounterSeries.from_dict(d["end"]),
            samples_from_dict(d["samples"]),
            idle,
            d["control_mj"],
            d["control_err_mj"],
            d.get("max_rel_err"),  # records before it was stored: no limit
            tuple(d["problems"]),
            d.get("tail_s", TAIL_S),  # records before it was stored used the default
        )

    def with_method(self, method: str) -> Measurement:
        """The same readings, read another way (``aligned`` readings also hold samples)."""
        return replace(self, method=method)


_EMPTY = CounterSeries((), (), ())


def _open_board(device) -> Board:
    from nvmeter.nvml import NvmlBoard

    return NvmlBoard(device)


class EnergyWindow:
    """Meter a block of code: ``with EnergyWindow(...) as w: ...; w.call()``.

    Args:
        device: CUDA index or ``GPU-…`` UUID (default 0), or a :class:`Board`.
        idle: ``"measure"`` (1 s quiescent spans before and after, the default), a
            probe file path (same board, UUID checked), a float in W, or an
            :class:`IdleBaseline`.
        sync: ``"torch"``, ``"cupy"``, ``"jax"``, ``"none"``, a callable, or None for
            torch when it is in use.
        method: ``"auto"``, ``"aligned"``, ``"samples"`` or ``"plain"``.
        calls: Calls the block will make (else count them with :meth:`call`).
        control_mj, control_err_mj: Per-call round-trip cost to subtract, mJ.
        max_rel_err: Relative bound above which the result is marked not reliable.
        tail_s: Wait after the work before the end edge, s.

    After the block, ``w.result`` is a :class:`Measurement` (None if the block raised:
    the exception propagates unchanged).

    Raises:
        UsageError: bad arguments. TelemetryError: NVML failed at an edge.
        RecordError: an idle probe file of another board or schema.
    """

    def __init__(
        self,
        device: int | str | Board | None = 0,
        *,
        idle: str | Path | float | IdleBaseline = "measure",
        sync: str | Sync | None = None,
        method: str = "auto",
        calls: int | None = None,
        control_mj: float = 0.0,
        control_err_mj: float = 0.0,
        max_rel_err: float | None = None,
        tail_s: float = TAIL_S,
    ) -> None:
        if method not in METHODS:
            raise errors.UsageError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
        if calls is not None and (not isinstance(calls, int) or calls < 0):
            raise errors.UsageError(f"calls must be a whole number >= 0, not {calls!r}")
        if max_rel_err is not None and not max_rel_err > 0:
            raise errors.UsageError(f"max_rel_err must be > 0, not {max_rel_err!r}")
        if not tail_s >= 0:
            raise errors.UsageError(f"tail_s must be >= 0 s, not {tail_s!r}")
        self.board = device if isinstance(device, Board) else _open_board(device)
        self.clock = self.board.clock
        self._sync, self.sync_name = resolve(sync)
        self._idle_spec = idle
        self.method = method
        self._calls = calls
        self._counted = 0
        self._control = (float(control_mj), float(control_err_mj))
        self._max_rel_err = max_rel_err
        self._tail_s = tail_s
        self._reads: list[tuple[PowerSample, ...]] = []
        self._last_read_s = -math.inf
        self.result: Measurement | None = None

    # -- the block -------------------------------------------------------------
    def __enter__(self) -> EnergyWindow:
        self._sync()
        self._idle_before = self._baseline_before()
        self._start = self._edge()
        self._read_samples()
        self._t0 = self.clock.now()
        return self

    def call(self, n: int = 1) -> None:
        """Declare ``n`` more calls; reads the sample buffer if a second has passed."""
        self._counted += n
        if self.clock.now() - self._last_read_s >= SAMPLE_EVERY_S:
            self._read_samples()

    def estimate(self) -> dict:
        """A running estimate while the window is open: samples so far, W and J."""
        self._read_samples()
        samples = merge_samples(*self._reads)
        now = min(self.clock.now(), samples[-1].t_s) if samples else self.clock.now()
        try:
            energy = integrate_samples_j(samples, self._t0, now)
        except ValueError:
            return {"window_s": now - self._t0, "energy_j": math.nan, "power_w": math.nan}
        return {"window_s": now - self._t0, "energy_j": energy, "power_w": energy / max(now - self._t0, 1e-9)}

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            return  # the caller's exception propagates unchanged; no measurement
        self._sync()
        t1 = self.clock.now()
        self.clock.sleep(self._tail_s)
        end = self._edge()
        # the sample covering the tail's end lands up to one spacing (~20 ms) later
        self.clock.sleep(max(0.0, t1 + self._tail_s + 0.03 - self.clock.now()))
        self._read_samples()
        self.result = self._build(t1, end)

    # -- pieces ----------------------------------------------------------------
    def _edge(self) -> CounterSeries:
        """The reads at one edge: until a step (aligned), one read (plain), none (samples)."""
        if self.method == "samples":
            return _EMPTY
        if self.method == "plain":
            return self._one_read()
        return aligned_edge(self.board, self.clock)

    def _one_read(self) -> CounterSeries:
        t0 = self.clock.now()
        value = self.board.energy_mj()
        return CounterSeries((t0,), (self.clock.now(),), (value,))

    def _read_samples(self) -> None:
        self._reads.append(self.board.power_samples())
        self._last_read_s = self.clock.now()

    def _baseline_before(self):
        spec = self._idle_spec
        if isinstance(spec, IdleBaseline):
            return spec
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            return IdleBaseline.given(float(spec))
        if spec == "measure":
            return measure_quiescent(self.board)
        if isinstance(spec, (str, Path)):
            return IdleBaseline.from_probe(Path(spec), self.board)
        raise errors.UsageError(
            f"idle must be 'measure', a probe file, watts or an IdleBaseline, not {spec!r}"
        )

    def _baseline(self) -> IdleBaseline:
        if isinstance(self._idle_before, IdleBaseline):
            return self._idle_before
        after = measure_quiescent(self.board)
        return IdleBaseline.from_spans([self._idle_before, after], "quiescent")

    def _problems(self, start: CounterSeries, end: CounterSeries, method: str) -> tuple[str, ...]:
        problems = []
        if method != "samples":
            values = list(start.energy_mj) + list(end.energy_mj)
            if any(b < a for a, b in itertools.pairwise(values)):
                problems.append("the energy counter went backwards or reset inside the window")
        if method == "aligned" and not (len(start.steps) and len(end.steps)):
            problems.append("no counter step at an edge: the edge is known only to a period")
        return tuple(problems)

    def _build(self, t1: float, end: CounterSeries) -> Measurement:
        calls = self._calls if self._calls is not None else self._counted
        method = "aligned" if self.method == "auto" else self.method
        return Measurement(
            device=self.board.identity(),
            method=method,
            calls=calls,
            work_t0_s=self._t0,
            work_t1_s=t1,
            start=self._start,
            end=end,
            samples=merge_samples(*self._reads),
            idle=self._baseline(),
            control_mj=self._control[0],
            control_err_mj=self._control[1],
            max_rel_err=self._max_rel_err,
            problems=self._problems(self._start, end, method),
            tail_s=self._tail_s,
        )


def measure(
    fn: Callable[[], object],
    *,
    min_window_s: float = 0.5,
    target_rel_err: float = 0.01,
    max_window_s: float = 30.0,
    warmup_s: float = WARMUP_S,
    device: int | str | Board | None = 0,
    idle: str | Path | float | IdleBaseline = "measure",
    sync: str | Sync | None = None,
    control: bool | Callable[[], object] = False,
) -> Measurement:
    """Run ``fn`` back to back until the window's bound reaches ``target_rel_err``.

    Order: idle (``"measure"``: one quiescent span now and one at the end, so no window
    starts cold because of it), the control window, ``warmup_s`` of unmetered calls,
    then windows from ``min_window_s``, doubling (up to ``max_window_s``) while the
    bound is wider than ``target_rel_err`` of the per-call energy.

    Args:
        fn: The call to meter (no arguments).
        min_window_s: First window length, s.
        target_rel_err: Accepted relative bound on the per-call energy; it cannot go
            below ``STATE_REL`` (0.4%), the board's own window-to-window variation.
        max_window_s: Longest window tried, s.
        warmup_s: Unmetered calls for this long first, s (at least one call): the clocks
            ramp for ~0.3 s after idle (results/window-accuracy-h200.json).
        device: As for :class:`EnergyWindow`.
        idle: As for :class:`EnergyWindow`.
        sync: As for :class:`EnergyWindow`.
        control: Also meter a null call (``True``: ``lambda: None``; or the null call
            to use) and subtract its per-call cost.

    Returns:
        The last window's :class:`Measurement` (marked not reliable if the target was
        not reached by ``max_window_s``).

    Raises:
        UsageError: non-positive durations or error target.
    """
    if not (min_window_s > 0 and max_window_s >= min_window_s and target_rel_err > 0 and warmup_s >= 0):
        raise errors.UsageError(
            "measure needs min_window_s > 0, max_window_s >= min_window_s, target_rel_err > 0 "
            "and warmup_s >= 0"
        )
    board = device if isinstance(device, Board) else _open_board(device)
    sync_fn, _ = resolve(sync)
    before = measure_quiescent(board) if idle == "measure" else None
    window_idle = IdleBaseline.from_spans([before], "quiescent") if before else idle
    null = None
    if control:
        null_fn = control if callable(control) else (lambda: None)
        null = _run_window(null_fn, board, min_window_s, window_idle, sync, None, None)
    _warm_up(fn, board, warmup_s, sync_fn)
    window_s = min_window_s
    spans = [before]
    while True:
        result = _run_window(fn, board, window_s, window_idle, sync, null, target_rel_err)
        idled = before is not None and (result.reliable or window_s * 2 > max_window_s)
        if idled:
            # the idle after the work can widen the bound: judge the window with both spans
            spans.append(measure_quiescent(board))
            window_idle = IdleBaseline.from_spans(spans, "quiescent")
            null = null and replace(null, idle=window_idle)
            result = _with_control(replace(result, idle=window_idle), null)
        if result.reliable or window_s * 2 > max_window_s or result.problems:
            return result
        if idled:
            _warm_up(fn, board, warmup_s, sync_fn)  # the idle span cooled the board
        window_s *= 2


def _calls_for(fn, board: Board, seconds: float, on_call=lambda: None) -> None:
    """Call ``fn`` back to back (at least once) until ``seconds`` of the board's clock have passed.

    Raises:
        UsageError: ``fn`` does not advance the clock (a simulated board's virtual clock
            moves only when the call spends time on it), so the loop would never end.
    """
    now = board.clock.now()
    end = now + seconds
    stuck = 0
    while True:
        before = now
        fn()
        on_call()
        now = board.clock.now()  # one clock read a call, as a plain timed loop
        stuck = stuck + 1 if now == before else 0
        if stuck >= _STUCK_CALLS:
            raise errors.UsageError(
                f"{_STUCK_CALLS:,} calls did not advance the board's clock: on a simulated board the "
                "call (and a control's null call) must spend virtual time, e.g. board.clock.sleep(s)"
            )
        if now >= end:
            return


def _warm_up(fn, board: Board, warmup_s: float, sync_fn) -> None:
    _calls_for(fn, board, warmup_s)
    sync_fn()


def _with_control(result: Measurement, null: Measurement | None) -> Measurement:
    if null is None:
        return result
    return replace(result, control_mj=null.per_call_mj, control_err_mj=null.per_call_mj_err)


def _run_window(fn, board, window_s, idle, sync, null, max_rel_err) -> Measurement:
    with EnergyWindow(board, idle=idle, sync=sync, max_rel_err=max_rel_err) as w:
        _calls_for(fn, board, window_s, w.call)
    return _with_control(w.result, null)


def measure_many(boards: Sequence[Board], block: Callable[[], int], **kwargs) -> list[Measurement]:
    """Meter one block on several boards at once; ``block`` returns its call count.

    Each board gets its own window (edges polled board after board, so each window
    brackets the whole block).

    Returns:
        One Measurement per board, in order; sum their ``above_idle_j`` for the total.
    """
    windows = [EnergyWindow(b, **kwargs) for b in boards]
    for w in windows:
        w.__enter__()
    calls = block()
    for w in reversed(windows):
        w._calls = calls
        w.__exit__(None, None, None)
    return [w.result for w in windows]
