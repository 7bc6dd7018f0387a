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
from pathlib import Path

from nvmeter import errors
from nvmeter.boards.factory import open_board
from nvmeter.boards.profile import BoardProfile, default_profile
from nvmeter.boards.protocol import Board, PowerSample
from nvmeter.meter.baseline import IdleBaseline, measure_quiescent
from nvmeter.meter.measurement import Measurement
from nvmeter.meter.series import CounterSeries, integrate_samples_j, merge_samples
from nvmeter.meter.span import aligned_edge
from nvmeter.meter.sync import Sync, resolve

METHODS = ("auto", "aligned", "samples", "plain")


_EMPTY = CounterSeries((), (), ())


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
        tail_s: Wait after the work before the end edge, s (default: the profile's).
        profile: The board's telemetry figures (default: its family's, :mod:`nvmeter.boards.profile`).

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
        tail_s: float | None = None,
        profile: BoardProfile | None = None,
    ) -> None:
        if method not in METHODS:
            raise errors.UsageError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
        if calls is not None and (not isinstance(calls, int) or calls < 0):
            raise errors.UsageError(f"calls must be a whole number >= 0, not {calls!r}")
        if max_rel_err is not None and not max_rel_err > 0:
            raise errors.UsageError(f"max_rel_err must be > 0, not {max_rel_err!r}")
        if tail_s is not None and not tail_s >= 0:
            raise errors.UsageError(f"tail_s must be >= 0 s, not {tail_s!r}")
        self.board = open_board(device)
        self.profile = profile or default_profile(self.board.identity().name)
        self.clock = self.board.clock
        self._sync, self.sync_name = resolve(sync)
        self._idle_spec = idle
        self.method = method
        self._calls = calls
        self._counted = 0
        self._control = (float(control_mj), float(control_err_mj))
        self._max_rel_err = max_rel_err
        self._tail_s = self.profile.tail_s if tail_s is None else tail_s
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
        if self.clock.now() - self._last_read_s >= self.profile.sample_every_s:
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
        return aligned_edge(self.board, self.clock, self.profile.edge_timeout_s)

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
            profile=self.profile,
        )
