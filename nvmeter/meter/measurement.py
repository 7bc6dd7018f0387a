"""`Measurement`: one window's raw readings, with every figure derived on demand.

The energy of an aligned window is the counter's between two of its steps, plus, where the
start step came inside the work (edges since error model 2), the sample buffer's integral
from the work's start to that step, less, where the end step came inside the caller's later
work (``end_in_work``), the sample buffer's integral from the work's end to that step. The
bound's telemetry figures come from the Measurement's
:class:`~nvmeter.boards.profile.BoardProfile`, its state constants from the
:mod:`~nvmeter.meter.errormodel` version it names; a Measurement made of consecutive
sub-windows (``measure()``) takes its state term from their own spread.

JSON history (``schema_version`` of the dict :meth:`Measurement.to_dict` writes):
    1: nvmeter 0.1 (no ``schema_version`` key): the readings, idle, control, problems, tail.
       Read as board profile ``H200_V1`` and error model 1.
    2: nvmeter 0.2: adds ``schema_version``, ``profile``, ``model_version``, ``inner`` (the
       sub-window edges) and ``states`` (the board's state at the edges).
    3: nvmeter 0.3: adds ``end_in_work`` (the end step was found inside the caller's later
       work, ``EnergyWindow(exit="return")``). Earlier versions read as False: their end
       edge was polled after the work, its tail counted in the window. An edge's reads may
       now hold several steps (an in-work poller goes past a blurred one); the edge is the
       sharpest, which for earlier records, one step an edge, is the only one.
    4: adds ``idle.busy_pct``: the GPU utilisation read at the end of the idle's quiescent
       spans, percent (null: not read, as for every idle given or from a probe file). Earlier
       versions read as null.
    5: adds ``call_ends_s``: when each call ended, where the caller marked every call with
       ``w.call()`` (at most :data:`~nvmeter.meter.fold.MAX_MARKS`), else empty. Error model
       7 folds the calls' power profile from them (:mod:`nvmeter.meter.fold`). Earlier
       versions read as empty. Its records written since 2026-12-04 add ``idle.local``: the idle
       was measured around this window (its own quiescent spans), which error model 8 does not
       move by the samples before the start; records without it read as false.
    6: ``profile.cap_spread``: the board's spread at the power cap by window length, which error
       model 10 widens a limited window's bound with (:mod:`nvmeter.boards.profile`). Earlier
       versions read as empty (not known): model 10 then takes the family's defaults.
    7: adds ``foreign_read_s``: the seconds this process read the board's energy counter inside
       the window for other meters (a window or idle span inside it), whose polling artefact
       the bound holds (:mod:`nvmeter.meter.polling`). Earlier versions read as 0, their bounds
       unchanged. Its records written since 2026-12-06 add ``profile.counter_coverage``, which
       error model 11 reads; records without it read as 1 (docs/formats.md, "score").
    8: adds ``contexts``: the board's compute processes at the window's entry and exit, this
       process's own told from the others (:mod:`nvmeter.meter.contexts`), and ``others_idle``:
       the caller said other processes' contexts did no work. Earlier versions read as not
       read (empty) and false: their windows say nothing of other processes, as they did. The
       exit's read is taken after the end step where the exit waits for it, at the work's end
       where the step is found in later work.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

from nvmeter import errors
from nvmeter.arguments import finite
from nvmeter.boards.profile import H200_V1, BoardProfile, default_profile
from nvmeter.boards.protocol import BoardIdentity, BoardState, PowerSample
from nvmeter.meter import errormodel, fold, reasons, sanity, spread
from nvmeter.meter.baseline import IdleBaseline
from nvmeter.meter.contexts import ContextRead
from nvmeter.meter.series import (
    CounterSeries,
    Step,
    integrate_samples_j,
    samples_from_dict,
    samples_to_dict,
    widest_gap_s,
)
from nvmeter.meter.span import AlignedSpan

SCHEMA_VERSION = 8
# An SM clock that moved more than this between the window's edges is reported: a power-capped
# H200 slid 1,545 -> 1,470 MHz (-5%) over 20 s (docs/facts.md); 2% is well inside that change.
CLOCK_MOVE_REL = 0.02


@dataclass(frozen=True)
class Measurement:
    """One window's raw readings, with every figure derived on demand.

    Attributes:
        device: The board.
        method: ``"aligned"``, ``"samples"`` or ``"plain"``.
        calls: Calls the caller declared.
        work_t0_s, work_t1_s: The work's start (entry returned) and end (exit's sync
            returned), s on the board's clock.
        start, end: Counter reads at each edge (one read for ``plain``; empty for
            ``samples``).
        samples: The sample buffer over the window, merged from every read.
        idle: The baseline subtracted.
        control_mj: Per-call round-trip cost subtracted, mJ (0 if none).
        control_err_mj: Its bound, mJ.
        max_rel_err: The caller's accepted relative bound (None: any).
        problems: Faults seen (counter backwards, no step at an edge, …).
        tail_s: The wait after the work that the window (and the samples' integral) covers, s.
        profile: The board's telemetry figures the bound uses (:mod:`nvmeter.boards.profile`).
        model_version: The error model that derives the bound (:mod:`nvmeter.meter.errormodel`).
        inner: Counter reads at the sub-window edges found inside the work (``measure()``).
        states: The board's state (clocks, temperature, clock-event reasons) at the edges.
        end_in_work: True when the end step was polled while the caller went on working
            (``exit="return"``): the window then ends at the work's end, not at that step.
        call_ends_s: When each call ended, s on the board's clock, where every call was
            marked with ``w.call()``; empty otherwise.
        foreign_read_s: Seconds this process spent reading the board's energy counter inside
            the window for other meters (a window inside this one, its idle span): their reads
            drew the polling artefact, which the bound holds (:mod:`nvmeter.meter.polling`).
        contexts: The board's compute processes at the entry and the exit
            (:mod:`nvmeter.meter.contexts`); empty where not read (records before version 8).
        others_idle: The caller said other processes' contexts on the board did no work inside
            the window (``EnergyWindow(others_idle=True)``): they are then a note, not a reason.
    """

    device: BoardIdentity
    method: str
    calls: int
    work_t0_s: float
    work_t1_s: float
    start: CounterSeries
    end: CounterSeries
    samples: tuple[PowerSample, ...]
    idle: IdleBaseline
    control_mj: float = 0.0
    control_err_mj: float = 0.0
    max_rel_err: float | None = None
    problems: tuple[str, ...] = field(default=())
    tail_s: float = H200_V1.tail_s
    profile: BoardProfile = H200_V1
    model_version: int = errormodel.CURRENT
    inner: tuple[CounterSeries, ...] = ()
    states: tuple[BoardState, ...] = ()
    end_in_work: bool = False
    call_ends_s: tuple[float, ...] = ()
    foreign_read_s: float = 0.0
    contexts: tuple[ContextRead, ...] = ()
    others_idle: bool = False

    @property
    def model(self) -> errormodel.ErrorModel:
        """The error model this Measurement's bound is derived with."""
        return errormodel.model(self.model_version)

    @property
    def idle_part_mj(self) -> float:
        """The idle's bound over the window, per call, mJ: the part of the bound no run length narrows.

        :attr:`idle_bound_w` over the window's time, which grows with the calls (0 without calls).
        """
        return self.idle_bound_w * self.window_s * 1e3 / self.calls if self.calls else 0.0

    @property
    def idle_bound_w(self) -> float:
        """How far the idle subtracted may be from the board's, W: ``idle.err_w`` + :attr:`idle_stretch_w`."""
        return self.idle.err_w + self.idle_stretch_w

    @property
    def idle_stretch_w(self) -> float:
        """The offset of the board's level before the window that the bound holds, W (error models 12, 14).

        Model 12: the quiet stretch's, the idle moved by it or not (:attr:`drift_ambiguous`), so
        the bound holds both readings. Model 14: a steady level beyond that stretch's band
        (:attr:`lead_level_gap_w`).
        """
        return max(self._quiet_stretch_w, self.lead_level_gap_w)

    @property
    def _quiet_stretch_w(self) -> float:
        """Model 12's part of :attr:`idle_stretch_w`: the quiet stretch's offset, W (0 before model 12)."""
        return abs(self.quiet_offset_w) if self.model.drift_ambiguous_k > 0 else 0.0

    @functools.cached_property
    def lead_level(self) -> LeadLevel | None:
        """The steady stretch of samples right before the window's first read (error model 14).

        Model 8's stretch (:func:`steady_stretch`), around the median of the samples in its last
        ``local_idle_min_s`` instead of the baseline's idle, a lone sample outside the band passed
        over: one noisy sample (2 W of noise) had ended it after 0.1 s (a review). None where
        none is left: no history, or a board still moving.
        """
        m, lead = self.model, self._lead_samples
        if not lead or not m.local_idle_min_s > 0:
            return None
        centre_w = statistics.median(s.power_w for s in lead if s.t_s >= lead[-1].t_s - m.local_idle_min_s)
        stretch = steady_stretch(lead, centre_w, m, lone_ok=True)
        if stretch is None:
            return None
        return LeadLevel(statistics.fmean(s.power_w for s in stretch), stretch[-1].t_s - stretch[0].t_s)

    @property
    def lead_level_gap_w(self) -> float:
        """How far a steady level lies from a given idle, where the bound holds it, W (model 14).

        The part of :attr:`lead_level_offset_w` the bound holds: a level over the idle is either
        the idle now or other work, which the samples cannot tell apart, so the bound holds both
        readings; one under it, by no more than the below-idle check's margin
        (:func:`below_idle_margin_w`), likewise.
        """
        offset_w = self.lead_level_offset_w
        return offset_w if offset_w > 0 else (0.0 if self.lead_level_under_w else -offset_w)

    @property
    def lead_level_under_w(self) -> float:
        """How far a steady level lies under a given idle past the below-idle margin, W (model 14; 0: not).

        A board cannot idle under its idle, so that idle is not this board's now: the window is not
        reliable. Widening the bound there instead hid the impossible-reading check: committed
        windows re-read with their idle moved 8 W up were refused under model 13 and read as
        reliable figures outside their bounds (bench/given_idle_shift.py,
        results/given-idle-shift.txt). Within the margin the bound holds it: an H100 idling at
        117.9 W, given the H200's 121.0 W, was refused for 3.1 W its bound held many times over
        (results/gpu-tests/h100ah-74aacbe.log).
        """
        under_w = -self.lead_level_offset_w
        return under_w if under_w > below_idle_margin_w(self.idle.samples_w) else 0.0

    @property
    def under_level_held_j(self) -> float:
        """The part of the bound that holds a level under a given idle (model 14), J.

        The impossible-reading check leaves it out: with it, warm windows re-read with their idle
        8 W too high, which model 13 refused, read as reliable figures outside their bounds
        (bench/given_idle_shift.py).
        """
        if self.lead_level_offset_w >= 0:
            return 0.0
        return max(0.0, self.lead_level_gap_w - self._quiet_stretch_w) * self.window_s

    @functools.cached_property
    def lead_level_offset_w(self) -> float:
        """A steady level before the window less a given idle, beyond the idle's bound, W (model 14; signed).

        A given idle was taken at another time, and a board's idle moves. Counted beyond the
        idle's own bound (the bound holds that already). A level under the idle always counts.
        One over it does not where it is the window's own calls run up to it (under their sampled
        power, in watts, by no more than the band or ``lead_level_same_rel`` of it), where it is
        not under their power at all, nor where it lies more than ``lead_level_idle_share`` of the
        idle above it (work: no idle moves so far). 0 for an idle measured around this window
        (``idle.local``), under models before 14, within the band where the idle has a sampled
        figure (model 8's), and under :data:`LEAD_LEVEL_MIN_W` for watts. Why, and the figures:
        errormodel's history 14.
        """
        m, level = self.model, self.lead_level
        if not m.lead_level or self.idle.local or level is None:
            return 0.0
        gap_w = level.mean_w - self.idle.samples_w
        # model 8 reads a level within its band, where the idle has a sampled figure (watts have none)
        band_w = m.local_idle_band_w if math.isfinite(self.idle.samples_power_w) else LEAD_LEVEL_MIN_W
        if abs(gap_w) <= band_w:
            return 0.0
        beyond_w = max(0.0, abs(gap_w) - self.idle.err_w)  # its own bound holds the rest already
        if gap_w < 0:
            return -beyond_w
        if gap_w > m.lead_level_idle_share * self.idle.samples_w:
            return 0.0
        # the calls' own samples, in watts: above a given idle their power carried its error (a review)
        own = self._work_samples_w
        if not own:  # no sample of the calls: nothing says the level is theirs
            return beyond_w
        own_w = statistics.fmean(own)
        same_w = max(m.local_idle_band_w, m.lead_level_same_rel * own_w)
        return beyond_w if level.mean_w < own_w - same_w else 0.0

    @functools.cached_property
    def _lead_samples(self) -> list[PowerSample]:
        """The samples of the model's ``local_idle_s`` up to the window's first read (models 8 and 14)."""
        t_first, look_s = self.first_read_s, self.model.local_idle_s
        return [s for s in self.samples if t_first - look_s <= s.t_s <= t_first]

    @functools.cached_property
    def _work_samples(self) -> list[PowerSample]:
        """The samples of the calls: those whose ~20 ms reaches into the work (a sample's time ends it)."""
        t1_s = self.work_t1_s + self.profile.sample_spacing_s
        return [s for s in self.samples if self.work_t0_s <= s.t_s <= t1_s]

    @property
    def _work_samples_w(self) -> list[float]:
        """:attr:`_work_samples`' powers, W."""
        return [s.power_w for s in self._work_samples]

    @property
    def idle_artefact_w(self) -> float | None:
        """The polling artefact an idle rebuilt for this record bounds its spans at, W.

        The profile's under error models with ``idle_polls_profiled``; None before (the H200's
        over the end edge's reads: :meth:`~nvmeter.meter.span.AlignedSpan.polling_bias_w`).
        """
        return self.profile.polling_artefact_w if self.model.idle_polls_profiled else None

    # -- edges -------------------------------------------------------------
    @functools.cached_property
    def _edges(self) -> tuple[float, float, float, float, float, float]:
        """(t_a, t_b, E_a mJ, E_b mJ, half-width a, half-width b) for counter methods.

        Cached (the Measurement is frozen): every figure and its bound asks for it, ~900
        times a window, and `nvmeter show` rebuilds hundreds of windows.
        """
        if self.method == "aligned" and self._span.aligned:
            # a poller may go past a blurred step: each edge is its sharpest step
            (t_a, e_a, hw_a), (t_b, e_b, hw_b) = self.start.edge_step(self.work_t1_s), self.end.edge_step()
            return (t_a, t_b, e_a, e_b, hw_a, hw_b)
        mid = lambda s, i: (s.t0_s[i] + s.t1_s[i]) / 2  # noqa: E731
        # plain edges, or aligned ones that saw no step: the value may be up to a period old
        return (
            mid(self.start, 0),
            mid(self.end, -1),
            self.start.energy_mj[0],
            self.end.energy_mj[-1],
            self.profile.counter_period_s,
            self.profile.counter_period_s,
        )

    @property
    def edge_steps_s(self) -> tuple[float, float]:
        """(start, end): the times of the counter readings the energy is taken between, s.

        Inside the work for in-work edges (:attr:`in_work`, :attr:`end_found_in_work`), the
        samples then cut from the work's start and end to them; else the edges themselves.
        """
        t_a, t_b, *_ = self._edges
        return (t_a, t_b)

    @functools.cached_property
    def _span(self) -> AlignedSpan:
        return AlignedSpan(self.start, self.end, self.samples)

    @functools.cached_property
    def samples_to_counter(self) -> float | None:
        """The samples' energy over the counter's span between the window's steps, over the counter's.

        None where there is nothing to compare: no step at an edge, a span under
        ``RATIO_MIN_SPAN_S``, or samples that do not cover it without a gap.
        """
        if not (len(self.start.energy_mj) and len(self.end.energy_mj) and self._span.aligned):
            return None
        a_s, b_s = self._span.t_a_s, self._span.t_b_s
        t = [s.t_s for s in self.samples]
        # the samples that cover the span: the last at or before its start to the first at or after
        # its end (each is held back over the gap before it, so a gap at an edge counts too)
        first = max((i for i, x in enumerate(t) if x <= a_s), default=None)
        last = min((i for i, x in enumerate(t) if x >= b_s), default=None)
        if first is None or last is None:
            return None
        gap_s = max((y - x for x, y in itertools.pairwise(t[first : last + 1])), default=math.inf)
        if b_s - a_s < RATIO_MIN_SPAN_S or gap_s > RATIO_MAX_GAP_SPACINGS * self.profile.sample_spacing_s:
            return None
        try:
            samples_j = integrate_samples_j(self.samples, a_s, b_s)
        except ValueError:
            return None
        counter_j = self._span.energy_j
        return samples_j / counter_j if counter_j > 0 and math.isfinite(samples_j) else None

    @property
    def counter_samples_j(self) -> float | None:
        """The samples' energy less the counter's between the window's steps, J.

        None where they are not compared, as for :attr:`samples_to_counter`.
        """
        ratio = self.samples_to_counter
        return None if ratio is None else (ratio - 1.0) * self._span.energy_j

    @property
    def counter_samples_share(self) -> float | None:
        """:attr:`counter_samples_j` over the energy above idle between the steps, the larger reading's.

        The larger: a counter that sensed none of work locked to its period reads ~0 above idle
        where the samples read all of it. None where they are not compared, or where neither
        reads :data:`COUNTER_CHECK_MIN_W` above idle.
        """
        gap_j = self.counter_samples_j
        if gap_j is None:
            return None
        idle_j = self.idle_w * self._span.duration_s
        above_j = max(self._span.energy_j - idle_j, self._span.energy_j + gap_j - idle_j)
        return gap_j / above_j if above_j >= COUNTER_CHECK_MIN_W * self._span.duration_s else None

    @property
    def _coverage_err_j(self) -> float:
        """On a counter that senses part of each period, how far the samples read from it, J (model 11)."""
        if not (self.model.counter_checked and self.profile.counter_coverage < 1):
            return 0.0
        gap_j = self.counter_samples_j
        return abs(gap_j) if gap_j is not None else 0.0

    def _coverage_reason(self) -> str | None:
        """Model 11: a counter the samples contradict, or one of partial coverage they cannot check.

        A counter of full coverage is held only to the model's ``full_counter_rel`` (from model 15):
        there a short burst's ~20 ms samples, not the counter, are what misread it (bin means by the
        burst's place in the period: samples 0.57-1.57 of the bursts' mean, counter 0.87-1.21, on an
        H200: results/enclose/call40-785c1db-h200-unpolled-10ms.txt).
        """
        if not self.model.counter_checked or self.method == "samples":
            return None
        full = self.profile.counter_coverage >= 1
        limit = self.model.full_counter_rel if full else COUNTER_SAMPLES_DISAGREE_REL
        if not limit:
            return None
        share = self.counter_samples_share
        if share is not None and abs(share) > limit:
            why = (
                f"{self.profile.source} takes its counter to sense all of each period, and no board that "
                "does read so far apart: it may sense only part (SC24: ~25 ms of ~100 ms on some A100s and "
                "H100s), and work locked to its period reads wherever that part falls; probe the board "
                "(nvmeter probe), or meter work not locked to the counter's period"
                if full
                else "the counter may sense only part of each period, or the telemetry is damaged"
            )
            return (
                f"the power samples and the counter disagree by {abs(share):.0%} of the energy above idle "
                f"between the window's steps (samples {share:+.0%}; H100s and H200s: within 7%): {why}"
            )
        if full:
            return None
        if self.counter_samples_j is None:
            return (
                f"this board's counter may sense only {self.profile.counter_coverage:.0%} of each period "
                f"({self.profile.source}) and the power samples do not cover the window to check it: "
                f"meter at least {RATIO_MIN_SPAN_S:g} s"
            )
        return None

    @property
    def in_work(self) -> bool:
        """True when the start step came after the work began (edges inside the work)."""
        return self.method == "aligned" and self._span.aligned and self._edges[0] > self.work_t0_s

    @property
    def window_t0_s(self) -> float:
        """Where the energy starts: the work's start for in-work edges, else the start edge, s."""
        if self.method == "samples":
            return self.work_t0_s - self.profile.sample_lead_s
        return self.work_t0_s if self.in_work else self._edges[0]

    @property
    def end_found_in_work(self) -> bool:
        """True when the window ends at the work's end, its end step found in later work."""
        return self.end_in_work and self.method == "aligned" and self._span.aligned

    @property
    def window_t1_s(self) -> float:
        """Where the energy ends: the work's end for an end found in later work, else the end edge, s."""
        if self.method == "samples":
            return self.work_t1_s + self.tail_s
        return self.work_t1_s if self.end_found_in_work else self._edges[1]

    @property
    def window_s(self) -> float:
        """Length of the window the energy covers, s."""
        return self.window_t1_s - self.window_t0_s

    def _cut_j(self, t_cut: float, t_edge: float, continuous: bool = False) -> float:
        """The sample buffer's energy from ``t_cut`` (the work's start or end) to a counter step, J.

        The sample interval that holds ``t_cut`` is split with the power of the sample before
        it where the power steps at the cut (what ran before it drew what that sample read),
        and pro rata where the board drew the work's power on both sides (``continuous``, model
        5: the sample's mean is then the best figure for any part of its interval). nan when
        the samples do not cover both.
        """
        before = [s for s in self.samples if s.t_s <= t_cut]
        after = [s for s in self.samples if s.t_s > t_cut]
        if not before or not after or self.samples[-1].t_s < t_edge:
            return math.nan
        prev, first = before[-1], after[0]
        if self._gapped(t_cut, t_edge):
            return math.nan
        if continuous:
            first_j = first.power_w * (first.t_s - t_cut)
        else:
            first_j = first.power_w * (first.t_s - prev.t_s) - prev.power_w * (t_cut - prev.t_s)
        if t_edge <= first.t_s:
            return first_j * (t_edge - t_cut) / (first.t_s - t_cut)
        return first_j + integrate_samples_j(self.samples, first.t_s, t_edge)

    def _gapped(self, a_s: float, b_s: float) -> bool:
        """True where the samples leave [a_s, b_s] uncovered, or cover it across a rolled-over gap."""
        return widest_gap_s(self.samples, a_s, b_s) > CUT_MAX_GAP_SPACINGS * self.profile.sample_spacing_s

    @property
    def head_j(self) -> float:
        """The sample buffer's energy from the work's start to an in-work start step, J (0: none).

        From idle, the share of the first interval before the start drew idle power; within
        a run of calls, the calls' (:meth:`_cut_j`).
        """
        return self._side_cut_j(before=True) if self.in_work else 0.0

    @property
    def tail_j(self) -> float:
        """The sample buffer's energy from the work's end to an end step found in later work, J (0: none).

        What the caller ran after the window (or the idle, if it ran nothing) is no part of it.
        """
        return self._side_cut_j(before=False) if self.end_found_in_work else 0.0

    def _side_cut_j(self, before: bool, continuous: bool | None = None) -> float:
        """The start's (``before``) or the end's cut integral, J.

        Split as :meth:`_busy_across` says unless ``continuous`` is given.
        """
        t_cut, t_edge = (self.work_t0_s, self._edges[0]) if before else (self.work_t1_s, self._edges[1])
        if continuous is None:
            continuous = self._busy_across(t_cut, before)
        return self._cut_j(t_cut, t_edge, continuous)

    def _busy_across(self, t_cut: float, before: bool) -> bool:
        """True (model 5) when the board drew the work's power on the far side of a cut too.

        The samples wholly outside the work within the model's ``lead_s`` of the cut (before
        the start, after the end) read at least ``cold_lead_share`` of the work's own sampled
        power above idle, the share that tells a warm lead-in from a cold one. From the
        samples alone: the work's energy depends on this choice.
        """
        if not self.model.continuous_cut:
            return False
        spacing, lead_s = self.profile.sample_spacing_s, self.model.lead_s
        t0, t1 = self.work_t0_s, self.work_t1_s
        inside = [s.power_w for s in self.samples if t0 <= s.t_s - spacing and s.t_s <= t1]
        if before:
            outside = [s.power_w for s in self.samples if t_cut - lead_s <= s.t_s <= t_cut]
        else:
            outside = [s.power_w for s in self.samples if 0 <= s.t_s - spacing - t_cut <= lead_s - spacing]
        if not inside or not outside:
            return False
        idle_w = self.idle.samples_w
        work_w = statistics.fmean(inside) - idle_w
        return work_w > 0 and statistics.fmean(outside) - idle_w >= self.model.cold_lead_share * work_w

    @property
    def energy_j(self) -> float:
        """Gross energy over the window, J (nan if the counter went backwards)."""
        if self.method == "samples":
            a_s, b_s = self.window_t0_s, self.work_t1_s + self.tail_s
            # a 6 s call with no mark read a rolled-over buffer's gap as one sample's power: -65% and
            # ±26%, reliable (an expert review, 2026-12-07), as the aligned cuts had before model 11
            if self._gapped(a_s, b_s):
                return math.nan
            return integrate_samples_j(self.samples, a_s, b_s)
        _, _, e_a, e_b, _, _ = self._edges
        if e_b < e_a:
            return math.nan
        head_j, tail_j = self._cuts_j
        return (e_b - e_a) / 1e3 + head_j - tail_j

    @property
    def _pro_rata_cuts_j(self) -> tuple[float, float]:
        """(start's cut less the earlier calls' lag, end's cut less the window's own), J: models 1-6."""
        return (self.head_j - self.lag_j, self.tail_j - self.trail_j)

    @property
    def _cuts_j(self) -> tuple[float, float]:
        """The energy to add for the start's cut and to take off for the end's, J.

        From the calls' folded profile where model 7 has one (:attr:`call_profile`), each
        side inside the work the profile's energy from the work's edge to the step, less the
        power's lag; else the samples' cuts (:attr:`head_j`, :attr:`tail_j`) with their lag.
        """
        pro_rata = self._pro_rata_cuts_j
        profile = self.call_profile
        if profile is None:
            return pro_rata
        t_a, t_b = self.edge_steps_s
        lag_s = self.profile.power_lag_s
        head = profile.energy_j(self.work_t0_s, t_a - lag_s) if self.in_work else pro_rata[0]
        tail = profile.energy_j(self.work_t1_s, t_b - lag_s) if self.end_found_in_work else pro_rata[1]
        return (head, tail)

    @functools.cached_property
    def call_profile(self) -> fold.CallProfile | None:
        """The calls' power profile that model 7 cuts with (None: the samples' pro-rata cuts).

        Only for aligned windows with a cut inside the work whose every call was marked
        (:attr:`call_ends_s`), under a model with ``folded_cut``; :func:`nvmeter.meter.fold.fit`
        says when the profile itself is refused.
        """
        if not (self.model.folded_cut and self.method == "aligned" and len(self.call_ends_s) == self.calls):
            return None
        if not (self.in_work or self.end_found_in_work):
            return None
        return fold.fit(
            self.samples,
            self.call_ends_s,
            self.work_t0_s,
            self.profile.power_lag_s,
            self.profile.sample_spacing_s / 2,
        )

    def _above_before_w(self, t_s: float) -> tuple[float, float]:
        """(lowest, highest) power above idle of the samples in the two spacings up to ``t_s``, W.

        (0, 0) when there are none. Work that pauses between calls (a host wait) shows as a
        spread: the 20 ms samples cannot say whether the board was busy right up to ``t_s``.
        """
        spacing = self.profile.sample_spacing_s
        near = [s.power_w - self.idle.samples_w for s in self.samples if t_s - 2 * spacing <= s.t_s <= t_s]
        if not near:
            return (0.0, 0.0)
        return (max(0.0, min(near)), max(0.0, max(near)))

    @property
    def lead_above_w(self) -> tuple[float, float]:
        """(lowest, highest) power above idle of the samples in the two spacings before the work, W."""
        return self._above_before_w(self.work_t0_s)

    @property
    def trail_above_w(self) -> tuple[float, float]:
        """(lowest, highest) power above idle of the samples in the two spacings before the work's end, W."""
        return self._above_before_w(self.work_t1_s)

    @property
    def lag_j(self) -> float:
        """The previous calls' power still in the window's first ``power_lag_s``, J (0: edge at idle).

        A window that starts inside a run of calls holds the trailing power of the call
        before it, and its own calls' trailing power falls in its tail: left in, a 0.5 s
        window of continuous work would read high by the lag's share of it (7.5 ms of 500 ms,
        1.5%, with the Hopper profile). Taken off at the lowest
        lead-in sample's power; the bound holds the rest (``_head_err_j``).
        """
        return self.lead_above_w[0] * self.profile.power_lag_s if self.in_work else 0.0

    @property
    def trail_j(self) -> float:
        """The window's own calls' power after the work's end, J (0 unless the end was found in later work).

        A window cut at the work's end leaves out its last calls' trailing power, which
        ``power_lag_s`` later is still being drawn; put back at the lowest sample's power
        before the end. Inside a run of calls it cancels :attr:`lag_j`; the bound holds the
        rest (:meth:`_cut_err_j`).
        """
        return self.trail_above_w[0] * self.profile.power_lag_s if self.end_found_in_work else 0.0

    @property
    def idle_w(self) -> float:
        """The idle power subtracted, W (the sample buffer's own figure for ``samples``).

        The baseline's, moved by :attr:`idle_drift_w` (model 8; 0 where it finds no quiet stretch).
        """
        base_w = self.idle.samples_w if self.method == "samples" else self.idle.power_w
        return base_w + self.idle_drift_w

    @functools.cached_property
    def idle_drift_w(self) -> float:
        """How far the board's idle has moved since its baseline, W (model 8; else 0).

        An H200's quiescent idle moved by up to 2.4 W within ~15 s, which a ~20 ms call's
        window of ~0.2 s turns into up to 5% (results/enclose/call27-25b7f91-tail-enclose.json.gz:
        the samples before 40 single copies read 1.4-2.0 W under the quiescent span at the
        kind's start). The sample buffer follows the counter's idle to -0.05..+0.14 W (the
        quiescent spans of calls 26-27, read both ways), so the samples of a quiet stretch
        right before the window's first read, less the baseline's own sampled idle, say how
        far the idle moved. The
        stretch: the samples (each the mean of the ~20 ms before its timestamp) that end
        before the first read, back to the last one outside ``local_idle_band_w`` of the
        baseline, at most ``local_idle_s``, less its first ``local_idle_settle_s``; 0 when
        what is left is shorter than ``local_idle_min_s`` (work running up to the window, a
        history too short), the baseline has no sampled idle, or it was measured around this
        window (``idle.local``: its own spans, which that stretch is part of). The figures of
        :data:`~nvmeter.meter.errormodel.MODELS` 8 and where they come from: errormodel's history.
        From model 12, 0 where the stretch may be the work itself (:attr:`drift_ambiguous`).
        """
        return 0.0 if self.drift_ambiguous else self.quiet_offset_w

    @functools.cached_property
    def drift_ambiguous(self) -> bool:
        """True when the quiet stretch before the window may be its own work (error model 12).

        Calls drawing less than model 8's band above idle, run up to the window, read as a
        quiet stretch: no sample of the work (those whose ~20 ms reaches into it) rose
        ``drift_ambiguous_k`` times the band above the baseline's sampled idle, so the samples
        cannot tell an idle that moved from the calls. The idle is then not moved. Either way
        the stretch's offset over the window joins the bound (:attr:`reading_err_j`): lighter
        calls may run up to heavier ones, which then clear the test (an adversarial review).
        """
        m = self.model
        if not (m.drift_ambiguous_k > 0 and self.quiet_offset_w != 0.0):
            return False
        powers_w = self._work_samples_w
        rise_w = m.drift_ambiguous_k * m.local_idle_band_w
        return not powers_w or max(powers_w) - self.idle.samples_power_w < rise_w

    @functools.cached_property
    def quiet_offset_w(self) -> float:
        """The quiet stretch's mean before the first read less the baseline's sampled idle, W (model 8)."""
        m = self.model
        if self.idle.local or not (m.local_idle_s > 0 and math.isfinite(self.idle.samples_power_w)):
            return 0.0
        base_w = self.idle.samples_power_w
        stretch = steady_stretch(self._lead_samples, base_w, m, lone_ok=False)
        return 0.0 if stretch is None else statistics.fmean(x.power_w for x in stretch) - base_w

    @functools.cached_property
    def quiet_below_idle(self) -> tuple[float, float, float] | None:
        """The longest stretch of the window's samples in which the board drew less than the idle subtracted.

        A board cannot idle below its idle: samples that stay under it for a while say the idle
        subtracted is not this board's now (a context's idle for a process that holds none, an
        idle taken on a hotter board), and every figure above it is short by the difference.
        A stretch: consecutive samples (the one that reaches the first read, the window's and those
        after it) that each lie more than ``idle.err_w`` plus :data:`QUIET_BELOW_MARGIN_W` or
        :data:`QUIET_BELOW_MARGIN_REL` of it (the larger) under the idle as the sample buffer reads
        it (moved by :attr:`idle_drift_w`); it counts when it spans :data:`QUIET_BELOW_MIN_S` or
        more, or :data:`QUIET_DEEP_MIN_S` with a mean under the idle by :data:`QUIET_DEEP_REL` of
        it or more. Inside the window too, not only right before it: windows back to back with
        0.17 s between them, a wrong idle given, read 21% low, marked reliable, when only the
        stretch ending at the first read was looked at (a new user's trial, 2026-12-06).

        Returns:
            (its first sample's time, s on the board's clock; its length, s; its mean power, W),
            or None.
        """
        below_w = self.quiet_below_w
        # from the stretch that reaches the first read on: earlier lead-in samples may predate a
        # context opened since (a board at 78.7 W without one, then metered at its context idle)
        lead = sum(1 for x in self.samples if x.t_s <= self.first_read_s)
        reaching = sum(
            1 for _ in itertools.takewhile(lambda x: x.power_w < below_w, reversed(self.samples[:lead]))
        )
        deep_w = (1 - QUIET_DEEP_REL) * self.sampled_idle_w
        counted = [
            f
            for f in stretches_under(self.samples[lead - reaching :], below_w)
            if f[1] >= QUIET_BELOW_MIN_S or (f[1] >= QUIET_DEEP_MIN_S and f[2] <= deep_w)
        ]
        return max(counted, key=lambda f: f[1], default=None)

    @property
    def sampled_idle_w(self) -> float:
        """The idle as the sample buffer reads it, moved by :attr:`idle_drift_w`, W."""
        return self.idle.samples_w + self.idle_drift_w

    @property
    def quiet_below_w(self) -> float:
        """The power a sample must be under to count towards :attr:`quiet_below_idle`, W.

        The sampled idle less its bound and the larger of :data:`QUIET_BELOW_MARGIN_W` and
        :data:`QUIET_BELOW_MARGIN_REL` of it.
        """
        idle_w = self.sampled_idle_w
        return idle_w - self.idle.err_w - below_idle_margin_w(idle_w)

    @functools.cached_property
    def after_work_w(self) -> tuple[float, float] | None:
        """(the samples' mean power above idle past the tail, the work's own), W; None where not read.

        For a window whose energy runs past the work's end (not one ended inside later work,
        :attr:`end_found_in_work`): the samples that end past the profile's ``tail_s`` after
        the work's end (a sample's time ends its interval, which may begin up to a spacing
        inside the tail: the committed windows show the power there fallen as well,
        results/after-work.txt), up to the last the exit read (it reads the buffer a sample and
        a half past its end step, before the caller runs anything more), against the work's
        own: the larger of the mean of the samples inside the work and of those in its last
        :data:`BUSY_AFTER_LAST_S` (what lingers after the tail follows the last calls). None
        where either has none, and where the window's own processes held no CUDA context at its
        end (``nvmeter run``'s, whose command has exited: an H200 stayed ~50 W over its
        no-context idle for 0.5 s after its command's exit, results/everyday/run-reference-h200.log).
        :data:`BUSY_AFTER_REL` says when the first is the board running on.
        """
        if self.end_found_in_work or (self.contexts and self.contexts[-1].own_n == 0):
            return None  # (records before version 8 read no contexts: the check stands)
        t0, t1, spacing = self.work_t0_s, self.work_t1_s, self.profile.sample_spacing_s
        idle_w = self.sampled_idle_w
        inside = [x for x in self.samples if t0 + spacing <= x.t_s <= t1]
        if not inside and self.model.tail_checked:
            # model 15: work shorter than a spacing, read by the samples that cover it; without them a
            # single 20 ms call whose power fell over 0.2 s went unchecked and read -70%, reliable
            # (a breaker, 2026-12-07)
            inside = self._work_samples
        after = [x.power_w for x in self.samples if x.t_s >= t1 + self.profile.tail_s]
        if not inside or not after:
            return None
        last = [x.power_w for x in inside if x.t_s >= t1 - BUSY_AFTER_LAST_S]
        work_w = max(statistics.fmean(x.power_w for x in inside), statistics.fmean(last or [0.0]))
        return statistics.fmean(after) - idle_w, work_w - idle_w

    @property
    def ran_on_after_work(self) -> bool:
        """True where :attr:`after_work_w` says the board ran on past the work's end.

        Its samples past the tail sit above idle, less the profile's polling artefact (the end
        edge polls the counter there: Ampere's ~30 W, docs/facts.md, would read as running on),
        by more than the larger of :data:`BUSY_AFTER_MIN_W` and :data:`BUSY_AFTER_REL` of the work's.
        """
        if (after := self.after_work_w) is None:
            return False
        after_w, work_w = after
        return after_w - self.profile.polling_artefact_w > max(BUSY_AFTER_MIN_W, BUSY_AFTER_REL * work_w)

    @property
    def power_w(self) -> float:
        """Mean gross power over the window, W."""
        return self.energy_j / self.window_s

    @property
    def above_idle_j(self) -> float:
        """Energy above idle, J."""
        return self.energy_j - self.idle_w * self.window_s

    @property
    def per_call_mj(self) -> float:
        """Energy above idle per call, less the control, mJ."""
        return self.above_idle_j * 1e3 / self.calls - self.control_mj if self.calls else math.nan

    @property
    def work_s(self) -> float:
        """The work's own duration (entry returned to exit's sync returned), s."""
        return self.work_t1_s - self.work_t0_s

    # -- the board's state -------------------------------------------------------
    @property
    def work_w(self) -> float:
        """The work's mean power above idle, W (0 when unknown)."""
        work_w = self.above_idle_j / self.work_s if self.work_s > 0 else 0.0
        return work_w if math.isfinite(work_w) else 0.0

    @property
    def first_read_s(self) -> float:
        """The window's first read of the board, s: its start edge's (the work's start for in-work edges)."""
        return self.work_t0_s if self.in_work or not len(self.start) else self.start.t0_s[0]

    @property
    def lead_w(self) -> float:
        """Mean sampled power over the model's ``lead_s`` before the window's first read, W (nan: none)."""
        t = self.first_read_s
        lead = [s.power_w for s in self.samples if t - self.model.lead_s <= s.t_s < t]
        return statistics.fmean(lead) if lead else math.nan

    @functools.cached_property
    def cold(self) -> bool:
        """True when the window started from idle (a lead-in under the model's share of the work's power).

        Unknown lead-ins (no samples) count as cold: the bound then errs wide.
        """
        if not self.work_w > 0:
            return False
        return not self.lead_w - self.idle.samples_w >= self.model.cold_lead_share * self.work_w

    @property
    def gap_s(self) -> float:
        """How long before the work's start the board last drew half the work's power above idle, s.

        From the sample buffer (~20 ms resolution); the whole history before the start
        when no sample that high is in it; nan when there is no sample before the start.
        """
        before = [s for s in self.samples if s.t_s < self.work_t0_s]
        if not before:
            return math.nan
        busy = self._last_busy_s()
        return self.work_t0_s - (busy if busy is not None else before[0].t_s)

    def _last_busy_s(self) -> float | None:
        """When a sample before the work last read half the work's power above idle, s (None: none did)."""
        busy = self._busy_before(-math.inf)
        return busy[-1] if busy else None

    def _busy_before(self, since_s: float) -> list[float]:
        """Times of the samples from ``since_s`` to the work's start at half its power above idle, s."""
        # the work's power derives from every reading: computed once, not once a sample
        idle_w, half_w = self.idle.samples_w, 0.5 * self.work_w
        return [
            s.t_s for s in self.samples if since_s <= s.t_s < self.work_t0_s and s.power_w - idle_w >= half_w
        ]

    @property
    def since_pause_s(self) -> float | None:
        """How long before the work's start the last pause in the model's look-back ended, s.

        A pause: two samples above half the work's power above idle further apart than the
        model's ``pause_gap_s`` plus the board's sample spacing, or samples under that power
        leading the look-back before the first above it. None: no pause seen, or a model
        (1-5) that does not look back (``pause_lookback_s`` 0).
        """
        t, lookback_s = self.work_t0_s, self.model.pause_lookback_s
        if not (lookback_s > 0 and self.work_w > 0):
            return None
        seen = [s for s in self.samples if t - lookback_s <= s.t_s < t]
        busy = self._busy_before(t - lookback_s)
        if not busy:
            return None  # nothing busy in the look-back: gap_s and cold say what the start was
        marks = busy if seen[0].t_s == busy[0] else [seen[0].t_s, *busy]
        longest_s = self.model.pause_gap_s + self.profile.sample_spacing_s
        ends = [b for a, b in itertools.pairwise(marks) if b - a > longest_s]
        return t - ends[-1] if ends else None

    @functools.cached_property
    def transient(self) -> bool:
        """True when the window started cold or after a pause (its calls may cost more or less)."""
        if self.model_version < 2:
            return self.cold
        return self.cold or self.gap_s > self.model.pause_gap_s or self.since_pause_s is not None

    @property
    def limited(self) -> bool:
        """True when the board reported a limiting clock-event reason at an edge.

        ``LIMITING_REASONS``: the software power cap, HW slowdown, SW or HW thermal, the power brake.
        """
        return any(s.limited for s in self.states)

    @property
    def state_changes(self) -> tuple[str, ...]:
        """What changed in the board's state between the first and last edge (notes, not faults)."""
        if len(self.states) < 2:
            return ()
        first, last = self.states[0], self.states[-1]
        notes = []
        if first.limited != last.limited or (first.limited and first.reasons != last.reasons):
            notes.append(
                f"clock-event reasons changed: {'+'.join(first.reasons) or 'none'} -> "
                f"{'+'.join(last.reasons) or 'none'}"
            )
        if first.sm_clock_mhz > 0 and abs(last.sm_clock_mhz / first.sm_clock_mhz - 1) > CLOCK_MOVE_REL:
            notes.append(f"SM clock moved {first.sm_clock_mhz:.0f} -> {last.sm_clock_mhz:.0f} MHz")
        if abs(last.temperature_c - first.temperature_c) >= 2:
            notes.append(f"temperature moved {first.temperature_c:.0f} -> {last.temperature_c:.0f} °C")
        return tuple(notes)

    # -- sub-windows ---------------------------------------------------------------
    @property
    def subwindow_mj(self) -> tuple[float, ...]:
        """Per-call energy above idle (less the control) of each sub-window between in-work steps, mJ."""
        return spread.subwindow_mj(self)

    @property
    def drift(self) -> spread.Drift | None:
        """A linear trend of the sub-windows' per-call energy over time (None under four sub-windows)."""
        return spread.drift(self)

    # -- the bound ---------------------------------------------------------------
    @property
    def err_j(self) -> float:
        """Bound on ``above_idle_j`` as the calls' cost, J: reading plus board state."""
        return self.reading_err_j + self.state_err_j

    @property
    def state_err_j(self) -> float:
        """Bound on how far this window's calls may cost from the same calls in steady state, J.

        The sub-windows' Student-t interval (their spread beyond what their edges explain)
        plus the model's floor where there are enough of them, else the model's
        ``state_rel``, plus ``limited_rel`` on a limited board; and for a transient window
        ``transient_fixed_s`` of the work's power above idle plus ``transient_rel`` of the
        energy above idle of its first ``transient_s``.
        """
        above, m = abs(self.above_idle_j), self.model
        if not math.isfinite(above):
            return math.nan
        halfwidth_w = self.subwindow_halfwidth_w
        if halfwidth_w is not None:
            term = self._subwindows_state_j(halfwidth_w, above)
        else:
            term = self._unmarked_state_rel(self.work_s) * above
        if self.transient and self.work_s > 0:
            fixed_j = m.transient_fixed_s * abs(self.work_w)  # a bound part: never negative
            if m.fixed_capped:  # the burst after a pause is no more than the work's own energy
                fixed_j = min(fixed_j, above)
            term += fixed_j + m.transient_rel * above * min(1.0, m.transient_s / self.work_s)
        return term

    def _unmarked_state_rel(self, length_s: float, run_level: bool = True) -> float:
        """The state part's share for a window of ``length_s`` without sub-windows (as :attr:`state_rel`).

        ``run_level=False``: without the board's run level (a piece of a run whose floor holds it).
        """
        m = self.model
        return self._state_rel_at(length_s, run_level) + (m.limited_rel if self.limited else 0.0)

    def _subwindows_state_j(self, halfwidth_w: float, above_j: float) -> float:
        """The state part, J, of a window whose sub-windows' interval is ``halfwidth_w`` (W of the mean).

        The interval over the work plus the model's floor (models 2-11). From model 12 (history
        12): sub-windows under ``subwindow_min_periods`` of the counter's periods join the next,
        and the interval is the larger of theirs and the joined ones' (too few joined ones: the
        part is at least the whole window's without sub-windows); and the work outside the
        sub-windows takes the larger of the interval and a window's own state part at that
        piece's length.
        """
        m = self.model
        floor_j = self.floor_rel * above_j
        if not m.uncovered_state:
            return halfwidth_w * self.work_s + floor_j
        steps = self.subwindow_steps
        joined = spread.join_short(steps, m.subwindow_min_periods * self.profile.counter_period_s)
        joined_w = halfwidth_w if joined is steps else spread.state_halfwidth_w(joined, self.idle_w, m)
        halfwidth_w = max(halfwidth_w, joined_w or 0.0)
        pieces_s = [max(0.0, steps[0].t_s - self.work_t0_s), max(0.0, self.work_t1_s - steps[-1].t_s)]
        above_w = above_j / self.work_s
        term = halfwidth_w * (self.work_s - sum(pieces_s)) + floor_j
        # the floor holds the run level over the whole run: the pieces take it no second time
        for u in (u for u in pieces_s if u > 0):
            term += u * max(halfwidth_w, self._unmarked_state_rel(u, run_level=False) * above_w)
        if joined_w is None:  # too few sub-windows of a length that shows a spread
            term = max(term, self._unmarked_state_rel(self.work_s) * above_j)
        return term

    @functools.cached_property
    def subwindow_steps(self) -> list[Step]:
        """The in-work counter steps that cut the sub-windows, in time order (:func:`spread.boundaries`)."""
        return spread.boundaries(self)

    @functools.cached_property
    def subwindow_halfwidth_w(self) -> float | None:
        """The sub-windows' Student-t half-width, W of the run's mean power (None: too few of them)."""
        if not self.calls or not self.work_s > 0:
            return None
        return spread.state_halfwidth_w(self.subwindow_steps, self.idle_w, self.model)

    @functools.cached_property
    def state_rel(self) -> float:
        """The state part's share of the energy above idle for a window without sub-windows.

        The model's ``state_rel``; from error model 10, for a limited window at least
        ``cap_spread_k`` times the board's spread at the cap at the window's length
        (:meth:`~nvmeter.boards.profile.BoardProfile.cap_spread_rel`, the family's defaults
        where the profile has none).
        """
        return self._state_rel_at(self.work_s)

    def _state_rel_at(self, length_s: float, run_level: bool = True) -> float:
        """:attr:`state_rel` for a window of ``length_s`` on this board in this state.

        ``run_level=False``: without the board's run level (error model 13).
        """
        m = self.model
        least = max(m.state_rel, self.run_level_rel if run_level else 0.0)
        if not (m.cap_spread_k > 0 and self.limited and length_s > 0):
            return least
        spread_rel = self.profile.cap_spread_rel(length_s)
        if spread_rel is None:  # a profile from before the cap spread
            spread_rel = default_profile(self.device.name).cap_spread_rel(length_s)
        return max(least, m.cap_spread_k * spread_rel)

    @functools.cached_property
    def run_level_rel(self) -> float:
        """How far this run's level may sit from the calls' steady one, share of the energy above idle.

        The profile's run level (the family's where it has none) from error model 13; 0 before.
        """
        if not self.model.run_level:
            return 0.0
        return self.profile.run_level_or(self.device.name)

    @property
    def floor_rel(self) -> float:
        """The state part's floor for a window of sub-windows (:func:`errormodel.floor_rel`)."""
        return errormodel.floor_rel(self.model, self.run_level_rel)

    @property
    def reading_err_j(self) -> float:
        """Bound on reading this window's energy above idle, J: each term a worst case, summed."""
        # other meters' counter reads inside the window drew the polling artefact too
        idle_term = self.idle_bound_w * self.window_s + self.profile.polling_artefact_w * self.foreign_read_s
        if self.method == "samples":
            return idle_term + self._sampling_err_j() + self.profile.samples_vs_counter * abs(self.energy_j)
        t_a, t_b, _, _, hw_a, hw_b = self._edges
        # edges: the energy between steps is exact; the time is known to hw each side. An
        # edge polled at idle misplaces idle power; one inside the work, the work's power
        # (plain edges: the work's power for up to a period)
        edge_w = self.idle_w if self.method == "aligned" and not self.problems else self.power_w
        start_w = self._power_near(t_a) if self.in_work else self._outside_w(t_a, edge_w, before=True)
        end_w = (
            self._power_near(t_b) if self.end_found_in_work else self._outside_w(t_b, edge_w, before=False)
        )
        # the end edge's polling (and an in-work start edge's) draws a little power inside the
        # window; an end found in later work is polled after the window
        polled_s = self._span.polled_s if len(self.end) and not self.end_found_in_work else 0.0
        if self.in_work:
            polled_s += max(0.0, min(self.start.t1_s[-1], t_b) - self.work_t0_s)
        if self.model.inner_polls_bounded:  # measure()'s marks poll inside the window as well
            polled_s += sum(
                max(0.0, min(c.t1_s[-1], t_b) - max(c.t0_s[0], t_a)) for c in self.inner if len(c)
            )
        polling = self.profile.polling_artefact_w * polled_s
        edges_j = start_w * hw_a + end_w * hw_b
        cuts_j = self._lag_err_j()
        if self.in_work:
            cuts_j += self._cut_err_j(self.work_t0_s, self.head_j) + self._split_err_j(before=True)
        if self.end_found_in_work:
            cuts_j += self._cut_err_j(self.work_t1_s, self.tail_j) + self._split_err_j(before=False)
        return idle_term + edges_j + polling + cuts_j + self._fold_shift_j + self._coverage_err_j + 2e-3

    @property
    def _fold_shift_j(self) -> float:
        """How far the folded cuts moved the energy from the pro-rata ones, J (model 7), widened.

        Added to the bound, so that the bound around the folded figure holds the pro-rata
        figure's whole bound, and so holds wherever model 6's held. Widened by the state
        part's shares of the energy above idle, which move with the figure.
        """
        if self.call_profile is None:
            return 0.0
        (head, tail), (head_0, tail_0) = self._cuts_j, self._pro_rata_cuts_j
        shift_j = (head - tail) - (head_0 - tail_0)
        m = self.model
        # both shares hold the run level from model 13: a widening of a small term, counted twice
        shares = self.state_rel + self.floor_rel + m.limited_rel + m.transient_rel
        return abs(shift_j) * (1 + shares) if math.isfinite(shift_j) else 0.0

    def _outside_w(self, t_s: float, edge_w: float, before: bool) -> float:
        """The power an edge outside the work misplaces, W: ``edge_w`` or (model 4) what the samples read.

        Only samples whose ~20 ms interval lies wholly outside the work count (``before`` it for
        a start edge, after it for an end edge): the work's own power is not the edge's.
        """
        if not self.model.measured_edge_power:
            return edge_w
        spacing = self.profile.sample_spacing_s
        outside = (
            (lambda s: s.t_s <= self.work_t0_s) if before else (lambda s: s.t_s - spacing >= self.work_t1_s)
        )
        near = [s.power_w for s in self.samples if abs(s.t_s - t_s) <= 1.5 * spacing and outside(s)]
        return max([edge_w, *near])

    def _power_near(self, t_s: float) -> float:
        """The highest sampled power within a sample spacing of ``t_s``, W."""
        near = [s.power_w for s in self.samples if abs(s.t_s - t_s) <= 1.5 * self.profile.sample_spacing_s]
        return max(near) if near else self.power_w

    def _split_err_j(self, before: bool) -> float:
        """How far the split of a cut's sample interval may be off, J: the other split's reading.

        Pro rata is right for power steady across the interval, the split with the sample
        before for a step at the cut; a burst inside the interval can sit anywhere between,
        and the samples' spread near the cut sees it only averaged into one sample. Model 5
        adds the gap between the two readings, whichever it took (models 1-4: nothing).
        """
        if not self.model.continuous_cut:
            return 0.0
        gap_j = self._side_cut_j(before, True) - self._side_cut_j(before, False)
        return abs(gap_j) if math.isfinite(gap_j) else 0.0

    def _cut_err_j(self, t_cut: float, cut_j: float) -> float:
        """A cut's integral (head or tail): the samples' calibration, and where the power changes at the cut.

        Args:
            t_cut: The work's start or end, s.
            cut_j: The integral from the cut to its counter step, J.
        """
        spacing = self.profile.sample_spacing_s
        near = [s.power_w for s in self.samples if abs(s.t_s - t_cut) <= 1.5 * spacing]
        jump_w = (max(near) - min(near)) if near else self.power_w
        # where the power changes inside the sample interval that holds the cut: the work
        # starts (ends) at the entry's return (the exit's sync), known to the samples' time
        # mapping, not to a spacing; a quarter spacing is the allowance (checked by
        # bench/window_accuracy.py on cold windows)
        return self.profile.samples_vs_counter * abs(cut_j) + 0.25 * spacing * jump_w

    def _lag_err_j(self) -> float:
        """The bound on :attr:`lag_j` less :attr:`trail_j`, J.

        Each is taken at its lowest sample, so each adds its samples' spread over the lag. The
        lag itself is the board's (its sensors trail the work), one figure at both cuts: known
        to ``power_lag_err_s``, it moves the two terms together, so a window cut inside a run
        of calls at both ends errs by the difference of their powers, not the sum.
        """
        lead = self.lead_above_w if self.in_work else (0.0, 0.0)
        trail = self.trail_above_w if self.end_found_in_work else (0.0, 0.0)
        spread_w = (lead[1] - lead[0]) + (trail[1] - trail[0])
        worst_w = max(abs(trail[1] - lead[0]), abs(lead[1] - trail[0]))
        return spread_w * self.profile.power_lag_s + worst_w * self.profile.power_lag_err_s

    def _sampling_err_j(self) -> float:
        """Samples ~20 ms apart place a rise or fall only to within half a spacing.

        Bound: one spacing x the highest sample above idle (half a spacing at each of
        two edges). On the H200 this covers the isolated-burst scatter the probe saw.
        """
        t = [s.t_s for s in self.samples]
        inside = [
            s.power_w
            for s in self.samples
            if self.work_t0_s - self.profile.sample_lead_s <= s.t_s <= self.work_t1_s + self.tail_s
        ]
        if len(t) < 2 or not inside:
            return math.nan
        spacing = statistics.median(b - a for a, b in itertools.pairwise(t))
        return spacing * max(0.0, max(inside) - self.idle_w)

    @property
    def per_call_mj_err(self) -> float:
        """Bound on ``per_call_mj``, mJ."""
        return self.err_j * 1e3 / self.calls + self.control_err_mj if self.calls else math.nan

    @property
    def ticks(self) -> int:
        """Counter updates the window spans."""
        return round(self.window_s / self.profile.counter_period_s)

    @property
    def reason(self) -> str | None:
        """Why the result is not reliable, or None (:func:`nvmeter.meter.reasons.reason`).

        The first that applies of: the readings themselves, the caller's given figures, the
        telemetry's plausibility, the idle, then the figure against its bound.
        """
        return reasons.reason(self)

    @property
    def notes(self) -> tuple[str, ...]:
        """What a reader of the figure should know that its bound already covers, in words.

        Why the window is transient, how the board's state changed across it, and a
        significant drift: the warnings the repr carries, for summaries that show several
        Measurements on one line (a job's boards).
        """
        return reasons.notes(self)

    def __repr__(self) -> str:
        return reasons.describe(self)

    @property
    def reliable(self) -> bool:
        """True when nothing in :attr:`reason` applies."""
        return self.reason is None

    def derived(self) -> dict:
        """The derived figures, for JSON (model 1's set for records made with it)."""
        figures = {
            "window_s": self.window_s,
            "energy_j": self.energy_j,
            "above_idle_j": self.above_idle_j,
            "per_call_mj": self.per_call_mj,
            "per_call_mj_err": self.per_call_mj_err,
            "reading_err_j": self.reading_err_j,
            "state_err_j": self.state_err_j,
            "cold": self.cold,
            "reliable": self.reliable,
            "reason": self.reason,
        }
        if self.model_version >= 2:
            drift = self.drift
            figures |= {
                "transient": self.transient,
                "gap_s": self.gap_s,
                "limited": self.limited,
                "state_changes": list(self.state_changes),
                "subwindow_mj": list(self.subwindow_mj),
                "drift": None if drift is None else drift.to_dict(),
            }
        if self.model_version >= 6:
            figures["since_pause_s"] = self.since_pause_s
        if self.model_version >= 10:
            figures["state_rel"] = self.state_rel
        if self.model_version >= 12:
            figures["drift_ambiguous"] = self.drift_ambiguous
        if self.model_version >= 14:
            figures["lead_level_gap_w"] = self.lead_level_gap_w
        return figures

    def to_dict(self) -> dict:
        """JSON form (``schema_version`` 8): raw readings and the derived figures."""
        return {
            "schema_version": SCHEMA_VERSION,
            "device": self.device.to_dict(),
            "method": self.method,
            "calls": self.calls,
            "work_t0_s": self.work_t0_s,
            "work_t1_s": self.work_t1_s,
            "start": self.start.to_dict(),
            "end": self.end.to_dict(),
            "samples": samples_to_dict(self.samples),
            "idle": {
                "power_w": self.idle.power_w,
                "err_w": self.idle.err_w,
                "source": self.idle.source,
                "samples_power_w": self.idle.samples_power_w,
                "busy_pct": self.idle.busy_pct,
                "local": self.idle.local,
            },
            "control_mj": self.control_mj,
            "control_err_mj": self.control_err_mj,
            "max_rel_err": self.max_rel_err,
            "problems": list(self.problems),
            "tail_s": self.tail_s,
            "profile": self.profile.to_dict(),
            "model_version": self.model_version,
            "inner": [c.to_dict() for c in self.inner],
            "states": [s.to_dict() for s in self.states],
            "end_in_work": self.end_in_work,
            "call_ends_s": list(self.call_ends_s),
            "foreign_read_s": self.foreign_read_s,
            "contexts": [c.to_dict() for c in self.contexts],
            "others_idle": self.others_idle,
            "derived": self.derived(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> Measurement:
        """Rebuild from :meth:`to_dict` of any listed version (derived figures are recomputed).

        Raises:
            RecordError: an unknown ``schema_version`` or error model, or a malformed dict.

        """
        try:
            m = cls._from_dict(d)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise errors.RecordError(f"a malformed Measurement ({type(exc).__name__}: {exc})") from exc
        if (
            m.method not in ("aligned", "samples", "plain")
            or isinstance(m.calls, bool)
            or not (isinstance(m.calls, int) and 0 <= m.calls <= sanity.MAX_CALLS)
        ):
            raise errors.RecordError(f"a malformed Measurement (method {m.method!r}, calls {m.calls!r})")
        _check_figures(m)
        return m

    @classmethod
    def _from_dict(cls, d: dict) -> Measurement:
        version = d.get("schema_version", 1)  # version 1 had no key: its absence is version 1
        # an int (True == 1 and 3.0 == 3, but neither is a version nvmeter writes)
        if type(version) is not int or version not in range(1, SCHEMA_VERSION + 1):
            newer = type(version) is int and version > SCHEMA_VERSION
            raise errors.RecordError(
                f"a Measurement of schema_version {version!r} (this nvmeter reads 1-{SCHEMA_VERSION}"
                + ("; a newer nvmeter wrote it: upgrade nvmeter to read it)" if newer else ")")
            )
        if version == 1:
            d = _upgrade_v1(d)
        if version <= 2:
            d = {**d, "end_in_work": False}  # its end edge was polled after the work, the tail counted
        if version <= 3:
            d = {**d, "idle": {**d["idle"], "busy_pct": None}}  # not read before version 4
        if version <= 4:
            d = {"call_ends_s": [], **d}  # calls were not marked before version 5
        if version <= 6:
            if "foreign_read_s" in d:  # read as 0 it would drop a term of the bound without a word
                raise errors.RecordError(
                    f"a Measurement of schema_version {version} holds foreign_read_s, which version 7 added"
                )
            d = {**d, "foreign_read_s": 0.0}  # other meters' reads were not counted before version 7
        if version <= 7:
            if d.keys() & {"contexts", "others_idle"}:  # read as not read, they would drop a reason
                raise errors.RecordError(
                    f"a Measurement of schema_version {version} holds contexts, which version 8 added"
                )
            d = {**d, "contexts": [], "others_idle": False}  # other processes were not looked for
        idle = IdleBaseline(
            d["idle"]["power_w"],
            d["idle"]["err_w"],
            d["idle"]["source"],
            _nan_if_null(d["idle"]["samples_power_w"]),
            busy_pct=_nan_if_null(d["idle"]["busy_pct"]),
            local=_strict_bool(d["idle"].get("local", False), "idle.local"),
        )
        if type(d["model_version"]) is not int:  # true is 1 to Python, and no model
            raise TypeError(f"model_version must be a whole number, not {d['model_version']!r}")
        errormodel.model(d["model_version"])  # an unknown model fails here, by name
        if not (isinstance(d["problems"], list) and all(isinstance(p, str) for p in d["problems"])):
            raise TypeError(f"problems must be a list of texts, not {d['problems']!r}")
        return cls(
            BoardIdentity.from_dict(d["device"]),
            d["method"],
            d["calls"],
            d["work_t0_s"],
            d["work_t1_s"],
            CounterSeries.from_dict(d["start"]),
            CounterSeries.from_dict(d["end"]),
            samples_from_dict(d["samples"]),
            idle,
            d["control_mj"],
            d["control_err_mj"],
            d["max_rel_err"],
            tuple(d["problems"]),
            d["tail_s"],
            BoardProfile.from_dict(d["profile"]),
            d["model_version"],
            tuple(CounterSeries.from_dict(c) for c in d["inner"]),
            tuple(BoardState.from_dict(s) for s in d["states"]),
            _strict_bool(d["end_in_work"], "end_in_work"),
            tuple(_seconds(t, "call_ends_s") for t in d["call_ends_s"]),
            d["foreign_read_s"],
            tuple(ContextRead.from_dict(c) for c in _listed(d["contexts"], "contexts")),
            _strict_bool(d["others_idle"], "others_idle"),
        )

    def save(self, path: Path) -> None:
        """Write this window as a ``window`` record, which ``nvmeter show`` and :meth:`load` read.

        Raises:
            UsageError: the path cannot be written.
        """
        from nvmeter.meter import windowrecord

        windowrecord.save(self, path)

    @classmethod
    def load(cls, path: Path) -> Measurement:
        """Read a ``window`` record (:meth:`save`), every figure recomputed from its raw readings.

        Raises:
            RecordError: unreadable, another kind, damaged, or a stored figure that differs
                from its recomputation.
        """
        from nvmeter.meter import windowrecord

        return windowrecord.load(path)

    def with_method(self, method: str) -> Measurement:
        """The same readings, read another way (``aligned`` readings also hold samples)."""
        return replace(self, method=method)


# The longest wait after the work for its power to come down, s: the H200's falls within ~60 ms
# (docs/window.md); a tail of minutes is a unit slip, not a wait.
MAX_TAIL_S = 10.0


def _listed(value, name: str) -> list:
    """``value``, a JSON list (a dict of reads iterated as none: a breaker's trial, 2026-12-07)."""
    if not isinstance(value, list):
        raise TypeError(f"{name} must be a list, not {type(value).__name__}")
    if len(value) > 2:  # one read at the entry and one at the exit
        raise ValueError(f"{name} holds {len(value)} reads; a window makes two")
    return value


def _check_figures(m: Measurement) -> None:
    """A rebuilt Measurement's own figures must be ones a window could have written.

    Raises:
        RecordError: naming the figure (:func:`nvmeter.arguments.finite`'s message).
    """
    watts = {"minimum": 0.0, "maximum": sanity.MAX_BOARD_W}
    figures = {  # name: (value, bounds, may be absent: None or nan)
        "tail_s": (m.tail_s, {"minimum": 0.0, "maximum": MAX_TAIL_S}, False),
        "max_rel_err": (m.max_rel_err, {"minimum": 0.0, "maximum": 1.0}, True),
        "idle.power_w": (m.idle.power_w, watts, False),
        "idle.err_w": (m.idle.err_w, watts, False),
        "idle.samples_power_w": (m.idle.samples_power_w, watts, True),
        "idle.busy_pct": (m.idle.busy_pct, {"minimum": 0.0, "maximum": 100.0}, True),
        "control_mj": (m.control_mj, {}, False),
        "control_err_mj": (m.control_err_mj, {"minimum": 0.0}, False),
        "foreign_read_s": (m.foreign_read_s, {"minimum": 0.0}, False),
    }
    for name, (value, bounds, optional) in figures.items():
        if optional and (value is None or (isinstance(value, float) and math.isnan(value))):
            continue
        finite(value, f"a malformed Measurement: {name}", error=errors.RecordError, **bounds)


# Choices, not fits: spans shorter than three counter periods, where one short burst's place in the
# period weighs its reading (0.84-1.21 polled, docs/window-log.md), and spans with a gap in the samples
# over three spacings (a block that read the buffer only at its edges) are not compared.
RATIO_MIN_SPAN_S = 0.3
RATIO_MAX_GAP_SPACINGS = 3.0
# Error model 11's check of the counter against the samples, as a share of the energy above idle
# over the window's span (the larger reading's): on the 2,201 committed H100 and H200 windows at
# least COUNTER_CHECK_MIN_W above idle (steady work), 0.28% median and 6.96% at most
# (results/enclose/samples-counter-ratio.txt). Twenty percent, about three times that, is a chosen
# margin: no steady work we measured, and work locked to the period of a counter that senses 25 ms of
# each 100 ms reads +96% (docs/window-log.md). Only a counter of partial coverage is held to it: on a
# full one, short bursts' samples misread by more (a code review, 2026-12-06).
COUNTER_SAMPLES_DISAGREE_REL = 0.2
# Under this mean power above idle the share means nothing: the edges' timing leaves a gap of up to
# 0.45 J (SD 0.18 J) between the steps of 60 simulated 0.3 s windows at idle, spans of 0.39-0.40 s:
# 22% of 5 W above idle there, 6% of 20 W (a code review); launch-bound work draws ~0 W above idle.
COUNTER_CHECK_MIN_W = 20.0
# A cut (the work's start or end to its counter step) read across a gap in the samples over this many
# spacings is not read: the buffer rolled over between two reads, and a sample 0.5 s later stood for the
# head of a 2.8 s call that no w.call() split (-6 to -13% as a reliable figure: an adversarial review).
# A choice, as RATIO_MAX_GAP_SPACINGS: the H200's samples come 9.6-28.2 ms apart at 20 ms
# (results/probe-h200.json); no cut of the committed windows of results/ has such a gap (docs/window-log.md).
CUT_MAX_GAP_SPACINGS = 3.0


# A board does not idle below its idle. Samples around a window that stay under the idle subtracted by
# more than its bound and the larger of these, for QUIET_BELOW_MIN_S or longer, mark the window not
# reliable. 5 W is error model 8's quiet band (within it the idle is moved, not refused); 5% covers the
# samples' calibration against the counter (0.959-1.045 over 1,799 windows, results/enclose/
# samples-counter-ratio.txt), for an idle given in the counter's terms. The board does dip under its idle
# right after heavy work (to 96.6-116 W against 121.6 W, 60-120 ms after bf16 at an H100's cap ended,
# results/enclose/call49-1983add-h100l-enclose.json.gz), but in the 5,034 windows of results/ no run of
# samples under this margin spans more than 61 ms, anywhere in their samples (call48-1983add-h100l's);
# 0.3 s is five times that.
# None of them has even two such samples at the end of its lead-in. A simulated board without a CUDA
# context (78.7 W) metered with its context idle (121.3 W) read 25,306 mJ a call for 30,000, marked
# reliable, before this check.
QUIET_BELOW_MARGIN_W = 5.0
QUIET_BELOW_MARGIN_REL = 0.05
QUIET_BELOW_MIN_S = 0.3
# A deep stretch counts from a shorter length: windows in a loop ~0.2 s apart, the context idle given
# to a board without one (35% under it), read -16% as reliable figures, each pause and tail under
# 0.3 s (a new user's trial, 2026-12-07). In those 5,051 windows no stretch under the margin outlasts
# 61 ms, none of 40 ms or more dips over 11.8% of the idle, and none of any length over 18.6%
# (bench/below_idle.py, results/below-idle.txt): twice the longest, and a dip a third deeper than any.
QUIET_DEEP_MIN_S = 0.12
QUIET_DEEP_REL = 0.25

# Error model 14, for an idle given in watts (no sampled figure, so no band): a level under this far from
# it, beyond the idle's own bound, is not counted. The samples follow the counter's idle to -0.05..+0.14 W
# (errormodel history 8). A chosen margin, seven times that.
LEAD_LEVEL_MIN_W = 1.0


# A window whose energy runs past the work's end (the default exit, and method="samples") counts the
# profile's tail_s as the work's power falling to idle. Samples after it, through the last the exit read,
# that still sit above idle (and the profile's polling artefact: the end edge polls the counter there) by
# BUSY_AFTER_REL of the work's own power and BUSY_AFTER_MIN_W say the board ran on:
# work left running by an exit that did not wait for it (sync="none", another stream or device) read
# +17 to +34% as reliable figures, and measure() +4 to +21% (a breaker on the simulated board,
# 2026-12-07). In the 1,652 committed windows with such samples (bench/after_work.py,
# results/after-work.txt) they sit at most 19.1 W above idle: for work over 100 W at most 3.3% of its
# power, lighter work at most 5.6 W (under the floor). The work's own is the larger of its mean and its
# last BUSY_AFTER_LAST_S's: what lingers follows the last calls (a review).
BUSY_AFTER_REL = 0.2
BUSY_AFTER_MIN_W = 10.0
BUSY_AFTER_LAST_S = 0.1


class LeadLevel(NamedTuple):
    """A steady level of the samples before a window (:attr:`Measurement.lead_level`)."""

    mean_w: float
    length_s: float


def below_idle_margin_w(idle_w: float) -> float:
    """How far under an idle of ``idle_w`` W the board may draw before that idle is not its own, W.

    The larger of :data:`QUIET_BELOW_MARGIN_W` and :data:`QUIET_BELOW_MARGIN_REL` of it: the
    below-idle check's (:attr:`Measurement.quiet_below_idle`) and error model 14's under-idle level.
    """
    return max(QUIET_BELOW_MARGIN_W, QUIET_BELOW_MARGIN_REL * idle_w)


def steady_stretch(lead: list, centre_w: float, m: errormodel.ErrorModel, lone_ok: bool) -> list | None:
    """The samples at the end of ``lead`` within the model's ``local_idle_band_w`` of ``centre_w``, or None.

    Back from the last sample while each lies within the band (``lone_ok``: a lone sample outside
    it is passed over and left out; two in a row end the stretch), less its first
    ``local_idle_settle_s`` (what ran before may still be falling to idle); None where what is left
    is shorter than ``local_idle_min_s`` or one sample. Error model 8's stretch (``lone_ok`` False)
    and model 14's level. ``lead``: PowerSamples in time order.
    """
    inside = [abs(s.power_w - centre_w) <= m.local_idle_band_w for s in lead]
    first = len(lead)
    while first > 0 and (inside[first - 1] or (lone_ok and first > 1 and inside[first - 2])):
        first -= 1
    stretch = [s for s, ok in zip(lead[first:], inside[first:], strict=True) if ok]
    stretch = [s for s in stretch if s.t_s - stretch[0].t_s >= m.local_idle_settle_s]
    if len(stretch) < 2 or stretch[-1].t_s - stretch[0].t_s < m.local_idle_min_s:
        return None
    return stretch


def stretches_under(samples, below_w: float) -> list[tuple[float, float, float]]:
    """Each run of consecutive ``samples`` under ``below_w``, W: (first sample's time, length, mean power).

    The time in s on the board's clock, the length in s from the first sample to the last (0 for
    one), the mean in W.
    """
    runs = (list(run) for under, run in itertools.groupby(samples, lambda x: x.power_w < below_w) if under)
    return [(run[0].t_s, run[-1].t_s - run[0].t_s, statistics.fmean(x.power_w for x in run)) for run in runs]


def _seconds(value, name: str) -> float:
    """A time read from a record: a number (not text, not true or false)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must hold numbers, not {value!r}")
    return float(value)


def _strict_bool(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be true or false, not {value!r}")
    return value


def _upgrade_v1(d: dict) -> dict:
    """A version-1 dict as version 2: nvmeter 0.1's H200 figures and error model 1.

    Version 1 stored ``max_rel_err`` and ``tail_s`` only from its later records; the earlier
    ones were made with no accepted bound and the 0.06 s tail, which is what they read as.
    """
    return {
        **d,
        "max_rel_err": d.get("max_rel_err"),
        "tail_s": d.get("tail_s", H200_V1.tail_s),
        "profile": H200_V1.to_dict(),
        "model_version": 1,
        "inner": [],
        "states": [],
    }


def _nan_if_null(value) -> float:
    if value is None:
        return math.nan
    # float("1") would take a string, and float(True) a bool, as a figure (a breaker's trial)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"a figure must be a number or null, not {value!r}")
    return float(value)
