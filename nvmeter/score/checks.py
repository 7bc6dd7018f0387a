"""The checks that can void a run's energy figure; each reads only the run's raw readings."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from nvmeter.probes.check import Verdict
from nvmeter.score.readings import Energy
from nvmeter.workloads import judge


@dataclass(frozen=True)
class Check:
    """One check of a run's energy figure.

    Attributes:
        name: Short id, e.g. ``counter_monotonic``.
        status: ``"pass"``, ``"fail"`` (voids the energy figure) or ``"note"`` (said, not judged).
        detail: One line: what was seen.

    """

    name: str
    status: str
    detail: str

    def __repr__(self) -> str:
        return f"{self.status.upper()} {self.name}: {self.detail}"


def energy_checks(
    energy: Energy, difficulty: int, timed_ms: Sequence[float], ms_tolerance: float
) -> tuple[Check, ...]:
    """Every check of the energy figure, from the raw readings.

    Args:
        energy: The run's energy readings.
        difficulty: The level the run was judged at (the window's accuracy floor).
        timed_ms: The timed calls, ms each.
        ms_tolerance: Accepted relative margin around the timed calls' range.

    """
    return (
        _monotonic(energy),
        _reliable(energy),
        _idle_utilisation(energy),
        _idle_processes(energy),
        _reference_exact(energy),
        _reference_band(energy),
        _band_provisional(energy),
        _window_accuracy(energy, difficulty),
        _window_ms(energy, timed_ms, ms_tolerance),
    )


def _series_in_order(energy: Energy):
    t = energy.reference
    spans = [t.idle_before, t.load, t.idle_after, energy.idle[0].span]
    yield from (s for span in spans for s in (span.start, span.end))
    yield from (energy.control_window.start, energy.control_window.end, energy.idle[1].span.start)
    yield from (energy.idle[1].span.end, energy.method_window.start, energy.method_window.end)
    yield from (energy.idle[2].span.start, energy.idle[2].span.end)


def _monotonic(energy: Energy) -> Check:
    values = [v for s in _series_in_order(energy) for v in s.energy_mj]
    backwards = sum(b < a for a, b in itertools.pairwise(values))
    if backwards:
        return Check("counter_monotonic", "fail", f"the energy counter went backwards {backwards} time(s)")
    return Check("counter_monotonic", "pass", f"{len(values):,} counter reads, never backwards")


def _reliable(energy: Energy) -> Check:
    bad = [
        f"{name}: {m.reason}"
        for name, m in (("control", energy.control), ("method", energy.method))
        if not m.reliable
    ]
    if bad:
        return Check("windows_reliable", "fail", "; ".join(bad))
    return Check("windows_reliable", "pass", "both windows' edges sat on counter steps")


def _idle_utilisation(energy: Energy) -> Check:
    if any(i.gpu_pct is None for i in energy.idle):
        return Check(
            "idle_utilization_zero", "note", "unknown: the board does not report utilisation; not checked"
        )
    busy = [f"{i.gpu_pct:g}%" for i in energy.idle if i.gpu_pct != 0]
    if busy:
        return Check("idle_utilization_zero", "fail", f"GPU busy during frozen idle: {', '.join(busy)}")
    return Check("idle_utilization_zero", "pass", "0% GPU utilisation in all three idle spans")


def _idle_processes(energy: Energy) -> Check:
    if any(i.pids is None for i in energy.idle):
        return Check(
            "idle_no_other_process",
            "note",
            "unknown: the board or its driver does not list its processes; other processes not ruled out",
        )
    others = sorted({p for i in energy.idle for p in i.others})
    if others:
        return Check("idle_no_other_process", "fail", f"other processes on the GPU during idle: {others}")
    return Check("idle_no_other_process", "pass", "only the worker held a context during idle")


def _reference_exact(energy: Energy) -> Check:
    exact = energy.reference.exact
    if exact is True:
        return Check("reference_exact", "pass", "constant-operand products exact (true FP32)")
    err = energy.reference.run.max_abs_err
    return Check("reference_exact", "fail", f"products not exact (max |C-1| = {err}): not true FP32")


def _reference_band(energy: Energy) -> Check:
    result = energy.check_result
    t = energy.reference
    figures = f"{t.j_per_tflop:.2f} J/TFLOP at {t.tflops:.1f} TFLOP/s"
    if result.verdict is Verdict.NO_BAND:
        return Check("reference_in_band", "note", f"{figures}; no band known for {result.board.name}")
    if result.verdict is Verdict.FAIL:
        return Check("reference_in_band", "fail", f"{figures}: {'; '.join(result.reasons)}")
    return Check("reference_in_band", "pass", f"{figures} in {result.band.describe()}")


def _band_provisional(energy: Energy) -> Check:
    band = energy.check_result.band
    if band is None:
        return Check("band_provisional", "note", "no band: the reference is reported, not judged")
    if band.provisional:
        return Check("band_provisional", "note", f"the {band.family} band is provisional ({band.source})")
    return Check("band_provisional", "pass", f"the {band.family} band is established ({band.source})")


def _window_accuracy(energy: Energy, difficulty: int) -> Check:
    block = energy.method_block
    floor = judge.floor(block.rows, difficulty) if block.rows else 0
    pairs = list(zip(block.call_draws(), block.correct, strict=True))
    mnist = [c for (dataset, _), c in pairs if dataset == "mnist"]
    low = [c for c in mnist if c < floor]
    if not mnist:
        return Check("window_accuracy_floor", "fail", "no judged MNIST calls in the method window")
    worst = min(mnist)
    if low:
        return Check(
            "window_accuracy_floor",
            "fail",
            f"{len(low)} of {len(mnist)} window calls under the floor {floor:,} (worst {worst:,})",
        )
    return Check(
        "window_accuracy_floor", "pass", f"{len(mnist)} window calls at or above {floor:,} (worst {worst:,})"
    )


def _window_ms(energy: Energy, timed_ms: Sequence[float], tolerance: float) -> Check:
    method_ms = energy.method_block.wall_ms_per_call
    harness_ms = energy.control_block.wall_ms_per_call
    implied = method_ms - harness_ms
    low, high = (min(timed_ms), max(timed_ms)) if timed_ms else (math.nan, math.nan)
    detail = (
        f"window {method_ms:,.1f} ms a call less {harness_ms:,.2f} ms harness = {implied:,.1f} ms "
        f"vs timed {low:,.1f}-{high:,.1f} ms"
    )
    if low * (1 - tolerance) <= implied <= high * (1 + tolerance):
        return Check("window_ms_consistent", "pass", detail)
    return Check("window_ms_consistent", "fail", f"{detail}: beyond their range ±{tolerance:.0%}")
