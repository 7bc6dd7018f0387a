"""Counter cadence: how often the energy counter steps, and by how much.

Polled back to back at idle with a context, under load, and with no context. The
gap between steps bounds how sharply a plain edge can be placed (docs/facts.md:
~100 ms on the H200, 95-106 ms on an A100).
"""

from __future__ import annotations

from dataclasses import dataclass

from nvmeter import records
from nvmeter.boards.profile import COUNTER_PERIOD_MAX_S
from nvmeter.meter.series import CounterSeries, summary
from nvmeter.probes import schedule
from nvmeter.worker.rig import Rig

NAME = "cadence"
TITLE = "counter cadence"
IN_QUICK = True

PHASES = ("context", "load", "no_context")
# 4096^2 FP32 products, random operands: the probes' standard load (docs/facts.md reference).
LOAD_N = schedule.LOAD_N
# The load phase's reads start this long after the job was asked for (the counter settles
# within 149 ms of a load's start on the H200: results/probe-h200.json, step).
LOAD_RAMP_S = 0.2
# How the profile takes the record's period (stored in its raw form; probe record v11):
#   1  the longest gap between steps, or the family's where no phase saw two; the family's edge wait;
#   2  the longest gap or still stretch, or the longest period a profile holds where no phase saw
#      two steps; the edge wait three periods (nvmeter.probes.profile). A record of 1 keeps the
#      figures it was made with, so that it verifies as it did.
DERIVATION = 2


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`).

    No context: the no-context counter poll (also the polling probe's). Full runs: the context
    and load phases are the step response's polls before and during its load; quick runs poll
    at context idle at the end, and under load before the random-operand load span.
    """
    return {"tight", "random", "context_poll"} if quick else {"tight", "step"}


@dataclass(frozen=True)
class Cadence:
    """Counter reads polled back to back, per phase."""

    phases: dict[str, CounterSeries]
    derivation: int = DERIVATION

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
        """Summary-table rows; where no phase saw two updates, one more says what the profile takes."""
        rows = []
        for name, d in self.derived().items():
            g = d["gap_ms"]
            if g["n"]:
                text = f"{g['median']:.1f} ms (min {g['min']:.1f}, max {g['max']:.1f}), {d['changes']} steps"
            else:
                series = self.phases[name]
                text = (
                    f"NO PERIOD: {d['changes']} step{'' if d['changes'] == 1 else 's'} in {d['reads']} reads "
                    f"over {series.duration_s:.2f} s; the counter updates less often than every "
                    f"{series.longest_still_s:.2f} s, or not at all"
                )
            rows.append((f"counter period, {name.replace('_', ' ')}", text))
        if self.derivation >= 2 and not any(d["gap_ms"]["n"] for d in self.derived().values()):
            rows.append(
                (
                    "counter period kept",
                    f"{COUNTER_PERIOD_MAX_S:g} s, the longest a profile holds: none was measured, and plain "
                    "edges are bounded at it (docs/probe.md)",
                )
            )
        return rows

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {"phases": {k: v.to_dict() for k, v in self.phases.items()}, "derivation": self.derivation}

    @classmethod
    def from_dict(cls, data: dict) -> Cadence:
        """Inverse of :meth:`to_dict` (records before probe v11 read as derivation 1: nvmeter.formats)."""
        derivation = records.integer(data["derivation"], "cadence.derivation", at_least=1, at_most=DERIVATION)
        return cls({k: CounterSeries.from_dict(v) for k, v in data["phases"].items()}, derivation)


def assemble(m: dict, quick: bool) -> Cadence:
    """The record, phases in the order context, load, no context."""
    if quick:
        return Cadence({"context": m["context_poll"], "load": m["random"].poll, "no_context": m["tight"]})
    polls = m["step"]
    return Cadence({"context": polls.context, "load": polls.load, "no_context": m["tight"]})


def run(rig: Rig, quick: bool) -> Cadence:
    """This probe alone (``nvmeter probe --only cadence``)."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
