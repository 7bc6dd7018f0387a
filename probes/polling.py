"""Tight-polling artefact: the power the counter implies while it is read back to back.

On the H200 the counter advanced at 85.2 W while polled ~250 times a second against
81.3 W read sparsely (docs/facts.md); an A100 showed ~90 W against 60-67 W. The
sparse figure uses edges aligned to counter steps and only the sample buffer in
between, so it polls for well under a tenth of its span. The sparse span is the no-context
idle span, measured before any polling of the run; the tight series follows the read cost
(:mod:`nvmeter.probes.schedule`).
"""

from __future__ import annotations

from dataclasses import dataclass

from nvmeter.meter.series import CounterSeries
from nvmeter.meter.span import AlignedSpan
from nvmeter.probes import schedule
from nvmeter.worker.rig import Rig

NAME = "polling"
TITLE = "tight-polling artefact"
IN_QUICK = False


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`)."""
    return {"idle_no_context", "tight"}


@dataclass(frozen=True)
class Polling:
    """A tight poll and a sparse (aligned-edge) span, both with no context."""

    tight: CounterSeries
    sparse: AlignedSpan

    def derived(self) -> dict:
        """Power (W) each way, their difference, and the tight read rate (reads/s)."""
        tight_w = self.tight.steps.power_w()
        sparse_w = self.sparse.power_w
        return {
            "tight_power_w": tight_w,
            "sparse_power_w": sparse_w,
            "sparse_samples_power_w": self.sparse.samples_power_w,
            "artefact_w": tight_w - sparse_w,
            "tight_reads_per_s": len(self.tight) / self.tight.duration_s,
        }

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        d = self.derived()
        return [
            (
                "tight-polling artefact",
                f"{d['tight_power_w']:.1f} W polled ({d['tight_reads_per_s']:.0f} reads/s) "
                f"vs {d['sparse_power_w']:.1f} W sparse: {d['artefact_w']:+.1f} W",
            )
        ]

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {"tight": self.tight.to_dict(), "sparse": self.sparse.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> Polling:
        """Inverse of :meth:`to_dict`."""
        return cls(CounterSeries.from_dict(data["tight"]), AlignedSpan.from_dict(data["sparse"]))


def assemble(m: dict, quick: bool) -> Polling:
    """The record: the no-context counter poll, and the no-context idle span as the sparse reading."""
    return Polling(m["tight"], m["idle_no_context"])


def run(rig: Rig, quick: bool) -> Polling:
    """This probe alone (``nvmeter probe --only polling``)."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
