"""Clocks: the real monotonic one and a virtual one for the simulated board.

Probes and windows take time only from a `Clock`, so a 20 s window on the
simulated board costs milliseconds in a test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

from nvmeter.arguments import finite

T = TypeVar("T")


class Clock(Protocol):
    """A monotonic clock in seconds that can also wait."""

    def now(self) -> float:
        """Seconds on a monotonic timebase (``time.perf_counter`` for the real clock)."""
        ...

    def sleep(self, duration_s: float) -> None:
        """Wait ``duration_s`` seconds (ValueError for a negative or non-finite one: :func:`duration`)."""
        ...

    def sleep_until(self, t_s: float) -> None:
        """Wait until ``now()`` reaches ``t_s`` (no-op for a time already past)."""
        ...


def duration(duration_s: float) -> float:
    """``duration_s`` if it is a wait a clock can make: a finite number of seconds, at least 0.

    A negative or nan wait is a caller's slip (a deadline passed as a duration, a unit lost),
    and an infinite one never ends: each used to be skipped in silence, or to move a virtual
    clock to infinity. Waits until a deadline go through ``sleep_until``.

    Raises:
        ValueError: naming the argument and its unit.
    """
    return finite(duration_s, "duration_s", kind="number of seconds", minimum=0)


def _moment(t_s: float) -> float:
    """``t_s`` if it is a finite time in seconds; ValueError naming it otherwise."""
    return finite(t_s, "t_s", kind="time in seconds")


class RealClock:
    """``time.perf_counter`` and ``time.sleep``.

    perf_counter is CLOCK_MONOTONIC on Linux, shared by every process, so a worker's
    timestamps and the parent's land on one timeline.
    """

    def now(self) -> float:
        """Seconds, CLOCK_MONOTONIC."""
        return time.perf_counter()

    def sleep(self, duration_s: float) -> None:
        """Sleep on the host.

        Raises:
            ValueError: a negative or non-finite ``duration_s`` (:func:`duration`).
        """
        if duration(duration_s) > 0:
            time.sleep(duration_s)

    def sleep_until(self, t_s: float) -> None:
        """Sleep until ``t_s`` (no-op for a time already past; ValueError for one not finite)."""
        self.sleep(max(0.0, _moment(t_s) - self.now()))


class VirtualClock:
    """Time that moves only when told to: by :meth:`sleep` or :meth:`advance`.

    Several simulated boards of one host share one VirtualClock, as real boards share
    the host's clock. :meth:`concurrently` runs functions side by side in virtual time
    (one thread each, deterministic), so N boards polled at once cost the time of one.

    Args:
        start_s: The clock's first reading, s.

    """

    def __init__(self, start_s: float = 1000.0) -> None:
        self._now_s = float(start_s)
        self._lanes: _Lanes | None = None

    def _lane(self) -> int | None:
        lanes = self._lanes
        return None if lanes is None else lanes.of_thread.get(threading.get_ident())

    def now(self) -> float:
        """Current virtual time, s (inside :meth:`concurrently`, the calling lane's)."""
        lane = self._lane()
        return self._now_s if lane is None else self._lanes.t_s[lane]

    def sleep(self, duration_s: float) -> None:
        """Advance virtual time by ``duration_s``.

        Raises:
            ValueError: a negative or non-finite ``duration_s`` (:func:`duration`).
        """
        if duration(duration_s) > 0:
            self._move(lambda t: t + duration_s)

    advance = sleep

    def advance_to(self, t_s: float) -> None:
        """Move to ``t_s`` if it lies ahead; time never runs backwards.

        Raises:
            ValueError: ``t_s`` is not a finite time (nan, inf).
        """
        t_s = _moment(t_s)
        self._move(lambda t: max(t, t_s))

    sleep_until = advance_to

    def _move(self, to: Callable[[float], float]) -> None:
        lane = self._lane()
        if lane is None:
            self._now_s = to(self._now_s)
        else:
            self._lanes.move(lane, to)

    def concurrently(self, fns: Sequence[Callable[[], T]]) -> list[T]:
        """Run ``fns`` side by side in virtual time; the clock then stands at the latest one's end.

        Each function runs in its own thread with its own virtual time, starting now.
        Exactly one runs at any moment: the one furthest behind (ties: the first
        listed), until it sleeps. This is a conservative discrete-event schedule, so
        every board sees its reads in time order and the result does not depend on how
        the host schedules threads.

        Returns:
            Each function's return value, in order.

        Raises:
            The first exception any function raised (after all have finished).
            RuntimeError: called from inside another :meth:`concurrently`.

        """
        if self._lanes is not None:
            raise RuntimeError("VirtualClock.concurrently does not nest")
        lanes = _Lanes(self._now_s, len(fns))
        self._lanes = lanes
        threads = [
            threading.Thread(target=lanes.run, args=(i, fn), name=f"nvmeter-lane-{i}", daemon=True)
            for i, fn in enumerate(fns)
        ]
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            self._lanes = None
            self._now_s = max([self._now_s, *lanes.t_s])
        return lanes.results()


class _Lanes:
    """The schedule behind :meth:`VirtualClock.concurrently`: one lane a thread."""

    def __init__(self, start_s: float, n: int) -> None:
        self.t_s = [start_s] * n
        self.of_thread: dict[int, int] = {}
        self._alive = [True] * n
        self._out: list = [None] * n
        self._errors: list[BaseException | None] = [None] * n
        self._cv = threading.Condition()

    def _turn(self) -> int | None:
        alive = [i for i, a in enumerate(self._alive) if a]
        return min(alive, key=lambda i: (self.t_s[i], i)) if alive else None

    def _wait_turn(self, lane: int) -> None:
        with self._cv:
            self._cv.notify_all()
            self._cv.wait_for(lambda: self._turn() == lane)

    def move(self, lane: int, to: Callable[[float], float]) -> None:
        self.t_s[lane] = to(self.t_s[lane])
        self._wait_turn(lane)

    def run(self, lane: int, fn: Callable[[], object]) -> None:
        self.of_thread[threading.get_ident()] = lane
        self._wait_turn(lane)
        try:
            self._out[lane] = fn()
        except BaseException as exc:  # handed to the caller by results()
            self._errors[lane] = exc
        finally:
            with self._cv:
                self._alive[lane] = False
                self._cv.notify_all()

    def results(self) -> list:
        for exc in self._errors:
            if exc is not None:
                raise exc
        return list(self._out)


def run_concurrently(clock: Clock, fns: Sequence[Callable[[], T]]) -> list[T]:
    """Run ``fns`` at once, one thread each: on the host's clock, or side by side in virtual time.

    Args:
        clock: The clock the functions take their time from (a :class:`VirtualClock`
            schedules them in virtual time; any other clock gets real threads).
        fns: Functions without arguments.

    Returns:
        Their return values, in order.

    Raises:
        The first exception any function raised, once all have finished.

    """
    if isinstance(clock, VirtualClock):
        return clock.concurrently(fns)
    if len(fns) <= 1:
        return [fn() for fn in fns]
    with ThreadPoolExecutor(max_workers=len(fns), thread_name_prefix="nvmeter-board") as pool:
        futures = [pool.submit(fn) for fn in fns]
        errors = [f.exception() for f in futures]
    for exc in errors:
        if exc is not None:
            raise exc
    return [f.result() for f in futures]
