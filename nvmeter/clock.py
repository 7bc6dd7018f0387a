"""Clocks: the real monotonic one and a virtual one for the simulated board.

Probes and windows take time only from a `Clock`, so a 20 s window on the
simulated board costs milliseconds in a test.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """A monotonic clock in seconds that can also wait."""

    def now(self) -> float:
        """Seconds on a monotonic timebase (``time.perf_counter`` for the real clock)."""
        ...

    def sleep(self, duration_s: float) -> None:
        """Wait ``duration_s`` seconds (no-op for a negative or zero duration)."""
        ...


class RealClock:
    """``time.perf_counter`` and ``time.sleep``.

    perf_counter is CLOCK_MONOTONIC on Linux, shared by every process, so a worker's
    timestamps and the parent's land on one timeline.
    """

    def now(self) -> float:
        """Seconds, CLOCK_MONOTONIC."""
        return time.perf_counter()

    def sleep(self, duration_s: float) -> None:
        """Sleep on the host."""
        if duration_s > 0:
            time.sleep(duration_s)


class VirtualClock:
    """Time that moves only when told to: by :meth:`sleep` or :meth:`advance`.

    Args:
        start_s: The clock's first reading, s.

    """

    def __init__(self, start_s: float = 1000.0) -> None:
        self._now_s = float(start_s)

    def now(self) -> float:
        """Current virtual time, s."""
        return self._now_s

    def sleep(self, duration_s: float) -> None:
        """Advance virtual time by ``duration_s`` (ignored if not positive)."""
        if duration_s > 0:
            self._now_s += duration_s

    advance = sleep

    def advance_to(self, t_s: float) -> None:
        """Move to ``t_s`` if it lies ahead; time never runs backwards."""
        self._now_s = max(self._now_s, t_s)
