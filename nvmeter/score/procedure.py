"""``nvmeter score``: time, judge and meter a method, run after run, one record per run.

One run (:func:`run_once`) starts a fresh worker process that holds the CUDA context and
loads the method (:mod:`nvmeter.score.method_client`, :mod:`nvmeter.score.method_host`); this process,
the scorer, owns NVML, the energy windows, the judge and the records. In order:

1. open the context, load the method; the worker and the scorer each build the run's
   draws from its seeds (``nvmeter.workloads.task`` is deterministic), so no array
   crosses the pipe; labels come back as ``.npy`` files;
2. warm-ups, then the timed calls (11 MNIST + 4 hold-out, in the plan's secret order),
   each judged by the scorer against its own copy of the draw;
3. only for a passing run, the energy: the J/TFLOP reference (constant operands, TF32
   off, same worker); an idle span with the worker frozen; a control window of null
   calls (the harness's round trip); another frozen idle span; the method window of
   back-to-back calls on fresh draws; a last frozen idle span. The windows are
   :class:`~nvmeter.meter.window.EnergyWindow` s whose edges this process places on counter
   steps while the worker runs the calls (sync ``"none"``: this process has no CUDA).

mJ per call = the method window's energy above the idle either side, per call, less
the control window's per call; the bound adds both windows' bounds
(:class:`nvmeter.score.record.Energy`). The checks in :func:`nvmeter.score.record.energy_checks`
can void the energy figure, never the time.

A run that fails (the method raises or returns bad output, the worker dies, hangs or
sends garbage) is recorded with the reason and ends the command; runs that fail the
judge are recorded and the next run goes on. Each record is written atomically when its
run ends and a line is appended to ``score.log``, so a crash keeps every earlier run.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import platform
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from nvmeter import errors, provenance, records
from nvmeter.boards.profile import resolve_profile
from nvmeter.boards.protocol import Board
from nvmeter.meter.baseline import IdleBaseline
from nvmeter.meter.measurement import Measurement
from nvmeter.meter.span import measure_span
from nvmeter.meter.window import EnergyWindow
from nvmeter.score.config import MAX_RUNS, DrawPlan, ScoreConfig
from nvmeter.score.method_client import MethodWorker, SimMethodWorker
from nvmeter.score.readings import Block, Energy, IdleReading, TimedCall
from nvmeter.score.record import KIND, RunRecord
from nvmeter.score.target import Target
from nvmeter.worker.rig import Rig
from nvmeter.workloads import judge, task

LOG_NAME = "score.log"
# While a window's calls run, wake this often to let the window read the power-sample
# buffer (~2.4 s of history; it reads at most once a second).
_POLL_S = 0.25

Phase = Callable[[str], None]


def _quiet(_text: str) -> None:
    return None


# -- the folder -----------------------------------------------------------------------
def run_path(out_dir: Path, run: int) -> Path:
    """``DIR/run-001.json`` for run 1."""
    return Path(out_dir) / f"run-{run:03d}.json"


def default_folder(name: str, level: int) -> Path:
    """Where ``nvmeter score`` keeps a method's runs without ``--json``: ``score-<name>-d<level>``, here.

    The method's name with every character but letters, digits, ``-`` and ``_`` as ``-``.
    """
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in name.replace(".py:", "-"))
    return Path(f"score-{slug}-d{level}")


def run_paths(out_dir: Path) -> list[Path]:
    """The score records' paths in ``out_dir`` (``run-*.json``, or gzipped ``run-*.json.gz``), by name.

    A kept folder may be compressed record by record, as results/ keeps large records; its
    gzipped runs had been left out of the folder without a word (an adversarial review).
    """
    out_dir = Path(out_dir)
    return sorted([*out_dir.glob("run-*.json"), *out_dir.glob("run-*.json.gz")])


def folder_runs(out_dir: Path) -> list[tuple[Path, dict]]:
    """The score records in ``out_dir`` (:func:`run_paths`), by run number.

    Raises:
        RecordError: a ``run-*.json`` that is not a readable score record.

    """
    found = []
    for path in run_paths(out_dir):
        data = records.read_json(path, KIND)
        try:
            found.append((int(data["run"]), path, data))
        except (KeyError, TypeError, ValueError) as exc:
            raise errors.RecordError(f"{path}: damaged score record (no run number)") from exc
    return [(path, data) for _, path, data in sorted(found, key=lambda npd: npd[0])]


def next_run(out_dir: Path, target: Target, difficulty: int) -> int:
    """The next run number in ``out_dir`` (made if missing), which must hold only this method's runs.

    Raises:
        UsageError: the folder is a file, cannot be made or written, or holds runs of
            another method, difficulty or source.
        RecordError: it holds a damaged record.

    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise errors.UsageError(f"{out_dir} exists and is not a folder; --json takes a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise errors.UsageError(f"cannot make the folder {out_dir}: {exc.strerror}") from exc
    records.check_writable(out_dir / "run-000.json", kind="score")
    last = 0
    for path, data in folder_runs(out_dir):
        try:
            theirs = Target.from_dict(data["target"])
            their_difficulty = data["difficulty"]
        except (KeyError, TypeError) as exc:
            raise errors.RecordError(f"{path}: damaged score record ({type(exc).__name__}: {exc})") from exc
        if theirs.name != target.name or their_difficulty != difficulty:
            raise errors.UsageError(
                f"{out_dir} holds runs of {theirs.name} at difficulty {data['difficulty']} ({path.name}); "
                f"score {target.name} at difficulty {difficulty} into another folder"
            )
        # runs since score record v4 compare their code (comments and docstrings aside); earlier
        # ones, only the file's bytes
        same_file = theirs.sha256 == target.sha256 or theirs.sources is not None
        if theirs.function != target.function or not same_file:
            raise errors.UsageError(
                f"{out_dir} holds runs of another version of {target.name} ({path.name}: sha256 "
                f"{theirs.sha256[:12]}…, now {target.sha256[:12]}…); score it into another folder"
            )
        mine = target.hashed_as(theirs.sources_scheme)  # a record keeps the scheme it was hashed with
        if theirs.sources != mine.sources:
            raise errors.UsageError(
                f"{out_dir}: {path.name} {_sources_differ(theirs, mine, data)}; score it into another folder"
            )
        last = max(last, int(data["run"]))  # folder_runs checked it
    return last + 1


def _sources_differ(theirs: Target, target: Target, data: dict) -> str:
    """Why a folder's run is of another version than ``target``, though its own file is the same."""
    if theirs.sources is None:
        return (
            "predates the record of the modules a method imports (score record v4), so its version is unknown"
        )
    old, new = dict(theirs.sources), dict(target.sources or ())
    changed = sorted(m for m in old.keys() | new.keys() if old.get(m) != new.get(m))
    why = f"ran another version of {', '.join(changed)}"
    python = (data.get("provenance") or {}).get("python")
    here = platform.python_version()
    if theirs.sources_scheme == 1 and python and python.rsplit(".", 1)[0] != here.rsplit(".", 1)[0]:
        # scheme 1 hashed tokenize's type numbers, which Python 3.12 and 3.13 renumbered
        why += (
            f" (or the same code: records before score record v5 hashed it as its Python reads it, "
            f"{python} there, {here} here)"
        )
    return why


# folders this process holds (real path -> how many holders), so the CLI can take the lock
# before it opens the board and score() take it again
_HELD: dict[str, int] = {}


@contextlib.contextmanager
def folder_lock(out_dir: Path):
    """Hold ``out_dir`` for this scorer alone: run numbers are claimed under it.

    An advisory lock (``flock``) on the folder itself: it leaves no file behind, and the
    kernel drops it when the process ends, however it ends (a SIGKILLed scorer leaves no
    stale lock). Workers do not inherit it. Re-entrant within a process.

    Raises:
        UsageError: another process holds the folder (another ``nvmeter score`` into it).

    """
    key = os.path.realpath(out_dir)
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    fd = os.open(out_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise errors.UsageError(
                f"another nvmeter score is writing into {out_dir}; wait for it to end or give "
                "another --json folder"
            ) from None
        _HELD[key] = 1
        try:
            yield
        finally:
            del _HELD[key]
    finally:
        os.close(fd)  # closing drops the lock


def _log(out_dir: Path, line: str) -> None:
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with open(Path(out_dir) / LOG_NAME, "a") as f:
        f.write(f"{stamp} {line}\n")
        f.flush()


# -- the board and its workers ------------------------------------------------------------
def open_board(
    device: int | str | None, simulate: bool, call_timeout_s: float
) -> tuple[Board, Callable[[], object]]:
    """The board and a factory of fresh workers for it.

    On the simulated board the worker is a real CPU process coupled to the board's
    virtual clock (:class:`~nvmeter.score.method_client.SimMethodWorker`).

    Raises:
        TelemetryError: no driver, no GPU, no such device.

    """
    board = Rig.open(device, simulate=simulate).board
    if simulate:
        return board, lambda: SimMethodWorker(board, MethodWorker("cpu", None, call_timeout_s))
    uuid = board.identity().uuid
    return board, lambda: MethodWorker("cuda", uuid, call_timeout_s)


# -- one run ---------------------------------------------------------------------------
def _read_labels(path: Path, shape: tuple[int, ...]) -> np.ndarray:
    """Labels the worker wrote. Raises WorkerError for anything but integers 0..9 of ``shape``."""
    try:
        labels = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise errors.WorkerError(f"the worker's labels file {path.name} is unreadable ({exc})") from exc
    if labels.shape != shape or labels.dtype.kind not in "iu":
        raise errors.WorkerError(
            f"the worker sent labels of shape {labels.shape} and dtype {labels.dtype}; "
            f"expected {shape} integers"
        )
    if labels.size and (labels.min() < 0 or labels.max() >= task.CLASSES):
        raise errors.WorkerError(f"the worker sent labels {labels.min()}..{labels.max()}, outside 0..9")
    return labels


def _frozen_idle(board: Board, worker, config: ScoreConfig, timeout_s: float) -> IdleReading:
    """An idle span with the worker's process group stopped; always resumed.

    ``timeout_s``: the longest wait for a counter step at the span's edges (the board profile's
    ``edge_timeout_s``: a slow counter outlasts the Hopper figure), s.
    """
    worker.freeze()
    try:
        board.clock.sleep(config.idle_settle_s)
        span = measure_span(board, board.clock, config.idle_s, timeout_s)
        busy = _unless_unsupported(lambda: board.utilization().gpu_pct, "GPU utilisation during idle")
        pids = _unless_unsupported(board.compute_pids, "other processes on the GPU during idle")
    finally:
        worker.resume()
    return IdleReading(span, config.idle_settle_s, busy, pids, worker.pid)


def _unless_unsupported(query, what: str):
    """The query's answer, or None where the board does not give it (the check then says so).

    A board or driver that cannot answer (NOT_SUPPORTED, or a driver without the function:
    FUNCTION_NOT_FOUND) leaves the figure unknown, never a pass: its check reads "unknown"
    (a note), and a :class:`~nvmeter.errors.NvmeterWarning` says so at once.
    """
    try:
        return query()
    except errors.NotSupported as exc:
        warnings.warn(f"{what}: unknown, not checked ({exc})", errors.NvmeterWarning, stacklevel=2)
        return None


def _window(
    board: Board, worker, kind: str, seconds: float, ctx: dict, **window
) -> tuple[Measurement, Block]:
    """One energy window around ``kind`` calls that the worker runs back to back."""
    plan: DrawPlan = ctx["plan"]
    with EnergyWindow(board, sync="none", **window) as w:
        reply = worker.calls(
            kind,
            seconds,
            ctx["config"].min_calls,
            list(plan.window_draws),
            plan.seed,
            ctx["root"],
            ctx["out"],
        )
        while not reply.wait(_POLL_S):  # returns as soon as the worker's reply is in
            w.tick()  # keeps the sample buffer's history read
        result = reply.result()
        if result["ms"]:
            w.call(len(result["ms"]))
    block = Block(kind, result["t0_s"], result["t1_s"], tuple(result["ms"]), plan.window_draws)
    return w.result, block


def _block(worker, kind: str, seconds: float, min_calls: int, ctx: dict) -> Block:
    """Unmetered calls back to back (the warm-up before a window)."""
    plan: DrawPlan = ctx["plan"]
    result = worker.calls(
        kind, seconds, min_calls, list(plan.window_draws), plan.seed, ctx["root"], None
    ).result()
    return Block(kind, result["t0_s"], result["t1_s"], tuple(result["ms"]), plan.window_draws)


def _judge_window(block: Block, path: Path, truth: dict) -> Block:
    labels = _read_labels(path, (block.calls, task.DRAW_ROWS))
    correct = tuple(int((labels[i] == truth[d].test_y).sum()) for i, d in enumerate(block.call_draws()))
    return replace(block, correct=correct, rows=task.DRAW_ROWS)


def measure_energy(board: Board, worker, record: RunRecord, tmp: Path, root, on_phase: Phase) -> Energy:
    """The energy readings of a passing run; see the module docstring for the order.

    Raises:
        WorkerError, UsageError: the worker or the method failed during a window.
        TelemetryError: NVML failed.

    """
    config, plan = record.config, record.plan
    on_phase("J/TFLOP reference")
    from nvmeter.probes.reference import run_trial

    rig = Rig(board, lambda: worker, on_phase=lambda text: on_phase(f"J/TFLOP reference: {text}"))
    trial = run_trial(rig, "constant", quick=config.reference == "quick")
    on_phase("building the window draws")
    prepared = worker.prepare(list(plan.window_draws), plan.seed, root)
    truth = {d: task.draw(d[0], d[1], split_seed=plan.seed, root=root) for d in plan.window_draws}
    prepared.result()
    ctx = {"config": config, "plan": plan, "root": root, "out": None}
    profile = resolve_profile(None, board.identity())

    def frozen(*spans) -> IdleBaseline:  # bounded at this board's polling artefact (error model 11)
        return IdleBaseline.from_spans(list(spans), "frozen", polling_artefact_w=profile.polling_artefact_w)

    on_phase("idle, worker frozen (1/3)")
    idle_a = _frozen_idle(board, worker, config, profile.edge_timeout_s)
    on_phase("control window: null calls")
    control_window, control_block = _window(
        board, worker, "null", config.control_s, ctx, idle=frozen(idle_a.span), profile=profile
    )
    on_phase("idle, worker frozen (2/3)")
    idle_b = _frozen_idle(board, worker, config, profile.edge_timeout_s)
    control = replace(control_window, idle=frozen(idle_a.span, idle_b.span))
    warmup = None
    if config.window_warmup_s > 0:  # so the window does not start cold (its bound would widen)
        on_phase("warm-up calls before the method window")
        warmup = _block(worker, "method", config.window_warmup_s, 1, ctx)
    on_phase("method window")
    method_window, method_block = _window(
        board,
        worker,
        "method",
        config.window_s,
        {**ctx, "out": tmp / "window.npy"},
        idle=frozen(idle_b.span),
        profile=profile,
        control_mj=control.per_call_mj,
        control_err_mj=control.per_call_mj_err,
    )
    method_block = _judge_window(method_block, tmp / "window.npy", truth)
    on_phase("idle, worker frozen (3/3)")
    idle_c = _frozen_idle(board, worker, config, profile.edge_timeout_s)
    return Energy(
        trial,
        config.band,
        (idle_a, idle_b, idle_c),
        control_window,
        control_block,
        method_window,
        method_block,
        warmup,
    )


def _timed_calls(
    worker, record: RunRecord, tmp: Path, root, on_phase: Phase, warmup_ms: list, calls: list
) -> None:
    """Warm-ups, then the timed calls; fills ``warmup_ms`` and ``calls`` as they come."""
    plan = record.plan
    for i, seed in enumerate(plan.warmup_seeds):
        on_phase(f"warm-up {i + 1}/{len(plan.warmup_seeds)} ({plan.warmup_dataset})")
        warmup_ms.append(worker.call(plan.warmup_dataset, seed, plan.seed, root, None))
    for i, (dataset, seed) in enumerate(plan.order):
        on_phase(f"timed call {i + 1}/{len(plan.order)} ({dataset})")
        out = tmp / f"call-{i:02d}.npy"
        ms = worker.call(dataset, seed, plan.seed, root, out)
        draw = task.draw(dataset, seed, split_seed=plan.seed, root=root)
        s = judge.score(draw, _read_labels(out, draw.test_y.shape))
        calls.append(TimedCall(dataset, seed, ms, s.correct, s.rows))


def run_once(
    board: Board,
    make_worker: Callable[[], object],
    target: Target,
    difficulty: int,
    config: ScoreConfig,
    *,
    run: int,
    seed: int,
    data_root: Path | None = None,
    on_phase: Phase = _quiet,
) -> tuple[RunRecord, BaseException | None]:
    """One run in a fresh worker; see the module docstring.

    Returns:
        The run's record, and the error that ended it early (None if it did not): recorded
        in the record's ``error`` too; or the Ctrl-C (KeyboardInterrupt) that came while its
        worker was closed, for the caller to raise once the record is written.

    Raises:
        UsageError: the method cannot be loaded (nothing was measured: no record).

    """
    from nvmeter.workloads import fetch

    root = str(data_root) if data_root is not None else None
    plan = DrawPlan.make(seed, fetch.is_cached("kmnist", data_root), config)
    record = RunRecord(
        run=run,
        target=target,
        difficulty=difficulty,
        board=board.identity(),
        config=config,
        plan=plan,
        created_utc=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        provenance=provenance.collect(),
    )
    on_phase("starting the worker")
    worker = make_worker()
    record = replace(record, worker_pid=worker.pid)
    try:
        outcome = _measured(board, worker, record, target, root, on_phase)
    except BaseException:
        worker.close()
        raise
    return _closed(worker, outcome)


def _measured(board, worker, record: RunRecord, target: Target, root, on_phase: Phase):
    """The run in an open worker: its record, and the error that ended it early (None if none)."""
    warmup_ms: list[float] = []
    calls: list[TimedCall] = []
    with tempfile.TemporaryDirectory(prefix="nvmeter-score-") as tmp_name:
        tmp = Path(tmp_name)
        try:
            on_phase("opening the CUDA context")
            _open(worker, record)
            on_phase("loading the method")
            worker.load(target)
        except errors.UsageError:
            raise  # bad input, nothing measured: no record
        except (errors.WorkerError, errors.TelemetryError) as exc:
            return replace(record, error=str(exc)), exc
        try:
            _timed_calls(worker, record, tmp, root, on_phase, warmup_ms, calls)
            record = replace(record, warmup_ms=tuple(warmup_ms), calls=tuple(calls))
            if not record.passed:
                return record, None
            energy = measure_energy(board, worker, record, tmp, root, on_phase)
        except (errors.WorkerError, errors.UsageError, errors.TelemetryError) as exc:
            # a board lost, a counter not ready or gone: the run is recorded as failed, with
            # no energy figure from what was read before (the window had not ended)
            failed = replace(record, warmup_ms=tuple(warmup_ms), calls=tuple(calls), error=str(exc))
            return failed, exc
        return replace(record, energy=energy), None


def _closed(
    worker, outcome: tuple[RunRecord, BaseException | None]
) -> tuple[RunRecord, BaseException | None]:
    """Close the worker of a run that has its record; a Ctrl-C held through the close ends the run after it.

    The worker's cleanup holds Ctrl-C, SIGTERM and SIGHUP back and delivers them once it is
    done (:mod:`nvmeter.interrupts`): raised here, one would lose a run whose every figure is in.
    It is returned as the run's failure instead, so that its record is written first.
    """
    record, failure = outcome
    try:
        worker.close()
    except KeyboardInterrupt as interrupted:
        return record, interrupted
    return record, failure


def _open(worker, record: RunRecord) -> None:
    uuid = worker.open_context()
    if uuid is not None and uuid != record.board.uuid:
        raise errors.WorkerError(f"the worker's CUDA device is {uuid}, not the board {record.board.uuid}")


# -- runs ------------------------------------------------------------------------------------
def check_runs(runs) -> None:
    """Raise UsageError unless ``runs`` is a whole number 1..:data:`~nvmeter.score.config.MAX_RUNS`."""
    if not (isinstance(runs, int) and not isinstance(runs, bool) and 1 <= runs <= MAX_RUNS):
        raise errors.UsageError(f"--runs must be a whole number >= 1 and at most {MAX_RUNS:,}, not {runs!r}")


def check_data(data_root: Path | None) -> None:
    """MNIST and Fashion-MNIST must be cached, and intact, before any run (every run needs both).

    Each is loaded and verified here (sha256 of its IDX bytes; the load is memoised, and
    the run's draws use it), so a missing or damaged cache fails before the board is
    touched, with one piece of advice.

    Raises:
        UsageError: a dataset is not in the cache or fails its check (the message gives
            the fetch command, which replaces a damaged copy).

    """
    from nvmeter.workloads import data

    for name in ("mnist", "fashion"):
        data.load(name, data_root)


def score(
    board: Board,
    make_worker: Callable[[], object],
    target: Target,
    difficulty: int,
    out_dir: Path,
    *,
    runs: int = 3,
    config: ScoreConfig | None = None,
    data_root: Path | None = None,
    seed: int | None = None,
    on_phase: Callable[[int, str], None] | None = None,
    on_run: Callable[[RunRecord, Path], None] | None = None,
) -> list[RunRecord]:
    """Score ``target`` ``runs`` times into ``out_dir``; one record per run, as it ends.

    Args:
        board: The board (NVML, or the simulated one).
        make_worker: Starts a fresh worker (see :func:`open_board`).
        target: The method.
        difficulty: The level to judge at (1..5).
        out_dir: Folder of the records and ``score.log``; new runs are numbered after
            those already there, which must be of the same method.
        runs: How many runs.
        config: How to measure (default: :class:`~nvmeter.score.record.ScoreConfig`'s).
        data_root: Data cache root (default ``$NVMETER_DATA_DIR`` or the user cache).
        seed: The first run's seed (default: its run number); each next run adds 1.
        on_phase: Called with (run, text) as a run goes.
        on_run: Called with each run's record and path once written.

    Returns:
        This call's records, in order.

    Raises:
        UsageError: bad input (difficulty, folder, data, a method that cannot be loaded or
            returns bad output: the last recorded first), or another scorer writing into
            ``out_dir`` (:func:`folder_lock`).
        WorkerError: a run's worker or method failed (recorded first).
        TelemetryError: NVML failed during a run (the board lost, say: recorded first, as
            failed; earlier runs stay recorded).

    """
    config = config or ScoreConfig()
    judge.required(1, difficulty)  # an unknown difficulty fails here, before anything runs
    check_runs(runs)
    next_run(out_dir, target, difficulty)  # a bad folder fails here (and makes it if missing)
    check_data(data_root)
    with folder_lock(out_dir):  # the run numbers below are this scorer's alone
        first = next_run(out_dir, target, difficulty)
        done = []
        for run in range(first, first + runs):
            run_seed = run if seed is None else seed + (run - first)
            _log(
                out_dir,
                f"run {run} started: {target.name} d{difficulty}, seed {run_seed}, {board.identity().short}",
            )
            phase = (lambda text, run=run: on_phase(run, text)) if on_phase else _quiet
            try:
                record, failure = run_once(
                    board,
                    make_worker,
                    target,
                    difficulty,
                    config,
                    run=run,
                    seed=run_seed,
                    data_root=data_root,
                    on_phase=phase,
                )
            except BaseException as exc:
                why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__  # Ctrl-C has no text
                _log(out_dir, f"run {run} ended without a record: {why}")
                raise
            path = run_path(out_dir, run)
            records.write_json(path, record.to_dict(), replace=False)
            _log(out_dir, f"{record!r} -> {path.name}")
            done.append(record)
            if on_run:
                on_run(record, path)
            if isinstance(failure, KeyboardInterrupt):
                _log(out_dir, f"run {run} interrupted after its record was written")
                raise failure
            if failure is not None:
                raise type(failure)(f"run {run} failed: {failure} (recorded in {path})") from failure
    return done
