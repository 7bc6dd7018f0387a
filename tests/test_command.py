"""``nvmeter run`` on the simulated board: the metered command, its exit, signals, records."""

import contextlib
import dataclasses
import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from nvmeter import errors, records
from nvmeter.boards.simulated import Fault, SimConfig, SimulatedBoard
from nvmeter.command import CommandRun, SimulatedLife, load_run, resolve_command, run_command
from nvmeter.meter.span import AlignedSpan

PY = sys.executable


def nvmeter(*args, **kwargs):
    return subprocess.run([PY, "-m", "nvmeter", *args], capture_output=True, text=True, timeout=120, **kwargs)


def sleeper(seconds, before=""):
    """A command that prints 'ready' once it runs, then sleeps."""
    return [PY, "-c", f"import time, signal\n{before}\nprint('ready', flush=True)\ntime.sleep({seconds})"]


@pytest.fixture
def plain_file(tmp_path):
    """A file without execute permission."""
    path = tmp_path / "notes.txt"
    path.write_text("not a program\n")
    path.chmod(0o644)
    return path


def truth_above_no_context_idle(board, m):
    span = AlignedSpan(m.start, m.end, m.samples)
    return board.true_energy_j(span.t_a_s, span.t_b_s) - board.config.idle_no_context_w * span.duration_s


def test_the_window_holds_the_imposed_load_within_its_bound():
    board = SimulatedBoard(SimConfig(seed=3))
    life = SimulatedLife(board)
    result = run_command(sleeper(0.8), [board], life=life)
    m = result.boards[0].window
    assert result.returncode == 0 and not result.interrupted
    assert m.reliable, m.reason
    assert abs(m.above_idle_j - truth_above_no_context_idle(board, m)) <= m.err_j
    # what was imposed: the context's step and the load, for the child's life on the virtual clock
    imposed_j = (life.load_w + 42.5) * (life.t1_s - life.t0_s)
    # the model's exact energy is the judge (above); the imposed load differs by the power's lag and noise
    assert m.above_idle_j == pytest.approx(imposed_j, rel=0.03)
    # the virtual clock followed the child's real life
    assert life.t1_s - life.t0_s == pytest.approx(result.wall_s, abs=0.1)
    assert 0.8 <= result.wall_s < 5
    assert m.idle.source == "quiescent" and m.idle_w == pytest.approx(78.7, abs=1.0)
    assert result.idle == {"kind": "before", "path": None}


def test_the_load_lasts_the_command_s_whole_life_even_a_short_one():
    """A new user's trial: ``sh -c 'exit 3'`` lived 10 ms and the board held the load for 0.15 ms."""
    board = SimulatedBoard(SimConfig(seed=3))
    life = SimulatedLife(board)
    result = run_command(["sh", "-c", "exit 3"], [board], life=life)
    assert result.returncode == 3
    # from before the process was made to its reaping, as wall_s (the fork and exec alone take ms)
    assert life.t1_s - life.t0_s == pytest.approx(result.wall_s, rel=0.05, abs=2e-4)


def test_a_board_lost_mid_run_lets_the_command_finish_then_says_nothing_was_measured(tmp_path):
    board = SimulatedBoard(SimConfig(seed=6))
    board.inject(Fault.GPU_LOST, at_s=board.clock.now() + 2.2)  # after the idle span and the edge
    done = tmp_path / "done"
    argv = [PY, "-c", f"import time, pathlib; time.sleep(2.0); pathlib.Path({str(done)!r}).touch()"]
    with pytest.raises(errors.GpuLost, match="nothing measured"):
        run_command(argv, [board], life=SimulatedLife(board))
    assert done.exists()


def test_given_idle_is_named_and_used():
    board = SimulatedBoard(SimConfig(seed=4))
    result = run_command(["true"], [board], idle=80.0, life=SimulatedLife(board))
    assert result.boards[0].window.idle_w == 80.0
    assert "idle 80.0 W, given" in result.lines()[-1]


def test_a_given_idle_a_little_under_the_rest_gets_a_bound_that_reaches_it():
    """A breaker's trial: 71 W for the 78.7 W rest read +65 J over 8 s against a ±30 J bound, reliable."""
    board = SimulatedBoard(SimConfig(seed=4))
    with pytest.warns(errors.NvmeterWarning, match=r"idle 71.0 W is below .* widened to ±7.7 W to reach it"):
        result = run_command(["sleep", "8"], [board], idle=71.0, life=SimulatedLife(board))
    m = result.boards[0].window
    gross_j = board.true_energy_j(m.work_t0_s, m.work_t1_s + m.tail_s)
    truth_j = gross_j - board.config.idle_no_context_w * m.window_s
    assert "idle 71.0 ± 7.7 W, given" in result.lines()[-1]
    assert m.reliable and abs(m.above_idle_j - truth_j) <= m.err_j, (m.above_idle_j, truth_j, m.err_j)


def test_the_record_round_trips_and_verifies(tmp_path):
    board = SimulatedBoard(SimConfig(seed=5))
    result = run_command(["true"], [board], life=SimulatedLife(board))
    path = tmp_path / "run.json"
    records.write_json(path, result.to_dict())
    again = load_run(path)  # verifies every stored figure against its recomputation
    assert isinstance(again, CommandRun) and again.argv == ("true",)
    assert again.lines() == result.lines()
    data = json.loads(path.read_text())
    data["derived"]["boards"][0]["above_idle_j"] += 1.0
    path.write_text(json.dumps(data))
    with pytest.raises(errors.RecordError, match=r"derived\.boards\[0\]\.above_idle_j disagrees"):
        load_run(path)


@pytest.mark.parametrize(
    ("argv", "error", "code"),
    [
        (["no-such-command-xyz"], errors.CommandNotFound, 127),
        (["./no/such/file"], errors.CommandNotFound, 127),
        (["{plain_file}"], errors.CommandNotExecutable, 126),
        (["/tmp"], errors.CommandNotExecutable, 126),
        ([], errors.UsageError, 2),
        ([""], errors.CommandNotFound, 127),
    ],
)
def test_bad_commands_are_refused_before_measuring(argv, error, code, plain_file):
    argv = [a.format(plain_file=plain_file) for a in argv]
    with pytest.raises(error) as info:
        resolve_command(argv)
    assert info.value.exit_code == code


# -- through the CLI, as a user runs it ---------------------------------------------------
def one_line(result, code):
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_cli_meters_a_command_and_writes_the_record(tmp_path):
    out = tmp_path / "run.json"
    result = nvmeter("run", "--simulate", "--json", str(out), "--", *sleeper(1.0))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ready\n"  # the command's own output, untouched
    lines = result.stderr.splitlines()
    assert "exited 0 after" in lines[0]
    assert "simulated board: it drew a CUDA context" in lines[1] and "whatever the command did" in lines[1]
    board_line = lines[2]
    for words in (
        "Simulated H200",
        " J, ",
        "J above idle",
        "no CUDA context, measured before",
        "mean",
        "W over",
    ):
        assert words in board_line, board_line
    data = json.loads(out.read_text())
    assert data["kind"] == "run" and data["schema_version"] == records.CURRENT["run"]
    assert data["provenance"]["argv"][1:3] == ["run", "--simulate"] and data["provenance"]["nvmeter"]
    fig = data["derived"]["boards"][0]
    sim = data["simulated"]
    imposed_j = (sim["load_w"] + sim["context_w"]) * (sim["t1_s"] - sim["t0_s"])
    assert abs(fig["above_idle_j"] - imposed_j) <= fig["err_j"] + 0.01 * imposed_j
    assert fig["reliable"] and data["signals"] == [] and data["returncode"] == 0
    shown = nvmeter("show", str(out))
    assert shown.returncode == 0, shown.stderr
    assert board_line.removeprefix("nvmeter: ") in shown.stdout


def test_cli_passes_the_exit_status_through(tmp_path):
    out = tmp_path / "run.json"
    result = nvmeter("run", "--simulate", "--json", str(out), "--", PY, "-c", "import sys; sys.exit(3)")
    assert result.returncode == 3, result.stderr
    assert "exited 3 after" in result.stderr
    assert json.loads(out.read_text())["returncode"] == 3


def test_cli_says_when_the_command_exits_at_once():
    result = nvmeter("run", "--simulate", "--", "true")
    assert result.returncode == 0, result.stderr
    assert "under one counter period" in result.stderr
    assert "samples:" in result.stderr  # a short command gets the sample buffer's reading too


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["no-such-command-xyz", "--flag"], 127, "command not found: no-such-command-xyz"),
        (["{plain_file}"], 126, "not executable"),
        ([], 2, "nothing to run"),
        ([""], 127, "the command is empty ('' after --): name the program to run"),
    ],
)
def test_cli_refuses_bad_commands_in_one_line(argv, code, words, tmp_path, plain_file):
    argv = [a.format(plain_file=plain_file) for a in argv]
    out = tmp_path / "run.json"
    line = one_line(nvmeter("run", "--simulate", "--json", str(out), "--", *argv), code)
    assert words in line
    assert not out.exists()


def test_a_command_that_is_there_but_cannot_start_says_why(tmp_path):
    """Both read 'command not found' though the file was there (an adversarial review)."""
    script = tmp_path / "badinterp.sh"
    script.write_text("#!/nonexistent/interp\necho hi\n")
    script.chmod(0o755)
    line = one_line(nvmeter("run", "--simulate", "--", str(script)), 127)
    assert "cannot be run: its interpreter /nonexistent/interp (its #! line) was not found" in line
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    line = one_line(nvmeter("run", "--simulate", "--", str(tmp_path / "loopA")), 127)
    assert "(a symbolic link to nothing, or a loop of links)" in line
    dos = tmp_path / "dos.sh"
    dos.write_bytes(b"#!/bin/sh\r\necho hi\r\n")  # /bin/sh is there; "/bin/sh\r" is not
    dos.chmod(0o755)
    line = one_line(nvmeter("run", "--simulate", "--", str(dos)), 127)
    assert "its #! line ends in a Windows line ending" in line


def test_a_signal_passed_on_before_the_command_exists_reaches_it_once_it_does():
    from nvmeter.command.process import Forwarding

    code = "import signal, sys, time; signal.signal(signal.SIGUSR1, lambda *a: sys.exit(7)); "
    code += "print('ready', flush=True); time.sleep(30)"
    with Forwarding() as forwarding:
        os.kill(os.getpid(), signal.SIGUSR1)  # its default would end this process
        proc = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert proc.stdout.readline() == "ready\n"
        forwarding.attach(proc)
        assert proc.wait(timeout=30) == 7
    assert forwarding.received == []  # passed on, not counted as an interruption


def test_cli_refuses_an_unwritable_record_before_running(tmp_path):
    marker = tmp_path / "ran"
    line = one_line(
        nvmeter("run", "--simulate", "--json", str(tmp_path / "no" / "r.json"), "--", "touch", str(marker)), 2
    )
    assert "does not exist" in line
    assert not marker.exists()


def test_device_all_waits_for_several_board_windows():
    assert "--device all" in one_line(nvmeter("run", "--simulate", "--device", "all", "--", "true"), 2)


def test_idle_from_a_probe_file(tmp_path):
    probe = tmp_path / "probe.json"
    made = nvmeter("probe", "--simulate", "--quick", "--only", "idle", "--out", str(probe))
    assert made.returncode == 0, made.stderr
    result = nvmeter("run", "--simulate", "--idle", str(probe), "--", "true")
    assert result.returncode == 0, result.stderr
    assert f"no CUDA context, from {probe}" in result.stderr


def test_an_idle_typed_ten_times_too_low_is_refused_before_the_command_runs(tmp_path):
    """An adversarial review: --idle 7.87 for 78.7 W read 422 J for 343 J, marked reliable."""
    out, ran = tmp_path / "run.json", tmp_path / "ran"
    result = nvmeter("run", "--simulate", "--idle", "7.87", "--json", str(out), "--", "touch", str(ran))
    assert "draws at rest without a CUDA context (78.7 W" in one_line(result, 2)
    assert not out.exists() and not ran.exists()


def start_metered(tmp_path, argv, **popen):
    """nvmeter run in a session of its own (no terminal), once its command said 'ready'."""
    out = tmp_path / "run.json"
    proc = subprocess.Popen(
        [PY, "-m", "nvmeter", "run", "--simulate", "--json", str(out), "--", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **(popen or {"start_new_session": True}),
    )
    assert proc.stdout.readline() == "ready\n"
    return proc, out


def state(pid):
    """The kernel's state letter for ``pid`` (S, R, T, Z, ...); None once it is reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def reaches(pid, states, timeout_s=10.0):
    """True once ``pid`` is in one of ``states`` (None: reaped) within ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while state(pid) not in states:
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


GONE = {None, "Z", "X"}  # a zombie has ended; only its parent (init, here) has yet to reap it


@pytest.fixture
def pids(tmp_path):
    """Where commands write pids to; whatever of them still runs after the test is killed."""
    folder = tmp_path / "pids"
    folder.mkdir()
    yield folder
    for f in folder.iterdir():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(f.read_text()), signal.SIGKILL)


class FailsOnceNoted(SimulatedLife):
    """The command's life on the simulated board, failing as nvmeter would once ``pid_file`` names a pid.

    ``before``: called first (to look at the process the file names while it is still there).
    """

    def __init__(self, board, pid_file: Path, before=None) -> None:
        super().__init__(board)
        self._pid_file, self._before = pid_file, before

    def tick(self):
        super().tick()
        if self._pid_file.exists() and self._pid_file.read_text():
            if self._before is not None:
                self._before()
            raise RuntimeError("nvmeter failed (test)")


def noted(pids, name):
    """The pid a command wrote to ``pids/name``."""
    return int((pids / name).read_text())


def note_pid(pids):
    """A sleeper's ``before``: write its pid to ``pids/child``."""
    return f"import os, pathlib; pathlib.Path({str(pids / 'child')!r}).write_text(str(os.getpid()))"


@pytest.mark.parametrize(
    ("sig", "status"), [(signal.SIGTERM, 128 + 15), (signal.SIGINT, 128 + 2), (signal.SIGHUP, 128 + 1)]
)
def test_a_signal_mid_run_reaches_the_command_and_the_record_says_so(tmp_path, pids, sig, status):
    proc, out = start_metered(tmp_path, sleeper(60, before=note_pid(pids)))
    os.kill(proc.pid, sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == status, stderr
    assert stderr.count(f"was killed by {sig.name} (exit status {status})") == 1, stderr
    assert "interrupted" in stderr and "J above idle" in stderr
    data = json.loads(out.read_text())
    assert data["signals"] == [sig.name]
    assert data["derived"]["interrupted"] is True
    assert data["derived"]["boards"][0]["above_idle_j"] > 0
    assert data["wall_s"] < 30  # the command ended when told, not after its 60 s
    assert state(noted(pids, "child")) in GONE


def test_a_signal_ignored_when_nvmeter_started_stays_ignored_for_it_and_its_command(tmp_path, pids):
    # `nohup nvmeter run -- …`: SIGHUP ended nvmeter and was passed on to the command (a new user's trial)
    def ignore_sighup():
        os.setsid()
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc, out = start_metered(tmp_path, sleeper(1.5, before=note_pid(pids)), preexec_fn=ignore_sighup)
    os.kill(proc.pid, signal.SIGHUP)
    os.kill(noted(pids, "child"), signal.SIGHUP)  # the command inherited it ignored
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    data = json.loads(out.read_text())
    assert data["signals"] == [] and data["derived"]["exit_status"] == 0 and data["wall_s"] >= 1.4


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGQUIT])
def test_a_command_that_handles_the_signal_keeps_its_own_exit_status(tmp_path, sig):
    handler = f"signal.signal(signal.{sig.name}, lambda *a: (print('bye', flush=True), exit(0)))"
    proc, out = start_metered(tmp_path, sleeper(60, before=handler))
    os.kill(proc.pid, sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert stdout == "bye\n"
    data = json.loads(out.read_text())
    assert data["signals"] == [sig.name] and data["derived"]["interrupted"] is True


def send_three(proc, sig=signal.SIGTERM):
    for _ in range(3):
        os.kill(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)


def test_a_signal_before_the_command_exists_is_passed_on_once_it_does():
    from nvmeter.command.process import Forwarding, spawn

    with Forwarding() as forwarding:
        os.kill(os.getpid(), signal.SIGTERM)  # as if sent while Popen was still returning
        assert forwarding.received == ["SIGTERM"]
        proc = spawn([sys.executable, "-c", "import time; time.sleep(60)"])
        try:
            forwarding.attach(proc)
            assert proc.wait(timeout=30) == -signal.SIGTERM
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert signal.getsignal(signal.SIGTERM) != forwarding._handle  # restored


def test_the_third_signal_kills_a_command_that_ignores_them(tmp_path):
    proc, out = start_metered(tmp_path, sleeper(60, before="signal.signal(signal.SIGTERM, signal.SIG_IGN)"))
    send_three(proc)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + 9, stderr
    assert json.loads(out.read_text())["signals"] == ["SIGTERM"] * 3


def test_the_third_signal_kills_what_the_command_started_too(tmp_path, pids):
    # the shell and its background sleep both ignore SIGTERM (the sleep inherits the trap)
    script = f"trap '' TERM; sleep 100 & echo $! > {pids / 'grandchild'}; echo ready; wait"
    proc, out = start_metered(tmp_path, ["sh", "-c", script])
    send_three(proc)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + 9, stderr
    assert json.loads(out.read_text())["signals"] == ["SIGTERM"] * 3
    assert reaches(noted(pids, "grandchild"), GONE), "the command's own child outlived it"


def test_a_signal_reaches_a_command_that_stopped_itself(tmp_path, pids):
    # stopped, the command holds a forwarded SIGTERM pending until it runs again
    script = f"echo $$ > {pids / 'child'}; echo ready; kill -STOP $$; sleep 100"
    proc, out = start_metered(tmp_path, ["sh", "-c", script])
    assert reaches(noted(pids, "child"), {"T"}), "the command did not stop itself"
    os.kill(proc.pid, signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + 15, stderr
    assert json.loads(out.read_text())["signals"] == ["SIGTERM"]
    assert reaches(noted(pids, "child"), GONE)


def test_ctrl_c_at_a_terminal_reaches_the_command_once(tmp_path):
    # the command has no terminal of its own now: only nvmeter's forwarding can deliver it
    code = (
        "import signal, time\nn = []\nsignal.signal(signal.SIGINT, lambda *a: n.append(1))\n"
        "print('ready', flush=True)\nfor _ in range(3000):\n    time.sleep(0.01)\n    if n: break\n"
        "time.sleep(0.5)\nraise SystemExit(10 + len(n))"
    )
    controller, terminal = os.openpty()
    try:
        proc, out = start_metered(
            tmp_path,
            [PY, "-c", code],
            stdin=terminal,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),  # nvmeter's controlling terminal
        )
        os.write(controller, b"\x03")
        _, stderr = proc.communicate(timeout=60)
    finally:
        os.close(controller)
        os.close(terminal)
    assert proc.returncode == 11, stderr  # the command counted one SIGINT: not none, not two
    assert json.loads(out.read_text())["signals"] == ["SIGINT"]


def test_ctrl_z_stops_the_command_with_nvmeter_and_continuing_resumes_it(tmp_path, pids):
    # a group of its own in our session, not orphaned, so nvmeter's SIGTSTP really stops it
    proc, out = start_metered(tmp_path, sleeper(60, before=note_pid(pids)), process_group=0)
    child = noted(pids, "child")
    try:
        os.kill(proc.pid, signal.SIGTSTP)
        assert reaches(child, {"T"}) and reaches(proc.pid, {"T"})
        os.kill(proc.pid, signal.SIGCONT)
        assert reaches(child, {"S", "R"})
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        os.kill(proc.pid, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + 15, stderr
    assert json.loads(out.read_text())["signals"] == ["SIGTERM"]  # a stop is no interruption


def test_a_terminal_resize_is_passed_on_and_not_recorded(tmp_path):
    handler = "signal.signal(signal.SIGWINCH, lambda *a: (print('resized', flush=True), exit(5)))"
    proc, out = start_metered(tmp_path, sleeper(60, before=handler))
    os.kill(proc.pid, signal.SIGWINCH)
    stdout, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stdout) == (5, "resized\n"), stderr
    assert json.loads(out.read_text())["signals"] == []


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM])
def test_a_signal_a_command_may_use_for_itself_is_passed_on_and_the_record_kept(tmp_path, pids, sig):
    """Their default ended nvmeter alone: no line, no record, and the command ran on, orphaned."""
    handler = f"signal.signal(signal.{sig.name}, lambda *a: (print('checkpoint', flush=True), exit(5)))"
    proc, out = start_metered(tmp_path, sleeper(60, before=handler))
    os.kill(proc.pid, sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert (proc.returncode, stdout) == (5, "checkpoint\n"), stderr
    assert json.loads(out.read_text())["signals"] == []  # passed on, not an interruption
    proc, out = start_metered(tmp_path, sleeper(60, before=note_pid(pids)))
    os.kill(proc.pid, sig)  # the command keeps the default: it ends, and nvmeter says so
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig and f"was killed by {sig.name}" in stderr, stderr
    assert json.loads(out.read_text())["derived"]["boards"][0]["above_idle_j"] > 0
    assert state(noted(pids, "child")) in GONE


def test_processes_the_command_left_running_are_named_and_recorded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    board = SimulatedBoard(SimConfig(seed=3))
    # the shell starts a sleeper it does not wait for, and exits
    result = run_command(
        ["sh", "-c", "sleep 30 & echo $! > pid; sleep 0.2"], [board], life=SimulatedLife(board)
    )
    try:
        left = int(Path("pid").read_text())
        assert result.left_running == (left,)
        assert any(f"left 1 process it started running ({left})" in line for line in result.lines())
        again = CommandRun.from_dict(json.loads(json.dumps(result.to_dict())))
        assert again.left_running == (left,)
    finally:
        with contextlib.suppress(ProcessLookupError, FileNotFoundError, ValueError):
            os.kill(int(Path("pid").read_text()), signal.SIGKILL)
        Path("pid").unlink(missing_ok=True)
    clean = run_command(["sh", "-c", "sleep 0.1"], [board], life=SimulatedLife(board))
    assert clean.left_running == () and not any("left" in line for line in clean.lines())


def test_a_signal_once_the_command_ended_is_noted_and_the_handlers_come_back():
    from nvmeter.command.process import Forwarding, LateSignals

    before = signal.getsignal(signal.SIGTERM)
    late = LateSignals()
    with Forwarding(late):
        pass  # the command ended: the forwarded signals now wait for the record
    os.kill(os.getpid(), signal.SIGTERM)
    assert late.received == ["SIGTERM"]
    late.release()
    assert signal.getsignal(signal.SIGTERM) == before
    with pytest.raises(RuntimeError), Forwarding(LateSignals()):
        raise RuntimeError  # nvmeter failed: its own handlers come back at once
    assert signal.getsignal(signal.SIGTERM) == before


def test_signals_the_console_settles_are_ignored_from_noted_with_the_rest_put_back():
    from nvmeter.command.process import Forwarding, LateSignals

    before = signal.getsignal(signal.SIGQUIT), signal.getsignal(signal.SIGTERM)
    late = LateSignals()
    with Forwarding(late):
        pass
    late.release(ignoring={signal.SIGTERM})
    try:
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGQUIT) == before[0]
    finally:
        signal.signal(signal.SIGTERM, before[1])


def held_at_the_end(held: Path, go: Path) -> str:
    """``python -c`` code: the console script, held once the interpreter tears its modules down.

    That is the last moment Python code runs, after atexit handlers and thread joins, and
    after Python has put SIG_DFL back for every signal given a Python handler: a signal
    there ends the process unless it is ignored.
    """
    return (
        "import pathlib, time\n"
        "class Hold:\n"
        "    # bound now: by the time this runs the module's globals may already be gone\n"
        f"    def __del__(self, held=pathlib.Path({str(held)!r}), go=pathlib.Path({str(go)!r}), "
        "sleep=time.sleep):\n"
        "        held.touch()\n"
        "        while not go.exists():\n"
        "            sleep(0.01)\n"
        "hold = Hold()\n"
        "from nvmeter import _entry\n"
        "_entry.main()\n"
    )


def until(done, timeout_s=60.0) -> bool:
    """True once ``done()`` is, within ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > end:
            return False
        time.sleep(0.001)
    return True


def test_signals_once_the_record_is_written_leave_the_commands_status(tmp_path):
    """SIGTERM as the record appears, then SIGTERM, SIGHUP and SIGINT in the interpreter's last moments.

    Before the fix nvmeter ended with 143 or 129 there, silently (10 of 10 SIGTERMs sent as the
    record appeared; every time once held at the end).
    """
    out, held, go = tmp_path / "run.json", tmp_path / "held", tmp_path / "go"
    run = ["run", "--simulate", "--json", str(out), "--", "sh", "-c", "exit 7"]
    proc = subprocess.Popen(
        [PY, "-c", held_at_the_end(held, go), *run],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert until(lambda: out.exists() or proc.poll() is not None)
        proc.send_signal(signal.SIGTERM)  # as the record appears: while its lines are said, or after
        assert until(lambda: held.exists() or proc.poll() is not None)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            proc.send_signal(sig)  # (none once it has ended and been reaped)
    finally:
        go.touch()
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 7, stderr
    assert held.exists()  # it did reach its last moments
    assert "ended by" not in stderr and "interrupted" not in stderr, stderr
    assert f"wrote {out}" in stderr
    assert load_run(out).exit_status == 7


def test_an_executable_file_of_no_known_format_is_exit_126(tmp_path):
    garbage = tmp_path / "f"
    garbage.write_bytes(b"\x00\x01\x02 not a program")
    garbage.chmod(0o755)
    proc = subprocess.run(
        [PY, "-m", "nvmeter", "run", "--simulate", "--", str(garbage)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 126 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "is not executable" in proc.stderr


def test_the_line_names_ten_of_many_processes_left_running_and_the_record_all():
    """A command that left 1,000 processes had every pid on its line (an adversarial review)."""
    board = SimulatedBoard(SimConfig(seed=3))
    result = run_command(["sh", "-c", "true"], [board], life=SimulatedLife(board))
    many = dataclasses.replace(result, left_running=tuple(range(1000, 1025)))
    (line,) = [x for x in many.lines() if "left 25 processes" in x]
    shown = ", ".join(map(str, range(1000, 1010)))
    assert f"({shown} and 15 more, all in the record)" in line
    assert many.to_dict()["left_running"] == list(range(1000, 1025))


def test_a_zombie_of_the_session_is_not_left_running():
    from nvmeter.command.process import spawn, survivors

    # the shell's child ends at once; the shell becomes `sleep 5`, which never reaps it: a zombie
    proc = spawn(["sh", "-c", "sleep 0 & exec sleep 5"])
    try:
        deadline = time.monotonic() + 10
        zombies = []
        while not zombies and time.monotonic() < deadline:
            import psutil

            zombies = [c for c in psutil.Process(proc.pid).children() if c.status() == psutil.STATUS_ZOMBIE]
            time.sleep(0.02)
        assert zombies, "no zombie to test with"
        assert survivors(proc) == ()
    finally:
        proc.kill()
        proc.wait()


def test_nvmeter_failing_while_the_command_runs_ends_what_it_started_in_a_session_of_its_own(tmp_path, pids):
    """Not just its process group: a grandchild in a session of its own (start_new_session) too."""
    script = (
        "import subprocess, sys, time, pathlib\n"
        "child = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        f"pathlib.Path({str(pids / 'grandchild')!r}).write_text(str(child.pid))\n"
        "time.sleep(600)\n"
    )

    sessions = []

    board = SimulatedBoard(SimConfig(seed=7))
    life = FailsOnceNoted(
        board, pids / "grandchild", lambda: sessions.append(os.getsid(noted(pids, "grandchild")))
    )
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="nvmeter failed"):
        run_command([PY, "-c", script], [board], life=life)
    assert time.monotonic() - t0 < 60
    grandchild = noted(pids, "grandchild")
    assert sessions == [grandchild]  # a session of its own: out of the command's group and session
    assert reaches(grandchild, GONE), "the command's grandchild in its own session outlived nvmeter's failure"


def test_a_process_the_command_left_in_a_session_of_its_own_is_named_too(pids):
    board = SimulatedBoard(SimConfig(seed=3))
    script = (
        "import subprocess, pathlib\n"
        "child = subprocess.Popen(['sleep', '30'], start_new_session=True)\n"
        f"pathlib.Path({str(pids / 'child')!r}).write_text(str(child.pid))\n"
    )
    result = run_command([PY, "-c", script], [board], life=SimulatedLife(board))
    assert result.left_running == (noted(pids, "child"),)  # out of its session, found by the marker


def test_nvmeter_failing_ends_a_double_forks_grandchild_that_left_the_tree_at_once(tmp_path, pids):
    """Its parent exits at once, so it is init's before any look at the tree: the marker finds it."""
    script = (
        "import os, time, pathlib\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        pathlib.Path({str(pids / 'grandchild')!r}).write_text(str(os.getpid()))\n"
        "        time.sleep(600)\n"
        "    os._exit(0)\n"
        "time.sleep(600)\n"
    )

    board = SimulatedBoard(SimConfig(seed=7))
    with pytest.raises(RuntimeError, match="nvmeter failed"):
        run_command([PY, "-c", script], [board], life=FailsOnceNoted(board, pids / "grandchild"))
    assert reaches(noted(pids, "grandchild"), GONE), "the double fork's grandchild outlived nvmeter's failure"


@pytest.mark.parametrize("wall_s", [1e300, 100.0])
def test_a_run_record_whose_wall_time_outlasts_its_window_is_refused(tmp_path, wall_s):
    board = SimulatedBoard(SimConfig(seed=5))
    result = run_command(["true"], [board], life=SimulatedLife(board))
    path = tmp_path / "run.json"
    data = result.to_dict()
    data["wall_s"] = wall_s
    path.write_text(json.dumps(data))
    with pytest.raises(errors.RecordError, match=r"wall_s is .* longer than boards\[0\]'s window"):
        load_run(path)


def test_a_signal_noted_before_a_failed_record_write_is_said(tmp_path, monkeypatch):
    """A SIGTERM while the record is written, then the write fails: the line names the signal.

    Before, the signal was noted and then dropped with the handlers (helper-11's review).
    """
    from typer.testing import CliRunner

    from nvmeter import cli, errors, records

    def failing_write(claimed, data):
        os.kill(os.getpid(), signal.SIGTERM)  # noted: the command has ended
        raise errors.RecordError(f"cannot write {claimed.path}: disk full")

    monkeypatch.setattr(records, "write_claimed", failing_write)
    before = signal.getsignal(signal.SIGTERM)
    argv = ["run", "--simulate", "--json", str(tmp_path / "r.json"), "--", "true"]
    result = CliRunner().invoke(cli.app, argv)
    assert signal.getsignal(signal.SIGTERM) == before  # put back, not left noting
    assert result.exit_code != 0
    assert "SIGTERM came after the command ended, before its record was written" in result.output
    assert "disk full" in str(result.exception) + result.output


def test_a_signal_during_nvmeter_s_kill_does_not_continue_the_group_it_looks_at(tmp_path, pids, monkeypatch):
    """The kill stops the command's group before it looks under it; a forwarded signal's SIGCONT undid that.

    Ctrl-C (or a batch system's SIGTERM) that came while nvmeter, failing, ended the command was
    passed on to the group with a SIGCONT: the group ran again through the look, and a fork it
    made then, in a session of its own with an empty environment, outlived the kill.
    """
    from nvmeter import descendants

    script = (
        "import os, signal, time, pathlib\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"pathlib.Path({str(pids / 'child')!r}).write_text(str(os.getpid()))\n"
        "time.sleep(600)\n"
    )
    states = []
    look = descendants.Descendants.note

    def note_with_a_signal(self):
        os.kill(os.getpid(), signal.SIGTERM)  # the user's, as the look begins
        time.sleep(0.05)  # Python's handler has run: the look is the next thing it does
        states.append(state(self.root_pid))
        look(self)

    monkeypatch.setattr(descendants.Descendants, "note", note_with_a_signal)

    board = SimulatedBoard(SimConfig(seed=7))
    with pytest.raises(RuntimeError, match="nvmeter failed"):
        run_command([PY, "-c", script], [board], life=FailsOnceNoted(board, pids / "child"))
    assert states == ["T"], f"the command's group ran during the look: {states}"
    assert reaches(noted(pids, "child"), GONE)


def test_a_folder_as_the_command_is_exit_126_named_a_folder(tmp_path):
    """A new user's `nvmeter run -- ./docs` read 'not executable'; a shell says 'Is a directory'."""
    proc = subprocess.run(
        [PY, "-m", "nvmeter", "run", "--simulate", "--", f"{tmp_path}/"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 126 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "is a folder, not a program" in proc.stderr


def test_two_runs_to_one_json_path_lose_neither_record(tmp_path):
    # the later of two concurrent `run --json` to one path replaced the earlier (a review, 2026-12-06)
    first, out = start_metered(tmp_path, sleeper(2.0))
    second = nvmeter("run", "--simulate", "--json", str(out), "--", *sleeper(0.1))
    assert second.returncode == 0, second.stderr
    written = json.loads(out.read_text())
    _, stderr = first.communicate(timeout=120)
    assert first.returncode == errors.UsageError.exit_code, stderr
    line = stderr.strip().splitlines()[-1]
    assert "was written by another process while this command ran" in line and "Traceback" not in stderr
    (kept,) = tmp_path.glob("run.json.*.conflict")
    assert str(kept) in line and "the command's status was 0" in line
    assert json.loads(out.read_text()) == written  # the other run's record, untouched
    assert json.loads(kept.read_text())["command"] != written["command"]


@pytest.mark.parametrize("then", ["", "echo > out"])
def test_a_command_that_removes_the_record_s_folder_does_not_lose_the_record(tmp_path, then):
    """A breaker's trial: a traceback (FileNotFoundError; NotADirectoryError where a file took the
    folder's place), exit 1, and no record anywhere."""
    out = tmp_path / "out" / "run.json"
    out.parent.mkdir()
    temp = tmp_path / "temp"  # the system's temp folder, as the command sees it (TMPDIR)
    temp.mkdir()
    command = ["sh", "-c", f"rm -rf out; {then}"]
    proc = nvmeter(
        "run",
        "--simulate",
        "--json",
        str(out),
        "--",
        *command,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(temp)},
    )
    assert proc.returncode == errors.UsageError.exit_code and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert f"{out} could not be written: its folder {out.parent} is gone" in line
    (kept,) = temp.glob("run.json.*.conflict")
    assert f"this record is kept as {kept} " in line and json.loads(kept.read_text())["kind"] == "run"


def test_a_command_that_stops_itself_is_said_once_and_resumes(tmp_path):
    # `kill -STOP $$` held nvmeter run without a word until it was killed (an adversarial review)
    import queue
    import threading

    out = tmp_path / "run.json"
    script = "kill -STOP $$; echo resumed"
    proc = subprocess.Popen(
        [PY, "-m", "nvmeter", "run", "--simulate", "--json", str(out), "--", "sh", "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stderr], daemon=True)
    reader.start()
    try:
        line = ""
        while "is stopped" not in line:
            line = lines.get(timeout=60)  # fails the test, not hangs it, if the note never comes
        assert "is stopped (SIGSTOP, or a debugger holds it) and still metered: `kill -CONT " in line, line
        pid = int(line.split("(pid ")[1].split(")")[0])
        time.sleep(1.5)  # past a second note's time, were there one
        os.kill(pid, signal.SIGCONT)
        stdout = proc.stdout.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    reader.join(10)
    rest = [lines.get() for _ in range(lines.qsize())]
    assert proc.returncode == 0 and stdout == "resumed\n", rest
    assert not any("is stopped" in x for x in rest)  # said once
    assert json.loads(out.read_text())["returncode"] == 0


def test_another_process_s_context_makes_the_run_not_reliable_unless_said_idle():
    board = SimulatedBoard(SimConfig(seed=3))
    other = os.getppid()  # a running process not nvmeter's descendant, holding a context throughout
    board.other_pids.append(other)
    m = run_command(sleeper(0.3), [board], life=SimulatedLife(board)).boards[0].window
    assert not m.reliable and f"other process ({other})" in m.reason and "--others-idle" in m.reason
    run = run_command(sleeper(0.3), [board], life=SimulatedLife(board), others_idle=True)
    assert run.boards[0].window.reliable, run.boards[0].window.reason
    line = run.lines()[-1]  # named once, and why it is not a reason
    assert line.count(str(other)) == 1 and "held a context, taken as idle (--others-idle)" in line, line


def test_a_process_gone_before_the_window_is_still_named_in_the_run_s_line():
    """It held a context while the idle was measured, which its draw may be in (a review, 2026-12-07)."""
    board = SimulatedBoard(SimConfig(seed=3))
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    board.other_pids.append(ended.pid)  # listed before the idle; ended: not another's at the edges
    run = run_command(sleeper(0.3), [board], life=SimulatedLife(board))
    assert run.boards[0].window.reliable
    assert f"other processes held a CUDA context before the idle ({ended.pid})" in run.lines()[-1]


@pytest.mark.parametrize(("idle", "code", "status"), [("121", "0", 1), ("measure", "0", 0), ("121", "7", 7)])
def test_require_reliable_fails_a_successful_command_whose_figure_is_not_reliable(idle, code, status):
    """A new user's trial: a CI step had no exit status to catch a figure marked NOT RELIABLE."""
    result = nvmeter(
        "run", "--simulate", "--idle", idle, "--require-reliable", "--", PY, "-c", f"exit({code})"
    )
    assert result.returncode == status, result.stderr
    said = "nvmeter: exit 1 (--require-reliable): not reliable on Simulated H200" in result.stderr
    assert said is (status == 1) and "Traceback" not in result.stderr
    plain = nvmeter("run", "--simulate", "--idle", idle, "--", PY, "-c", f"exit({code})")
    assert plain.returncode == int(code)  # without it, the command's own status whatever the figures


def test_a_process_list_no_process_can_have_is_not_named_as_another_process():
    """A review: misaligned bindings list 4294967295; nvmeter run named it as another process."""
    board = SimulatedBoard(SimConfig(seed=3))
    board.other_pids.append(4294967295)
    run = run_command(sleeper(0.3), [board], life=SimulatedLife(board))
    assert run.boards[0].other_pids is None and "4294967295" not in "\n".join(run.lines())
    assert any("other processes not checked" in note for note in run.boards[0].window.notes)
