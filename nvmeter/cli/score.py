"""``nvmeter score``: time, judge and meter a method, a record per run, and their table."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from nvmeter import errors
from nvmeter.cli import console
from nvmeter.cli.console import say_line
from nvmeter.cli.guard import adopt_console_orphans, guarded
from nvmeter.cli.options import DeviceOpt, bool_flag, known_bands, parse_device, parse_path, pick_band


class _ScoreProgress:
    """On a terminal, a live line per run phase; otherwise (a log) one timestamped line per phase."""

    def __init__(self, runs: int) -> None:
        self._live = console.err.is_terminal
        self._progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console.err
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
            say_line(f"[{time.monotonic() - self._t0:7.1f} s] {line}")

    def on_run(self, record, path: Path) -> None:
        text = f"{record!r} -> {path}"
        if self._live:
            self._progress.console.print(text, soft_wrap=True, highlight=False)
        else:
            say_line(f"[{time.monotonic() - self._t0:7.1f} s] {text}")


@guarded
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
            parser=parse_path,
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
        bool_flag(
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
    adopt_console_orphans()
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
        band=pick_band(band, known_bands()),
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
        board, make_worker = scoring.open_board(parse_device(device), simulate, config.call_timeout_s)
        ident = board.identity()
        console.err.print(
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
    print(to_markdown(group(done)), file=console.STDOUT)
    if earlier > 0:  # the table holds this call's runs only
        say_line(
            f"{earlier} earlier run{'s' if earlier > 1 else ''} in {out_dir} not in this table: "
            f"`nvmeter summarize {out_dir}` tables them all"
        )
    bad = [r for r in done if not r.energy_valid]
    for r in bad:
        why = "; ".join(r.reasons()) or f"energy {r.energy_note}"
        say_line(f"nvmeter: run {r.run}: {why}")
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
