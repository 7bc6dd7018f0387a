"""Counter cadence: how often the energy counter steps, and by how much.

Polled back to back at idle with a context, under load, and with no context. The
gap between steps bounds how sharply a plain edge can be placed (docs/facts.md:
~100 ms on the H200, 95-106 ms on an A100).
"""

from __future__ import annotations

from dataclasses import dataclass

from nvmeter.meter.series import CounterSeries, poll_counter, summary
from nvmeter.worker.rig import Rig

NAME = "cadence"
TITLE = "counter cadence"
IN_QUICK = True

PHASES = ("context", "load", "no_context")
# 4096^2 FP32 products, random operands: the probes' standard load (docs/facts.md reference).
LOAD_N = 4096


def budget_s(quick: bool) -> float:
    """Expected run time, s."""
    return 3 * _duration_s(quick) + 0.5


def _duration_s(quick: bool) -> float:
    return 1.0 if quick else 4.0


@dataclass(frozen=True)
class Cadence:
    """Counter reads polled back to back, per phase."""

    phases: dict[str, CounterSeries]

    def derived(self) -> dict:
        """Per phase: reads, steps, gap (ms) and step size (mJ) statistics, power (W)."""
        out = {}
        for name, series in self.phases.items():
            steps = series.steps
            out[name] = {
                "reads": len(series),
                "changes": len(steps),
                "gap_ms": summary(steps.gaps_s * 1e3),
                "step_mj": summary(steps.sizes_mj),
                "power_w": steps.power_w(),
            }
        return out

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        rows = []
        for name, d in self.derived().items():
            g = d["gap_ms"]
            if g["n"]:
                text = f"{g['median']:.1f} ms (min {g['min']:.1f}, max {g['max']:.1f}), {d['changes']} steps"
            else:
                text = f"no step in {d['reads']} reads"
            rows.append((f"counter period, {name.replace('_', ' ')}", text))
        return rows

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {"phases": {k: v.to_dict() for k, v in self.phases.items()}}

    @classmethod
    def from_dict(cls, data: dict) -> Cadence:
        """Inverse of :meth:`to_dict`."""
        return cls({k: CounterSeries.from_dict(v) for k, v in data["phases"].items()})


def run(rig: Rig, quick: bool) -> Cadence:
    """Poll through the three phases; ends with no context (the worker is ended)."""
    board, clock = rig.board, rig.clock
    duration = _duration_s(quick)
    phases = {}
    rig.on_phase("idle, context open")
    worker = rig.context()
    phases["context"] = poll_counter(board, clock, duration)
    rig.on_phase("under load")
    job = worker.matmul(LOAD_N, "random", seconds=duration + 0.4)
    clock.sleep(0.2)
    phases["load"] = poll_counter(board, clock, duration, until=job.done)
    job.result()
    rig.on_phase("no context")
    rig.no_context()
    clock.sleep(0.5)
    phases["no_context"] = poll_counter(board, clock, duration)
    return Cadence(phases)
