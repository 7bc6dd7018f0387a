"""Idle power: no CUDA context; a context open; the context's process frozen.

A CUDA context alone raises idle draw by tens of watts (H200 +41 W, A100 +7 to +26 W,
H100 +50 W: docs/facts.md), so "above idle" means nothing until one says which
idle. The frozen level is what the scorer subtracts: the worker that holds the
context is stopped with SIGSTOP, so no host thread can touch the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from nvmeter.meter.span import AlignedSpan
from nvmeter.probes import schedule
from nvmeter.worker.rig import Rig

NAME = "idle"
TITLE = "idle power"
IN_QUICK = True

LEVELS = ("no_context", "context", "frozen")


def needs(quick: bool) -> set[str]:
    """The schedule's measurements this probe's record is made of (:mod:`nvmeter.probes.schedule`)."""
    return {"idle_no_context", "frozen", "idle_context"}


@dataclass(frozen=True)
class Idle:
    """One aligned span per idle level, and the wait before each, s (level -> seconds).

    The wait is the one after the board's last change of state: the run's start for no
    context, the context's opening and the freeze for frozen; the context span follows the
    frozen one at once (resuming a process that does nothing changes nothing on the board).
    """

    spans: dict[str, AlignedSpan]
    settle_s: dict[str, float]

    def derived(self) -> dict:
        """Power per level from the counter and from the sample buffer, W, and deltas."""
        out = {level: span.derived() for level, span in self.spans.items()}
        w = {level: span.power_w for level, span in self.spans.items()}
        out["context_minus_no_context_w"] = w["context"] - w["no_context"]
        out["frozen_minus_context_w"] = w["frozen"] - w["context"]
        return out

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows."""
        return [
            (
                f"idle, {level.replace('_', ' ')}",
                f"{span.power_w:.1f} W (samples {span.samples_power_w:.1f} W, {span.duration_s:.1f} s)",
            )
            for level, span in self.spans.items()
        ]

    def to_dict(self) -> dict:
        """Raw JSON form."""
        return {"settle_s": self.settle_s, "spans": {k: v.to_dict() for k, v in self.spans.items()}}

    @classmethod
    def from_dict(cls, data: dict) -> Idle:
        """Inverse of :meth:`to_dict`."""
        return cls(
            {k: AlignedSpan.from_dict(v) for k, v in data["spans"].items()},
            {k: float(v) for k, v in data["settle_s"].items()},
        )


def assemble(m: dict, quick: bool) -> Idle:
    """The record, in the order no context, context, frozen (the schedule measures frozen first)."""
    p = schedule.plan(quick)
    return Idle(
        {"no_context": m["idle_no_context"], "context": m["idle_context"], "frozen": m["frozen"]},
        {"no_context": p.start_settle_s, "context": 0.0, "frozen": p.context_settle_s},
    )


def run(rig: Rig, quick: bool) -> Idle:
    """This probe alone: no context, then the context frozen (always resumed), then running."""
    return assemble(schedule.measure(rig, quick, needs(quick)), quick)
