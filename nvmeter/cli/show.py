"""``nvmeter show``: print a record, each figure recomputed from its raw series."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from nvmeter import errors
from nvmeter.cli import console
from nvmeter.cli.console import make_table, printable_line
from nvmeter.cli.guard import guarded
from nvmeter.cli.options import parse_path


@guarded
def show(
    record_file: Annotated[
        Path,
        typer.Argument(
            help="A probe record (nvmeter probe), a run record (nvmeter run --json), an energy-budget "
            "record (pytest --energy-json), a window record (Measurement.save) or a job record "
            "(JobMeasurement.save).",
            parser=parse_path,
            metavar="RECORD",
        ),
    ],
) -> None:
    """Print a probe, run, energy-budget, window or job record, each figure recomputed from its raw series.

    A stored derived figure (or budget verdict) that differs from its recomputation is an error
    (exit 2), named in one line.
    """
    kind, data = _parse_record(record_file)
    elsewhere = {
        "score": f"nvmeter summarize {record_file}",
        "workloads": f"python -m nvmeter.workloads.evaluate --table {record_file}",
        "window-accuracy": f"python bench/window_accuracy.py analyze {record_file}",
    }
    if kind in elsewhere:  # records that another command (or the library, or the bench) reads
        raise errors.UsageError(f"{record_file} is a {kind} record: read it with `{elsewhere[kind]}`")
    if kind.startswith("bench-"):
        raise errors.UsageError(
            f"{record_file} is a bench record ({kind}): the bench script that wrote it reads it "
            "(bench/README.md lists them)"
        )
    from nvmeter.formats import SHOWN_KINDS

    if kind not in SHOWN_KINDS:  # a record of nvmeter's, but not one show reads
        raise errors.UsageError(
            f"{record_file} is a record of kind {kind!r}; nvmeter show reads probe records (nvmeter probe), "
            "run records (nvmeter run --json), energy-budget records (pytest --energy-json), window "
            "records (Measurement.save) and job records (JobMeasurement.save)"
        )
    if kind != "probe":
        # built whole and made printable first: an error leaves no half-printed record behind
        lines = [printable_line(line) for line in _record_lines(record_file, kind, data)]
        print("\n".join(lines), file=console.STDOUT)
        return
    from nvmeter.probes.report import load_report

    report = load_report(record_file, parsed=data)
    board = report.board
    console.out.print(make_table(f"{board.name} {board.uuid} ({report.started_utc})", report.rows()))


def _record_lines(path: Path, kind: str, data: dict) -> list[str]:
    """A verified run, pytest-energy, window or job record's lines (each reader loads its own kind)."""
    if kind == "window":
        from nvmeter.meter.windowrecord import load

        return [repr(load(path, data))]
    if kind == "run":
        from nvmeter.command import load_run

        return load_run(path, data).lines()
    if kind == "job":
        from nvmeter.meter.jobmeasurement import JobMeasurement

        return JobMeasurement.load(path, data).table().splitlines()
    from nvmeter.budgets import load_budgets

    with _RecordProgress() as progress:
        return load_budgets(path, on_entry=progress.on_entry, parsed=data).lines()


class _RecordProgress:
    """A bar while a record's windows are rebuilt, on a terminal and past ``SHOWN_FROM`` of them.

    Each window is rebuilt from its raw readings (how long that takes: docs/everyday.md).
    Transient: the record's lines follow on stdout as if it had not been there.
    """

    SHOWN_FROM = 20

    def __init__(self) -> None:
        self._progress: Progress | None = None
        self._task = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.stop()

    def on_entry(self, done: int, total: int) -> None:
        if total < self.SHOWN_FROM or not console.err.is_terminal:
            return
        if self._progress is None:
            columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
            self._progress = Progress(*columns, console=console.err, transient=True)
            self._task = self._progress.add_task("verifying windows", total=total)
            self._progress.start()
        self._progress.update(self._task, completed=done, description=f"verifying window {done} of {total}")


def _shown() -> str:
    """What ``nvmeter show`` reads, for its messages (the job record had been left out of them)."""
    from nvmeter.formats import SHOWN_KINDS

    return f"an nvmeter {', '.join(SHOWN_KINDS[:-1])} or {SHOWN_KINDS[-1]} record"


_BENCH_READS = "if a bench script wrote it, that script reads it (bench/README.md lists them)"


def _parse_record(path: Path) -> tuple[str, dict]:
    """The record's ``kind`` and its JSON: a bounded regular file of JSON whose ``kind`` is a string.

    The JSON goes to the kind's loader, so a record of hundreds of windows is parsed once.

    Raises:
        RecordError: anything else, in one line naming what show reads (the kind's own
            loader then says what is wrong with a record of that kind).
    """
    from nvmeter import formats, records

    data = records.parse_json(path, _shown())
    kind = data.get("kind") if isinstance(data, dict) else None
    if not isinstance(kind, str):
        # results/ holds bench records from before they named their kind (results/distributed/): say where
        # they are read (a new user's trial)
        bench = f"; {_BENCH_READS}" if isinstance(data, dict) and "kind" not in data else ""
        raise errors.RecordError(f"{path}: not {_shown()} ({formats.found_kind(data)}{bench})")
    return kind, data
