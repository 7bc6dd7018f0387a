"""Does a raw series make physical sense? The check behind "a damaged record, not a figure".

Figures are recomputed from the raw series a file holds. A series that cannot have been
read from a board (an energy counter that goes backwards, a span that ends before it
starts, a product job that did no work, a negative or non-finite reading, a board state's
clock or temperature outside any board's) would give a figure that is simply wrong
(-19,274 W, inf J/TFLOP, a 50% run level), so it is refused as a damaged record instead.
Live measurements use the same check: the counter going backwards while a probe runs (a
driver reload) is a :class:`~nvmeter.errors.CounterFault`, not a table.

:func:`faults` walks a record's raw JSON form and recognises the series by their keys,
so every probe's record (and a probe file's idle span) is covered without each having
its own checker.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

from nvmeter.records import MAX_BOARD_W

# No window holds more calls: 10^12 calls of 1 us would be 11 days (and a per-call figure of so
# many would round to nothing). Here, in a module that loads without numpy: budgets read it too.
MAX_CALLS = 10**12

_SERIES = {"t0_s", "t1_s", "energy_mj"}
_SPAN = {"start", "end", "samples"}
_SAMPLES = {"t_s", "power_w"}
_JOB = {"t0_s", "t1_s", "matmuls", "n", "flops"}
_BURST = {"pre", "post", "tail"}
_STATE = {"t_s", "temperature_c", "clock_event_reasons"}
_CONTEXT = {"t_s", "pids", "others", "unattributed"}
# No board lists more compute processes than a pid can number (Linux's pid_max is at most 2^22).
MAX_PID = 2**22

# Past these a board state is a unit slip or an edit, not a reading: the committed windows' states
# under results/ read at most 1,980 MHz (SM), 3,201 MHz (memory) and 82 °C. Chosen margins, far
# outside; a temperature under absolute zero is no reading at all.
MAX_CLOCK_MHZ = 100_000.0
MAX_TEMPERATURE_C = 200.0
STATE_FIELDS = (
    ("sm_clock_mhz", 0.0, MAX_CLOCK_MHZ),
    ("memory_clock_mhz", 0.0, MAX_CLOCK_MHZ),
    ("temperature_c", -273.15, MAX_TEMPERATURE_C),
)


COUNTER_BACKWARDS = "the energy counter goes backwards"
COUNTER_JUMP = f"the energy counter jumps: it reads more power than any board draws ({MAX_BOARD_W:,.0f} W)"


def _numbers(values) -> bool:
    return isinstance(values, list) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values
    )


def _rising(values: list) -> bool:
    return all(b >= a for a, b in itertools.pairwise(values))


def series_fault(d: dict) -> str | None:
    """Why a counter series (``t0_s``, ``t1_s``, ``energy_mj``) cannot be real, or None."""
    t0, t1, e = d["t0_s"], d["t1_s"], d["energy_mj"]
    if not (_numbers(t0) and _numbers(t1) and _numbers(e)) or not len(t0) == len(t1) == len(e):
        return "a counter series with missing, unequal or non-finite values"
    if not e:
        return "a counter series without reads"
    # one poller reads one at a time: each read ends before the next begins (an adversarial review's
    # t1_s[0] = 1e308 was read as a window's)
    if not _rising([t for pair in zip(t0, t1, strict=True) for t in pair]):
        return "counter reads out of time order"
    if not _rising(e) or min(e) < 0:
        return COUNTER_BACKWARDS
    # a step holds the energy since the counter's previous update: allow a second for it
    if (e[-1] - e[0]) / 1e3 > MAX_BOARD_W * (t1[-1] - t0[0] + 1.0):
        return COUNTER_JUMP
    return None


def _span_fault(d: dict) -> str | None:
    from nvmeter.meter.series import went_back
    from nvmeter.meter.span import AlignedSpan

    for edge in ("start", "end"):
        if not isinstance(d[edge], dict) or not set(d[edge]) >= _SERIES:
            return f"its {edge} is not a counter series (t0_s, t1_s, energy_mj)"
    try:
        span = AlignedSpan.from_dict(d)
    except (KeyError, TypeError, ValueError) as exc:
        return f"a malformed span ({exc})"
    if not span.duration_s > 0:
        return "a span that ends before it starts"
    # by time: a window's start poll may still read when its end's begins (series.went_back)
    if went_back(span.start, span.end) or span.energy_j < 0:
        return COUNTER_BACKWARDS
    if span.power_w > MAX_BOARD_W:
        return COUNTER_JUMP
    return None


def samples_fault(d: dict) -> str | None:
    """Why a power-sample series (``t_s``, ``power_w``) cannot be real, or None."""
    t, p = d["t_s"], d["power_w"]
    if not (_numbers(t) and _numbers(p)) or len(t) != len(p):
        return "power samples with missing, unequal or non-finite values"
    if not _rising(t):
        return "power samples out of time order"
    if p and min(p) < 0:
        return "a negative power sample"
    if p and max(p) > MAX_BOARD_W:
        return f"a power sample above what any board draws ({MAX_BOARD_W:,.0f} W)"
    return None


def _job_fault(d: dict) -> str | None:
    fields = [d["t0_s"], d["t1_s"], d["matmuls"], d["n"], d["flops"]]
    if not _numbers(fields):
        return "a product job with missing or non-finite figures"
    if not (d["t1_s"] > d["t0_s"] and d["matmuls"] >= 1 and d["n"] >= 1 and d["flops"] > 0):
        return "a product job that did no products (no time, no matmuls or no flops)"
    return None


def _burst_fault(d: dict) -> str | None:
    reads = [d["pre"], d["post"], d["tail"]]
    if not all(isinstance(r, list) and len(r) == 3 and _numbers(r) for r in reads):
        return "a burst with malformed counter reads"
    if not _rising([t for r in reads for t in r[:2]]):  # one poller: each read ends before the next
        return "counter reads out of time order"
    if not _rising([r[2] for r in reads]):
        return COUNTER_BACKWARDS
    return None


def _instant_fault(d: dict) -> str | None:
    """A step response's power field readings (``instant_w``): finite, not negative."""
    p = d["instant_w"]
    if not _numbers(p):
        return "power readings with missing or non-finite values"
    return "a negative power reading" if p and min(p) < 0 else None


def _reads_fault(d: dict) -> str | None:
    """The read-cost probe's durations (``reads_s``, per signal): finite and not negative.

    A breaker's edit of every energy read to minus itself showed as a read cost of -3,110.9 us.
    """
    reads = d["reads_s"]
    if not isinstance(reads, dict) or not reads or not all(_numbers(v) and v for v in reads.values()):
        return "read durations with missing or non-finite values"
    return "a read that took negative time" if min(min(v) for v in reads.values()) < 0 else None


def _settle_fault(d: dict) -> str | None:
    """The idle probe's waits before its spans (``settle_s``, per level): finite and not negative."""
    waits = d["settle_s"]
    if not isinstance(waits, dict) or not _numbers(list(waits.values())):
        return "settle waits with missing or non-finite values"
    return "a settle wait of negative time" if any(v < 0 for v in waits.values()) else None


def _state_fault(d: dict) -> str | None:
    """A board state's clocks and temperature: hidden (null, nan) or within :data:`STATE_FIELDS`.

    A breaker set one probe state to 1e308 °C, and the run-level probe read a 50% level from it.
    """
    for name, lowest, highest in STATE_FIELDS:
        if name not in d:
            return f"a board state without its {name}"
        value = d[name]
        if value is None or (isinstance(value, float) and math.isnan(value)):  # the board hides it
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return f"a board state's {name} is {value!r}, not a number"
        if not lowest <= value <= highest:
            return f"a board state's {name} is {value:g}, outside any board's ({lowest:g} to {highest:g})"
    return None


def _context_fault(d: dict) -> str | None:
    """A read of a board's compute processes: whole pids, its others among them, a count not past them."""
    pids, others, unattributed = d["pids"], d["others"], d["unattributed"]
    if not _numbers([d["t_s"]]):
        return "a read of the compute processes without a time"
    listed = [] if pids is None else pids
    whole = [listed, others]
    if not all(isinstance(v, list) and all(_pid(p) for p in v) for v in whole):
        return "a read of the compute processes whose pids are not whole numbers"
    if len(set(listed)) != len(listed) or len(set(others)) != len(others):
        return "a read of the compute processes that lists a pid twice"
    if not set(others) <= set(listed) or not _pid(unattributed) or len(others) + unattributed > len(listed):
        return "a read of the compute processes that counts others it does not list"
    return None


def _pid(value) -> bool:
    return type(value) is int and 0 <= value <= MAX_PID


_CHECKS = ((_SERIES, series_fault), (_SPAN, _span_fault), (_SAMPLES, samples_fault))
_CHECKS += ((_JOB, _job_fault), (_BURST, _burst_fault), ({"instant_w"}, _instant_fault))
_CHECKS += ((_STATE, _state_fault), (_CONTEXT, _context_fault), ({"reads_s"}, _reads_fault))
_CHECKS += (({"settle_s", "spans"}, _settle_fault),)


def known_limit_w(device) -> float | None:
    """``device``'s enforced power limit, W, where NVML gave one that can be real (None: unknown).

    A board without power telemetry reports none (nan); a limit of 0 W or above any board's
    draw is a reading, not a limit.
    """
    limit = device.power_limit_w
    real = isinstance(limit, (int, float)) and not isinstance(limit, bool) and 0 < limit < MAX_BOARD_W
    return float(limit) if real else None


def refuse(raw, where: str = "") -> None:
    """Raise for the first raw series in ``raw`` that cannot be real (:func:`faults`).

    Raises:
        BadField: ``"<why> (at <where>)"`` (a RecordError once :func:`nvmeter.records.building`
            names the file).
    """
    from nvmeter.records import BadField

    for at, why in faults(raw, where):
        raise BadField(f"{why} (at {at})")


def faults(raw, where: str = "") -> Iterator[tuple[str, str]]:
    """Every raw series in ``raw`` (a record's JSON form) that cannot be real.

    Yields:
        (where it is, as a dotted path; why it cannot be real), in the record's order, the
        parts of a series before the series they make.

    """
    if isinstance(raw, dict):
        if raw.get("method") == "samples" and "model_version" in raw:
            # a window read from the samples alone has no counter edges: its empty start and end are
            # not a span, nor counter series without reads (such windows could not be read back)
            raw = {k: v for k, v in raw.items() if k not in ("start", "end")}
        # the parts before the whole: a span of a damaged series is named at the series
        # (window.start), not as "a malformed span" with Python's words (an adversarial review)
        for key, value in raw.items():
            yield from faults(value, f"{where}.{key}" if where else str(key))
        keys = set(raw)
        for shape, check in _CHECKS:
            if shape <= keys:
                try:
                    why = check(raw)
                except (KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
                    why = f"malformed ({type(exc).__name__}: {exc})"
                if why:
                    yield where or "(top)", why
    elif isinstance(raw, list):
        for i, value in enumerate(raw):
            yield from faults(value, f"{where}[{i}]")


# A board draws at most this share of its power limit over a window: the limiter lets power run
# only a few percent over the limit, and briefly (docs/facts.md: ~3% for ~0.5 s after a pause).
PLAUSIBLE_LIMIT_SHARE = 2.0


def plausible_w(device) -> float:
    """The most power a window on ``device`` (a BoardIdentity) can read, W.

    Twice its power limit, or MAX_BOARD_W where the limit is not known.
    """
    limit = known_limit_w(device)
    return MAX_BOARD_W if limit is None else PLAUSIBLE_LIMIT_SHARE * limit


# A window's samples and its counter read one sensor: between its steps they agree to a few
# percent (2,260 committed H200 and H100 windows: 0.959-1.045, results/enclose/samples-counter-ratio.txt,
# from bench/samples_counter_ratio.py; a probe's 19 ms burst, its samples +28% at most,
# results/probe-h200.json). A factor of two is no board's reading (an adversarial review scaled a
# record's samples by 3, and it read as a reliable figure): a margin chosen far outside that range.
SAMPLES_COUNTER_RATIO = 2.0
