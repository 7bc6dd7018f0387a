"""Where in a call its power goes: the calls' power profile, folded over their period.

The sample buffer averages ~20 ms (results/probe-h200.json). Work whose power swings inside
a call (a call that runs on the GPU, then waits on the host) turns on and off within one
sample, so a cut at a window's start or end read pro rata from that sample splits a call's
energy by time, not by where the GPU worked: on the H200 records of results/enclose/, duty-
cycled 0.5 s windows whose start step fell early in a call read low, late in a call high
(docs/window-log.md). When the window knows when each call ended (``w.call()`` once per call) and
the calls are alike, each sample's interval covers known shares of each phase of a call, so
the mean power of each phase bin follows from all the window's samples by least squares, and
a cut becomes the profile's integral over the calls' phases it covers.

The profile is used only where it explains the samples better than steady power (an F-test,
``scipy.stats.f``); for steady work the pro-rata cut stands. Error model 7 reads the cuts so
(:mod:`nvmeter.meter.errormodel`); its bound adds the difference from the pro-rata cuts, so it
holds wherever model 6's did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nvmeter.boards.protocol import PowerSample

# Phase bins of a call. Chosen before looking at any record: 5 ms each for the bench's 30 ms
# duty-cycled call, fewer parameters than the ~25 samples of a 0.5 s window.
BINS = 6
# Ridge weight per sample and bin, pulling each bin toward the samples' mean power, so that
# work without a profile reads flat. 0.1 was picked from 0.01, 0.1 and 1 on call 2's records
# (results/enclose/call2-e9e826e-enclose.json.gz; a first version of this fit, without the F-test,
# read 12 of 20 duty-cycled windows within ±1% with each, largest error 1.77-2.19%) and checked
# on calls 3-7 (docs/window-log.md).
RIDGE = 0.1
# Calls whose durations vary more than this (standard deviation over mean) are not alike:
# no profile. The bench's calls in a 0.5 s window vary 0.1-1.5% (median per kind and board,
# results/enclose/call2-7), the most 7.3%; the launch-bound kind's 3.9%, up to 16%.
MAX_CALL_CV = 0.1
# The profile must explain the samples better than steady power at this significance.
SIGNIFICANCE = 0.01
# Sums of squares below this share of n mean² are rounding, not power (float64 rounds at ~1e-16;
# a sensor's noise of 0.3 W at 400 W is ~6e-7 of it).
ROUNDING_REL = 1e-12
# Marks kept per window: beyond this many calls (over 10 s of calls of the shortest period
# folded) a cut's share of the window is too small to matter.
MAX_MARKS = 1024


@dataclass(frozen=True)
class CallProfile:
    """The mean power of each phase of a call, and when the calls ran.

    Attributes:
        starts_s: Each marked call's start and, last, the last call's end, s on the board's
            clock (the first start is the work's start; each later one a call's mark).
        period_s: The median call, s; calls before and after the marked ones are taken to
            follow at this period.
        bin_w: Mean power of each of the ``BINS`` equal phase bins of a call, W.
    """

    starts_s: tuple[float, ...]
    period_s: float
    bin_w: tuple[float, ...]

    def energy_j(self, a_s: float, b_s: float) -> float:
        """The profile's energy over work time ``[a_s, b_s]``, J (negative when ``b_s < a_s``)."""
        if b_s < a_s:
            return -self.energy_j(b_s, a_s)
        return float(_phase_times_s([a_s], [b_s], self._calls(a_s, b_s))[0] @ np.asarray(self.bin_w))

    def _calls(self, a_s: float, b_s: float) -> np.ndarray:
        """Call boundaries covering ``[a_s, b_s]``: the marked ones, extended at the period."""
        first, last, p = self.starts_s[0], self.starts_s[-1], self.period_s
        before = first - p * np.arange(max(0, int(np.ceil((first - a_s) / p))), 0, -1)
        after = last + p * np.arange(1, max(0, int(np.ceil((b_s - last) / p))) + 1)
        return np.concatenate([before, self.starts_s, after])


def _phase_times_s(a_s, b_s, bounds_s: np.ndarray) -> np.ndarray:
    """Time spent in each phase bin over each ``[a_s[i], b_s[i]]``, s: shape (len(a_s), BINS).

    For calls between ``bounds_s`` (ascending); time outside them counts in no bin. The
    difference of the cumulative time in each bin at both ends, so one pass serves every
    interval (the stopping rule of ``measure()`` folds a window's samples between two calls).
    """
    return _cumulative_s(np.asarray(b_s, dtype=float), bounds_s) - _cumulative_s(
        np.asarray(a_s, dtype=float), bounds_s
    )


def _cumulative_s(t_s: np.ndarray, bounds_s: np.ndarray) -> np.ndarray:
    """Time spent in each phase bin from ``bounds_s[0]`` to each ``t_s``, s: shape (len(t_s), BINS)."""
    t_s = np.clip(t_s, bounds_s[0], bounds_s[-1])
    durations = np.diff(bounds_s)
    done_s = np.concatenate([[0.0], np.cumsum(durations)]) / BINS
    k = np.clip(np.searchsorted(bounds_s, t_s, side="right") - 1, 0, len(durations) - 1)
    bin_s = durations[k, None] / BINS
    into = t_s[:, None] - bounds_s[k, None] - bin_s * np.arange(BINS)
    return done_s[k, None] + np.clip(into, 0.0, bin_s)


def fit(
    samples: Sequence[PowerSample],
    call_ends_s: Sequence[float],
    work_t0_s: float,
    lag_s: float,
    min_period_s: float,
) -> CallProfile | None:
    """The calls' profile from the samples inside their run, or None where it cannot be trusted.

    Each sample is the mean power since the sample before it (the driver's averages), the
    board's power trailing the work by ``lag_s``.

    Args:
        samples: The window's power samples, oldest first.
        call_ends_s: When each call of the window ended, s (one mark a call, in order).
        work_t0_s: The first call's start, s.
        lag_s: How long the sensed power trails the work, s (the profile's ``power_lag_s``).
        min_period_s: Shorter calls are not folded: their power swings average out within
            one sample anyway (half the board's sample spacing).

    Returns:
        None when the calls are too short, too few or unlike each other, when too few samples
        lie inside them, or when the profile does not explain the samples better than steady
        power (F-test at ``SIGNIFICANCE``).
    """
    starts = np.concatenate([[work_t0_s], np.asarray(call_ends_s, dtype=float)])
    durations = np.diff(starts)
    if len(durations) < 2 or len(durations) > MAX_MARKS or not np.all(durations > 0):
        return None
    period_s = float(np.median(durations))
    if period_s < min_period_s or durations.std() > MAX_CALL_CV * durations.mean():
        return None
    rows, powers = _design(samples, starts, lag_s)
    if len(powers) < BINS + 3:
        return None
    bin_w = _ridge(rows, powers)
    if not _explains(rows, powers, bin_w):
        return None
    return CallProfile(tuple(starts), period_s, tuple(float(w) for w in bin_w))


def _design(
    samples: Sequence[PowerSample], starts: np.ndarray, lag_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """(share of each sample's interval in each phase bin, the sample's power) inside the calls."""
    t_s = np.array([s.t_s for s in samples], dtype=float) - lag_s
    power_w = np.array([s.power_w for s in samples], dtype=float)
    a_s, b_s = t_s[:-1], t_s[1:]
    keep = (starts[0] <= a_s) & (b_s <= starts[-1]) & (b_s - a_s > 1e-4)
    a_s, b_s = a_s[keep], b_s[keep]
    rows = _phase_times_s(a_s, b_s, starts) / (b_s - a_s)[:, None]
    return rows.reshape(-1, BINS), power_w[1:][keep]


def _ridge(rows: np.ndarray, powers: np.ndarray) -> np.ndarray:
    """Each bin's mean power, shrunk toward the samples' mean by ``RIDGE``."""
    lam = RIDGE * len(powers) / BINS
    lhs = rows.T @ rows + lam * np.eye(BINS)
    return np.linalg.solve(lhs, rows.T @ powers + lam * powers.mean())


def _explains(rows: np.ndarray, powers: np.ndarray, bin_w: np.ndarray) -> bool:
    """True when the profile's residuals are significantly below steady power's (an F-test)."""
    from scipy import stats

    flat = float(np.sum((powers - powers.mean()) ** 2))
    folded = float(np.sum((powers - rows @ bin_w) ** 2))
    n, extra = len(powers), BINS - 1
    # sums of squares at rounding level are zero (a sensor's noise, ~0.3 W, is far above it)
    rounding = ROUNDING_REL * n * float(powers.mean()) ** 2
    if flat <= rounding:
        return False
    if folded <= rounding:
        return True
    f_stat = ((flat - folded) / extra) / (folded / (n - BINS))
    return f_stat > 0 and float(stats.f.sf(f_stat, extra, n - BINS)) < SIGNIFICANCE
