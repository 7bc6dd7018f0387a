"""One run of ``nvmeter score``: what it measured (raw), and every figure derived from that.

A :class:`RunRecord` holds raw readings only: each timed call's ms and correct count, the
reference's spans, the idle spans with what the board said about itself meanwhile, and the
control and method windows (their counter edges, ticks and samples as
:class:`~nvmeter.meter.measurement.Measurement` keeps them) with the worker's timestamps of the calls.
Every figure (the verdict, ms per call, mJ per call above idle and its bound, the checks) is
a property computed from those, so ``nvmeter summarize`` recomputes a record with today's
code and refuses one whose stored figures disagree.

The record's JSON form (kind ``score``) carries ``schema_version``; its versions and the
upgrades from each earlier one are in :mod:`nvmeter.formats` (docs/formats.md).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass

from nvmeter import errors, records
from nvmeter.boards.protocol import BoardIdentity
from nvmeter.provenance import Provenance
from nvmeter.score.checks import Check, energy_checks
from nvmeter.score.config import DrawPlan, ScoreConfig
from nvmeter.score.readings import Energy, TimedCall
from nvmeter.score.target import Target
from nvmeter.workloads import judge
from nvmeter.workloads.versions import SCHEMES

# The largest run number a record may hold (check_record).
MAX_RUN_NUMBER = 10**6

KIND = "score"


@dataclass(frozen=True)
class RunRecord:
    """One run: raw readings, with every figure derived on demand.

    Attributes:
        run: Its number in the output folder (1, 2, …).
        target: The method.
        difficulty: The level it was judged at.
        board: The board.
        config: How it was measured.
        plan: Its draws.
        worker_pid: The worker's process id (None if it never started).
        warmup_ms: Warm-up calls' times, ms.
        calls: The timed calls, in the order they ran.
        energy: The energy readings (None: the run did not pass, or failed before).
        error: Why the run stopped early (the worker died, hung, sent garbage; the method
            raised or returned bad output), or None.
        created_utc: When the run started (ISO 8601).
        provenance: Which machine and software made it.
        rederived: Notes of bench/rederive_score.py (commit, why, first change), one per
            re-derivation of the stored figures under a changed rule (empty as written).

    """

    run: int
    target: Target
    difficulty: int
    board: BoardIdentity
    config: ScoreConfig
    plan: DrawPlan
    worker_pid: int | None = None
    warmup_ms: tuple[float, ...] = ()
    calls: tuple[TimedCall, ...] = ()
    energy: Energy | None = None
    error: str | None = None
    created_utc: str = ""
    provenance: Provenance | None = None
    rederived: tuple[dict, ...] = ()

    # -- time and accuracy ---------------------------------------------------------
    @property
    def complete(self) -> bool:
        """True when every planned timed call ran."""
        return self.error is None and len(self.calls) == len(self.plan.order)

    @property
    def verdict(self) -> judge.Verdict | None:
        """The judge's verdict over the timed calls made (None before any MNIST call)."""
        mnist = [
            judge.Score(c.dataset, c.seed, c.correct, c.rows) for c in self.calls if c.dataset == "mnist"
        ]
        holdout = [
            judge.Score(c.dataset, c.seed, c.correct, c.rows) for c in self.calls if c.dataset != "mnist"
        ]
        return judge.judge(mnist, holdout, self.difficulty) if mnist else None

    @property
    def passed(self) -> bool:
        """Every timed call ran and the judge passed them."""
        verdict = self.verdict
        return self.complete and verdict is not None and verdict.passed

    @property
    def ms_per_call(self) -> float:
        """Median of the timed calls, ms (nan with none)."""
        return statistics.median(c.ms for c in self.calls) if self.calls else math.nan

    @property
    def mnist_accuracy(self) -> float:
        """Correct share of the MNIST timed calls (nan with none)."""
        v = self.verdict
        return v.mnist_correct / v.mnist_rows if v else math.nan

    @property
    def holdout_accuracy(self) -> float:
        """Correct share of the hold-out timed calls (nan with none)."""
        v = self.verdict
        return v.holdout_correct / v.holdout_rows if v and v.holdout_rows else math.nan

    # -- energy --------------------------------------------------------------------
    @property
    def checks(self) -> tuple[Check, ...]:
        """The energy figure's checks (empty without energy readings)."""
        if self.energy is None:
            return ()
        timed = [c.ms for c in self.calls]
        return energy_checks(self.energy, self.difficulty, timed, self.config.window_ms_tolerance)

    @property
    def energy_valid(self) -> bool:
        """A passing run with energy readings and no failed check."""
        return self.passed and self.energy is not None and not any(c.status == "fail" for c in self.checks)

    @property
    def energy_note(self) -> str:
        """Why there is no energy figure, or ``""``."""
        if self.error:
            return "not measured: the run failed"
        if not self.passed:
            return "not measured: the run did not pass"
        if self.energy is None:
            return "not measured"
        failed = [c.name for c in self.checks if c.status == "fail"]
        return f"void: {', '.join(failed)} failed" if failed else ""

    @property
    def status(self) -> str:
        """``"error"``, ``"fail"`` or ``"pass"`` (time and accuracy; see :attr:`energy_note`)."""
        if self.error:
            return "error"
        return "pass" if self.passed else "fail"

    def reasons(self) -> tuple[str, ...]:
        """Why the run failed, one line each (empty on a pass)."""
        if self.error:
            return (self.error,)
        verdict = self.verdict
        reasons = list(verdict.reasons) if verdict else []
        if not self.complete:
            reasons.append(f"{len(self.calls)} of {len(self.plan.order)} timed calls ran")
        return tuple(reasons)

    @property
    def w_above_idle(self) -> float:
        """Power above idle while the method runs: mJ per call / timed ms per call, W.

        As the A100 table's column reads (e.g. 2,429 mJ / 61.6 ms = 39 W for the CUDA-graph
        MLP): the energy window's back-to-back calls over the isolated timed calls' time, so not
        quite the power the window drew (``window_ms_consistent`` holds the two times to 10%);
        nan without energy readings.
        """
        if self.energy is None or not self.calls:
            return math.nan
        return self.energy.method.per_call_mj / self.ms_per_call

    def energy_figures(self) -> dict | None:
        """Per-call energy and what it rests on (None without energy readings)."""
        e = self.energy
        if e is None:
            return None
        m, c = e.method, e.control
        return {
            "mj_per_call": m.per_call_mj,
            "mj_per_call_err": m.per_call_mj_err,
            "w_above_idle": self.w_above_idle,
            "window_s": m.window_s,
            "window_calls": m.calls,
            "idle_w": m.idle_w,
            "idle_err_w": m.idle.err_w,
            "control_mj_per_call": c.per_call_mj,
            "control_mj_per_call_err": c.per_call_mj_err,
            "control_calls": c.calls,
            "samples_mj_per_call": e.samples_per_call_mj,
            "reference_j_per_tflop": e.reference.j_per_tflop,
            "reference_tflops": e.reference.tflops,
            "method": m.to_dict()["derived"],
            "control": c.to_dict()["derived"],
        }

    def derived(self) -> dict:
        """Every figure of the run, recomputed from the raw readings."""
        verdict = self.verdict
        return {
            "status": self.status,
            "reasons": list(self.reasons()),
            "full_task": self.config.full_task,
            "ms_per_call": self.ms_per_call,
            "ms_min": min((c.ms for c in self.calls), default=math.nan),
            "ms_max": max((c.ms for c in self.calls), default=math.nan),
            "mnist_accuracy": self.mnist_accuracy,
            "holdout_accuracy": self.holdout_accuracy,
            "verdict": verdict.to_dict() if verdict else None,
            "energy_valid": self.energy_valid,
            "energy_note": self.energy_note,
            "energy": self.energy_figures(),
            "checks": [asdict(c) for c in self.checks],
        }

    def __repr__(self) -> str:
        text = f"run {self.run} {self.target.name} d{self.difficulty}: {self.status.upper()}"
        if self.calls:
            text += f", {self.ms_per_call:,.1f} ms/call, MNIST {self.mnist_accuracy:.2%}"
        if self.energy_valid:
            m = self.energy.method
            text += f", {m.per_call_mj:,.1f} ± {m.per_call_mj_err:,.1f} mJ/call above idle"
        elif self.energy_note:
            text += f", energy {self.energy_note}"
        return f"{text} ({self.board.short})" if not self.error else f"{text}: {self.error}"

    # -- JSON ----------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The record in the current version: raw readings, provenance, and the derived figures."""
        return {
            **records.header(KIND),
            "created_utc": self.created_utc,
            "provenance": self.provenance.to_dict() if self.provenance is not None else None,
            "rederived": list(self.rederived),
            "run": self.run,
            "target": self.target.to_dict(),
            "difficulty": self.difficulty,
            "board": self.board.to_dict(),
            "config": self.config.to_dict(),
            "plan": self.plan.to_dict(),
            "worker_pid": self.worker_pid,
            "warmup_ms": list(self.warmup_ms),
            "calls": [asdict(c) for c in self.calls],
            "energy": self.energy.to_dict() if self.energy else None,
            "error": self.error,
            "derived": self.derived(),
        }

    @classmethod
    def from_dict(cls, d: dict) -> RunRecord:
        """Rebuild from :meth:`to_dict` (stored derived figures are not read).

        ``d`` is of the current version: :func:`nvmeter.records.read_json` upgrades older ones.

        Raises:
            BadField (a ValueError): a field of the wrong type or out of range, named, or a
                malformed energy window; KeyError, TypeError, ValueError: other damage (the
                caller names the file: :func:`nvmeter.records.building`).
        """
        check_record(d)
        try:
            return cls._from_dict(d)
        except (
            errors.RecordError
        ) as exc:  # a malformed Measurement: a ValueError here, so the caller names the file
            raise records.BadField(str(exc)) from exc

    @classmethod
    def _from_dict(cls, d: dict) -> RunRecord:
        return cls(
            run=d["run"],
            target=Target.from_dict(d["target"]),
            difficulty=d["difficulty"],
            board=BoardIdentity.from_dict(d["board"]),
            config=ScoreConfig.from_dict(d["config"]),
            plan=DrawPlan.from_dict(d["plan"]),
            worker_pid=d["worker_pid"],
            warmup_ms=tuple(d["warmup_ms"]),
            calls=tuple(TimedCall(**c) for c in d["calls"]),
            energy=Energy.from_dict(d["energy"]) if d["energy"] is not None else None,
            error=d["error"],
            created_utc=d["created_utc"],
            provenance=Provenance.from_dict(d["provenance"]) if d["provenance"] is not None else None,
            rederived=tuple(d["rederived"]),
        )


def _duration_ms(value, where: str):
    return records.number(value, where, at_least=0)


def check_record(d: dict) -> None:
    """A score record's fields that the tables show or sort by have their types, and its counters count.

    Raises:
        BadField: the first field that is wrong, named as a dotted path; KeyError for a
            missing one.
    """
    # a folder's runs are numbered on across invocations of at most MAX_RUNS each; a million is
    # past any folder's (an adversarial review's 2**64 was summarised as a run)
    records.integer(d["run"], "run", at_least=1, at_most=MAX_RUN_NUMBER)
    records.integer(d["difficulty"], "difficulty")
    target = records.mapping(d["target"], "target")
    for key in ("name", "file", "function", "sha256"):
        records.text(target[key], f"target.{key}")
    if not isinstance(target["registered"], bool):
        raise records.BadField(f"target.registered is {target['registered']!r}, not true or false")
    records.integer(target["difficulty"], "target.difficulty", none=True)
    records.mapping(target["sources"], "target.sources", none=True)
    scheme = target["sources_scheme"]
    if isinstance(scheme, bool) or scheme not in ((None,) if target["sources"] is None else SCHEMES):
        raise records.BadField(
            f"target.sources_scheme is {scheme!r}, not one of {SCHEMES} (null without sources)"
        )
    records.board(d["board"], "board")
    records.text(d["created_utc"], "created_utc")
    records.text(d["error"], "error", none=True)
    records.integer(d["worker_pid"], "worker_pid", none=True)
    records.items(d["warmup_ms"], "warmup_ms", records.number)
    records.items(d["calls"], "calls", records.mapping)
    if d["energy"] is not None:
        energy = records.mapping(d["energy"], "energy")
        records.counters(energy, "energy")
        for where, block, span in _blocks(energy):  # each block's call times are times, in its span
            records.mapping(block, where)
            records.items(block["ms"], f"{where}.ms", _duration_ms)
            _ran_in(block, where, span)


def _blocks(energy: dict) -> list[tuple[str, dict, tuple[float, float, str]]]:
    """Each block of calls, where it is, and the span it ran in (nvmeter.score.procedure's order).

    The control's and the method's calls ran inside their windows' work; the warm-up's, between
    the two windows. The worker's times and the windows' share one clock (CLOCK_MONOTONIC, or
    the simulated board's), and each block's command is sent once its span began and answered
    before the span ends: a genuine record always has them in order.
    """

    def work(part: str, key: str) -> float:
        window = records.mapping(energy[part]["window"], f"energy.{part}.window")
        return records.number(window[key], f"energy.{part}.window.{key}")

    control = (work("control", "work_t0_s"), work("control", "work_t1_s"), "its window")
    method = (work("method", "work_t0_s"), work("method", "work_t1_s"), "its window")
    found = [("energy.control.block", energy["control"]["block"], control)]
    found.append(("energy.method.block", energy["method"]["block"], method))
    if energy["warmup"] is not None:
        between = (control[1], method[0], "the gap between the windows")
        found.append(("energy.warmup", energy["warmup"], between))
    return found


def _ran_in(block: dict, where: str, span: tuple[float, float, str]) -> None:
    """The block's ``t0_s`` and ``t1_s`` lie in order inside ``span`` (after, before, name), or BadField."""
    t0_s, t1_s = (records.number(block[key], f"{where}.{key}") for key in ("t0_s", "t1_s"))
    records.span_inside(where, t0_s, t1_s, span[:2], span[2])
