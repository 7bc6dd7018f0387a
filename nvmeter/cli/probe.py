"""``nvmeter probe``: characterise a board's telemetry and write a probe record (one board, or every one)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from nvmeter import errors
from nvmeter.cli import console
from nvmeter.cli.console import make_table, say_line
from nvmeter.cli.guard import adopt_console_orphans, guarded
from nvmeter.cli.options import PROBE_NAMES, ProbeDeviceOpt, SimulateOpt, bool_flag, open_rig, parse_out_path


class _ProbeProgress:
    """One bar over the whole run, advanced by host time against the run's budget."""

    def __init__(self, total_s: float, probes_n: int) -> None:
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TimeElapsedColumn(),
            console=console.err,
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


@guarded
def probe(
    out_path: Annotated[
        Path,
        typer.Option("--out", "-o", help="Where to write the probe record (JSON).", parser=parse_out_path),
    ] = Path("probe.json"),
    device: ProbeDeviceOpt = None,
    quick: Annotated[
        bool,
        bool_flag(
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
        bool_flag(
            "--cache/--no-cache",
            help="Keep the probe record in the user cache (NVMETER_CACHE_DIR): windows on this board take "
            "their profile from it, checked against its raw series (not a simulated board's).",
        ),
    ] = True,
    cap_spread: Annotated[
        bool,
        bool_flag(
            "--cap-spread",
            help="Also run the cap-spread probe: ~30 s of bf16 products at the power cap, which measure "
            "how far a short window's calls cost from steady state there (its figure widens the bound of "
            "windows the board limits; without it, the family's wider defaults).",
        ),
    ] = False,
    run_levels: Annotated[
        bool,
        bool_flag(
            "--run-levels",
            help="Also run the run-level probe: ~45 s of FP32 products restarted eight times, which "
            "measure how far one whole run's calls may cost from another's on this board (where over the "
            "family's default, 3% on Hopper, its figure widens the floor of every window's state part).",
        ),
    ] = False,
    coverage: Annotated[
        bool,
        bool_flag(
            "--coverage",
            help="Also run the coverage probe: ~20 s of 10 ms bursts at phases over the counter's period, "
            "which find a counter that senses only part of each period (where one does, every window "
            "is checked against the power samples).",
        ),
    ] = False,
    sim_boards: Annotated[int, typer.Option("--sim-boards", hidden=True)] = 1,
) -> None:
    """Characterise the board's telemetry and write a probe record (a minute a board; simulated, a second)."""
    adopt_console_orphans()
    from nvmeter import records
    from nvmeter.probes.report import selection

    # `--only idle,bursts` as well as `--only idle --only bursts`
    names = [name.strip() for given in only or () for name in given.split(",") if name.strip()]
    if only is not None and not names:
        raise errors.UsageError(f"--only takes probe names: {', '.join(PROBE_NAMES)}")
    # (wanted, its flag, the probe's name, in words)
    opted = (
        (cap_spread, "--cap-spread", "cap_spread", "cap-spread"),
        (run_levels, "--run-levels", "run_levels", "run-level"),
        (coverage, "--coverage", "coverage", "coverage"),
    )
    for wanted, flag, name, label in opted:
        if not wanted:
            continue
        if quick:
            raise errors.UsageError(f"--quick skips the {label} probe; run {flag} without --quick")
        names = list(dict.fromkeys([*(names or [m.NAME for m in selection(False)]), name]))
    only = names or None
    selection(quick, tuple(only or ()))  # bad names fail before a board is opened
    from nvmeter.boards.protocol import names_all

    if not names_all(device):
        # before the board: a path that cannot be written is bad input
        claimed = records.claim(out_path, kind="probe")
        _probe_one(open_rig(device, simulate), claimed, quick, only, cache)
        return
    from nvmeter.boards.factory import open_boards
    from nvmeter.worker.rig import Rig

    # each board's file is named from OUT's: a folder has no name to extend (OUT itself is not written)
    records.check_writable(out_path, record=False)
    boards = open_boards("all", simulate=simulate, sim_boards=sim_boards)
    paths = [out_path.with_name(f"{out_path.stem}-{b.identity().uuid}{out_path.suffix}") for b in boards]
    # every file checked before the first board is touched
    claims = [records.claim(path, kind="probe") for path in paths]
    failed: list[errors.NvmeterError] = []
    lost: console.OutputLost | None = None
    for board, claimed in zip(boards, claims, strict=True):
        try:
            _probe_one(Rig.around(board), claimed, quick, only, cache)
        # the other boards still get probed; a record kept beside another's (UsageError) too
        except (errors.TelemetryError, errors.WorkerError, errors.UsageError) as exc:
            say_line(f"nvmeter: {board.identity().uuid}: {exc}")
            failed.append(exc)
        # stdout's reader went (`| head -1`) or stdout is full, after this board's record was
        # written: the others are still probed and written (reviews, 2026-12-07)
        except console.OutputLost as exc:
            lost = lost or exc
    if failed:  # a board's failure, said on stderr, outranks the lost output in the exit status
        raise typer.Exit(failed[0].exit_code)
    if lost is not None:
        raise lost


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
    console.err.print(
        f"probing {board.name} {board.uuid} ({'quick, ' if quick else ''}~{expected_s:.0f} s{clock})"
    )
    with _ProbeProgress(expected_s, sum(s.NAME in steps for s in schedule.STEPS)) as progress:
        rig.on_phase = progress.on_phase
        report = run_probes(rig, quick=quick, only=tuple(only or ()), on_probe=progress.on_probe)
    # the record before the table: a reader gone from standard output (`| head -1`) ended the
    # command at the table and lost a minute's probe (a new user's trial); the table whatever the
    # write did: a record kept beside another's (written there meanwhile) loses none of its figures
    kept = None
    try:
        records.write_claimed(claimed, report.to_dict())
        if cache and not board.simulated:
            kept = _cache(report, board)
    finally:
        console.out.print(make_table(f"{board.name} {board.uuid} ({report.started_utc})", report.rows()))
        if kept is not None:
            console.out.print(f"windows on this board now use its profile: {kept}")
    console.out.print(f"wrote {claimed.given}")


def _cache(report, board):
    """Keep the probe in the user cache; a newer nvmeter's kept record stays, and the line says so (None)."""
    from nvmeter.boards.profile import store_probe
    from nvmeter.probes.report import for_cache

    try:
        return store_probe(for_cache(report).to_dict(), board)
    except errors.NewerRecord as exc:  # the record is written: only the cache is left as it was
        console.err.print(f"the user cache was left as it was: {exc}")
        return None
