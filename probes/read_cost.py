"""Read cost of each signal: energy counter, instant power, average power, sample buffer.

The counter costs ~3 ms a read on the H200 and the power fields ~2 us
(docs/facts.md): the edge of a window is only as sharp as one counter read.
"""

from __future__ import annotations

from dataclasses import dataclass

from nvmeter.meter.series import summary
from nvmeter.probes import schedule
from nvmeter.worker.rig import Rig

NAME = "read_cost"
TITLE = "read cost of each signal"
IN_QUICK = True

SIGNALS = ("energy", "power_instant", "power_average", "samples")


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`)."""
    return {"read_cost"}


@dataclass(frozen=True)
class ReadCost:
    """Duration of each read, s, per signal (tuples of equal length per signal)."""

    reads_s: dict[str, tuple[float, ...]]

    def derived(self) -> dict:
        """Median/min/max read cost per signal, in microseconds."""
        return {sig: summary([t * 1e6 for t in v]) for sig, v in self.reads_s.items()}

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        d = self.derived()
        return [
            (f"read {s}", f"{d[s]['median']:,.1f} us (min {d[s]['min']:,.1f}, max {d[s]['max']:,.1f})")
            for s in SIGNALS
        ]

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {"reads_s": {k: list(v) for k, v in self.reads_s.items()}}

    @classmethod
    def from_dict(cls, data: dict) -> ReadCost:
        """Inverse of :meth:`to_dict`."""
        return cls({k: tuple(v) for k, v in data["reads_s"].items()})


def assemble(m: dict, quick: bool) -> ReadCost:
    """The record: ``plan.read_rounds`` reads of each signal, interleaved (the schedule's)."""
    return ReadCost(m["read_cost"])


def run(rig: Rig, quick: bool) -> ReadCost:
    """This probe alone (``nvmeter probe --only read_cost``)."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
