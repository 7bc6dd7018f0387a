"""`Measurement`: one window's raw readings, with every figure derived on demand.

The bound's telemetry figures come from the Measurement's
:class:`~nvmeter.boards.profile.BoardProfile`, its state constants from the
:mod:`~nvmeter.meter.errormodel` version it names.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass, field, replace

from nvmeter.boards.profile import H200_V1, BoardProfile
from nvmeter.boards.protocol import BoardIdentity, PowerSample
from nvmeter.meter import errormodel
from nvmeter.meter.baseline import IdleBaseline
from nvmeter.meter.series import CounterSeries, integrate_samples_j, samples_from_dict, samples_to_dict
from nvmeter.meter.span import AlignedSpan


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
        profile: The board's telemetry figures the bound uses (:mod:`nvmeter.boards.profile`).
        model_version: The error model that derives the bound (:mod:`nvmeter.meter.errormodel`).
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
    tail_s: float = H200_V1.tail_s
    profile: BoardProfile = H200_V1
    model_version: int = errormodel.CURRENT

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
            self.profile.counter_period_s,
            self.profile.counter_period_s,
        )

    @property
    def _span(self) -> AlignedSpan:
        return AlignedSpan(self.start, self.end, self.samples)

    @property
    def window_s(self) -> float:
        """Length of the window the energy covers, s."""
        if self.method == "samples":
            return self.work_t1_s + self.tail_s - (self.work_t0_s - self.profile.sample_lead_s)
        t_a, t_b, *_ = self._edges
        return t_b - t_a

    @property
    def energy_j(self) -> float:
        """Gross energy over the window, J (nan if the counter went backwards)."""
        if self.method == "samples":
            try:
                return integrate_samples_j(
                    self.samples, self.work_t0_s - self.profile.sample_lead_s, self.work_t1_s + self.tail_s
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
        """Mean sampled power over the ``self.model.lead_s`` before the window's first read, W (nan: none)."""
        t = self.start.t0_s[0] if len(self.start) else self.work_t0_s
        lead = [s.power_w for s in self.samples if t - self.model.lead_s <= s.t_s < t]
        return statistics.fmean(lead) if lead else math.nan

    @property
    def cold(self) -> bool:
        """True when the window started from idle: its lead-in drew under half the work's power.

        Unknown lead-ins (no samples) count as cold: the bound then errs wide.
        """
        work_w = self.above_idle_j / self.work_s if self.work_s > 0 else 0.0
        if not work_w > 0:
            return False
        return not self.lead_w - self.idle.samples_w >= self.model.cold_lead_share * work_w

    @property
    def model(self) -> errormodel.ErrorModel:
        """The error model this Measurement's bound is derived with."""
        return errormodel.model(self.model_version)

    @property
    def state_err_j(self) -> float:
        """Bound on how far this window's calls may cost from the same calls in steady state, J.

        The model's ``state_rel`` of the energy above idle, plus for a cold window its
        ``cold_rel`` of the energy above idle of the first ``cold_ramp_s`` (the clocks' ramp).
        """
        above = abs(self.above_idle_j)
        if not math.isfinite(above):
            return math.nan
        term = self.model.state_rel * above
        if self.cold and self.work_s > 0:
            term += self.model.cold_rel * above * min(1.0, self.model.cold_ramp_s / self.work_s)
        return term

    @property
    def reading_err_j(self) -> float:
        """Bound on reading this window's energy above idle, J: each term a worst case, summed."""
        idle_term = self.idle.err_w * self.window_s
        if self.method == "samples":
            return idle_term + self._sampling_err_j() + self.profile.samples_vs_counter * abs(self.energy_j)
        _, _, _, _, hw_a, hw_b = self._edges
        # edges: the energy between steps is exact; the time is known to hw each side,
        # and it is idle time (plain edges: the work's power for up to a period)
        edge_power = self.idle_w if self.method == "aligned" and not self.problems else self.power_w
        # the end edge's polling draws a little power inside the window (the meter's cost)
        polling = self.profile.polling_artefact_w * self._span.polled_s if len(self.end) else 0.0
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
            if self.work_t0_s - self.profile.sample_lead_s <= s.t_s <= self.work_t1_s + self.tail_s
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
        return round(self.window_s / self.profile.counter_period_s)

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
            d.get("tail_s", H200_V1.tail_s),  # records before it was stored used the default
        )

    def with_method(self, method: str) -> Measurement:
        """The same readings, read another way (``aligned`` readings also hold samples)."""
        return replace(self, method=method)
