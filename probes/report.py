"""``nvmeter probe``: run the probes on a rig and assemble the report.

The report keeps every probe's raw series; :func:`load_report` rebuilds the probe
records from them, so every derived figure in a probe file can be recomputed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from nvmeter import errors, probes, provenance, records, verify
from nvmeter.boards.protocol import BoardIdentity
from nvmeter.meter import sanity
from nvmeter.probes import coverage, runlevels
from nvmeter.provenance import Provenance
from nvmeter.worker.rig import Rig


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class ProbeReport:
    """A board's characterisation: identity, when, and one record per probe.

    Attributes:
        board: The board probed.
        started_utc, finished_utc: ISO 8601 timestamps.
        quick: Whether the ``--quick`` subset ran.
        provenance: Which machine and software made it.
        probes: Probe name -> its record (see :mod:`nvmeter.probes`).

    """

    board: BoardIdentity
    started_utc: str
    finished_utc: str
    quick: bool
    provenance: Provenance
    probes: dict

    def derived(self) -> dict:
        """Every probe's derived figures."""
        return {name: rec.derived() for name, rec in self.probes.items()}

    def profile(self):
        """The board's :class:`~nvmeter.boards.profile.BoardProfile`, from the probes that measured it."""
        from nvmeter.probes.profile import profile_from_report

        return profile_from_report(self)

    def rows(self) -> list[tuple[str, str]]:
        """Summary-table rows of every probe, in run order (first, the energy scope where module-wide)."""
        scope = [("energy scope", f"{self.board.scope_note} (the counter covers the whole module)")]
        return (
            (scope if self.board.scope_note else [])
            + [row for rec in self.probes.values() for row in rec.rows()]
            + self._run_level_rows()
            + self._lag_rows()
        )

    def _run_level_rows(self) -> list[tuple[str, str]]:
        """What the profile keeps of a run-level probe: its figure, or the family's wider default."""
        if "run_levels" not in self.probes:
            return []
        from nvmeter.boards.profile import default_profile

        kept, family = self.profile().run_level_rel, default_profile(self.board.name).run_level_rel
        if kept > family:
            return [
                ("run level kept", f"{100 * kept:.2f}%, this probe's, over the family's {100 * family:.1f}%")
            ]
        return [
            (
                "run level kept",
                f"{100 * family:.1f}%, the family's default: a probe widens it and never narrows it "
                "(docs/probe.md)",
            )
        ]

    def _lag_rows(self) -> list[tuple[str, str]]:
        """The power-lag bound the profile keeps, and why: widened to the step's delay, or the family's.

        A step that placed no delay kept the family's bound without a word (a breaker's trial, 2026-12-07).
        """
        if "step" not in self.probes:
            return []
        from nvmeter.boards.profile import default_profile
        from nvmeter.probes.profile import LAG_DERIVATION, lag_reach_s, step_read_s

        kept, family = self.profile(), default_profile(self.board.name)
        bound = f"{1e3 * kept.power_lag_s:.1f} ± {1e3 * kept.power_lag_err_s:.1f} ms"
        reach_s = lag_reach_s(self.probes["step"])
        if kept.power_lag_err_s > family.power_lag_err_s:
            # the parts, since the step's own row shows its best delays, not the latest that fits (a new user)
            read_ms = 1e3 * step_read_s(self.probes["step"])
            why = (
                f"widened to reach this board's counter delay, {1e3 * reach_s:.1f} ms (the latest delay the "
                f"step fits, {1e3 * reach_s - read_ms:.1f} ms, and a read, {read_ms:.1f} ms)"
            )
            if kept.tail_s > family.tail_s:
                why += f"; the exit's tail with it, {1e3 * kept.tail_s:.0f} ms"
        elif reach_s is None:
            step = self.probes["step"]
            why = (
                f"the family's: a record of step derivation {step.derivation}, made before a probe widened it"
                if step.derivation < LAG_DERIVATION
                else "the family's: the step response placed no delay (a flat or blurred step)"
            )
        else:
            why = f"the family's, which reaches this board's counter delay, {1e3 * reach_s:.0f} ms"
        return [("power lag kept", f"{bound}, {why}")]

    def to_dict(self) -> dict:
        """The JSON record (kind ``probe``, its current version; docs/formats.md)."""
        return {
            **records.header("probe"),
            "started_utc": self.started_utc,
            "finished_utc": self.finished_utc,
            "quick": self.quick,
            "provenance": self.provenance.to_dict(),
            "board": self.board.to_dict(),
            # derived, like every probe's figures: what windows on this board use (nvmeter.boards.profile)
            "profile": self.profile().to_dict(),
            "probes": {
                name: {"raw": rec.to_dict(), "derived": rec.derived()} for name, rec in self.probes.items()
            },
        }

    @classmethod
    def from_dict(cls, data: dict) -> ProbeReport:
        """Rebuild from a record of the current version; derived figures are recomputed from the raw series.

        Older versions are upgraded by :func:`nvmeter.records.read_json` (or
        :func:`nvmeter.formats.upgrade`) first.

        Raises:
            RecordError: a probe's raw series is missing or malformed.
            KeyError: a field of the record is missing.

        """
        built = {}
        if not isinstance(data["probes"], dict):
            raise errors.RecordError("the probe file's 'probes' is not a mapping")
        for name, entry in data["probes"].items():
            if name not in probes.RECORDS:
                raise errors.RecordError(f"unknown probe {name!r} in the probe file")
            try:
                built[name] = probes.RECORDS[name].from_dict(entry["raw"])
            except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
                what = f"no field {exc.args[0]!r}" if isinstance(exc, KeyError) and exc.args else str(exc)
                raise errors.RecordError(
                    f"probe {name!r} in the probe file is malformed ({what}): edited, or cut short?"
                ) from exc
        return cls(
            board=BoardIdentity.from_dict(data["board"]),
            started_utc=data["started_utc"],
            finished_utc=data["finished_utc"],
            quick=data["quick"],
            provenance=Provenance.from_dict(data["provenance"]),
            probes=built,
        )


def load_report(path: Path, board: BoardIdentity | None = None, parsed: dict | None = None) -> ProbeReport:
    """Read a probe file (any version: docs/formats.md), its derived figures verified.

    With ``board``, check that it was made on that board (UUID). ``parsed``: the file's JSON,
    where the caller has parsed it already (:func:`nvmeter.records.parse_json`).

    Raises:
        RecordError: unreadable, another schema, another board, malformed, no probes, a raw
            series that cannot be real (the counter going backwards, a span ending before it
            starts, a job without products: :mod:`nvmeter.meter.sanity`), or a stored derived
            figure that differs from its recomputation from the raw series.

    """
    data = records.read_json(path, "probe", parsed)
    with records.building(path, "probe"):
        records.board(data["board"], "board")
        records.text(data["started_utc"], "started_utc")
        records.text(data["finished_utc"], "finished_utc")
        if not isinstance(data["quick"], bool):
            raise records.BadField(f"quick is {data['quick']!r}, not true or false")
        records.counters(data["probes"], "probes")
        # before the probes are built: a damaged series is named at its field, not by the
        # builder's Python error (an adversarial review, 2026-12-06)
        for name, entry in records.mapping(data["probes"], "probes").items():
            sanity.refuse(records.mapping(entry, f"probes.{name}")["raw"], name)
        report = ProbeReport.from_dict(data)
        if not report.probes:
            raise errors.RecordError(f"{path} holds no probe results; run nvmeter probe again")
        report.derived()  # a damaged series fails here, not later in a table
        verify_report(path, data, report)  # inside: its recomputation's numpy warnings are silenced too
    if board is not None and report.board.uuid != board.uuid:
        raise errors.RecordError(
            f"{path} was made on {report.board.name} {report.board.uuid}, not on this board {board.uuid}"
        )
    return report


def verify_report(path: Path, data: dict, report: ProbeReport) -> None:
    """Refuse a probe file whose stored ``derived`` blocks or ``profile`` differ from its raw series'.

    Each probe's figures are derived again from its raw series by this nvmeter and compared
    with the file's, as ``nvmeter summarize`` does for score records.

    Raises:
        RecordError: one line naming the first figure that differs, with both values.

    """
    checks = [
        (f"probes.{name}.derived", data["probes"][name].get("derived"), rec.derived())
        for name, rec in report.probes.items()
    ]
    if data.get("profile") is not None:  # derived too: what windows given this file use
        checks.append(("profile", data["profile"], report.profile().to_dict()))
    verify.check(path, checks)


def for_cache(report: ProbeReport) -> ProbeReport:
    """The probe record the cache keeps after ``report``: this run's probes over those it kept.

    A run of some probes (``--only``) so keeps what an earlier run measured, and the profile is
    derived from the probes' raw series whenever a window reads it. A kept record that is
    damaged, or a profile kept without its probes, is replaced (this run's alone).

    Raises:
        NewerRecord: the kept record is a newer nvmeter's; it is not replaced (a breaker: its wider
            run level was dropped without a word).
    """
    from nvmeter.boards.profile import cached_report

    try:
        kept = cached_report(report.board)
    except errors.NewerRecord:  # a newer nvmeter's: its run level may be wider than this run's
        raise
    except errors.RecordError:  # damaged, or a profile kept without its probes: replaced
        kept = None
    if kept is None:
        return report
    # the record spans both runs, and is quick where any probe it keeps ran quick: this run's, or
    # the kept run's that this one did not replace (a quick run after a full one had labelled the
    # full run's polling and samples quick: an adversarial review; the reverse, a review)
    kept_quick = kept.quick and bool(set(kept.probes) - set(report.probes))
    probes = {**kept.probes, **report.probes}
    if "run_levels" in kept.probes and "run_levels" in report.probes:
        # a board's run level only widens: a later probe that missed the level does not undo an
        # earlier one that saw it (three probes of one H100 read 3.09%, 3.46%, then 1.81%)
        probes["run_levels"] = runlevels.wider_levels(kept.probes["run_levels"], probes["run_levels"])
    if "coverage" in kept.probes and "coverage" in report.probes:  # likewise, a coverage only narrows
        probes["coverage"] = coverage.lower_coverage(kept.probes["coverage"], probes["coverage"])
    return replace(
        report,
        started_utc=min(kept.started_utc, report.started_utc),
        quick=report.quick or kept_quick,
        probes=probes,
    )


def budget_s(quick: bool, only: tuple[str, ...] = ()) -> float:
    """Expected duration of a run's measurements, s (:func:`nvmeter.probes.schedule.expected_s`)."""
    from nvmeter.probes import schedule

    return schedule.expected_s(quick, needs(selection(quick, only), quick))


def needs(chosen, quick: bool) -> set[str]:
    """The schedule's measurements the chosen probe modules are made of."""
    return set().union(*(m.needs(quick) for m in chosen)) if chosen else set()


def selection(quick: bool, only: tuple[str, ...] = ()) -> list:
    """The probe modules a run makes, in order.

    Raises:
        UsageError: an unknown name in ``only``, or one that the ``quick`` subset skips (it
            would silently not run; with nothing else, an empty record would be written).

    """
    unknown = sorted(set(only) - set(probes.BY_NAME))
    if unknown:
        raise errors.UsageError(f"unknown probe(s) {', '.join(unknown)}; known: {', '.join(probes.BY_NAME)}")
    offered = [m.NAME for m in probes.offered(quick)]
    skipped = sorted(set(only) - set(offered))
    if skipped:  # asked for, and would silently not run
        raise errors.UsageError(
            f"--quick skips {', '.join(skipped)} (it runs {', '.join(offered)}); run it without --quick"
        )
    if only:
        return [m for m in probes.offered(quick) if m.NAME in only]
    return list(probes.selected(quick))


def check_readings(name: str, record) -> None:
    """A probe's readings must make physical sense before any figure is made of them.

    Raises:
        CounterFault: the energy counter went backwards (a driver reload, a counter fault).
        TelemetryError: another reading that cannot be real.

    """
    for where, why in sanity.faults(record.to_dict(), name):
        if why == sanity.COUNTER_BACKWARDS:
            raise errors.CounterFault(
                f"the energy counter went backwards during the {name} probe (at {where}; a driver "
                "reload or a counter fault): its figures would be wrong; nothing written"
            )
        raise errors.TelemetryError(f"the {name} probe read something impossible: {why} (at {where})")


def run_probes(
    rig: Rig,
    quick: bool = False,
    only: tuple[str, ...] = (),
    on_probe: Callable[[object, float], None] | None = None,
) -> ProbeReport:
    """Run the probes (all, the quick subset, or ``only`` these) and return the report.

    The probes share their measurements: :mod:`nvmeter.probes.schedule` makes each one the
    chosen probes need once, in its order, and each probe's record is assembled from them.

    Args:
        rig: The board and its worker.
        quick: Fewer, shorter probes.
        only: Probe names to run (default: all of the selection).
        on_probe: Called as each of the schedule's measurements starts, with it (``NAME`` and
            ``TITLE``, as a probe module has them) and the elapsed host time (s).

    Raises:
        UsageError: an unknown probe name, or one ``quick`` skips (:func:`selection`).
        CounterFault: the energy counter went backwards during a probe.
        TelemetryError, WorkerError: as they happen; the worker is always resumed and reaped.

    """
    from nvmeter.probes import schedule

    chosen = selection(quick, only)
    started = _utc_now()
    t0 = time.monotonic()

    def on_step(step) -> None:
        if on_probe:
            on_probe(step, time.monotonic() - t0)

    results = {}
    with rig:
        measured = schedule.measure(rig, quick, needs(chosen, quick), on_step)
        for module in chosen:
            results[module.NAME] = module.assemble(measured, quick)
            check_readings(module.NAME, results[module.NAME])
    return ProbeReport(rig.board.identity(), started, _utc_now(), quick, provenance.collect(), results)
