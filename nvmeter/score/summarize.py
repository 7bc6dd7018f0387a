"""``nvmeter summarize``: the published tables, recomputed from the raw records.

Every record is rebuilt from its raw readings (:meth:`nvmeter.score.record.RunRecord.from_dict`)
and every figure recomputed by this nvmeter; a stored figure that disagrees with its
recomputation is an error (the record was altered, or written by code whose figures
differ: re-run, or summarize with the nvmeter that wrote it). The tables then take
medians over the passing runs of each method, as the A100 tables do (median of 3 runs).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import tempfile
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nvmeter import errors, formats, provenance, records
from nvmeter import verify as verify_figures
from nvmeter.meter import errormodel, sanity
from nvmeter.score.procedure import folder_runs, run_paths
from nvmeter.score.record import RunRecord


# -- loading and verifying ----------------------------------------------------------------
def verify(path: Path, data: dict, record: RunRecord) -> None:
    """Refuse a record whose stored figures differ from those recomputed from its raw readings.

    Raises:
        RecordError: naming the first figure that differs, with both values.

    """
    checks = [("derived", data.get("derived"), record.derived())]
    if record.energy is not None:
        for name, m in (("control", record.energy.control), ("method", record.energy.method)):
            stored = data["energy"][name]["window"].get("derived")
            checks.append((f"energy.{name}.window.derived", stored, m.to_dict()["derived"]))
    verify_figures.check(path, checks)


def _runs_below(folder: Path) -> list[Path]:
    """The subfolders of ``folder`` that hold score records (a session's runs, kept one level down)."""
    return [p for p in sorted(folder.iterdir()) if p.is_dir() and run_paths(p)]


def load_records(
    paths: Iterable[Path], on_empty: Callable[[Path, list[Path]], None] | None = None
) -> list[tuple[Path, RunRecord]]:
    """Every score record in the given folders (``run-*.json``, ``run-*.json.gz``) or files, verified.

    A folder with no records of its own (subfolders are not searched) is passed to
    ``on_empty`` when others hold some, so that a glob's stray folder is said, not lost, with
    its subfolders that do hold records (a session kept one level down).

    Raises:
        UsageError: a path that does not exist, or no records at all.
        RecordError: a damaged record, another kind or schema, or a stored figure that
            disagrees with its recomputation.

    """
    from nvmeter.score.record import KIND

    found: list[tuple[Path, dict]] = []
    empty: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            runs = folder_runs(path)
            found += runs
            empty += [] if runs else [path]
        elif path.exists():  # read_json refuses what is not a regular file (a device, a FIFO)
            parsed = records.parse_json(path, f"an nvmeter {KIND} record", KIND)
            kind = parsed.get("kind") if isinstance(parsed, dict) else None
            if kind in formats.SHOWN_KINDS:  # a record `nvmeter show` prints
                raise errors.UsageError(
                    f"{path} is a {kind} record, not a score record: read it with `nvmeter show {path}`"
                )
            found.append((path, records.read_json(path, KIND, parsed)))
        else:
            raise errors.UsageError(f"{path}: no such folder or file")
    if not found:
        # a new user gave results/score-h200, whose records lie one folder down (a trial, 2026-12-07)
        below = [p for d in empty for p in _runs_below(d)]
        hint = f": its subfolders hold them ({below[0].parent}/*)" if below else ""
        where = ", ".join(map(str, paths))
        raise errors.UsageError(f"no score records (run-*.json, run-*.json.gz) in {where}{hint}")
    for path in empty if on_empty is not None else ():
        on_empty(path, _runs_below(path))
    out = []
    seen: set[Path] = set()
    copies: dict[str, Path] = {}
    twins: list[str] = []
    for path, data in found:
        if path.resolve() in seen:  # named twice (a folder and its file, or twice): count once
            continue
        seen.add(path.resolve())
        content = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
        if content in copies:  # one run copied into two folders is one run
            twins.append(f"{path} (of {copies[content]})")
            continue
        copies[content] = path
        with records.building(path, KIND):
            record = RunRecord.from_dict(data)
            # every raw series the record holds (windows, idle spans, the reference's), as show's are:
            # an adversarial review's inf, negative and x1000 samples summarised as a PASS
            sanity.refuse(data)
            record.derived()  # recompute once here so a damaged raw series is this record's error
        verify(path, data, record)
        out.append((path, record))
    if twins:
        warnings.warn(
            f"copies of a run, each counted once: {', '.join(twins)}", errors.NvmeterWarning, stacklevel=2
        )
    return out


# -- the error model ------------------------------------------------------------------------
def under_model(record: RunRecord, version: int) -> RunRecord:
    """``record`` with its windows' bounds derived by error model ``version``, not the one it names.

    A record keeps its model, so that a model change does not move a published table; this
    re-reads its raw readings as a window made today would be read, for a table beside it.

    Raises:
        RecordError: no such error model.
    """
    errormodel.model(version)  # an unknown version fails here, once
    e = record.energy
    if e is None:
        return record
    windows = {
        name: replace(getattr(e, name), model_version=version) for name in ("control_window", "method_window")
    }
    return replace(record, energy=replace(e, **windows))


# -- the tables ---------------------------------------------------------------------------
@dataclass(frozen=True)
class MethodSummary:
    """One method at one difficulty over its runs.

    Medians are over passing runs (energy: over runs whose energy figure stands). The bound
    on the median energy is the largest of the runs' bounds: if every run's value is within
    its bound of the truth, their median is within the largest bound of the truths' median.

    Attributes:
        name: The method.
        difficulty: Its level.
        runs: Its runs, in run order.

    """

    name: str
    difficulty: int
    runs: tuple[RunRecord, ...]

    @property
    def passing(self) -> tuple[RunRecord, ...]:
        """Runs that passed the judge."""
        return tuple(r for r in self.runs if r.passed)

    @property
    def metered(self) -> tuple[RunRecord, ...]:
        """Passing runs whose energy figure stands."""
        return tuple(r for r in self.runs if r.energy_valid)

    def _median(self, runs, value) -> float:
        values = [value(r) for r in runs]
        return statistics.median(values) if values else math.nan

    @property
    def ms_per_call(self) -> float:
        """Median over passing runs of each run's median call, ms."""
        return self._median(self.passing, lambda r: r.ms_per_call)

    @property
    def mj_per_call(self) -> float:
        """Median per-call energy above idle (control subtracted), mJ."""
        return self._median(self.metered, lambda r: r.energy.method.per_call_mj)

    @property
    def mj_per_call_err(self) -> float:
        """Bound on :attr:`mj_per_call`: the largest run bound, mJ."""
        bounds = [r.energy.method.per_call_mj_err for r in self.metered]
        return max(bounds) if bounds else math.nan

    @property
    def mj_per_call_range(self) -> tuple[float, float]:
        """The lowest and highest metered run's per-call energy above idle, mJ (nan, nan: none).

        Runs are fresh processes and may really cost differently (a cold start, another seed):
        the bound holds the median of the runs' own figures, and this shows how far they differ.
        """
        values = [r.energy.method.per_call_mj for r in self.metered]
        return (min(values), max(values)) if values else (math.nan, math.nan)

    @property
    def runs_disagree(self) -> bool | None:
        """True if two metered runs' figures differ by more than the sum of their bounds (None: under two).

        Both cannot then hold the one true cost: the runs really cost differently (a cold
        start, another seed, clocks), and the median's bound, a measurement bound, does not
        cover that spread.
        """
        runs = [(r.energy.method.per_call_mj, r.energy.method.per_call_mj_err) for r in self.metered]
        if len(runs) < 2:
            return None  # no pair to compare
        return any(abs(a - b) > ea + eb for i, (a, ea) in enumerate(runs) for b, eb in runs[i + 1 :])

    @property
    def models(self) -> tuple[int, ...]:
        """The error models that bound its metered runs' figures (:mod:`nvmeter.meter.errormodel`)."""
        return tuple(sorted({r.energy.method.model_version for r in self.metered}))

    @property
    def w_above_idle(self) -> float:
        """Median power above idle while the method runs, W."""
        return self._median(self.metered, lambda r: r.w_above_idle)

    @property
    def mnist_accuracy(self) -> float:
        """Median MNIST accuracy over passing runs, 0..1."""
        return self._median(self.passing, lambda r: r.mnist_accuracy)

    @property
    def boards(self) -> tuple[str, ...]:
        """The boards its runs ran on."""
        return tuple(sorted({r.board.short for r in self.runs}))

    @property
    def partial(self) -> bool:
        """True if any run made fewer timed calls than the task's 11 + 4."""
        return any(not r.config.full_task for r in self.runs)

    def to_dict(self) -> dict:
        """JSON form (nan as None)."""
        return verify_figures.plain(
            {
                "method": self.name,
                "difficulty": self.difficulty,
                "ms_per_call": self.ms_per_call,
                "mj_per_call": self.mj_per_call,
                "mj_per_call_err": self.mj_per_call_err,
                "mj_per_call_range": list(self.mj_per_call_range) if self.metered else None,
                "runs_disagree": self.runs_disagree,
                "models": list(self.models),
                "w_above_idle": self.w_above_idle,
                "mnist_accuracy": self.mnist_accuracy,
                "runs": len(self.runs),
                "passing": len(self.passing),
                "metered": len(self.metered),
                "boards": list(self.boards),
                "partial_task": self.partial,
            }
        )

    def __repr__(self) -> str:
        return (
            f"{self.name} d{self.difficulty}: {_ms(self.ms_per_call)} ms/call, "
            f"{_mj(self.mj_per_call, self.mj_per_call_err)} mJ/call above idle "
            f"({len(self.passing)} of {len(self.runs)} runs pass, {len(self.metered)} metered)"
        )


def summarize(records: Sequence[RunRecord]) -> list[MethodSummary]:
    """Group runs by (method, difficulty, board model), in the order first seen; runs in run order.

    Boards of one model pool (their runs' medians are the model's); another model, or the
    simulated board, gets rows of its own: a median over an H200's and a simulated board's
    runs is no board's figure.
    """
    groups: dict[tuple[str, int, str], list[RunRecord]] = {}
    for r in records:
        groups.setdefault((r.target.name, r.difficulty, r.board.name), []).append(r)
    return [
        MethodSummary(name, level, tuple(sorted(runs, key=lambda r: (r.created_utc, r.run))))
        for (name, level, _), runs in groups.items()
    ]


def _ms(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:,.1f}"


def _mj_digits(value: float) -> int:
    """Decimals for mJ in the tables: one below a joule, none above."""
    return 1 if abs(value) < 1000 else 0


def _mj(value: float, err: float) -> str:
    if not math.isfinite(value):
        return "-"
    digits = _mj_digits(value)
    return f"{value:,.{digits}f} ± {err:,.{digits if err < 1000 else 0}f}"


def _pct(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.2%}"


def _num(value: float, fmt: str) -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, fmt)


def _range(s: MethodSummary) -> str:
    """The runs' per-call energies from lowest to highest ("-" under two metered runs)."""
    if len(s.metered) < 2:
        return "-"
    low, high = s.mj_per_call_range
    digits = _mj_digits(high)
    return f"{low:,.{digits}f} to {high:,.{digits}f}"


def method_rows(summaries: Sequence[MethodSummary]) -> list[list[str]]:
    """Rows of the per-method table (see :data:`METHOD_HEADER`)."""
    rows = []
    for s in summaries:
        runs = f"{len(s.passing)}/{len(s.runs)} pass, {len(s.metered)} metered" + (
            " (partial task)" if s.partial else ""
        )
        rows.append(
            [
                s.name,
                str(s.difficulty),
                _ms(s.ms_per_call),
                _mj(s.mj_per_call, s.mj_per_call_err),
                _num(s.w_above_idle, ",.1f"),
                _pct(s.mnist_accuracy),
                _range(s) + (" (beyond their bounds)" if s.runs_disagree else ""),
                runs,
                ", ".join(map(str, s.models)) or "-",
                ", ".join(s.boards),
            ]
        )
    return rows


METHOD_HEADER = [
    "method",
    "difficulty",
    "ms/call",
    "mJ/call above idle",
    "W above idle",
    "MNIST",
    "mJ/call, runs' range",
    "runs",
    "error model",
    "board",
]
RUN_HEADER = [
    "method",
    "run",
    "board",
    "ms/call",
    "mJ/call above idle",
    "error model",
    "window s",
    "idle W",
    "round trip mJ",
    "reference J/TFLOP",
    "status",
]


def run_rows(summaries: Sequence[MethodSummary]) -> list[list[str]]:
    """Rows of the every-run table (see :data:`RUN_HEADER`)."""
    rows = []
    for s in summaries:
        for r in s.runs:
            e = r.energy
            status = r.status.upper() + (
                f"; energy {r.energy_note}" if r.energy_note and r.status == "pass" else ""
            )
            if r.error:
                status += f": {r.error}"
            rows.append(
                [
                    s.name,
                    str(r.run),
                    r.board.short,
                    _ms(r.ms_per_call),
                    _mj(e.method.per_call_mj, e.method.per_call_mj_err) if e else "-",
                    str(e.method.model_version) if e else "-",
                    _num(e.method.window_s, ".2f") if e else "-",
                    _num(e.method.idle_w, ".1f") if e else "-",
                    _mj(e.control.per_call_mj, e.control.per_call_mj_err) if e else "-",
                    _num(e.reference.j_per_tflop, ".2f") if e else "-",
                    status,
                ]
            )
    return rows


def markdown(header: list[str], rows: list[list[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def model_line(summaries: Sequence[MethodSummary], version: int | None) -> str:
    """What bounds the tables' figures: the error models the runs name, or the one they were re-read under."""
    if version == errormodel.CURRENT:
        return f"Bounds read under error model {version}, this nvmeter's (`--model recorded`: the runs' own)."
    if version is not None:
        return f"Bounds re-read under error model {version}, not the ones the runs name (`--model recorded`)."
    current = errormodel.CURRENT
    line = f"Bounds as the runs were read, under error model {_models(summaries)}"
    if any(m < current for s in summaries for m in s.models):
        return f"{line}; this nvmeter's is {current}: `--model current` re-reads them so."
    return line + "."


def _models(summaries: Sequence[MethodSummary]) -> str:
    return ", ".join(map(str, sorted({m for s in summaries for m in s.models}))) or "-"


def to_markdown(summaries: Sequence[MethodSummary], version: int | None = None) -> str:
    """Both tables, in markdown, with a line on what they are (``version``: the model re-read under)."""
    return (
        model_line(summaries, version)
        + "\n\nPer method (medians over passing runs; mJ per call above idle, less the harness's round trip; "
        "the bound is the largest run's, and holds the median of the runs' own figures; the range is "
        'how far the runs differ, "beyond their bounds" where two runs really cost differently):\n\n'
        + markdown(METHOD_HEADER, method_rows(summaries))
        + "\n\nEvery run:\n\n"
        + markdown(RUN_HEADER, run_rows(summaries))
    )


def to_json(summaries: Sequence[MethodSummary], version: int | None = None) -> dict:
    """Both tables as data (kind ``score-summary``): per method, and every run's derived figures.

    ``version``: the error model the runs were re-read under (None: each its own, ``"recorded"``).
    """
    return {
        **records.header("score-summary"),
        "provenance": provenance.collect().to_dict(),
        "error_model": "recorded" if version is None else version,
        "methods": [s.to_dict() for s in summaries],
        "runs": [
            {
                "method": s.name,
                "difficulty": s.difficulty,
                "run": r.run,
                "board": r.board.to_dict(),
                **verify_figures.plain(r.derived()),
            }
            for s in summaries
            for r in s.runs
        ],
    }


def disagreement_lines(summaries: Sequence[MethodSummary]) -> list[str]:
    """One line a method whose runs differ beyond their bounds (:attr:`MethodSummary.runs_disagree`)."""
    lines = []
    for s in summaries:
        if s.runs_disagree:
            lines.append(
                f"{s.name} d{s.difficulty}: its runs differ beyond their bounds ({_range(s)} mJ/call): "
                "the calls cost differently from run to run, and the median's bound does not cover that"
            )
    return lines


# -- the plot -------------------------------------------------------------------------------
# The formats a plot is written in, by its file's suffix (matplotlib's; the ones the docs name).
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def _runs(s: MethodSummary) -> list[tuple[float, float]]:
    """Each metered run's (ms, mJ) a call, where both are positive numbers."""
    runs = [(r.ms_per_call, r.energy.method.per_call_mj) for r in s.metered]
    return [(x, y) for x, y in runs if math.isfinite(x) and math.isfinite(y) and x > 0 and y > 0]


def _spans_decade(values: list[float]) -> bool:
    """True when the positive ``values`` span at least a factor of 10 (an axis worth a log scale)."""
    found = [v for v in values if math.isfinite(v) and v > 0]
    return bool(found) and max(found) >= 10 * min(found)


def check_plot_path(plot_path: Path, paths: Iterable[Path]) -> None:
    """Refuse a plot path before any record is read: a suffix no format has, or a record it would replace.

    Raises:
        UsageError: the suffix is not one of :data:`PLOT_SUFFIXES`, or ``plot_path`` is one of
            the records read (a record given, or one in a folder given: writing the plot over it
            lost the record), or cannot be written.
    """
    read = [f for p in map(Path, paths) for f in (run_paths(p) if p.is_dir() else [p])]
    records.check_writable(plot_path, inputs=tuple(("record", f) for f in read), record=False)
    if plot_path.suffix.lower() not in PLOT_SUFFIXES:
        raise errors.UsageError(
            f"--plot {plot_path}: the suffix says the format; use one of {', '.join(PLOT_SUFFIXES)}"
        )


def plot(summaries: Sequence[MethodSummary], path: Path) -> None:
    """Energy per call against time per call, one point per method, bars for the bounds, each run hollow.

    Written atomically; the format follows the suffix (.png, .svg, .pdf).

    Raises:
        MissingPackage: matplotlib is missing. UsageError: no method has an energy figure, or the path
            cannot be written.

    """
    points = [s for s in summaries if s.metered]
    if not points:
        raise errors.UsageError("no run has an energy figure to plot (runs must pass, and their checks)")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise errors.MissingPackage(
            "--plot needs matplotlib: pip install matplotlib (in a checkout of nvmeter: "
            "pip install -e '.[plot]')"
        ) from exc
    from nvmeter import files, records

    path = Path(path)
    records.check_writable(path, record=False)
    fig, ax = plt.subplots(figsize=(8.0, 4.4))
    markers = "osD^v<>ph*"
    runs_of = [_runs(s) for s in points]  # each rebuilds its runs' figures: once a method
    # names in a legend: labels beside close points overlap
    for i, (s, runs) in enumerate(zip(points, runs_of, strict=True)):
        line = ax.errorbar(
            s.ms_per_call, s.mj_per_call, yerr=s.mj_per_call_err, fmt=markers[i % len(markers)],
            capsize=3, label=f"{s.name} (d{s.difficulty})",
        )  # fmt: skip
        if len(runs) > 1:  # each run, hollow: the bar is the median's bound, not the runs' spread
            ax.scatter(
                *zip(*runs, strict=True),
                s=12, facecolors="none", edgecolors=line[0].get_color(), linewidths=0.8, alpha=0.7,
            )  # fmt: skip
    # log axes where the methods span orders of magnitude; over a few percent they printed ticks of
    # 7.35x10^4 ... 7.75x10^4 (a new user's trial)
    xs = [s.ms_per_call for s in points] + [x for runs in runs_of for x, _ in runs]
    ys = [s.mj_per_call for s in points] + [y for runs in runs_of for _, y in runs]
    ax.set_xscale("log" if _spans_decade(xs) else "linear")
    ax.set_yscale("log" if _spans_decade(ys) else "linear")
    if any(len(runs) > 1 for runs in runs_of):
        ax.scatter([], [], s=12, facecolors="none", edgecolors="grey", label="each run")
    ax.set_xlabel("time per call, ms (median of runs)")
    ax.set_ylabel("energy per call above idle, mJ")
    boards = sorted({b for s in points for b in s.boards})
    on = (
        ", ".join(boards)
        if len(boards) <= 2
        else f"{len(boards)} boards ({', '.join(sorted({b.split()[0] for b in boards}))})"
    )
    # which model's bounds the bars are: the runs' own, or the one --model re-read them under (a new user)
    ax.set_title(f"nvmeter score on {on}; bounds of error model {_models(points)}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        os.chmod(tmp, files.output_mode())  # mkstemp's 0600 is for temporaries, not for what we hand over
        fig.savefig(tmp, dpi=150)
        os.replace(tmp, path)
    except (OSError, ValueError) as exc:
        raise errors.UsageError(f"cannot write {path}: {exc}") from exc
    finally:
        plt.close(fig)
        Path(tmp).unlink(missing_ok=True)
