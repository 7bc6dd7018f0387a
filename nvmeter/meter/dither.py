"""Where a block that starts on a quiet board falls in the energy counter's period.

A call shorter than the counter's period reads more or less of its energy depending on where
it falls in the period: on an H200, isolated ~20-40 ms calls started from 0 to 95 ms after a
counter step read from -18% to +15% against the same call repeated at random phases, FP32
8192² products and copies starting 80-100 ms after the step reading 3-11% low on each of four
boards (medians of 10 ms of starts)
(results/enclose/call23-054bb23-phase-*, call24-a1057f2-*, call25-6f7550e-*,
call26-7c23ffb-*). An entry on a quiet board returns right
after a step, so every undithered window of a short block starts at one phase, and the
board's response there is a bias of its own.

``EnergyWindow(dither=True)`` makes a quiet entry wait a share of the counter period after its
start step before the block runs. The shares follow the golden-ratio (Weyl) sequence, which
covers the period evenly for any number of windows: the mean of N dithered windows converges
on the phase average like 1/N, where random shares would give 1/sqrt(N). One sequence per
process, shared by every board and thread. Off by default, as measured: dithered and
undithered single calls against the same references on two boards (calls 25 and 26) had
medians -4.6/-8.3% and -3.3/-5.3% (FP32 8192²), -3.6/-4.0% and +1.1/-1.0% (copies), -2.1/-2.3%
(bf16), +2.9/+0.9% (duty-cycled), while the dithered ones' largest errors were larger in five
of those six cells (8.2-20.6% against 6.7-11.9%): the start right after a step is one of the
period's better places.
"""

from __future__ import annotations

import itertools
import math
import threading

# 1/phi: the irrational step whose multiples (mod 1) spread most evenly (Weyl's equidistribution)
GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


class PhaseDither:
    """The shares of a period to wait at successive quiet entries.

    Args:
        start: The sequence's first index (the share at index 0 is 0: no wait).
    """

    def __init__(self, start: int = 1) -> None:
        self._index = itertools.count(start)
        self._lock = threading.Lock()

    def next_share(self) -> float:
        """The next share, in [0, 1)."""
        with self._lock:
            k = next(self._index)
        return (k * GOLDEN) % 1.0

    def next_delay_s(self, period_s: float) -> float:
        """The next wait, s: a share of ``period_s`` (the profile's ``counter_period_s``)."""
        return self.next_share() * period_s


PROCESS_DITHER = PhaseDither()
