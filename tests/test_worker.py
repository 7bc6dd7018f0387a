"""The real worker process: jobs, freeze/resume, reaping, dying with its parent."""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import psutil
import pytest
from processes import gone

from nvmeter import errors
from nvmeter.descendants import MARKER
from nvmeter.worker.guardian import DISMISSED
from nvmeter.worker.process import WorkerProcess


@pytest.fixture
def worker():
    with WorkerProcess("cpu") as w:
        w.ping()  # started and serving
        yield w


def test_job_runs_for_its_duration_and_reports_times(worker):
    job = worker.matmul(128, "random", seconds=0.3)
    t0 = time.perf_counter()
    run = job.result()
    assert 0.25 < run.duration_s < 1.0
    assert run.t0_s >= t0 - 0.5  # the child's perf_counter shares the parent's timeline
    assert run.flops == 2 * 128**3 * run.matmuls


def test_constant_operands_are_exact(worker):
    run = worker.matmul(256, "constant", count=3, check=True).result()
    assert run.matmuls == 3
    assert run.max_abs_err == 0.0


def test_freeze_stops_the_process_and_resume_continues_the_job(worker):
    worker.matmul(128, "random", count=1).result()  # the child's imports and operands, out of the timing
    job = worker.matmul(128, "random", seconds=0.4)
    time.sleep(0.1)  # let the job start
    worker.freeze()
    assert psutil.Process(worker.pid).status() == psutil.STATUS_STOPPED
    time.sleep(0.5)
    assert not job.done()
    worker.resume()
    run = job.result()
    assert run.duration_s > 0.55  # the job's wall time includes the 0.5 s frozen


def test_close_resumes_and_reaps_a_frozen_worker():
    w = WorkerProcess("cpu")
    w.ping()
    w.freeze()
    w.close()
    assert gone(w.pid)
    w.close()  # idempotent


def test_a_killed_worker_is_a_clear_error(worker):
    job = worker.matmul(128, "random", seconds=5.0)
    os.kill(worker.pid, signal.SIGKILL)
    with pytest.raises(errors.WorkerError, match="exited"):
        job.result()


def test_bad_operands_are_refused(worker):
    with pytest.raises(errors.UsageError):
        worker.matmul(128, "zeros", count=1)


@pytest.mark.parametrize(("operands", "dtype"), [("Random", "fp32"), ("random", "fp16")])
def test_both_workers_refuse_a_product_they_cannot_run_alike(worker, operands, dtype):
    # the simulated worker raised a bare KeyError: 'Random' (a review)
    from nvmeter.boards.simulated import SimulatedBoard
    from nvmeter.worker.simulated import SimWorker

    with pytest.raises(errors.UsageError) as real:
        worker.matmul(128, operands, count=1, dtype=dtype)
    with pytest.raises(errors.UsageError) as simulated:
        SimWorker(SimulatedBoard()).matmul(128, operands, count=1, dtype=dtype)
    assert str(real.value) == str(simulated.value)


def test_worker_dies_with_its_parent_even_when_frozen(tmp_path):
    """SIGKILL the parent while its worker is frozen: the worker must not survive."""
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from nvmeter.worker.process import WorkerProcess
            w = WorkerProcess("cpu")
            w.ping()
            w.freeze()
            print(w.pid, flush=True)
            time.sleep(60)
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    assert psutil.Process(child_pid).status() == psutil.STATUS_STOPPED
    parent.kill()
    parent.wait()
    assert gone(child_pid), "the frozen worker outlived its SIGKILLed parent"


ALONE = (
    "import os, sys\n"
    "os.setsid()\n"
    "os.execve(sys.executable, [sys.executable, '-c', 'import time; time.sleep(600)'], {})\n"
)


def test_what_a_frozen_worker_holds_ends_with_its_sigkilled_parent(tmp_path, monkeypatch):
    """The worker's group and what was held out of it: before its guardian, both stayed stopped for ever."""
    importable(tmp_path, monkeypatch, "spawning_handlers", SPAWNING_HANDLERS)
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import time
            from nvmeter.worker.process import WorkerProcess
            w = WorkerProcess("cpu", handlers="spawning_handlers")
            member = w.request("spawn", script="import time; time.sleep(600)", args=[])["pid"]
            # in a session of its own, its environment (the marker) cleared: only its hold tells the guardian
            alone = w.request("spawn", script={ALONE!r}, args=[])["pid"]
            time.sleep(0.5)
            w.freeze()
            print(w.pid, member, alone, flush=True)
            time.sleep(60)
            """
        )
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    pids = [int(pid) for pid in parent.stdout.readline().split()]
    try:
        assert [psutil.Process(pid).status() for pid in pids] == [psutil.STATUS_STOPPED] * 3
        assert MARKER not in psutil.Process(pids[2]).environ()
        assert os.getsid(pids[2]) == pids[2]  # out of the worker's group and session
        parent.kill()
        parent.wait()
        left = [pid for pid in pids if not gone(pid, within_s=10.0)]
        assert not left, f"{left} of the frozen worker's processes outlived its SIGKILLed parent"
    finally:
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()


def test_close_dismisses_the_guardian_and_a_dismissed_one_ends_nothing():
    """A worker closed by its parent leaves no guardian behind, and the goodbye keeps it from acting."""
    worker = WorkerProcess("cpu")
    worker.ping()
    guardian = worker._guardian._proc
    assert guardian.poll() is None and os.getsid(guardian.pid) == guardian.pid
    worker.close()
    assert guardian.returncode == DISMISSED  # reaped by close(), after its goodbye (it did nothing)


def test_a_stopped_job_ends_after_its_current_chunk_and_reports_what_ran(worker):
    worker.matmul(128, "random", count=1).result()  # imports and operands, out of the timing
    job = worker.matmul(128, "random", seconds=5.0)
    time.sleep(0.3)
    t_stop = time.perf_counter()
    job.stop()
    run = job.result()
    assert time.perf_counter() - t_stop < 1.0
    assert 0.2 < run.duration_s < 1.2
    assert run.flops == 2 * 128**3 * run.matmuls
    job.stop()  # done: a no-op
    after = worker.matmul(128, "random", seconds=0.3).result()  # a stop never cuts the next job short
    assert after.duration_s >= 0.3


def test_preload_then_the_context_and_a_job(worker):
    worker.preload()
    worker.preload(wait=True)  # twice is once; waiting takes the reply once
    assert worker.open_context() is None  # the cpu backend has no device
    assert worker.matmul(64, "constant", count=2, check=True).result().max_abs_err == 0.0


# A process of the worker's group that forks every millisecond; each child leaves the group (setsid) and
# the marker (an empty environment), and so the tree too once the spawner has died.
SPAWNER = """
import os, sys, time
sleep, tag = sys.argv[1:]
for _ in range(1000):
    if os.fork() == 0:
        os.setsid()
        os.execve(sleep, [tag, "600"], {})
    time.sleep(0.001)
time.sleep(600)
"""


def importable(tmp_path, monkeypatch, module: str, source: str) -> None:
    """Make ``module`` (``source``) importable by the workers this test starts."""
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))


SPAWNING_HANDLERS = """
import subprocess, sys
def spawn(request, engine):
    return {"pid": subprocess.Popen([sys.executable, "-c", request["script"], *request["args"]]).pid}
HANDLERS = {"spawn": spawn}
"""


def tagged(tag: str) -> list[psutil.Process]:
    """The spawner and its children (forked or started), by ``tag`` in their command lines."""
    found = []
    for process in psutil.process_iter():
        try:
            if tag in process.cmdline() and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except psutil.Error:
            pass
    return found


def test_kill_stops_the_group_before_it_looks_so_nothing_it_forks_meanwhile_escapes(tmp_path, monkeypatch):
    """Killed without stopping its group first, a fork between the look and the kill outlived the worker."""
    importable(tmp_path, monkeypatch, "spawning_handlers", SPAWNING_HANDLERS)
    tag = f"nvmeter-test-{uuid.uuid4().hex}"
    try:
        with WorkerProcess("cpu", handlers="spawning_handlers") as worker:
            worker.request("spawn", script=SPAWNER, args=[shutil.which("sleep"), tag])
            end = time.monotonic() + 30
            while len(tagged(tag)) < 40 and time.monotonic() < end:  # the spawner forking
                time.sleep(0.01)
            assert len(tagged(tag)) >= 40
            worker.kill()
        left = [p.pid for p in tagged(tag) if not gone(p.pid, within_s=1.0)]
        assert not left, f"{len(left)} of what the worker's group forked outlived its kill"
    finally:
        for process in tagged(tag):
            with contextlib.suppress(psutil.Error):
                process.kill()


def test_a_ctrl_c_as_close_begins_leaves_nothing_of_a_frozen_worker_stopped(
    tmp_path, monkeypatch, ctrl_c_raises
):
    """Held back until close() is done, then raised: before, the frozen group was left stopped for ever."""
    from nvmeter.descendants import Descendants

    importable(tmp_path, monkeypatch, "spawning_handlers", SPAWNING_HANDLERS)
    worker = WorkerProcess("cpu", handlers="spawning_handlers")
    member = worker.request("spawn", script="import time; time.sleep(600)", args=[])["pid"]  # in its group
    try:
        worker.freeze()
        look = Descendants.note

        def note_then_ctrl_c(self):
            look(self)
            os.kill(os.getpid(), signal.SIGINT)  # the user's second Ctrl-C, as close() begins

        monkeypatch.setattr(Descendants, "note", note_then_ctrl_c)
        with pytest.raises(KeyboardInterrupt):
            worker.close()
        assert gone(member), "a process of its group left behind (stopped)"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(worker.pid, 0)


# started in a session of its own, deaf to SIGTERM: only the look and the SIGKILL end it
DEAF_SETSID = (
    "import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
)


def test_a_ctrl_c_during_the_end_of_strays_does_not_leave_them_running(tmp_path, monkeypatch, ctrl_c_raises):
    """A Ctrl-C in Descendants.end's grace used to cut it short, before the SIGKILL of a stray."""
    from nvmeter.descendants import Descendants

    importable(tmp_path, monkeypatch, "spawning_handlers", SPAWNING_HANDLERS)
    worker = WorkerProcess("cpu", handlers="spawning_handlers")
    stray = worker.request("spawn", script=DEAF_SETSID, args=[])["pid"]
    deadline = time.monotonic() + 10
    while os.getsid(stray) == os.getsid(worker.pid) and time.monotonic() < deadline:  # until it has left
        time.sleep(0.01)
    end = Descendants.end

    def ctrl_c_then_end(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # held: the handler would raise here otherwise
        return end(self, *args, **kwargs)

    monkeypatch.setattr(Descendants, "end", ctrl_c_then_end)
    try:
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            worker.close()
        assert gone(stray, within_s=0.5), "a stray outside the group left running"
        # the worker had exited by itself: the held Ctrl-C costs only the end's grace and kill
        assert time.monotonic() - started < 5
    finally:
        with contextlib.suppress(psutil.Error):
            psutil.Process(stray).kill()


NAPPING_HANDLERS = """
import time
def nap(request, engine):
    time.sleep(request["s"])
    return {}
HANDLERS = {"nap": nap}
"""


def test_a_worker_busy_in_a_call_is_not_waited_for_at_close(tmp_path, monkeypatch):
    """Asked to exit while in a call, it cannot read the request: close() waited 5 s for nothing."""
    importable(tmp_path, monkeypatch, "napping_handlers", NAPPING_HANDLERS)
    worker = WorkerProcess("cpu", handlers="napping_handlers")
    worker.request("nap", s=0.0)  # started and answering
    worker.submit("nap", timeout_s=60, s=30)  # the call a Ctrl-C interrupts
    started = time.monotonic()
    worker.close()
    assert time.monotonic() - started < 2.5
    assert gone(worker.pid, within_s=0)
