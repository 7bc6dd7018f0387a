"""Energy over a span with its edges placed on counter updates.

The counter steps every ~100 ms and a read costs ~3 ms (docs/facts.md), so a
span read at arbitrary edges misplaces up to a period at each end. Here each edge
polls until the counter steps and takes the step as the edge: the energy between
two steps is exact to the counter's own accuracy, and the time between them is
known to within half a read at each end. Between the edges only the sample
buffer is read, once a second, so its ~2.4 s history never rolls over.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nvmeter.boards.protocol import Board, PowerSample
from nvmeter.clock import Clock
from nvmeter.meter import polling
from nvmeter.meter.series import (
    CounterSeries,
    integrate_samples_j,
    merge_samples,
    samples_from_dict,
    samples_to_dict,
)

# Longest wait for a counter step at an edge: the longest gap seen on the H200 was
# 116 ms (docs/facts.md); 0.35 s also covers a late update and a slow read.
EDGE_TIMEOUT_S = 0.35
# Extra board power while the counter is polled back to back: +2.8 W on the H200
# (results/probe-h200.json, polling); the public A100 probe showed ~23-30 W
# (~90 W polled vs 60-67 W, docs/facts.md).
POLLING_ARTEFACT_W = 2.8
# Sample-buffer read spacing inside a span; the buffer holds ~2.4 s (docs/facts.md).
SAMPLE_EVERY_S = 1.0
# A step is sharp when it is known to within this many of the series' median reads: two
# ordinary reads bracket it to about one read each side, and a slow read (up to ~16 ms against
# ~3 ms, docs/facts.md) blurs it several-fold.
SHARP_READS = 1.5


def aligned_edge(
    board: Board, clock: Clock, timeout_s: float = EDGE_TIMEOUT_S, until: Callable[[], bool] | None = None
) -> CounterSeries:
    """Read the counter back to back until its value changes (or ``timeout_s`` passes).

    Args:
        board: The board whose counter is read.
        clock: Its clock.
        timeout_s: Give up after this long without a step, s.
        until: Also stop once this says so, checked after each read (a poller told to end).

    Returns:
        The reads, from the first to the first one showing a new value.

    """
    t0s, t1s, values = [], [], []
    end = clock.now() + timeout_s
    while True:
        t0, t1, value = polling.read_energy(board, clock)
        values.append(value)
        t0s.append(t0)
        t1s.append(t1)
        if values[-1] != values[0] or clock.now() >= end or (until is not None and until()):
            return CounterSeries(tuple(t0s), tuple(t1s), tuple(values))


def sharp(reads: CounterSeries) -> bool:
    """True when the last step in ``reads`` is sharp (:data:`SHARP_READS`)."""
    steps = reads.steps
    return bool(len(steps)) and steps.half_width_s[-1] <= SHARP_READS * float(np.median(reads.read_cost_s))


def joined(a: CounterSeries, b: CounterSeries) -> CounterSeries:
    """Two runs of reads as one series, ``a`` first."""
    return CounterSeries(a.t0_s + b.t0_s, a.t1_s + b.t1_s, a.energy_mj + b.energy_mj)


def sharp_edge(board: Board, clock: Clock, timeout_s: float = EDGE_TIMEOUT_S) -> CounterSeries:
    """:func:`aligned_edge`, polling on past a step that a slow read blurred while ``timeout_s`` allows.

    An edge's step costs the power there over its width: inside the work the work's, at idle
    the idle's. A 15 ms read at an idle edge misplaces up to ~1 J of a 121 W idle (read costs
    and idle: results/probe-h200.json), 8% of a ~20 ms call at 580 W above idle, where the next
    step costs the caller only latency (an edge polled before the work, or after it at exit)
    or ~0.1 s of idle. Every edge of a window and of an idle span is found so; the Measurement
    takes the sharpest step.
    """
    end_s = clock.now() + timeout_s
    reads = aligned_edge(board, clock, timeout_s)
    while len(reads.steps) and not sharp(reads) and clock.now() < end_s:
        reads = joined(reads, aligned_edge(board, clock, end_s - clock.now()))
    return reads


@dataclass(frozen=True)
class AlignedSpan:
    """A span measured between two counter steps, plus the sample buffer over it.

    Attributes:
        start, end: The reads at each edge (each ends with the first changed read).
        samples: The power-sample buffer over the span, merged from all reads.
        busy_pct: GPU utilisation NVML reported at its end, percent (nan: not read). Only idle
            spans read it (:func:`nvmeter.meter.baseline.measure_quiescent`).

    """

    start: CounterSeries
    end: CounterSeries
    samples: tuple[PowerSample, ...]
    busy_pct: float = math.nan

    @property
    def aligned(self) -> bool:
        """True if both edges saw a counter step."""
        return len(self.start.steps) >= 1 and len(self.end.steps) >= 1

    @property
    def t_a_s(self) -> float:
        """Start edge: the sharpest step of the start reads (or its first read), s."""
        step = self.start.edge_step()
        return step[0] if step else self.start.t0_s[0]

    @property
    def t_b_s(self) -> float:
        """End edge: the sharpest step of the end reads (or its last read), s."""
        step = self.end.edge_step()
        return step[0] if step else self.end.t1_s[-1]

    @property
    def duration_s(self) -> float:
        """Time between the edges, s."""
        return self.t_b_s - self.t_a_s

    @property
    def energy_j(self) -> float:
        """Counter energy between the edges, J."""
        a, b = self.start.edge_step(), self.end.edge_step()
        e_a = a[1] if a else self.start.energy_mj[0]
        e_b = b[1] if b else self.end.energy_mj[-1]
        return (e_b - e_a) / 1e3

    @property
    def power_w(self) -> float:
        """Counter power between the edges, W."""
        return self.energy_j / self.duration_s

    @property
    def edge_uncertainty_s(self) -> float:
        """Sum of both edges' half-widths: how far the span's length may be off, s.

        An edge without a step counts its longest read, though its value may be a counter period
        old: a window refuses an idle of such spans (:func:`nvmeter.meter.baseline.unstepped`).
        """
        a, b = self.start.edge_step(), self.end.edge_step()
        return float(
            (a[2] if a else self.start.read_cost_s.max()) + (b[2] if b else self.end.read_cost_s.max())
        )

    @property
    def polled_s(self) -> float:
        """Time the end edge's reads polled inside the span, s."""
        return max(0.0, min(self.end.t1_s[-1], self.t_b_s) - self.end.t0_s[0])

    @property
    def polled_inside_s(self) -> float:
        """Time both edges' reads polled inside the span, s.

        The start edge polls on past a blurred step (:func:`sharp_edge`) and the span may begin
        at the first, sharper one: those reads fall inside it.
        """
        return self.polled_s + max(
            0.0, min(self.start.t1_s[-1], self.t_b_s) - max(self.t_a_s, self.start.t0_s[0])
        )

    def polling_bias_w(self, artefact_w: float | None = None) -> float:
        """Bound on the power the edge polling itself adds to the span's mean, W.

        Args:
            artefact_w: The board's polling artefact (its profile's ``polling_artefact_w``), W,
                over every read inside the span. None: :data:`POLLING_ARTEFACT_W` over the end
                edge's reads alone: the idle of every record made before error model 11 was
                bounded so, score records of those models recompute theirs so, and the bench does.
        """
        if artefact_w is None:
            return POLLING_ARTEFACT_W * self.polled_s / self.duration_s
        return artefact_w * self.polled_inside_s / self.duration_s

    @property
    def samples_energy_j(self) -> float:
        """The sample buffer's energy over the same span, J (nan if it does not cover it)."""
        try:
            return integrate_samples_j(self.samples, self.t_a_s, self.t_b_s)
        except ValueError:
            return float("nan")

    @property
    def samples_power_w(self) -> float:
        """The sample buffer's mean power over the span, W."""
        return self.samples_energy_j / self.duration_s

    def derived(self) -> dict:
        """The span's figures, for JSON and tables."""
        return {
            "aligned": self.aligned,
            "duration_s": self.duration_s,
            "energy_j": self.energy_j,
            "power_w": self.power_w,
            "samples_power_w": self.samples_power_w,
            "edge_uncertainty_s": self.edge_uncertainty_s,
        }

    def to_dict(self) -> dict:
        """Raw JSON form."""
        out = {
            "start": self.start.to_dict(),
            "end": self.end.to_dict(),
            "samples": samples_to_dict(self.samples),
        }
        # optional: spans that did not read it (and records before it) have no such key
        return {**out, "busy_pct": self.busy_pct} if math.isfinite(self.busy_pct) else out

    @classmethod
    def from_dict(cls, data: dict) -> AlignedSpan:
        """Inverse of :meth:`to_dict`."""
        busy = data.get("busy_pct")
        return cls(
            CounterSeries.from_dict(data["start"]),
            CounterSeries.from_dict(data["end"]),
            samples_from_dict(data["samples"]),
            math.nan if busy is None else float(busy),
        )


def measure_span(
    board: Board, clock: Clock, duration_s: float, timeout_s: float = EDGE_TIMEOUT_S
) -> AlignedSpan:
    """Measure ``duration_s`` (at least) between two counter steps.

    Between the edges only the sample buffer is read, every ``SAMPLE_EVERY_S``. ``timeout_s``:
    the longest wait for a step at each edge (the board profile's ``edge_timeout_s``), s.
    """
    reads = [board.power_samples()]
    start = sharp_edge(board, clock, timeout_s)
    end_s = start.t1_s[-1] + duration_s
    while clock.now() < end_s:
        clock.sleep_until(min(clock.now() + SAMPLE_EVERY_S, end_s))
        reads.append(board.power_samples())
    end = sharp_edge(board, clock, timeout_s)
    # the sample covering the end edge lands up to one spacing later
    clock.sleep(0.05)
    reads.append(board.power_samples())
    return AlignedSpan(start, end, merge_samples(*reads))
