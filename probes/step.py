"""Step response: idle -> load -> idle, counter steps and instant power on one timeline.

How fast each signal follows a change in load tells how much of a short call the
counter or the instant field can see. On the H200 the first counter step after the
load starts already held most of it (docs/facts.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from nvmeter import records
from nvmeter.meter.series import CounterSeries
from nvmeter.probes import schedule
from nvmeter.worker.protocol import MatmulRun
from nvmeter.worker.rig import Rig

NAME = "step"
TITLE = "step response"
IN_QUICK = False

LOAD_N = schedule.LOAD_N
# "Settled": every later reading within this fraction of the change. One interval's
# counter power carries about +-3% from its edges (half a ~3 ms read at each end of
# ~100 ms), so a tighter band would call noise unsettled.
SETTLE_FRACTION = 0.10
# Intervals whose two edges together are uncertain by more than this fraction of
# their length (a slow read at an edge: 9-16 ms on the H200) are left out of the
# response figures; ordinary reads bracket an interval's two edges to 5.5-7 ms in
# ~100 ms (results/probe-h200.json, step: 10th-80th percentile).
SHARP_EDGES = 0.10
# Delays tried when fitting each signal's lag, s; readings within FIT_WINDOW_S of
# an edge are fitted.
DELAY_GRID_S = np.arange(-0.050, 0.5005, 0.001)
FIT_WINDOW_S = 0.6
# How the record's figures are derived (stored in its raw form; probe record v5):
#   1  intervals with a blurred edge are dropped (every record before v5);
#   2  a blurred step is skipped instead: the interval runs from the sharp step before it to
#      the sharp one after, so a slow read at the load's start no longer leaves the edge in a
#      gap that every delay fits alike (results/probe-speed/: -23 ms and +179 ms misfits).
#   3  the figures as 2; the board's profile takes its power-lag bound from them where they reach
#      further than the family's (nvmeter.probes.profile; probe record v11): a record of 2 keeps
#      the family's bound it was made with, so it verifies as it did.
DERIVATION = 3


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`)."""
    return {"step"}


@dataclass(frozen=True)
class Step:
    """Counter reads, and the instant power read after each, around one load job."""

    counter: CounterSeries
    instant_w: tuple[float, ...]
    load: MatmulRun
    derivation: int = DERIVATION

    def _intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Start, end and mean power of each counter interval with sharp edges."""
        steps = self.counter.steps
        t, half, energy = steps.t_s, steps.half_width_s, steps.energy_mj
        if self.derivation >= 2 and t.size > 2:
            # skip a step that a slow read blurs: measure across it, between sharp steps
            keep = half <= SHARP_EDGES * float(np.median(np.diff(t))) / 2
            t, half, energy = t[keep], half[keep], energy[keep]
        dt = np.diff(t)
        # a slow read blurs an edge; keep intervals known to within SHARP_EDGES
        sharp = half[:-1] + half[1:] <= SHARP_EDGES * dt
        power = np.diff(energy) / 1e3 / dt
        return t[:-1][sharp], t[1:][sharp], power[sharp]

    def _levels(self, t: np.ndarray, p: np.ndarray) -> tuple[float, float]:
        """Idle before the load and the plateau (median of the load's second half), W."""
        before = p[t < self.load.t0_s]
        during = p[(t > self.load.t0_s + self.load.duration_s / 2) & (t < self.load.t1_s)]
        idle = float(np.median(before)) if before.size else float("nan")
        return idle, float(np.median(during)) if during.size else float("nan")

    def _fit_delays(self, predict, t_mid: np.ndarray, p: np.ndarray) -> dict:
        """{edge: (best delay, (lowest, highest) delay fitting exactly as well) or None}, ms, by grid search.

        The best is the grid's first among equals. Where no interval spans the edge
        (derivation 1 drops the intervals that a slow read blurs), every delay inside the gap
        predicts the same readings: the span covers the gap, and the figure's uncertainty it.
        """
        out = {}
        for edge, t_edge in (("rise", self.load.t0_s), ("fall", self.load.t1_s)):
            near = np.abs(t_mid - t_edge) < FIT_WINDOW_S
            if near.sum() < 3:
                out[edge] = None
                continue
            cost = np.array([np.sum((predict(d)[near] - p[near]) ** 2) for d in DELAY_GRID_S])
            tied = DELAY_GRID_S[cost <= cost.min() * (1 + 1e-12)] * 1e3
            out[edge] = (
                float(DELAY_GRID_S[int(np.argmin(cost))] * 1e3),
                (float(tied.min()), float(tied.max())),
            )
        return out

    def _settle_ms(self, t: np.ndarray, p: np.ndarray, idle_w: float, plateau_w: float) -> float | None:
        """Time, ms, from the load's start until every reading (t s, p W) is within SETTLE_FRACTION."""
        during = (t > self.load.t0_s) & (t < self.load.t1_s)
        far = during & (np.abs(p - plateau_w) > SETTLE_FRACTION * abs(plateau_w - idle_w))
        after = t[during & (t > (t[far].max() if far.any() else -np.inf))]
        return float((after[0] - self.load.t0_s) * 1e3) if after.size else None

    def _response(
        self, t_level: np.ndarray, t_fit: np.ndarray, p: np.ndarray, on_fraction
    ) -> tuple[dict, dict]:
        """(levels, fitted delays and settling; each delay's span of equal fits) of readings ``p``.

        Args:
            t_level: When each reading applies, for the levels and settling, s.
            t_fit: Where each reading sits for the delay fit, s.
            p: The readings, W.
            on_fraction: delay_s -> the share of each reading the load covers (0..1).
        """
        idle, plateau = self._levels(t_level, p)
        fit = self._fit_delays(lambda d: idle + (plateau - idle) * on_fraction(d), t_fit, p)
        derived = {"idle_w": idle, "plateau_w": plateau}
        derived |= {f"{e}_delay_ms": None if fit[e] is None else fit[e][0] for e in ("rise", "fall")}
        derived["rise_settle_ms"] = self._settle_ms(t_level, p, idle, plateau)
        return derived, {f"{e}_delay_ms": None if fit[e] is None else fit[e][1] for e in ("rise", "fall")}

    def _counter_response(self) -> tuple[dict, dict]:
        a, b, p = self._intervals()
        t0, t1 = self.load.t0_s, self.load.t1_s

        def on_fraction(delay_s: float) -> np.ndarray:
            return np.clip(np.minimum(b, t1 + delay_s) - np.maximum(a, t0 + delay_s), 0, None) / (b - a)

        return self._response(b, (a + b) / 2, p, on_fraction)

    def _instant_response(self) -> tuple[dict, dict]:
        t = (np.asarray(self.counter.t0_s) + np.asarray(self.counter.t1_s)) / 2
        t0, t1 = self.load.t0_s, self.load.t1_s
        on = lambda d: (t >= t0 + d) & (t < t1 + d)  # noqa: E731
        return self._response(t, t, np.asarray(self.instant_w), on)

    @cached_property
    def _analysis(self) -> dict[str, tuple[dict, dict]]:
        """{signal: (derived figures, delay spans)}, each signal fitted once."""
        return {"counter": self._counter_response(), "instant": self._instant_response()}

    def delay_spans_ms(self) -> dict:
        """{signal: {"rise_delay_ms": (lowest, highest) or None, "fall_delay_ms": ...}}, ms.

        The delays that explain the readings exactly as well as the one :meth:`derived`
        reports (its grid's first). One grid step (1 ms) wide where a sharp interval spans
        the edge; as wide as the gap where none does (a slow read at the edge).
        """
        return {sig: dict(spans) for sig, (_, spans) in self._analysis.items()}

    def derived(self) -> dict:
        """Idle and plateau (W), fitted rise/fall delay (ms) and settling (ms) of each signal.

        The counter's delay is fitted to its interval powers (an interval half covered
        by the load reads half way), the instant field's to its readings; a delay near
        zero means the signal follows the load with no lag beyond its update period.
        """
        return {sig: dict(derived) for sig, (derived, _) in self._analysis.items()}

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        d = self.derived()

        def ms(v):
            return "n/a" if v is None else f"{v:.0f} ms"

        return [
            (
                f"step response, {sig}",
                f"{d[sig]['idle_w']:.0f} -> {d[sig]['plateau_w']:.0f} W; "
                f"delay rise {ms(d[sig]['rise_delay_ms'])}, "
                f"fall {ms(d[sig]['fall_delay_ms'])}; settled {ms(d[sig]['rise_settle_ms'])} after the start",
            )
            for sig in ("counter", "instant")
        ]

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {
            "counter": self.counter.to_dict(),
            "instant_w": list(self.instant_w),
            "load": self.load.__dict__,
            "derivation": self.derivation,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Step:
        """Inverse of :meth:`to_dict`."""
        return cls(
            CounterSeries.from_dict(data["counter"]),
            tuple(data["instant_w"]),
            MatmulRun(**data["load"]),
            # records before probe v5 read as derivation 1 (nvmeter.formats)
            records.integer(data["derivation"], "step.derivation", at_least=1, at_most=DERIVATION),
        )


def poll_step(rig: Rig, worker, phases_s: tuple[float, float, float]) -> tuple[Step, float]:
    """Poll counter + instant power through idle, a load job, and idle again.

    Args:
        rig: The board.
        worker: Its worker, holding the context.
        phases_s: Idle before, load, idle after, s. The fit of each edge's delay reads
            FIT_WINDOW_S either side of it, so the idle after needs no more than that.

    Returns:
        The record, and when the load job was asked for (s), where the cadence's load phase
        is cut from the same reads (:mod:`nvmeter.probes.schedule`).

    """
    board, clock = rig.board, rig.clock
    pre, load_s, post = phases_s
    t0s, t1s, energy, instant = [], [], [], []

    def poll_until(t_end: float, job=None) -> None:
        while clock.now() < t_end and not (job and job.done()):
            t0 = clock.now()
            energy.append(board.energy_mj())
            t0s.append(t0)
            t1s.append(clock.now())
            instant.append(board.power_instant_w())

    rig.on_phase("idle before")
    poll_until(clock.now() + pre)
    rig.on_phase("load")
    submitted = clock.now()
    job = worker.matmul(LOAD_N, "random", seconds=load_s)
    poll_until(clock.now() + load_s + 30.0, job)
    run_ = job.result()
    rig.on_phase("idle after")
    poll_until(clock.now() + post)
    return Step(CounterSeries(tuple(t0s), tuple(t1s), tuple(energy)), tuple(instant), run_), submitted


def assemble(m: dict, quick: bool) -> Step:
    """The record, from the schedule's step polls."""
    return m["step"].record


def run(rig: Rig, quick: bool) -> Step:
    """This probe alone (``nvmeter probe --only step``; the full run's phases)."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
