"""`CallStream`: the work's calls, each timed, and how long they have run without a gap.

A warm trial must follow at least ``lead_s`` of the same calls with no gap over
``max_gap_s`` between one call's end and the next one's start (issue 10: 2 s, 10 ms).
The stream knows where the current unbroken run began, so the runner adds calls only
when a gap (a window's exit that took long, a save, a pause) broke it. A call that took
``max_gap_s`` longer than the recent calls' median breaks it too: each call synchronises, so
the extra time was spent before its work reached the GPU or after it finished, and the board
idled (results/enclose/call5-9b41547-enclose.json.gz: a 129 ms call among 40 ms ones, after which
a power-capped board's limiter swung for ~2 s).
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable

# A gap between calls longer than this breaks a run of calls (issue 10).
MAX_GAP_S = 0.010
# Calls before a warm trial or a reference, without a gap (issue 10).
LEAD_S = 2.0
# Recent calls whose median is a call's usual length, and how many are needed before it counts.
RECENT_CALLS = 64
MIN_RECENT = 5


class CallStream:
    """Calls ``fn`` on demand, timing each on ``clock``.

    Args:
        fn: One call (does its work and synchronises).
        clock: The board's clock (virtual on the simulated board).
        max_gap_s: Longest gap that keeps a run of calls unbroken, s.

    Attributes:
        collect: While not None, each call's ms is appended here (the runner sets it per
            window); otherwise to ``free_ms`` (calls outside any window).
        free_ms: Calls outside windows, ms (the first ``free_cap`` of them).
        last_end_s: When the last call (of any kind) ended, s on ``clock`` (None before).
        long_calls: Calls that broke the run by their own length (over the median by ``max_gap_s``);
            the bench's injected stalls are not counted.
        outer: While not None, a window enclosing the trials (an enclosing reference): every
            call is declared to it (``outer.call()``) and its ms appended to ``outer_ms``.
    """

    def __init__(self, fn: Callable[[], None], clock, max_gap_s: float = MAX_GAP_S, free_cap: int = 3000):
        self.fn = fn
        self.clock = clock
        self.max_gap_s = max_gap_s
        self.collect: list[float] | None = None
        self.free_ms: list[float] = []
        self.free_cap = free_cap
        self.last_end_s: float | None = None
        self.run_start_s: float | None = None
        self.calls = 0
        self.outer = None
        self.outer_ms: list[float] = []
        self.long_calls = 0
        self._recent: dict[object, deque] = {}

    def call(self, fn: Callable[[], None] | None = None, stall_s: float = 0.0) -> None:
        """One call (``fn``, default the stream's own), timed.

        Args:
            fn: The call (synchronises).
            stall_s: A host wait inside the call after its work, s (the bench's injected stall):
                the board idles, so the run starts again after it; the call is left out of
                the recent calls' median and of ``long_calls``.
        """
        t0 = self.clock.now()
        (fn or self.fn)()
        if stall_s > 0:
            self.clock.sleep(stall_s)
        t1 = self.clock.now()
        if self.last_end_s is None or t0 - self.last_end_s > self.max_gap_s:
            self.run_start_s = t0
        if stall_s > 0:
            self.run_start_s = t1
        elif self._too_long(fn or self.fn, t1 - t0):
            self.run_start_s = t1  # the board idled inside this call: the run starts again after it
            self.long_calls += 1
        self.last_end_s = t1
        self.calls += 1
        ms = (t1 - t0) * 1e3
        if self.collect is not None:
            self.collect.append(ms)
        elif len(self.free_ms) < self.free_cap:
            self.free_ms.append(ms)
        if self.outer is not None:
            self.outer_ms.append(ms)
            self.outer.call()

    def _too_long(self, fn, call_s: float) -> bool:
        """True when this call took ``max_gap_s`` longer than the median of its kind's recent calls."""
        recent = self._recent.setdefault(fn, deque(maxlen=RECENT_CALLS))
        long = len(recent) >= MIN_RECENT and call_s - statistics.median(recent) > self.max_gap_s
        recent.append(call_s)
        return long

    def unbroken_s(self) -> float:
        """How long calls have run without a gap, as of now (0 if the gap since the last is too long)."""
        if self.last_end_s is None or self.clock.now() - self.last_end_s > self.max_gap_s:
            return 0.0
        return self.clock.now() - self.run_start_s

    def gap_s(self) -> float | None:
        """Time since the last call ended, s (None before the first call)."""
        return None if self.last_end_s is None else self.clock.now() - self.last_end_s

    def lead(self, seconds: float = LEAD_S) -> int:
        """Call until the unbroken run is ``seconds`` long; returns the calls made."""
        made = 0
        while self.unbroken_s() < seconds:
            self.call()
            made += 1
        return made

    def run_for(self, seconds: float) -> int:
        """Call back to back for ``seconds`` (at least once); returns the calls made."""
        end = self.clock.now() + seconds
        made = 0
        while True:
            self.call()
            made += 1
            if self.clock.now() >= end:
                return made
