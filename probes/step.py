"""Step response: idle -> load -> idle, counter steps and instant power on one timeline.

How fast each signal follows a change in load tells how much of a short call the
counter or the instant field can see. On the H200 the first counter step after the
load starts already held most of it (shared/FACTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nvmeter.rig import Rig
from nvmeter.series import CounterSeries
from nvmeter.worker import MatmulRun

NAME = "step"
TITLE = "step response"
IN_QUICK = False

LOAD_N = 4096
# "Settled": every later reading within this fraction of the change. One interval's
# counter power carries about +-3% from its edges (half a ~3 ms read at each end of
# ~100 ms), so a tighter band would call noise unsettled.
SETTLE_FRACTION = 0.10
# Intervals whose two edges together are uncertain by more than this fraction of
# their length (a slow read at an edge) are left out of the response figures.
SHARP_EDGES = 0.04


def _phases_s(quick: bool) -> tuple[float, float, float]:
    return (0.6, 1.5, 0.8) if quick else (1.5, 3.0, 2.0)


def budget_s(quick: bool) -> float:
    """Expected run time, s."""
    return sum(_phases_s(quick)) + 0.5


@dataclass(frozen=True)
class Step:
    """Counter reads, and the instant power read after each, around one load job."""

    counter: CounterSeries
    instant_w: tuple[float, ...]
    load: MatmulRun

    def _interval_power(self) -> tuple[np.ndarray, np.ndarray]:
        """End time and mean power of each counter interval with sharp edges."""
        steps = self.counter.steps
        dt = np.diff(steps.t_s)
        # a slow read blurs an edge; keep intervals known to within SHARP_EDGES
        edge = steps.half_width_s[:-1] + steps.half_width_s[1:]
        sharp = edge <= SHARP_EDGES * dt
        power = np.diff(steps.energy_mj) / 1e3 / dt
        return steps.t_s[1:][sharp], power[sharp]

    def _response(self, t: np.ndarray, p: np.ndarray) -> dict:
        """Lag to half the change and settling time after the rise and the fall, ms."""
        before = np.median(p[t < self.load.t0_s]) if np.any(t < self.load.t0_s) else np.nan
        during = (t > self.load.t0_s + self.load.duration_s / 2) & (t < self.load.t1_s)
        plateau = np.median(p[during]) if np.any(during) else np.nan
        out = {"idle_w": float(before), "plateau_w": float(plateau)}
        for edge, t_edge, target in (("rise", self.load.t0_s, plateau), ("fall", self.load.t1_s, before)):
            start = before if edge == "rise" else plateau
            after = t > t_edge
            half = after & (np.abs(p - target) < np.abs(start - target) / 2)
            out[f"{edge}_half_ms"] = float((t[half][0] - t_edge) * 1e3) if half.any() else None
            within = np.abs(p - target) <= SETTLE_FRACTION * abs(start - target)
            end = self.load.t1_s if edge == "rise" else np.inf
            window = after & (t < end)
            bad = window & ~within
            idx = np.flatnonzero(window)
            if idx.size == 0:
                out[f"{edge}_settle_ms"] = None
                continue
            last_bad = np.flatnonzero(bad)
            settle_t = t[last_bad[-1] + 1] if last_bad.size and last_bad[-1] + 1 < len(t) else t[idx[0]]
            out[f"{edge}_settle_ms"] = float((settle_t - t_edge) * 1e3)
        return out

    def derived(self) -> dict:
        """Rise/fall lag and settling of the counter's step power and of instant power."""
        t_c, p_c = self._interval_power()
        t_i = np.asarray(self.counter.t1_s)
        p_i = np.asarray(self.instant_w)
        return {"counter": self._response(t_c, p_c), "instant": self._response(t_i, p_i)}

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        d = self.derived()

        def ms(v):
            return "n/a" if v is None else f"{v:.0f} ms"

        return [
            (
                f"step response, {sig}",
                f"{d[sig]['idle_w']:.0f} -> {d[sig]['plateau_w']:.0f} W; "
                f"half at {ms(d[sig]['rise_half_ms'])}, "
                f"settled {ms(d[sig]['rise_settle_ms'])}; fall half {ms(d[sig]['fall_half_ms'])}",
            )
            for sig in ("counter", "instant")
        ]

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {
            "counter": self.counter.to_dict(),
            "instant_w": list(self.instant_w),
            "load": self.load.__dict__,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Step:
        """Inverse of :meth:`to_dict`."""
        return cls(
            CounterSeries.from_dict(data["counter"]), tuple(data["instant_w"]), MatmulRun(**data["load"])
        )


def run(rig: Rig, quick: bool) -> Step:
    """Poll counter + instant power through idle, a load job, and idle again."""
    board, clock = rig.board, rig.clock
    worker = rig.context()
    pre, load_s, post = _phases_s(quick)
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
    job = worker.matmul(LOAD_N, "random", seconds=load_s)
    poll_until(clock.now() + load_s + 30.0, job)
    run_ = job.result()
    rig.on_phase("idle after")
    poll_until(clock.now() + post)
    return Step(CounterSeries(tuple(t0s), tuple(t1s), tuple(energy)), tuple(instant), run_)
