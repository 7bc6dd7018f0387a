"""Raw telemetry series and the estimators every probe and window shares.

A :class:`CounterSeries` is what polling the energy counter gives: for each read,
its start and end on the clock and the value. The counter changes only at its
updates, so an update lies between the read that still shows the old value and the
first that shows the new one. NVML does not say when inside a read (~3 ms on the
H200, up to ~16 ms) the value is taken, so :attr:`CounterSeries.steps` brackets each
update from the start of the read before it to the end of the read that shows it,
and places it in the middle.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from nvmeter.boards.protocol import Board, PowerSample
from nvmeter.clock import Clock
from nvmeter.meter import polling


class Step(NamedTuple):
    """One counter update placed in time: where a window's edge or a sub-window's cut lies.

    Attributes:
        t_s: Estimated time of the update, s.
        energy_mj: Counter value right after it, mJ.
        half_width_s: Half the interval it is known to lie in, s.
    """

    t_s: float
    energy_mj: float
    half_width_s: float


@dataclass(frozen=True)
class Steps:
    """Counter updates found in a series.

    Attributes:
        t_s: Estimated time of each update, s, shape (k,).
        half_width_s: Half the interval each update is known to lie in, s, shape (k,).
        energy_mj: Counter value right after each update, mJ, shape (k,).

    """

    t_s: np.ndarray
    half_width_s: np.ndarray
    energy_mj: np.ndarray

    def __len__(self) -> int:
        return len(self.t_s)

    @property
    def gaps_s(self) -> np.ndarray:
        """Time between consecutive updates, s, shape (k-1,)."""
        return np.diff(self.t_s)

    @property
    def sizes_mj(self) -> np.ndarray:
        """Counter increase at each update after the first, mJ, shape (k-1,)."""
        return np.diff(self.energy_mj)

    def power_w(self) -> float:
        """Mean power between the first and last update, W (nan with under 2 updates)."""
        if len(self) < 2:
            return float("nan")
        return float((self.energy_mj[-1] - self.energy_mj[0]) / 1e3 / (self.t_s[-1] - self.t_s[0]))


@dataclass(frozen=True)
class CounterSeries:
    """Reads of the energy counter: start and end of each read, s, and its value, mJ.

    All three are tuples of equal length n, oldest first.
    """

    t0_s: tuple[float, ...]
    t1_s: tuple[float, ...]
    energy_mj: tuple[int, ...]

    def __post_init__(self) -> None:
        if not len(self.t0_s) == len(self.t1_s) == len(self.energy_mj):
            raise ValueError("counter series of unequal lengths")

    def __len__(self) -> int:
        return len(self.energy_mj)

    @cached_property
    def steps(self) -> Steps:
        """The counter updates seen (changes between consecutive reads)."""
        e = np.asarray(self.energy_mj, dtype=np.int64)
        idx = np.flatnonzero(np.diff(e) != 0) + 1
        earliest = np.asarray(self.t0_s)[idx - 1]  # the old value may be read at its read's start
        latest = np.asarray(self.t1_s)[idx]  # the new one at its read's end
        return Steps(
            t_s=(earliest + latest) / 2,
            half_width_s=(latest - earliest) / 2,
            energy_mj=e[idx].astype(float),
        )

    def edge_step(self, before_s: float = np.inf) -> Step | None:
        """The edge's step: the narrowest (:meth:`narrowest_step`).

        None when the series shows no step.
        """
        i = self.narrowest_step(before_s)
        if i < 0:
            return None
        steps = self.steps
        return Step(float(steps.t_s[i]), float(steps.energy_mj[i]), float(steps.half_width_s[i]))

    def narrowest_step(self, before_s: float = np.inf) -> int:
        """Index into :attr:`steps` of the step known most closely (the first among equals).

        Only steps placed before ``before_s`` count while there are any; -1 when the series
        shows no step. An edge poll may run past a step that a slow read blurred to find a
        sharper one (:func:`nvmeter.meter.span.sharp_edge`).
        """
        steps = self.steps
        if not len(steps):
            return -1
        early = np.flatnonzero(steps.t_s < before_s)
        candidates = early if len(early) else np.arange(len(steps))
        return int(candidates[np.argmin(steps.half_width_s[candidates])])

    @cached_property
    def longest_still_s(self) -> float:
        """The longest time the counter certainly did not update, s (0 with under two reads).

        From the end of a read to the start of a later one that shows the same value: an update
        between them would show. A lower bound on the counter's longest gap, which holds where
        the reads saw fewer than two updates and so no gap at all. On the H200s' 100 ms counter
        it read 93.9-96.1 ms against the gaps' 101-108 ms (every probe file in results/).
        """
        e = np.asarray(self.energy_mj, dtype=np.int64)
        if e.size < 2:
            return 0.0
        changes = np.flatnonzero(np.diff(e) != 0) + 1
        firsts = np.concatenate(([0], changes))  # each run of one value: its first read and its last
        lasts = np.concatenate((changes - 1, [e.size - 1]))
        still = np.asarray(self.t0_s)[lasts] - np.asarray(self.t1_s)[firsts]
        return max(0.0, float(still.max()))

    @property
    def read_cost_s(self) -> np.ndarray:
        """Duration of each read, s, shape (n,)."""
        return np.asarray(self.t1_s) - np.asarray(self.t0_s)

    @property
    def duration_s(self) -> float:
        """From the first read's start to the last read's end, s."""
        return self.t1_s[-1] - self.t0_s[0] if self.energy_mj else 0.0

    def naive_power_w(self) -> float:
        """(last value - first value) / (last read's end - first read's start), W."""
        if len(self) < 2:
            return float("nan")
        return (self.energy_mj[-1] - self.energy_mj[0]) / 1e3 / self.duration_s

    def is_monotonic(self) -> bool:
        """True if the counter never went backwards."""
        return bool(np.all(np.diff(np.asarray(self.energy_mj, dtype=np.int64)) >= 0))

    def to_dict(self) -> dict:
        """JSON form, at full precision so derived figures recompute exactly."""
        return {
            "t0_s": list(self.t0_s),
            "t1_s": list(self.t1_s),
            "energy_mj": list(self.energy_mj),
        }

    @classmethod
    def from_dict(cls, data: dict) -> CounterSeries:
        """Inverse of :meth:`to_dict`."""
        return cls(tuple(data["t0_s"]), tuple(data["t1_s"]), tuple(int(v) for v in data["energy_mj"]))


def poll_counter(
    board: Board, clock: Clock, duration_s: float, *, every_s: float = 0.0, until=None
) -> CounterSeries:
    """Read the energy counter for ``duration_s``: back to back, or every ``every_s``.

    Args:
        board: The board to read.
        clock: Its clock.
        duration_s: How long to poll, s.
        every_s: Spacing between read starts, s (0 = tight loop).
        until: Optional callable; polling also stops once it returns True.

    Returns:
        The series of reads.

    """
    t0s, t1s, values = [], [], []
    end = clock.now() + duration_s
    next_s = clock.now()
    while clock.now() < end and not (until and until()):
        if every_s:
            clock.sleep_until(next_s)
            next_s += every_s
        t0, t1, value = polling.read_energy(board, clock)
        values.append(value)
        t0s.append(t0)
        t1s.append(t1)
    return CounterSeries(tuple(t0s), tuple(t1s), tuple(values))


def samples_to_dict(samples: tuple[PowerSample, ...]) -> dict:
    """JSON form of a sample-buffer read."""
    return {"t_s": [s.t_s for s in samples], "power_w": [s.power_w for s in samples]}


def samples_from_dict(data: dict) -> tuple[PowerSample, ...]:
    """Inverse of :func:`samples_to_dict`."""
    return tuple(PowerSample(t, p) for t, p in zip(data["t_s"], data["power_w"], strict=True))


def merge_samples(*reads: tuple[PowerSample, ...]) -> tuple[PowerSample, ...]:
    """Union of several buffer reads, one entry per timestamp, oldest first."""
    by_t = {s.t_s: s for read in reads for s in read}
    return tuple(by_t[t] for t in sorted(by_t))


def integrate_samples_j(samples: tuple[PowerSample, ...], a_s: float, b_s: float) -> float:
    """Energy over [a_s, b_s] from the power-sample buffer, J.

    Each sample is taken as the mean power of the interval since the sample before
    it (the driver's ~20 ms averages), so the power is piecewise constant, held
    backwards from each timestamp.

    Raises:
        ValueError: the samples do not cover [a_s, b_s].

    """
    t = np.array([s.t_s for s in samples])
    p = np.array([s.power_w for s in samples])
    if len(t) < 2 or t[0] > a_s or t[-1] < b_s:
        raise ValueError("the power samples do not cover the interval")
    starts, ends = t[:-1], t[1:]
    overlap = np.clip(np.minimum(ends, b_s) - np.maximum(starts, a_s), 0.0, None)
    return float(np.sum(overlap * p[1:]))


def widest_gap_s(samples: tuple[PowerSample, ...], a_s: float, b_s: float) -> float:
    """The longest interval between consecutive samples that holds part of [a_s, b_s], s.

    inf where the samples do not cover [a_s, b_s]. A buffer that rolled over between two reads
    leaves such a gap, which no sample's mean stands for.
    """
    t = np.array([s.t_s for s in samples])
    if len(t) < 2 or t[0] > a_s or t[-1] < b_s:
        return math.inf
    starts, ends = t[:-1], t[1:]
    held = (ends > a_s) & (starts <= b_s)
    return float(np.max(ends[held] - starts[held], initial=0.0))


def summary(values) -> dict:
    """Median, min, max and count of a series (NaN-free)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {"n": 0, "median": None, "min": None, "max": None}
    return {"n": int(v.size), "median": float(np.median(v)), "min": float(v.min()), "max": float(v.max())}


def went_back(*series: CounterSeries) -> bool:
    """True when a read shows less than one that ended before it began, across ``series``.

    By time, not by series: a start edge polled in the work may still be reading when a short
    window's end poll begins (exit="return"), and its later reads are no fault (an adversarial
    review's 0.2 s window was flagged as a counter gone back). Reads that overlap in time are
    not compared: each returns the counter as of some instant inside it.
    """
    reads = sorted((t1, t0, v) for s in series for t0, t1, v in zip(s.t0_s, s.t1_s, s.energy_mj, strict=True))
    ends = [t1 for t1, _, _ in reads]
    most = list(itertools.accumulate((v for _, _, v in reads), max))  # the most read by each end
    for _, t0, value in reads:
        done = bisect.bisect_right(ends, t0)  # reads that ended by this one's start
        if done and most[done - 1] > value:
            return True
    return False
