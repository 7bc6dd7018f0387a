"""Energy budgets: a window judged against a budget, and the record of a test run's windows.

The pytest plugin (:mod:`nvmeter.pytest_plugin`) judges each window a test meters and, with
``--energy-json``, writes them as a :class:`BudgetRecord` (kind ``pytest-energy``);
``nvmeter show`` reads it back with :func:`load_budgets`, every window's figures and verdict
recomputed from its raw readings. Neither pytest nor the meter is imported at load time: the
plugin stays light, and a record reads where pytest is not installed (it is no dependency).
"""

from __future__ import annotations

import json
import numbers
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from nvmeter import errors, records, verify
from nvmeter.meter.sanity import MAX_CALLS
from nvmeter.provenance import Provenance

KIND = "pytest-energy"
# pytest.ExitCode.INTERRUPTED (Ctrl-C): kept as a number, so reading a record needs no pytest
INTERRUPTED = 2
INTERRUPTED_LINE = "the session was interrupted: only the windows metered before are here"
# The keys the energy marker takes, each as it is when not given (no budget: refused).
_MARK_DEFAULTS = {"max_mj_per_call": None, "calls": 1, "device": None}
# A verdict's outcomes, in the order a summary counts them, and what a count of each says.
OUTCOMES = ("pass", "fail", "undecided", "unreliable", "measured")
_COUNTED = {"undecided": "undecided (the bound straddles the budget)", "measured": "measured (no budget)"}


@dataclass(frozen=True)
class Budget:
    """What ``@pytest.mark.energy(...)`` asks.

    Attributes:
        max_mj_per_call: Budget, mJ per call above idle.
        calls: Calls in the test call, when the marker meters it (default 1).
        device: CUDA index or ``GPU-…`` UUID (None: index 0).
    """

    max_mj_per_call: float
    calls: int = 1
    device: int | str | None = None

    @classmethod
    def from_mark(cls, mark) -> Budget:
        """The marker's budget.

        Raises:
            UsageError: unknown keys, a missing or non-positive budget, bad calls or device
                (:meth:`from_dict` refuses the same).
        """
        kwargs = dict(mark.kwargs)
        # energy(40000, 10), read as calls=10, was metered as one call (an adversarial review)
        if len(mark.args) > 1:
            raise errors.UsageError(
                f"energy marker: {len(mark.args)} positional arguments; give the budget alone by position "
                f"and the rest by name, e.g. @pytest.mark.energy({mark.args[0]!r}, calls=10)"
            )
        if mark.args and "max_mj_per_call" in kwargs:
            raise errors.UsageError(
                f"energy marker: the budget is given twice ({mark.args[0]!r} and "
                f"max_mj_per_call={kwargs['max_mj_per_call']!r}); keep one"
            )
        if mark.args:
            kwargs["max_mj_per_call"] = mark.args[0]
        unknown = sorted(set(kwargs) - set(_MARK_DEFAULTS))
        if unknown:
            # a window's keywords go on the fixture's energy(...) or the command line (a new user's trial)
            window = " (a window's keywords: energy(...) in the test, or pytest --energy-others-idle)"
            hint = window if "others_idle" in unknown else ""
            raise errors.UsageError(
                f"energy marker: unknown key(s) {unknown}; known: {list(_MARK_DEFAULTS)}{hint}"
            )
        if kwargs.get("max_mj_per_call") is None:
            raise errors.UsageError(
                "energy marker: the budget is required, mJ per call above idle: "
                "@pytest.mark.energy(max_mj_per_call=1500)"
            )
        try:
            return cls._checked({**_MARK_DEFAULTS, **_plain_numbers(kwargs)}, "energy marker: ")
        except records.BadField as exc:  # the marker's mistake, not a record's
            raise errors.UsageError(str(exc)) from exc

    @classmethod
    def from_dict(cls, d, where: str) -> Budget:
        """A budget as :meth:`Entry.to_dict` stores it: one that :meth:`from_mark` could have made.

        Raises:
            BadField: a field no marker gives, named under ``where``; KeyError for a missing one.
        """
        return cls._checked(records.mapping(d, where), f"{where}.")

    @classmethod
    def _checked(cls, d: dict, prefix: str) -> Budget:
        """The budget ``d`` holds, each field's name led by ``prefix`` in a refusal.

        One check for a marker and a record: a marker the plugin takes writes a record that show reads.

        Raises:
            BadField: a field of the wrong type or out of range; KeyError for a missing one.
        """
        budget = records.number(d["max_mj_per_call"], f"{prefix}max_mj_per_call")
        if not budget > 0:
            raise records.BadField(f"{prefix}max_mj_per_call is {budget!r}, not a number > 0")
        # the window's own limit, said as the marker's mistake before any window opens
        calls = records.integer(d["calls"], f"{prefix}calls", at_least=1, at_most=MAX_CALLS)
        device = d["device"]
        if device is not None and (isinstance(device, bool) or not isinstance(device, (int, str))):
            raise records.BadField(
                f"{prefix}device is {records.shown(device)}, not a CUDA index, a GPU-… UUID or null"
            )
        return cls(float(budget), calls, device)


def _plain_numbers(kwargs: dict) -> dict:
    """A marker's NumPy numbers as Python's: np.float64 was taken and np.int64 refused (a review).

    Whole numbers stay whole (calls); nothing else changes (a bool, text, None are judged as given).
    """
    plain = {}
    for key, value in kwargs.items():
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            value = int(value)
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            value = float(value)
        plain[key] = value
    return plain


@dataclass(frozen=True)
class Verdict:
    """A window judged against a budget.

    Attributes:
        outcome: ``"pass"``, ``"fail"``, ``"undecided"`` (the budget lies within the
            bound), ``"unreliable"`` (the figure itself is not), or ``"measured"`` (no budget).
        text: One line saying why.
    """

    outcome: str
    text: str


def judge(m, budget: Budget | None) -> Verdict:
    """Judge a Measurement's per-call figure (mJ above idle, with its bound) against a budget."""
    from nvmeter.meter.reasons import mj_text  # the meter's: the plugin loads without it

    # a 0.004 mJ/call window against a 0.002 budget read "0.0 ± 0.0 exceeds 0.0" (a review)
    figure = f"{mj_text(m.per_call_mj)} ± {mj_text(m.per_call_mj_err)} mJ/call"
    if (why := m.reason) is not None:  # every check of the window: once
        return Verdict("unreliable", f"energy {figure} is not reliable: {why}")
    if budget is None:
        return Verdict("measured", f"energy {figure}")
    limit = f"the budget of {mj_text(budget.max_mj_per_call)} mJ/call"
    low, high = m.per_call_mj - m.per_call_mj_err, m.per_call_mj + m.per_call_mj_err
    if high <= budget.max_mj_per_call:
        return Verdict("pass", f"energy {figure} is within {limit}")
    if low > budget.max_mj_per_call:
        return Verdict("fail", f"energy {figure} exceeds {limit}")
    return Verdict("undecided", f"energy {figure}: its bound straddles {limit} {_narrows(m)}")


def _narrows(m) -> str:
    """What narrows an undecided figure's bound, not only how to silence it (new users' trials, 2026-12-06).

    The idle's part of the bound is the idle's error over each call's own time: more calls do
    not narrow it (calls that drew ~0 above idle were told they would).
    """
    idle_mj = m.idle_part_mj
    if idle_mj >= m.per_call_mj_err / 2:
        return (
            f"(±{idle_mj:,.1f} mJ of the bound is the idle's, ±{m.idle_bound_w:.2f} W over each call's time: "
            "more calls do not narrow that part; the budget is too close to the figure to decide)"
        )
    # how to get a warm start, too: a marker alone meters the whole test, which starts from idle (a new user)
    return (
        "(more calls in the window narrow the bound, and so does a warm start: with the energy fixture, "
        "calls run just before its window and the idle given, --energy-idle=PROBE_FILE)"
    )


@dataclass(frozen=True)
class Entry:
    """One metered window of one test, judged.

    Attributes:
        nodeid: The test's pytest node id.
        measurement: The window (a :class:`~nvmeter.meter.measurement.Measurement`).
        budget: The marker's budget (None: the test has no marker).
        verdict: The window judged against it (:func:`judge`).
    """

    nodeid: str
    measurement: object
    budget: Budget | None
    verdict: Verdict

    def line(self) -> str:
        """The terminal summary's line."""
        return f"{self.nodeid}: {self.measurement!r} -> {self.verdict.outcome.upper()}: {self.verdict.text}"

    def to_dict(self) -> dict:
        """JSON form: the test, the budget, the verdict and the raw window."""
        return {
            "nodeid": self.nodeid,
            "budget": None if self.budget is None else asdict(self.budget),
            "outcome": self.verdict.outcome,
            "text": self.verdict.text,
            "window": self.measurement.to_dict(),
        }

    @classmethod
    def from_dict(cls, d, where: str) -> Entry:
        """Rebuild from :meth:`to_dict`: the window from its raw readings, its verdict judged again.

        Raises:
            BadField: a field of the wrong type or out of range, or a window that cannot be
                real, named under ``where``; KeyError for a missing field (both become a
                RecordError under :func:`nvmeter.records.building`).
        """
        from nvmeter.meter import measurement, windowcheck  # the meter loads only when a record is read

        records.mapping(d, where)
        records.text(d["nodeid"], f"{where}.nodeid")
        windowcheck.check_dict(d["window"], f"{where}.window")
        budget = None if d["budget"] is None else Budget.from_dict(d["budget"], f"{where}.budget")
        try:
            m = measurement.Measurement.from_dict(d["window"])
        except errors.RecordError as exc:  # it cannot say which of the record's windows it was
            raise records.BadField(f"{where}.window: {exc}") from exc
        return cls(d["nodeid"], m, budget, judge(m, budget))


@dataclass(frozen=True)
class BudgetRecord:
    """A test run's metered windows, judged: the plugin's ``--energy-json`` (kind ``pytest-energy``).

    Attributes:
        entries: Every window, in the order the tests metered them (empty: none was).
        session_status: pytest's exit status for the session (``pytest.ExitCode``: 0 all
            passed, 1 some failed, 2 interrupted, and so on); None where not known (a record
            from before it was kept, or one written outside a session).
        provenance: Where the record came from (:mod:`nvmeter.provenance`); None when not known.
    """

    entries: tuple[Entry, ...]
    session_status: int | None = None
    provenance: Provenance | None = None

    @property
    def interrupted(self) -> bool:
        """True when the session was cut short (Ctrl-C): later tests' windows are missing."""
        return self.session_status == INTERRUPTED

    def to_dict(self) -> dict:
        """The JSON record: each entry's test, budget, verdict and raw window, and how the session ended."""
        return {
            **records.header(KIND),
            "session_status": self.session_status,
            "provenance": None if self.provenance is None else self.provenance.to_dict(),
            "entries": [e.to_dict() for e in self.entries],
        }

    @classmethod
    def from_dict(cls, d: dict, on_entry: Callable[[int, int], None] | None = None) -> BudgetRecord:
        """Rebuild from :meth:`to_dict` (figures and verdicts are recomputed, not read).

        ``on_entry(done, total)``: called after each window is rebuilt (a record of hundreds
        takes seconds: docs/everyday.md).

        Raises:
            BadField, KeyError: as :meth:`Entry.from_dict`, or ``entries`` not a list.
        """
        records.items(d["entries"], "entries", records.mapping)
        # an exit status: one byte (an adversarial review's 2**64 read as a status)
        status = records.integer(d["session_status"], "session_status", at_least=0, at_most=255, none=True)
        origin = records.mapping(d["provenance"], "provenance", none=True)
        entries = []
        for i, e in enumerate(d["entries"]):
            entries.append(Entry.from_dict(e, f"entries[{i}]"))
            if on_entry is not None:
                on_entry(i + 1, len(d["entries"]))
        return cls(tuple(entries), status, None if origin is None else Provenance.from_dict(origin))

    def lines(self) -> list[str]:
        """What ``nvmeter show`` prints: the verdicts counted, then each window's line as pytest gave it."""
        cut = [INTERRUPTED_LINE] if self.interrupted else []
        if not self.entries:
            # tests skipped without a GPU meter nothing either (a new user read it as no plugin at all)
            return [
                *cut,
                "no window was metered (no test used the energy marker or fixture, or every one that did was "
                "skipped: without a GPU, run pytest with --energy-simulate)",
                *self._status_line(),
            ]
        n, tests = len(self.entries), len({e.nodeid for e in self.entries})
        counts = Counter(e.verdict.outcome for e in self.entries)
        verdicts = ", ".join(f"{counts[o]} {_COUNTED.get(o, o)}" for o in OUTCOMES if counts[o])
        reliable = sum(e.measurement.reliable for e in self.entries)
        head = f"{_count(n, 'window')} of {_count(tests, 'test')}: {verdicts}; {reliable} of {n} reliable"
        return [*cut, head, *(e.line() for e in self.entries), *self._status_line()]

    def _status_line(self) -> list[str]:
        """How pytest's session ended, where it did not pass (what failed is in pytest's own report)."""
        if self.session_status in (None, 0, INTERRUPTED):  # interrupted: said first
            return []
        return [f"pytest's session ended with status {self.session_status}: not every test passed"]


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def load_budgets(
    path: Path, on_entry: Callable[[int, int], None] | None = None, parsed: dict | None = None
) -> BudgetRecord:
    """Read a ``pytest-energy`` record, every window's figures and verdict verified against its raw readings.

    ``on_entry(done, total)``: progress, after each window is rebuilt (:meth:`BudgetRecord.from_dict`).
    ``parsed``: the file's JSON, where the caller has parsed it already (:func:`nvmeter.records.parse_json`).

    Raises:
        RecordError: unreadable, another kind or schema, damaged (a field of the wrong type
            or out of range, a raw series that cannot be real: :mod:`nvmeter.meter.sanity`),
            or a stored figure or verdict that differs from its recomputation.
    """
    data = records.read_json(path, KIND, parsed)
    _refuse_copies(path, data)
    with records.building(path, KIND):
        record = BudgetRecord.from_dict(data, on_entry)
        checks = [
            check
            for i, entry in enumerate(record.entries)
            for check in _checks(data["entries"][i], entry, f"entries[{i}]")
        ]
    verify.check(path, checks)
    return record


def _refuse_copies(path: Path, data: dict) -> None:
    """A window that repeats another's board, work times and edge reads was copied: no two windows do.

    The work's start and end on the board's clock tell apart even windows of ``method="samples"``,
    which read no counter; the key leaves out the power samples, the bulk of a long window's
    record, so the check costs no second pass over them. An adversarial review copied one passing
    window over another, and ``show`` counted two passes.

    Raises:
        RecordError: naming both windows.
    """
    seen: dict[str, int] = {}
    entries = data.get("entries")
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        window = entry.get("window") if isinstance(entry, dict) else None
        if not isinstance(window, dict):
            continue  # a malformed entry is the rebuild's to name
        which = [window.get(k) for k in ("device", "work_t0_s", "work_t1_s", "start", "end")]
        key = json.dumps(which, sort_keys=True, default=str)
        if key in seen:
            raise errors.RecordError(
                f"{path}: entries[{i}]'s window repeats entries[{seen[key]}]'s board, times and edge reads: "
                "a window copied, not measured (an altered record)"
            )
        seen[key] = i


def _checks(stored: dict, entry: Entry, where: str) -> list[tuple[str, object, object]]:
    """The entry's stored window figures and verdict, each beside its recomputation.

    The window's ``derived`` block is recomputed inside :func:`nvmeter.records.building`, so a
    raw series that breaks the arithmetic is this record's damage, not nvmeter's error.
    """
    verdict = {"outcome": entry.verdict.outcome, "text": entry.verdict.text}
    return [
        (f"{where}.window.derived", stored["window"].get("derived"), entry.measurement.derived()),
        (where, {key: stored[key] for key in verdict}, verdict),
    ]
