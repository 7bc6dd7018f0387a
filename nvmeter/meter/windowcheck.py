"""Is a stored window one a board could have given? The checks of a window's raw fields in a record.

Every record that holds windows (run, pytest-energy, job, window) checks each with
:func:`check_dict` before :meth:`~nvmeter.meter.measurement.Measurement.from_dict`, which
cannot say where in the record the window was: the board, the counter series
(:mod:`nvmeter.meter.sanity`), the work's times, the board states and the power samples, each
where the window's own reads put it. The margins are chosen far outside what the committed
windows of results/ hold; each says so where it is set.
"""

from __future__ import annotations

from nvmeter import records
from nvmeter.meter import sanity


def check_dict(d, where: str) -> dict:
    """``d`` if it is a stored window (:meth:`Measurement.to_dict`) whose board and raw series can be real.

    Every record that holds windows checks each here before :meth:`Measurement.from_dict`,
    which cannot say where in the record the window was.

    Raises:
        BadField: the first field that is wrong, a dotted path under ``where``; KeyError for a missing one.
    """
    window = records.mapping(d, where)
    records.board(window["device"], f"{where}.device")
    records.counters(window, where)
    sanity.refuse(window, where)
    reads_s = _edge_reads(window, where)
    _check_work(window, where, reads_s)
    _check_states(window, where, reads_s)
    _check_sample_times(window, where, reads_s)
    records.items(window.get("inner", []), f"{where}.inner", records.mapping)
    return window


def _edge_reads(window: dict, where: str) -> list[float]:
    """The times of the start edge's first read and the end edge's last, s (fewer where an edge has none).

    An edge without reads is a window read from the samples alone, whose edges ``sanity`` leaves unchecked.

    Raises:
        BadField: an edge that is not a counter series' mapping, or times that are not numbers.
    """
    reads_s = []
    for edge, name in (("start", "t0_s"), ("end", "t1_s")):
        series = records.mapping(window[edge], f"{where}.{edge}")
        times = records.items(series[name], f"{where}.{edge}.{name}", records.number)
        reads_s += times[:1] if edge == "start" else times[-1:]
    return reads_s


def _check_sample_times(window: dict, where: str, reads_s: list[float]) -> None:
    """The window's power samples lie around its reads, on a clock that starts at 0 (BadField if not).

    A sample 1e30 s on, or a read at -1,002 s, was shown as a verified window (a breaker's trial).
    """
    for edge, name, at in (("start", "t0_s", 0), ("end", "t1_s", -1)):
        times = window[edge][name]
        if times and times[at] < 0:
            raise records.BadField(
                f"{where}.{edge}.{name}[{at}] is {times[at]:.6g} s, before the board's clock began"
            )
    times = window["samples"]["t_s"] if isinstance(window["samples"], dict) else []
    if len(reads_s) == 2 and times:
        around = (max(0.0, reads_s[0] - SAMPLE_MARGIN_S), reads_s[1] + SAMPLE_MARGIN_S)
        records.span_inside(f"{where}.samples", times[0], times[-1], around, "the window's reads")


# The samples a window keeps begin at most 2.52 s before its first read (the driver's buffer at
# entry) and end at most 0.045 s after its last, over the 4,965 committed windows of results/ with
# samples (2026-12-07). A minute either side is a chosen margin far outside that.
SAMPLE_MARGIN_S = 60.0
# A state is read by its edge's poller just before or after the edge's counter reads: in the 4,810
# committed windows of results/ with states, at most 5.3 ms before the first read and never after the
# last, always in time order. One second either side is a chosen margin far outside that.
STATE_MARGIN_S = 1.0


def _check_states(window: dict, where: str, reads_s: list[float]) -> None:
    """The window's board states are readings taken while it ran, in time order (BadField if not).

    ``reads_s``: the window's first and last counter reads (:func:`_edge_reads`).
    """
    states = records.items(window.get("states", []), f"{where}.states", records.mapping)
    if not states:
        return
    first_s, last_s = reads_s if len(reads_s) == 2 else (window["work_t0_s"], window["work_t1_s"])
    span = (first_s - STATE_MARGIN_S, last_s + STATE_MARGIN_S)
    times = []
    for i, state in enumerate(states):
        at = f"{where}.states[{i}]"
        times.append(records.number(state["t_s"], f"{at}.t_s"))  # clocks and temperature: sanity's
        # NVML's clock-event reasons are a 64-bit mask; -1 where the board keeps none
        records.integer(
            state["clock_event_reasons"], f"{at}.clock_event_reasons", at_least=-1, at_most=2**64 - 1
        )
    if times != sorted(times):
        raise records.BadField(f"{where}.states are out of time order")
    records.span_inside(f"{where}.states", times[0], times[-1], span, "the window's reads")


def _check_work(window: dict, where: str, reads_s: list[float]) -> None:
    """The work's times in order, within the window's reads, each call's end inside (BadField if not).

    In the 2,835 committed windows of results/ with call ends, every one lies so. Of the 5,034
    committed windows, the work starts at most 0.25 s after the start edge's first read or 1.2 ms
    before it, and ends at least 6 ms before the end edge's last read; ``STATE_MARGIN_S`` either
    side is a chosen margin far outside that. A work end edited 31 years past the end edge
    narrowed a window's bound 4.7 times (an adversarial review, 2026-12-06).
    """
    t0_s = records.number(window["work_t0_s"], f"{where}.work_t0_s")
    t1_s = records.number(window["work_t1_s"], f"{where}.work_t1_s")
    if t1_s < t0_s:
        raise records.BadField(f"{where}.work_t1_s is {t1_s:.6g} s, before work_t0_s ({t0_s:.6g} s)")
    if len(reads_s) == 2:
        around = (reads_s[0] - STATE_MARGIN_S, reads_s[1] + STATE_MARGIN_S)
        records.span_inside(f"{where}.work_t0_s..work_t1_s", t0_s, t1_s, around, "the window's reads")
    ends = records.items(window.get("call_ends_s", []), f"{where}.call_ends_s", records.number)
    if ends:
        if ends != sorted(ends):
            raise records.BadField(f"{where}.call_ends_s are out of time order")
        records.span_inside(f"{where}.call_ends_s", ends[0], ends[-1], (t0_s, t1_s), "the work")
