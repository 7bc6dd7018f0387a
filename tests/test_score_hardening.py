"""`nvmeter score` under misuse, concurrency, signals and failures (simulated board, real workers on CPU)."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from processes import gone
from score_helpers import FAST, FAST_CLI, METHODS, cli

from nvmeter import errors, records
from nvmeter.boards.simulated import Fault, SimConfig, SimulatedBoard
from nvmeter.score import procedure as scoring
from nvmeter.score.config import ScoreConfig
from nvmeter.score.method_client import MethodWorker
from nvmeter.score.record import RunRecord
from nvmeter.score.target import Target
from nvmeter.worker.simulated import SimWorker


@pytest.fixture(scope="module")
def data(score_data):
    return score_data


def my_workers() -> list[psutil.Process]:
    """Worker processes (or their children) this test process still has."""
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if p.status() != psutil.STATUS_ZOMBIE and "nvmeter.worker.child" in " ".join(p.cmdline())
    ]


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("nvmeter:")]
    assert "Traceback" not in err, err
    assert len(lines) == 1, err
    return lines[0]


def sim_rig(call_timeout_s=60.0):
    """The simulated board, and a maker of real CPU workers coupled to it."""
    return scoring.open_board(None, True, call_timeout_s)


def score_lib(tmp_path, data, function, *, rig=None, make_worker=None, call_timeout_s=60.0, **config):
    board, make = rig or sim_rig(call_timeout_s)
    return scoring.score(
        board,
        make_worker or make,
        Target.parse(function if ":" in function else f"{METHODS}:{function}"),
        1,
        tmp_path / "out",
        runs=1,
        config=ScoreConfig(**{**FAST, "call_timeout_s": call_timeout_s, **config}),
        data_root=data,
    )


def the_record(tmp_path, run=1) -> RunRecord:
    return RunRecord.from_dict(records.read_json(tmp_path / "out" / f"run-{run:03d}.json", "score"))


def cli_here(*args, data_root):
    from typer.testing import CliRunner

    from nvmeter import cli as cli_module

    result = CliRunner().invoke(
        cli_module.app, list(map(str, args)), env={"NVMETER_DATA_DIR": str(data_root)}
    )
    return result.exit_code, result.stdout, result.stderr


# -- a method that fails mid-run: recorded within seconds, no energy, nothing left behind ----------
@pytest.mark.parametrize(
    ("function", "call", "where"),
    [
        ("oom_at", 3, "its third call (a timed call)"),
        ("exits_at", 3, "its third call (a timed call)"),
        ("exits_at", 6, "the first call of the method window (FAST: 1 warm-up, 3 timed, 1 before it)"),
    ],
)
def test_a_method_failing_mid_run_is_recorded_without_energy(
    tmp_path, data, monkeypatch, function, call, where
):
    monkeypatch.setenv("NVMETER_TEST_FAIL_AT", str(call))
    if call > 4:  # it must pass the judge to reach the window
        monkeypatch.setenv("NVMETER_TEST_PASS", "1")
    t0 = time.monotonic()
    with pytest.raises(errors.WorkerError, match="run 1 failed"):
        score_lib(tmp_path, data, function)
    assert time.monotonic() - t0 < 60, where
    record = the_record(tmp_path)
    assert record.status == "error", where
    assert ("OutOfMemoryError" if function == "oom_at" else "the worker exited (status 1)") in record.error
    assert record.energy is None and not record.energy_valid  # no figure from partial energy
    assert record.derived()["energy"] is None
    assert not my_workers()


# -- the board lost between the method window's entry and exit -------------------------------------
def test_a_board_lost_mid_window_records_the_run_as_failed(tmp_path, data):
    board, make = sim_rig()

    def make_worker():
        worker = make()
        method_calls = worker.calls
        seen = []

        def calls(kind, *args):
            if kind == "method":
                seen.append(kind)
                if len(seen) == 2:  # the first is the warm-up before the window; this is the window
                    board.inject(Fault.GPU_LOST)
            return method_calls(kind, *args)

        worker.calls = calls
        return worker

    uuid = board.identity().uuid
    with pytest.raises(errors.GpuLost, match=f"run 1 failed: the GPU was lost .* of {uuid}") as info:
        score_lib(tmp_path, data, "tiny", rig=(board, make), make_worker=make_worker)
    assert info.value.exit_code == 3
    record = the_record(tmp_path)
    assert record.status == "error" and uuid in record.error and record.energy is None
    log = (tmp_path / "out" / "score.log").read_text()
    assert "ended without a record" not in log and log.count("run 1") == 2  # started, recorded
    assert not my_workers()


# -- the driver cannot list the board's processes: "unknown", a note and a warning, never a pass ----
def test_no_process_list_leaves_the_idle_reading_unknown_with_a_warning():
    board, _ = sim_rig()
    board.inject(Fault.NO_PROCESS_LIST)
    worker = SimWorker(board)
    worker.pid = os.getpid()  # the scorer's idle reading names the worker's pid
    worker.open_context()
    with pytest.warns(errors.NvmeterWarning, match="other processes on the GPU during idle: unknown"):
        idle = scoring._frozen_idle(board, worker, ScoreConfig(**FAST), 0.35)
    assert idle.pids is None and idle.others is None
    assert idle.span.power_w == pytest.approx(board.config.idle_frozen_w, rel=0.01)  # energy unaffected
    assert not worker.frozen  # resumed


def test_an_unknown_process_list_is_a_note_never_a_pass(scored):
    out, *_ = scored
    data = records.read_json(out / "run-001.json", "score")
    for idle in data["energy"]["idle"]:
        idle["pids"] = None  # as _frozen_idle leaves it when the driver cannot list them
    record = RunRecord.from_dict(data)
    check = {c.name: c for c in record.checks}["idle_no_other_process"]
    assert check.status == "note" and check.detail.startswith("unknown")
    assert record.energy_valid  # energy is unaffected


def test_the_cli_prints_a_warning_as_one_line(capsys):
    import warnings

    from nvmeter.cli import guard

    def command():
        warnings.warn("a check left unknown", errors.NvmeterWarning, stacklevel=1)

    guard.run_guarded(command)
    assert capsys.readouterr().err == "nvmeter: warning: a check left unknown\n"


# -- a method that hangs at import: --call-timeout-s, not a fixed 120 s ------------------------------
def test_a_method_hanging_at_import_fails_after_the_call_timeout(tmp_path, data):
    method = tmp_path / "hangs_at_import.py"
    method.write_text("import time\n\ntime.sleep(600)\n\n\ndef method(train_x, train_y, test_x):\n    pass\n")
    t0 = time.monotonic()
    with pytest.raises(errors.WorkerError, match="did not answer 'load' within 2 s; it was killed"):
        score_lib(tmp_path, data, f"{method}:method", call_timeout_s=2.0)
    assert time.monotonic() - t0 < 60
    assert the_record(tmp_path).status == "error"
    assert not my_workers()


# -- two scorers into one folder ----------------------------------------------------------------------
def test_a_folder_another_scorer_holds_is_refused_at_once(tmp_path, data):
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); "
         "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)", str(out)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = cli_here(
            "score", f"{METHODS}:tiny", "-n", "1", "--simulate", "--json", out, data_root=data
        )
        assert code == 2
        assert "another nvmeter score is writing into" in one_line(err)
        assert list(out.iterdir()) == []
    finally:
        holder.kill()
        holder.wait()


def test_two_scorers_at_once_never_share_a_run_number(tmp_path, data):
    out = tmp_path / "out"
    args = ("score", f"{METHODS}:tiny", "-n", "1", "--runs", "1", "--simulate", "--json", out, *FAST_CLI)
    procs = [cli(*args, data_root=data, wait=False) for _ in range(2)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    # the winner runs (0, or 1 when a check voids its energy on a crowded 2-core CPU); the other is refused
    assert codes[0] in (0, 1) and codes[1] == 2, results
    loser = next(err for code, _, err in results if code == 2)
    assert "another nvmeter score is writing into" in one_line(loser)
    assert sorted(p.name for p in out.iterdir()) == ["run-001.json", "score.log"]
    assert (out / "score.log").read_text().count("run 1 started") == 1


def test_a_record_is_never_overwritten(tmp_path):
    path = tmp_path / "run-001.json"
    records.write_json(path, {"kind": "score", "run": 1}, replace=False)
    with pytest.raises(errors.UsageError, match=r"appeared while this record was written.*\.conflict"):
        records.write_json(path, {"kind": "score", "run": 2}, replace=False)
    assert '"run": 1' in path.read_text()
    (kept,) = tmp_path.glob("run-001.json.*.conflict")
    assert '"run": 2' in kept.read_text()


# -- every duration has an upper limit -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--window-s", "1e300"], "window_s (--window-s) must be a number > 0 and at most 600 s"),
        (["--idle-s", "1e6"], "idle_s (--idle-s) must be a number > 0 and at most 600 s"),
        (["--control-s", "inf"], "control_s (--control-s) must be a number > 0 and at most 600 s"),
        (["--settle-s", "1e4"], "idle_settle_s (--settle-s) must be a number >= 0 and at most 600 s"),
        (["--window-warmup-s", "601"], "(--window-warmup-s) must be a number >= 0 and at most 600 s"),
        (["--call-timeout-s", "1e9"], "(--call-timeout-s) must be a number > 0 and at most 86400 s"),
        (["--min-calls", "100000"], "min_calls (--min-calls) must be a whole number 1-1,000"),
        (["--runs", "5000"], "--runs must be a whole number >= 1 and at most 1,000"),
    ],
)
def test_durations_and_counts_over_their_limit_are_refused(tmp_path, data, args, match):
    out = tmp_path / "out"
    code, _, err = cli_here("score", "graph_mlp", "--simulate", "--json", out, *args, data_root=data)
    assert code == 2
    assert match in one_line(err)
    assert not out.exists()


# -- Ctrl-C while the arguments are parsed ---------------------------------------------------------------
def test_ctrl_c_while_typer_parses_the_arguments_is_one_line():
    """Before the fix typer turned it into a silent exit 130 (15 of 20 tries)."""
    script = (
        "import os, signal, typer.core\n"
        "original = typer.core.TyperGroup.make_context\n"
        "def interrupted(self, *args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    return original(self, *args, **kwargs)\n"
        "typer.core.TyperGroup.make_context = interrupted\n"
        "from nvmeter import _entry\n"
        "import sys; sys.argv = ['nvmeter', 'score', 'graph_mlp', '--simulate']\n"
        "_entry.main()\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 130
    assert result.stderr == "nvmeter: interrupted; nothing written\n"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_while_typer_parses_the_arguments_is_one_line(sig):
    """SIGTERM or SIGHUP before the command's code ran ended nvmeter without a word."""
    script = (
        "import os, signal, typer.core\n"
        "original = typer.core.TyperGroup.make_context\n"
        "def ended(self, *args, **kwargs):\n"
        f"    os.kill(os.getpid(), signal.{sig.name})\n"
        "    return original(self, *args, **kwargs)\n"
        "typer.core.TyperGroup.make_context = ended\n"
        "from nvmeter import _entry\n"
        "import sys; sys.argv = ['nvmeter', 'run', '--simulate', '--', 'sleep', '5']\n"
        "_entry.main()\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 128 + sig
    assert result.stderr == f"nvmeter: ended by {sig.name}; nothing written\n"


@pytest.mark.parametrize(
    "sig, code, words",
    [
        (signal.SIGINT, 130, "interrupted; records of finished runs kept"),
        (signal.SIGTERM, 143, "ended by SIGTERM; records of finished runs kept"),
    ],
)
def test_ctrl_c_or_sigterm_during_a_command_still_runs_its_cleanup(tmp_path, data, sig, code, words):
    """Inside the command Python's handler is back: the scorer reaps its worker and says so."""
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nvmeter", "score", f"{METHODS}:tiny", "-n", "1", "--simulate", "--json", out,
         *FAST_CLI],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NVMETER_DATA_DIR": str(data)},
    )  # fmt: skip

    def cmdline(child) -> str:
        try:
            return " ".join(child.cmdline())
        except psutil.Error:  # a child that ended (or is a zombie) between the listing and the look
            return ""

    end = time.monotonic() + 60
    while time.monotonic() < end and not any(
        "nvmeter.worker.child" in cmdline(c) for c in psutil.Process(proc.pid).children()
    ):
        time.sleep(0.05)
    workers = [c for c in psutil.Process(proc.pid).children() if "nvmeter.worker.child" in cmdline(c)]
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code
    assert words in one_line(err)
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)


def test_ctrl_c_ends_what_the_method_started_in_a_session_of_its_own(tmp_path, data):
    """A method's grandchild out of the worker's group and session dies with the worker on Ctrl-C."""
    grandchildren = tmp_path / "grandchildren"
    env = {
        **os.environ,
        "NVMETER_DATA_DIR": str(data),
        "NVMETER_TEST_GRANDCHILD": str(grandchildren),
        "NVMETER_TEST_SESSION": "setsid",
        "NVMETER_TEST_THEN": "hang",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "nvmeter", "score", f"{METHODS}:spawns_a_session", "-n", "1", "--simulate",
         "--json", tmp_path / "out", *FAST_CLI],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    pid = None
    try:
        end = time.monotonic() + 120
        while pid is None and time.monotonic() < end and proc.poll() is None:
            if grandchildren.exists() and grandchildren.read_text().endswith("\n"):
                pid = int(grandchildren.read_text().split()[0])
            time.sleep(0.05)
        assert pid is not None, "the method never started its grandchild"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert gone(pid), "what the method started in its own session outlived the interrupted scorer"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()


# -- a frozen idle span stops what the method started out of the worker's group too --------------------
def stopped(process: psutil.Process) -> bool:
    return process.status() == psutil.STATUS_STOPPED


@pytest.mark.parametrize(
    ("session", "end"),
    [("setsid", "close"), ("setsid", "kill"), ("double-fork", "close")],  # a double fork: the marker alone
)
def test_freeze_stops_what_the_method_started_in_a_session_of_its_own_until_resume(
    tmp_path, data, monkeypatch, session, end
):
    """It kept running (and drawing power) through an idle span measured as frozen."""
    grandchildren = tmp_path / "grandchildren"
    monkeypatch.setenv("NVMETER_TEST_GRANDCHILD", str(grandchildren))
    monkeypatch.setenv("NVMETER_TEST_SESSION", session)
    monkeypatch.setenv("NVMETER_TEST_THEN", "return")
    worker = MethodWorker("cpu", call_timeout_s=60.0)
    try:
        worker.open_context()
        worker.load(Target.parse(f"{METHODS}:spawns_a_session"))
        worker.call("mnist", 0, 0, str(data), None)  # starts the grandchild, then returns
        (pid,) = [int(line) for line in grandchildren.read_text().split()]
        grandchild, leader = psutil.Process(pid), psutil.Process(worker.pid)
        # the double fork's setsid runs just after its pid is written: wait for its own session
        deadline = time.monotonic() + 5
        while os.getsid(pid) == os.getsid(worker.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert os.getsid(pid) != os.getsid(worker.pid) and not stopped(grandchild)
        worker.freeze()
        assert stopped(leader)
        assert stopped(grandchild), "the method's grandchild in its own session ran on while frozen"
        worker.resume()
        deadline = time.monotonic() + 5
        while (stopped(leader) or stopped(grandchild)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not stopped(leader) and not stopped(grandchild), "resume() left it stopped"
        worker.freeze()  # frozen again, then ended: a stopped process must end too
        assert stopped(grandchild)
        if end == "kill":
            worker._proc.kill()  # as a call's time limit ends it
        else:
            worker.close()
        assert gone(worker.pid)
        assert gone(pid), f"{end}() after a freeze left the method's grandchild behind"
    finally:
        worker.close()
        for line in grandchildren.read_text().split() if grandchildren.exists() else []:
            with contextlib.suppress(psutil.Error):
                psutil.Process(int(line)).kill()


# -- every output file gets the umask's mode -----------------------------------------------------------
@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_the_plot_and_the_records_get_the_umask_s_mode(scored, data, tmp_path, umask):
    out, *_ = scored
    plot = tmp_path / "energy.png"
    old = os.umask(umask)
    try:
        code, _, err = cli_here("summarize", out, "--plot", plot, data_root=data)
        records.write_json(tmp_path / "r.json", {"kind": "score"})
    finally:
        os.umask(old)
    assert code == 0, err
    assert plot.stat().st_mode & 0o777 == 0o666 & ~umask
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o666 & ~umask


# -- a Ctrl-C while a finished run's worker is closed: the record is kept, then the interruption --------
def test_a_ctrl_c_as_a_finished_runs_worker_closes_keeps_its_record(
    tmp_path, data, monkeypatch, ctrl_c_raises
):
    """Held through the worker's cleanup and delivered after it, the Ctrl-C lost the run's record."""
    from nvmeter.descendants import Descendants

    look = Descendants.note
    closing = []

    def note_then_ctrl_c(self):  # the worker's close notes its tree first: the user presses Ctrl-C then
        look(self)
        if not closing:
            closing.append(True)
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(Descendants, "note", note_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        score_lib(tmp_path, data, "tiny")
    assert closing, "the worker's close never ran"
    record = the_record(tmp_path)
    assert record.status != "error" and record.energy is not None
    assert "interrupted after its record was written" in (tmp_path / "out" / "score.log").read_text()
    assert not my_workers()


@pytest.mark.parametrize(
    "setting",
    [
        "window_s", "control_s", "idle_s", "idle_settle_s", "window_warmup_s", "call_timeout_s",
        "window_ms_tolerance", "min_calls", "mnist_draws", "window_draws", "holdout_draws", "warmup_calls",
    ],
)  # fmt: skip
def test_a_settings_error_names_the_option_nvmeter_score_has(setting):
    """A review found `warmup_calls (--warmup-calls)`: the option is --warmups."""
    import re

    import typer.main

    from nvmeter import cli, errors
    from nvmeter.score.config import ScoreConfig

    with pytest.raises(errors.UsageError) as refused:
        ScoreConfig(**{setting: -1})
    option = re.search(r"^" + setting + r" \((--[a-z-]+)\) must be", str(refused.value)).group(1)
    score = typer.main.get_command(cli.app).commands["score"]
    assert option in {name for p in score.params for name in p.opts}


def test_the_scorer_s_frozen_idles_take_the_board_profile_s_edge_wait(tmp_path, data, monkeypatch):
    """A review: a test of _frozen_idle alone would pass were the scorer to pass 0.35 s again."""
    from nvmeter.boards.profile import default_profile

    waits = []
    real_span = scoring.measure_span

    def span(board, clock, duration_s, timeout_s=None):
        waits.append(timeout_s)
        return real_span(board, clock, duration_s, timeout_s)

    monkeypatch.setattr(
        scoring, "resolve_profile", lambda *_: default_profile("H200").with_(edge_timeout_s=0.77)
    )
    monkeypatch.setattr(scoring, "measure_span", span)
    score_lib(tmp_path, data, "tiny")
    assert len(waits) == 3 and set(waits) == {0.77}


def test_frozen_idle_waits_for_a_slow_counter_as_its_profile_says():
    # a 0.6 s counter outlasts Hopper's 0.35 s wait: the scorer's idle spans take the profile's
    # edge wait, as every window does, not the family figure fixed in the span module
    board = SimulatedBoard(SimConfig(seed=3, counter_period_s=1.0, counter_jitter_s=0.0))
    worker = SimWorker(board)
    worker.pid = os.getpid()
    worker.open_context()
    # an edge that waits 0.35 s sees a step of a 1 s counter only where one falls inside its wait
    assert not scoring._frozen_idle(board, worker, ScoreConfig(**FAST), 0.35).span.aligned
    assert not worker.frozen
    for _ in range(3):
        idle = scoring._frozen_idle(board, worker, ScoreConfig(**FAST), 3 * 1.0)
        assert idle.span.aligned and not worker.frozen
