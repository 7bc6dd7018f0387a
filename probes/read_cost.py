"""Read cost of each signal: energy counter, instant power, average power, sample buffer.

The counter costs ~3 ms a read on the H200 and the power fields ~2 us
(docs/facts.md): the edge of a window is only as sharp as one counter read.
"""

from __future__ import annotations

from dataclasses import dataclass

from nvmeter.meter.series import summary
from nvmeter.worker.rig import Rig

NAME = "read_cost"
TITLE = "read cost of each signal"
IN_QUICK = True

SIGNALS = ("energy", "power_instant", "power_average", "samples")


def budget_s(quick: bool) -> float:
    """Expected run time, s."""
    return 0.5 if quick else 1.5


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


def run(rig: Rig, quick: bool) -> ReadCost:
    """Time ``n`` reads of each signal, interleaved so drifts hit all alike."""
    board, clock = rig.board, rig.clock
    n = 40 if quick else 150
    readers = {
        "energy": board.energy_mj,
        "power_instant": board.power_instant_w,
        "power_average": board.power_average_w,
        "samples": board.power_samples,
    }
    reads: dict[str, list[float]] = {s: [] for s in SIGNALS}
    rig.on_phase("reading each signal")
    for _ in range(n):
        for sig in SIGNALS:
            t0 = clock.now()
            readers[sig]()
            reads[sig].append(clock.now() - t0)
    return ReadCost({s: tuple(v) for s, v in reads.items()})
