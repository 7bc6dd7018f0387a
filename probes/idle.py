"""Idle power: no CUDA context; a context open; the context's process frozen.

A CUDA context alone raises idle draw by tens of watts (H200 +41 W, A100 +7 to +26 W,
H100 +50 W: docs/facts.md), so "above idle" means nothing until one says which
idle. The frozen level is what the scorer subtracts: the worker that holds the
context is stopped with SIGSTOP, so no host thread can touch the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from nvmeter.meter.span import AlignedSpan, measure_span
from nvmeter.worker.rig import Rig

NAME = "idle"
TITLE = "idle power"
IN_QUICK = True

LEVELS = ("no_context", "context", "frozen")


def _durations(quick: bool) -> tuple[float, float]:
    """(settle, span) seconds; docs/facts.md froze for a 3 s settle."""
    return (0.3, 1.0) if quick else (3.0, 5.0)


def budget_s(quick: bool) -> float:
    """Expected run time, s."""
    settle, span = _durations(quick)
    return 3 * (settle + span + 0.3) + (2 if quick else 5)


@dataclass(frozen=True)
class Idle:
    """One aligned span per idle level, and the settle time before each."""

    spans: dict[str, AlignedSpan]
    settle_s: float

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
        return cls({k: AlignedSpan.from_dict(v) for k, v in data["spans"].items()}, data["settle_s"])


def run(rig: Rig, quick: bool) -> Idle:
    """No context, then a context, then the context's process frozen (always resumed)."""
    board, clock = rig.board, rig.clock
    settle, span = _durations(quick)
    spans = {}
    rig.on_phase("no context")
    rig.no_context()
    clock.sleep(settle)
    spans["no_context"] = measure_span(board, clock, span)
    rig.on_phase("context open")
    worker = rig.context()
    clock.sleep(settle)
    spans["context"] = measure_span(board, clock, span)
    rig.on_phase("context frozen (SIGSTOP)")
    worker.freeze()
    try:
        clock.sleep(settle)
        spans["frozen"] = measure_span(board, clock, span)
    finally:
        worker.resume()
    return Idle(spans, settle)
