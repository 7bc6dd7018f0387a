"""Idle baselines: the power "above idle" is measured above, and where it came from.

A CUDA context alone adds 42.6 W on our H200 (results/probe-h200.json), so every
baseline names its source: given by the caller, read from a probe file of the same
board, measured with the context open and the caller quiescent, or measured with
the work's process frozen.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from nvmeter import errors, records
from nvmeter.boards.protocol import Board
from nvmeter.meter import sanity
from nvmeter.meter.span import EDGE_TIMEOUT_S, AlignedSpan, measure_span

if TYPE_CHECKING:
    from nvmeter.boards.profile import BoardProfile

# A quiescent idle span before and after a window; 1 s holds ~10 counter periods,
# enough for a baseline known to ~0.3% (edges ~3 ms of ~1 s).
IDLE_SPAN_S = 1.0
# Largest disagreement of a probe file's idle span between counter and samples, share: the H200
# read 0.07% (results/probe-h200.json); 10% is a damaged file.
IDLE_AGREEMENT = 0.10
# Settle after freezing a process before measuring: docs/facts.md and the A100
# scorer used 3 s.
FREEZE_SETTLE_S = 3.0
# A measured idle whose GPU ran kernels for more than this share of NVML's last utilisation
# period (1/6 s to 1 s, nvml.h) was not idle. Half, so that the last milliseconds of work
# synchronised just before the span cannot trip it; work left running reads 100%.
IDLE_BUSY_PCT = 50.0


@dataclass(frozen=True)
class IdleBaseline:
    """Idle power and its uncertainty.

    Attributes:
        power_w: Idle power, W (counter).
        err_w: Bound on its error, W.
        source: ``"given"``, ``"probe"``, ``"quiescent"`` or ``"frozen"``.
        samples_power_w: The same idle from the sample buffer, W (nan if unknown).
        spans: The raw spans it was measured from (empty if not measured here).
        busy_pct: The highest GPU utilisation read at the end of a quiescent span, percent
            (nan: not read); over :data:`IDLE_BUSY_PCT` the idle was not idle.
        local: Measured around the window it is used in (the window's own quiescent spans
            before and after): error model 8 does not move it by the samples before the start
            (:attr:`~nvmeter.meter.measurement.Measurement.idle_drift_w`).
    """

    power_w: float
    err_w: float
    source: str
    samples_power_w: float = float("nan")
    spans: tuple[AlignedSpan, ...] = ()
    busy_pct: float = float("nan")
    local: bool = False

    @property
    def busy(self) -> bool:
        """True when a quiescent span saw kernels run (:data:`IDLE_BUSY_PCT`)."""
        return math.isfinite(self.busy_pct) and self.busy_pct > IDLE_BUSY_PCT

    def __repr__(self) -> str:
        return f"IdleBaseline({self.power_w:.2f} ± {self.err_w:.2f} W, {self.source})"

    @property
    def samples_w(self) -> float:
        """The idle as the sample buffer reads it, W (the counter's figure where unknown)."""
        return self.samples_power_w if math.isfinite(self.samples_power_w) else self.power_w

    @classmethod
    def given(cls, power_w: float, err_w: float = 0.0) -> IdleBaseline:
        """A caller's own figure.

        Raises:
            UsageError: a negative or non-finite power or error, or one over any board's draw.
        """
        # MAX_BOARD_W only screens out what no board draws: the board's own power limit, checked
        # once the board is known (drawable), is the bound a user meets, so the power's message
        # names that limit, not 5,000 W ("must be 0 to 5,000 W" beside a refusal of 5,000 W read
        # as two rules, a new user's trial)
        for value, what, bound in (
            (power_w, "idle power", "under the board's power limit"),
            (err_w, "idle's error", f"at most {sanity.MAX_BOARD_W:,.0f} W"),
        ):
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (number and 0 <= value <= sanity.MAX_BOARD_W):
                raise errors.UsageError(
                    f"{what} must be a finite number of watts >= 0, {bound}; not {value!r}"
                )
        return cls(float(power_w), float(err_w), "given")

    @classmethod
    def from_spans(
        cls,
        spans: list[AlignedSpan],
        source: str,
        local: bool = False,
        polling_artefact_w: float | None = None,
    ) -> IdleBaseline:
        """Mean of spans; the bound is half their spread, the edges' share and the polling's.

        Each edge is taken as known to its step; a span with an edge that saw none is the
        window's problem (:func:`unstepped`), which its figure is refused for.

        Args:
            spans: The idle spans, each between two counter steps.
            source: What they were: ``"quiescent"`` or ``"frozen"``.
            local: The spans were measured around the window that uses them (:attr:`local`).
            polling_artefact_w: The board's polling artefact (its profile's), W; None: the
                H200's, as records made before error model 11 were bounded
                (:meth:`~nvmeter.meter.span.AlignedSpan.polling_bias_w`).
        """
        powers = [s.power_w for s in spans]
        mean = sum(powers) / len(powers)
        spread = (max(powers) - min(powers)) / 2
        edges = max(
            s.power_w * s.edge_uncertainty_s / s.duration_s + s.polling_bias_w(polling_artefact_w)
            for s in spans
        )
        samples = sum(s.samples_power_w for s in spans) / len(spans)
        busy = max((s.busy_pct for s in spans if math.isfinite(s.busy_pct)), default=math.nan)
        return cls(mean, spread + edges, source, samples, tuple(spans), busy, local)

    @classmethod
    def from_probe(
        cls, path: Path, board: Board, level: str = "context", polling_artefact_w: float | None = None
    ) -> IdleBaseline:
        """The idle a probe file measured on this board (``level``: no_context, context, frozen).

        ``polling_artefact_w``: as for :meth:`from_spans`.

        Raises:
            RecordError: another board, another schema, no idle probe in the file, an idle
                span that cannot be real (:mod:`nvmeter.meter.sanity`), without a counter step
                at an edge or drawing nothing, or a file whose figures differ from its raw
                series (:func:`nvmeter.records.verify`).
        """
        # read the raw span straight from the file: the meter does not depend on the probes
        data = records.read_json(path, "probe")
        probes = data.get("probes")
        if not isinstance(probes, dict) or "idle" not in probes:
            raise errors.RecordError(
                f"{path} has no idle {LEVEL_WORDS.get(level, level)} (its idle probe did not run): give a "
                "probe file with the idle probe (a full `nvmeter probe`, or `--only idle`), the idle in "
                "watts, or 'measure' (the default: measured around the window)"
            )
        try:
            uuid = data["board"]["uuid"]
            raw = probes["idle"]["raw"]["spans"][level]
        except (KeyError, TypeError) as exc:
            # the idle probe ran: a file without its span was edited or cut short (a new user's trial
            # read "did not run" of one whose raw block had been emptied)
            keyed = isinstance(exc, KeyError) and exc.args
            missing = f"no field {exc.args[0]!r}" if keyed else "not a mapping"
            raise errors.RecordError(
                f"{path}: damaged probe record: its idle probe holds no span {LEVEL_WORDS.get(level, level)} "
                f"({missing}); probe the board again, or give the idle in watts or 'measure'"
            ) from exc
        if uuid != board.identity().uuid:
            raise board.identity().made_elsewhere(
                path, uuid, "give the idle probe of this board, or 'measure'"
            )
        try:
            records.counters(raw, f"idle.{level}")  # a count past int64 is no read (OverflowError later)
        except records.BadField as exc:
            raise errors.RecordError(f"{path}: damaged probe record: {exc}") from exc
        for where, why in sanity.faults(raw, f"idle.{level}"):
            raise errors.RecordError(f"{path}: damaged probe record: {why} (at {where})")
        try:
            span = AlignedSpan.from_dict(raw)
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise errors.RecordError(f"{path}: the idle probe's {level} span is malformed ({exc})") from exc
        # the counter and the sample buffer read the same idle to 0.1% (results/probe-h200.json):
        # a span on which they disagree by more than IDLE_AGREEMENT is damaged, not a board
        counter_w, samples_w = span.power_w, span.samples_power_w
        if (
            not span.aligned
            or not (math.isfinite(counter_w) and counter_w > 0)
            or (
                math.isfinite(samples_w) and abs(counter_w - samples_w) > IDLE_AGREEMENT * max(samples_w, 1.0)
            )
        ):
            raise errors.RecordError(
                f"{path}: the idle probe's {level} span reads {counter_w:.1f} W by the counter and "
                f"{samples_w:.1f} W by the samples: a damaged record"
            )
        records.verify(path, "probe")  # the span above is raw: the file's figures must be its own
        return cls(
            span.power_w,
            span.power_w * span.edge_uncertainty_s / span.duration_s
            + span.polling_bias_w(polling_artefact_w),
            "probe",
            span.samples_power_w,
            (span,),
        )


def measure_quiescent(
    board: Board, duration_s: float = IDLE_SPAN_S, timeout_s: float = EDGE_TIMEOUT_S
) -> AlignedSpan:
    """One idle span with the caller quiescent (the caller must have synchronised).

    Its ``busy_pct`` is the GPU utilisation read at its end: kernels still running (the
    caller's unsynchronised work, another process's) make an idle that is not one. A span
    that cannot be real (:func:`span_fault`: a counter reset or a wrap inside it) is measured
    once more, since a reset is one event. ``timeout_s``: the longest wait for a counter step
    at an edge (the profile's ``edge_timeout_s``), s.
    """
    return _checked_quiescent(board, duration_s, timeout_s)[0]


def _checked_quiescent(board: Board, duration_s: float, timeout_s: float) -> tuple[AlignedSpan, str | None]:
    """:func:`measure_quiescent`'s span, and why the last one measured cannot be real (None: it can)."""
    span = _quiescent(board, duration_s, timeout_s)
    fault = span_fault(span)
    if fault is not None:  # a reset is one event: the span after it reads the board again
        span = _quiescent(board, duration_s, timeout_s)
        fault = span_fault(span)
    return span, fault


def _quiescent(board: Board, duration_s: float, timeout_s: float) -> AlignedSpan:
    span = measure_span(board, board.clock, duration_s, timeout_s)
    try:
        busy_pct = board.utilization().gpu_pct
    except errors.NotSupported:
        busy_pct = math.nan
    return replace(span, busy_pct=float(busy_pct))


def span_fault(span: AlignedSpan) -> str | None:
    """Why ``span`` cannot be real (:func:`nvmeter.meter.sanity.faults`), or None."""
    fault = next(sanity.faults(span.to_dict(), "the idle span"), None)
    return None if fault is None else fault[1]


def quiet_span(board: Board, profile: BoardProfile) -> AlignedSpan:
    """:func:`measure_quiescent` for an idle taken before any work: one that cannot be real is refused.

    A counter reset during the span before a window read it at -455 kW, and the window a
    reliable 22,813,995.7 ± 24,121,083.3 mJ a call for 22,000 (a code review, 2026-12-06).

    Raises:
        TelemetryError: two spans in a row that cannot be real.
    """
    span, why = _checked_quiescent(board, IDLE_SPAN_S, profile.edge_timeout_s)
    if why is not None:
        raise errors.TelemetryError(
            f"two idle spans in a row on {board.identity().short} cannot be real ({why}): its energy counter "
            "is resetting or wrapping; run `nvmeter check` on it, or give the idle in watts"
        )
    return span


def quiet_idle(board: Board, profile: BoardProfile, local: bool = False) -> IdleBaseline:
    """The idle of :func:`quiet_span`, bounded at the profile's polling artefact.

    Raises:
        TelemetryError: as :func:`quiet_span`.
    """
    return idle_of([quiet_span(board, profile)], profile, local)


def idle_of(spans: list[AlignedSpan], profile: BoardProfile, local: bool = False) -> IdleBaseline:
    """:meth:`IdleBaseline.from_spans` of quiescent spans, bounded at the profile's polling artefact."""
    return IdleBaseline.from_spans(spans, "quiescent", local, profile.polling_artefact_w)


def idle_after(
    board: Board, before: AlignedSpan, profile: BoardProfile, what: str, local: bool = False
) -> tuple[IdleBaseline, tuple[str, ...]]:
    """The idle of ``before`` and a span measured now, after the ``what`` (window, work); its problems.

    The span after can widen the bound: the figure is judged with both. One that cannot be real
    twice over (a driver reload during it read -455 kW, and a window a reliable figure 900 times
    the truth: an adversarial review) is left out, and the figure says so in its one problem.
    """
    after, fault = _checked_quiescent(board, IDLE_SPAN_S, profile.edge_timeout_s)
    if fault is None:
        return idle_of([before, after], profile, local), ()
    problem = f"{fault} in two idle spans after the {what}: the idle is the one before alone"
    return idle_of([before], profile, local), (problem,)


def unstepped(spans: tuple[AlignedSpan, ...]) -> tuple[str, ...]:
    """The problem of idle spans with an edge that saw no counter step (empty: every edge saw one).

    Such an edge is a read whose value may be a whole counter period old, and the period is not
    the profile's: the edge polled for the profile's ``edge_timeout_s``, longer than its period,
    without a step. No figure at hand bounds it, so the idle is refused as a window's own edge
    without a step is. Taken as known to a read, one such span read 248 W on a 121 W board, and
    method="plain" windows on a 400 ms counter left 24 of 30 reliable figures outside their
    bounds (an adversarial review on the simulated board, 2026-12-07).
    """
    if all(span.aligned for span in spans):
        return ()
    return (
        "an idle span saw no counter step at an edge within the profile's edge time-out: its edges are "
        "known only to a counter period, longer than this board's profile says (probe the board: "
        "nvmeter probe)",
    )


def longest_still_s(spans: tuple[AlignedSpan, ...]) -> float:
    """The longest the counter was seen not to update at the spans' edges, s (0: no spans).

    A lower bound on the counter's period (:attr:`~nvmeter.meter.series.CounterSeries.longest_still_s`).
    """
    return max((edge.longest_still_s for span in spans for edge in (span.start, span.end)), default=0.0)


class Freezable(Protocol):
    """What freezing needs of a worker: stop and resume its process group (and what it started elsewhere)."""

    def freeze(self) -> None:
        """SIGSTOP it."""
        ...

    def resume(self) -> None:
        """SIGCONT it."""
        ...


def measure_frozen(
    board: Board,
    worker: Freezable,
    duration_s: float = IDLE_SPAN_S,
    settle_s: float = FREEZE_SETTLE_S,
    timeout_s: float = EDGE_TIMEOUT_S,
) -> AlignedSpan:
    """An idle span with the worker frozen (its group and what it started elsewhere); always resumed.

    ``timeout_s``: the longest wait for a counter step at an edge (the profile's ``edge_timeout_s``), s.
    """
    worker.freeze()
    try:
        board.clock.sleep(settle_s)
        return measure_span(board, board.clock, duration_s, timeout_s)
    finally:
        worker.resume()


def context_level(board: Board) -> str:
    """The probe file's idle level that ``board`` draws at now: ``"context"`` or ``"no_context"``.

    A process metering a GPU holds a CUDA context (its own work opened one), so a real board
    reads ``"context"``; a simulated board holds one only once it is opened
    (``SimulatedBoard.set_context``), and the probe's context idle subtracted from a simulated
    board without one read 16% low, marked reliable (a new user's trial, 2026-12-05).
    """
    return "no_context" if getattr(board, "context_open", True) is False else "context"


# A probe's idle levels in words, for messages
LEVEL_WORDS = {
    "no_context": "without a CUDA context",
    "context": "with a CUDA context",
    "frozen": "with the process frozen",
}


def drawable(idle: IdleBaseline, board: Board) -> IdleBaseline:
    """``idle`` if the board can draw it: a given idle above its power limit, or below its rest, is refused.

    Such an idle is a typo or another board's figure. Above the limit, it leaves a figure below
    zero that no window could call reliable; below the board's idle without a CUDA context
    (:func:`rest_floor_w`), a figure too high that nothing else in the window can tell: 7.87 W
    given for 78.7 W read 422 J for 343 J, and 50 W for a 121 W idle 25,701 mJ a call for 22,000,
    both marked reliable (an adversarial review, 2026-12-06). Both are refused before any work
    runs. 0 W stays allowed: the board's whole energy, as asked.

    An idle above that share but still under the rest is taken with its bound widened to reach the
    rest, and a warning says so: 71 W given for a 78.7 W rest read +65 J over 8 s against a ±30 J
    bound, reliable (a breaker's trial, 2026-12-07).

    Returns:
        ``idle``, or ``idle`` with ``err_w`` widened to reach the rest floor.

    Raises:
        UsageError: ``idle`` lies above the board's enforced power limit, by more than its bound
            (where NVML gives a limit that can be real: :func:`nvmeter.meter.sanity.known_limit_w`),
            or is above 0 and, with its bound, under :data:`REST_FLOOR_SHARE` of the rest floor.
    """
    ident = board.identity()
    limit_w = sanity.known_limit_w(ident)
    if limit_w is not None and idle.power_w - idle.err_w > limit_w:
        raise errors.UsageError(
            f"idle {idle.power_w:,.1f} W is above {ident.short}'s power limit "
            f"({limit_w:,.0f} W): give the idle of this board, in watts"
        )
    floor = rest_floor_w(board) if idle.power_w > 0 else None
    if floor is None or idle.power_w + idle.err_w >= floor[0]:
        return idle
    # 1e-320 W had read "idle 0.0 W is below ... (0 for its whole energy)" (a breaker)
    given = f"{idle.power_w:,.1f}" if idle.power_w >= 0.05 else f"{idle.power_w:.3g}"
    below = (
        f"idle {given} W is below what {ident.short} draws at rest without a CUDA context "
        f"({floor[0]:,.1f} W, {floor[1]})"
    )
    if idle.power_w + idle.err_w < REST_FLOOR_SHARE * floor[0]:
        raise errors.UsageError(f"{below}: give the idle of this board, in watts (0 for its whole energy)")
    widened = replace(idle, err_w=floor[0] - idle.power_w)
    said = f"{below}: its bound is widened to ±{widened.err_w:,.1f} W to reach it"
    warnings.warn(said, errors.NvmeterWarning, stacklevel=2)
    return widened


# A given idle under this share of the board's rest without a context is refused (drawable). The H200's
# no-context idle read 78.7 and 77.6 W in two probes (results/probe-h200.json, probe-h200-quick-*.json),
# the H100's 74.9 W: 1.3% apart on one board; 0.9 is a chosen margin for warmer or cooler boards, not fitted.
REST_FLOOR_SHARE = 0.9


def rest_floor_w(board: Board) -> tuple[float, str] | None:
    """(What ``board`` draws at rest without a CUDA context, W; where that figure comes from), or None.

    A simulated board's model; a real board's idle probe in the probe record ``nvmeter probe``
    keeps for it (None where none is kept, or it cannot be read: no floor is then known).
    """
    ident = board.identity()
    if ident.simulated:
        config = getattr(board, "config", None)
        return None if config is None else (config.idle_no_context_w, "the simulated board's model")
    from nvmeter.boards.profile import cached_report

    try:
        report = cached_report(ident)
        idle = report.probes.get("idle") if report is not None else None
        # the one span's power, not every figure of the probe: this runs at each window's entry
        rest_w = idle.spans["no_context"].power_w if idle is not None else math.nan
    except (errors.RecordError, KeyError, TypeError, AttributeError, OSError):  # OSError: the file went
        return None
    if not math.isfinite(rest_w):
        return None
    return rest_w, f"its probe of {report.started_utc[:10]} in the user cache"


def given_idle(spec, board: Board, level: str = "context", artefact_w: float | None = None) -> IdleBaseline:
    """The idle a caller gave, for ``board``: an IdleBaseline, watts, or a probe file's span at ``level``.

    The one reading of a given idle for windows, ``nvmeter run --idle`` and pytest's
    ``--energy-idle`` (each had its own, and only the window's checked a baseline's figures).
    ``"measure"`` is not given: the caller measures it.

    Args:
        spec: An :class:`IdleBaseline`, watts (a number), or a probe file's path.
        board: The board the idle is for: a given one is held to what it can draw (:func:`drawable`),
            a probe file must be its own.
        level: Which of a probe file's idle spans (:func:`context_level`: ``"context"`` for a
            process with a CUDA context, ``"no_context"`` for a command's whole life).
        artefact_w: The board's polling artefact (its profile's), W, which bounds a probe file's
            span (None: as :meth:`IdleBaseline.from_probe` takes it).

    Raises:
        UsageError: a baseline whose power or bound is not finite and >= 0, watts as text, or
            anything else; watts the board cannot idle at (:func:`drawable`).
        RecordError: a probe file that cannot be read, or is another board's.
    """
    if isinstance(spec, IdleBaseline):
        values = (spec.power_w, spec.err_w)
        if not all(isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 for v in values):
            raise errors.UsageError(f"idle must have a finite power and bound >= 0, not {spec!r}")
        return drawable(spec, board) if spec.source == "given" else spec
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        return drawable(IdleBaseline.given(float(spec)), board)
    if isinstance(spec, str) and not Path(spec).exists() and watts_in(spec) is not None:
        raise errors.UsageError(f"idle={spec!r} is text: give watts as a number (idle={watts_in(spec):g})")
    if isinstance(spec, (str, Path)):
        return IdleBaseline.from_probe(Path(spec), board, level, artefact_w)
    raise errors.UsageError(f"idle must be 'measure', a probe file, watts or an IdleBaseline, not {spec!r}")


def watts_in(text: str) -> float | None:
    """The watts ``text`` spells (``"121.3"``, ``"121.3 W"``), or None where it spells no number (a path).

    ASCII digits only: Python's float() reads other scripts' digits too (``"١٢٣"`` is 123.0), which
    nobody types for an idle on purpose.
    """
    number = text.strip()
    number = number[:-1].rstrip() if number[-1:] in ("W", "w") else number
    # float() also takes "1_00" (100.0): a digit group nobody types for an idle
    if not number.isascii() or "_" in number:
        return None
    try:
        return float(number)
    except ValueError:
        return None


def idle_spec(text: str | None) -> str | Path | float:
    """An ``--idle`` option as a window's ``idle=``: None (measure), watts, or a probe file's path.

    Raises:
        UsageError: watts out of range, no file at the path, or text that is both watts (or
            ``measure``) and a file here (said before any work starts).
    """
    if text is None:
        return "measure"
    power_w = watts_in(text)
    named = power_w is not None or text.strip() == "measure"
    if named and os.path.lexists(text):  # a file named "80W" or "measure": which was meant?
        raise errors.UsageError(
            f"--idle {text!r} names a file here and is also {'watts' if power_w is not None else 'a word'}: "
            f"give ./{text} for the file"
        )
    if text.strip() == "measure":
        return "measure"
    if power_w is None:
        path = Path(text)
        if not path.is_file():
            why = "not a regular file" if os.path.lexists(path) else "no such file"
            raise errors.UsageError(f"--idle takes a probe file or watts, and {text!r} is neither ({why})")
        return path
    IdleBaseline.given(power_w)
    return power_w
