"""Ending what a child started in a session of its own (nvmeter.descendants), with real processes."""

import contextlib
import json
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
from nvmeter.descendants import GRACE_S, KILL_WAIT_S, MARKER, Descendants, end_tree, marked

PY = sys.executable
SLEEP_600 = [PY, "-c", "import time; time.sleep(600)"]


@pytest.fixture
def started():
    """Processes a test starts: whatever of them (and the pids it names) still runs after is killed."""
    procs: list[subprocess.Popen] = []
    pids: list[int] = []
    yield procs, pids
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


def start(started, script: str, env=None) -> subprocess.Popen:
    """``script`` in a session of its own, as nvmeter starts a worker or a command."""
    proc = subprocess.Popen([PY, "-c", textwrap.dedent(script)], start_new_session=True, env=env)
    started[0].append(proc)
    return proc


def pids_in(path, count=1, within_s=30.0) -> list[int]:
    """The first ``count`` pids a process wrote to ``path``, one a line, once they are there."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if path.exists():
            lines = path.read_text().split("\n")[:-1]  # complete lines only
            if len(lines) >= count:
                return [int(line) for line in lines]
        time.sleep(0.02)
    raise AssertionError(f"{path} did not get {count} pids within {within_s} s")


def running(pid: int) -> bool:
    return not gone(pid, within_s=0.0)


def new_session_grandchild(path, then="time.sleep(600)", argv=SLEEP_600):
    """A root's script: a grandchild in a session of its own, its pid written to ``path``."""
    return f"""
        import os, signal, subprocess, sys, time
        child = subprocess.Popen({argv!r}, start_new_session=True)
        with open({str(path)!r}, "a") as f:
            f.write(f"{{child.pid}}\\n")
        {then}
    """


def test_a_grandchild_in_a_session_of_its_own_outlives_the_group_kill_but_not_end(tmp_path, started):
    file = tmp_path / "pids"
    root = start(started, new_session_grandchild(file))
    (grandchild,) = pids_in(file)
    started[1].append(grandchild)
    assert os.getsid(grandchild) != os.getsid(root.pid)
    unrelated = start(started, "import time; time.sleep(600)")  # not under the root: left alone
    descendants = Descendants(root.pid)
    descendants.note()
    assert grandchild in descendants.pids() and unrelated.pid not in descendants.pids()
    os.killpg(root.pid, signal.SIGKILL)  # the root stays unreaped, as the worker's does
    assert not gone(grandchild, within_s=0.5), "the group's kill alone reached it: nothing to test"
    assert psutil.Process(grandchild).ppid() != root.pid  # orphaned: no longer under the root
    assert Descendants(root.pid).end() == () and running(grandchild)  # a look once the root died is too late
    assert descendants.end() == ()
    assert gone(grandchild), "the grandchild in its own session survived end()"
    assert running(unrelated.pid), "end() killed a process that was not under the root"


def test_sigterm_first_then_sigkill_for_one_that_ignores_it(tmp_path, started):
    file, cleaned = tmp_path / "pids", tmp_path / "cleaned"
    ready = f"open({str(file)!r}, 'a').write(f'{{os.getpid()}}\\n')"  # once its handler is set
    polite = f"""
        import os, signal, sys, time
        def bye(*_):
            open({str(cleaned)!r}, "w").close()
            sys.exit(0)
        signal.signal(signal.SIGTERM, bye)
        {ready}
        time.sleep(600)
    """
    stubborn = f"""
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        {ready}
        time.sleep(600)
    """
    root = start(
        started,
        f"""
        import subprocess, time
        for script in {[textwrap.dedent(polite), textwrap.dedent(stubborn)]!r}:
            subprocess.Popen([{PY!r}, "-c", script], start_new_session=True)
        time.sleep(600)
        """,
    )
    pids = pids_in(file, count=2)
    started[1].extend(pids)
    descendants = Descendants(root.pid)
    descendants.note()
    assert set(pids) <= set(descendants.pids())
    os.killpg(root.pid, signal.SIGKILL)
    t0 = time.monotonic()
    assert descendants.end(grace_s=0.5) == ()
    took = time.monotonic() - t0
    assert all(gone(pid) for pid in pids)
    assert cleaned.exists(), "the one with a SIGTERM handler never got SIGTERM"
    assert 0.5 <= took < 5.0, took  # the stubborn one waited out its grace, then SIGKILL


def test_the_marker_finds_a_double_fork_that_left_the_tree(tmp_path, started):
    file = tmp_path / "pids"
    env, token = marked(os.environ)
    # the shell's background job leaves the shell's session (setsid) and, the shell gone, its tree
    script = f"""
        import subprocess
        subprocess.run(["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! >> {file}"])
    """
    root = start(started, script, env=env)
    descendants = Descendants(root.pid, token)  # as the worker: taken when the root starts
    (orphan,) = pids_in(file)
    started[1].append(orphan)
    root.wait(timeout=30)  # the root has ended by itself: nothing is under it any more
    assert psutil.Process(orphan).environ().get(MARKER) == token
    assert Descendants(root.pid).end() == () and running(orphan)  # the tree alone cannot find it
    assert descendants.end() == ()
    assert gone(orphan), "the marker did not find the double fork's grandchild"


def test_what_a_marked_process_started_without_the_marker_is_found_under_it(tmp_path, started):
    """A double fork's grandchild (the marker finds it) and its child with an empty environment (the tree)."""
    file = tmp_path / "pids"
    env, token = marked(os.environ)
    inner = f"env -i sleep 600 & echo $! >> {file}; echo $$ >> {file}; wait"
    script = f"""
        import subprocess
        subprocess.run(["sh", "-c", "setsid sh -c '{inner}' </dev/null >/dev/null 2>&1 &"])
    """
    root = start(started, script, env=env)
    descendants = Descendants(root.pid, token)  # as the worker: taken when the root starts
    unmarked, orphan = pids_in(file, count=2)
    started[1].extend([unmarked, orphan])
    root.wait(timeout=30)
    # $! is env's pid: its environment is the marked one until it has exec'd sleep (a run that looked
    # sooner failed, a new user's trial and a reviewer's)
    deadline = time.monotonic() + 10
    while psutil.Process(unmarked).name() != "sleep" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert psutil.Process(orphan).environ().get(MARKER) == token
    assert MARKER not in psutil.Process(unmarked).environ() and psutil.Process(unmarked).ppid() == orphan
    assert Descendants(root.pid).end() == () and running(orphan) and running(unmarked)
    assert descendants.end() == ()
    assert gone(orphan) and gone(unmarked), "the child of a process the marker found was not ended"


def test_what_a_descendant_starts_while_it_is_ended_is_ended_too(tmp_path, started):
    """A grandchild in its own session that ignores SIGTERM and starts a process every 10 ms."""
    tag = uuid.uuid4().hex  # not nvmeter's marker: only to find every process this test started
    spawner = """
        import os, signal, subprocess, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            subprocess.Popen(["sleep", "600"], start_new_session=True)
            time.sleep(0.01)
    """
    env = {**os.environ, "NVMETER_TEST_TAG": tag}
    file = tmp_path / "pids"
    root = start(started, new_session_grandchild(file, argv=[PY, "-c", textwrap.dedent(spawner)]), env=env)
    pids_in(file)

    def tagged():
        found = []
        for p in psutil.process_iter():
            try:
                if p.environ().get("NVMETER_TEST_TAG") == tag and p.status() != psutil.STATUS_ZOMBIE:
                    found.append(p)
            except psutil.Error:
                pass
        return found

    end = time.monotonic() + 30
    while len(tagged()) < 10 and time.monotonic() < end:  # the root, the spawner and its sleeps
        time.sleep(0.05)
    assert len(tagged()) >= 10
    started[1].extend(p.pid for p in tagged())
    descendants = Descendants(root.pid)
    descendants.note()
    os.killpg(root.pid, signal.SIGKILL)
    assert descendants.end(grace_s=0.3) == ()
    left = [p for p in tagged() if p.pid != root.pid and p.is_running()]
    assert not left, f"left running: {[(p.pid, p.cmdline()) for p in left]}"


def until(condition, within_s=5.0) -> bool:
    """True as soon as ``condition()`` is, False if it is not within ``within_s``."""
    end = time.monotonic() + within_s
    while not condition():
        if time.monotonic() >= end:
            return False
        time.sleep(0.01)
    return True


def stopped(pid: int) -> bool:
    return psutil.Process(pid).status() == psutil.STATUS_STOPPED


def test_stop_holds_what_runs_under_the_child_and_cont_continues_exactly_that(tmp_path, started):
    """A frozen child's own session's grandchild, a double fork's, and one that stopped itself."""
    file = tmp_path / "pids"
    env, token = marked(os.environ)
    stops_itself = "import os, signal, time; os.kill(os.getpid(), signal.SIGSTOP); time.sleep(600)"
    script = f"""
        import subprocess, time
        for argv in ({SLEEP_600!r}, [{PY!r}, "-c", {stops_itself!r}]):
            child = subprocess.Popen(argv, start_new_session=True)
            with open({str(file)!r}, "a") as f:
                f.write(f"{{child.pid}}\\n")
        subprocess.run(["sh", "-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! >> {file}"])
        time.sleep(600)
    """
    root = start(started, script, env=env)
    runs, stopped_itself, orphan = pids_in(file, count=3)
    started[1].extend([runs, stopped_itself, orphan])
    unrelated = start(started, "import time; time.sleep(600)")
    assert until(lambda: stopped(stopped_itself))
    assert psutil.Process(orphan).ppid() != root.pid  # out of the tree: the marker alone finds it
    descendants = Descendants(root.pid, token)
    os.killpg(root.pid, signal.SIGSTOP)  # as WorkerProcess.freeze: the child's group first
    assert until(lambda: stopped(root.pid))
    assert sorted(descendants.stop()) == sorted([runs, orphan])  # held: the one found stopped is not
    assert stopped(runs) and stopped(orphan) and stopped(stopped_itself)
    assert not stopped(unrelated.pid), "stop() stopped a process that was not under the child"
    assert descendants.stop() == tuple(sorted([runs, orphan]))  # again: still held, none added
    os.killpg(root.pid, signal.SIGCONT)
    assert sorted(descendants.cont()) == sorted([runs, orphan])
    assert until(lambda: not stopped(runs) and not stopped(orphan)), "cont() left what stop() held stopped"
    assert stopped(stopped_itself), "cont() continued a process that stop() found stopped"
    assert descendants.cont() == ()  # continued once
    descendants.stop()
    os.killpg(root.pid, signal.SIGKILL)
    assert descendants.end() == ()  # stopped ones too (SIGTERM, then SIGCONT)
    assert all(gone(pid) for pid in (runs, stopped_itself, orphan))
    assert running(unrelated.pid)


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("setpriv"),
    reason="needs root and setpriv: a looker that may not signal",
)
def test_a_forking_process_it_may_not_signal_does_not_hang_stop_or_end(tmp_path, started):
    """Another user's process under the child (``sudo make -j``) that keeps forking: not waited on for ever.

    Each look found its new children, so stop() and end() looked again, without end: the probe's
    freeze and nvmeter run's kill hung (end() past the ``KILL_WAIT_S`` after which it says it gives up).
    """
    file = tmp_path / "pids"
    forker = (
        "import subprocess, time\nwhile True:\n    subprocess.Popen(['sleep', '0.5']); time.sleep(0.005)\n"
    )
    root = start(started, new_session_grandchild(file, argv=[PY, "-c", forker]))
    (forking,) = pids_in(file)
    started[1].append(forking)
    side = f"""
        import json, time
        from nvmeter.descendants import Descendants
        descendants = Descendants({root.pid})
        descendants.note()
        t0 = time.monotonic()
        held = descendants.stop()
        t1 = time.monotonic()
        left = descendants.end(grace_s=0.2)
        print(json.dumps({{"held": held, "stop_s": t1 - t0, "left": left, "end_s": time.monotonic() - t1}}))
    """
    # nobody may not signal root's processes: as a user's nvmeter may find a root process under its child
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    argv = [*nobody, PY, "-c", textwrap.dedent(side)]
    looker = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert looker.returncode == 0, looker.stderr
    found = json.loads(looker.stdout)
    assert found["held"] == [], "stop() said it held a process it may not signal"
    assert found["stop_s"] < 5.0, found
    assert forking in found["left"] and found["end_s"] < 2 * GRACE_S + KILL_WAIT_S + 5.0, found
    assert running(forking)  # not ours to end: named, and left


def test_end_tree_names_a_leader_it_could_not_reap(started):
    """A leader not reaped within ``REAP_WAIT_S`` (stuck in the kernel) is returned, not waited on.

    Its ``except subprocess.TimeoutExpired`` named a module imported for type checking only: the
    timeout became a NameError, a traceback out of the worker's cleanup and of ``nvmeter run``'s kill.
    """
    leader = start(started, "import time; time.sleep(600)")

    def stuck_in_the_kernel(timeout=None):
        raise subprocess.TimeoutExpired(leader.args, timeout)

    leader.wait = stuck_in_the_kernel  # as a leader in D state: SIGKILLed, not reaped within the wait
    try:
        with pytest.warns(errors.NvmeterWarning, match=rf"process\(es\) {leader.pid} could not be ended"):
            assert end_tree(leader, Descendants(leader.pid)) == (leader.pid,)
    finally:
        del leader.wait  # the fixture reaps it


# A process whose parent ends at once, with an empty environment and a session of its own: neither
# the tree (its parent is gone before any look) nor the marker (its environment is cleared) finds it.
ORPHAN_SH = "env -i setsid sh -c 'sleep 600 & echo $! >> {file}' </dev/null >/dev/null 2>&1"


def test_the_console_scripts_process_is_its_orphans_subreaper(tmp_path, started):
    """`nvmeter run` names, in left_running, what only the adoption finds: it was init's before."""
    file, record = tmp_path / "pids", tmp_path / "run.json"
    command = ["sh", "-c", ORPHAN_SH.format(file=file)]
    argv = ["nvmeter", "run", "--simulate", "--json", str(record), "--", *command]
    done = subprocess.run([PY, "-m", *argv], capture_output=True, text=True, timeout=120)
    (orphan,) = pids_in(file)
    started[1].append(orphan)
    assert done.returncode == 0, done.stderr
    assert json.loads(record.read_text())["left_running"] == [orphan]


def test_what_was_orphaned_under_a_failing_command_is_ended_by_its_subreaper(tmp_path, started):
    """In a process that adopts orphans (as the console script's does), nvmeter's failure ends them too."""
    file = tmp_path / "pids"
    script = f"""
        import pathlib, sys
        from nvmeter import descendants
        from nvmeter.boards.simulated import SimConfig, SimulatedBoard
        from nvmeter.command.life import SimulatedLife
        from nvmeter.command.meter import run_command

        assert descendants.adopt_orphans()
        file = pathlib.Path({str(file)!r})

        class FailsOnceNoted(SimulatedLife):
            def tick(self):
                super().tick()
                if file.exists() and file.read_text().endswith("\\n"):
                    raise RuntimeError("nvmeter failed (test)")

        board = SimulatedBoard(SimConfig(seed=7))
        command = ["sh", "-c", {ORPHAN_SH.format(file=file) + "; sleep 600"!r}]
        try:
            run_command(command, [board], life=FailsOnceNoted(board))
        except RuntimeError:
            print("failed as planned", flush=True)
        import psutil  # no child of this process runs any more, adopted or not

        left = tuple(c.pid for c in psutil.Process().children() if descendants.running(c))
        print("orphans left", left, flush=True)
    """
    done = subprocess.run([PY, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120)
    (orphan,) = pids_in(file)
    started[1].append(orphan)
    assert done.stdout.split("\n")[:2] == ["failed as planned", "orphans left ()"], done.stderr
    assert gone(orphan), "an orphan with no marker, out of the tree, outlived nvmeter's failure"


def test_a_worker_started_by_the_adopting_process_is_never_taken_for_an_orphan(tmp_path):
    """Two children started as Descendants roots: a look under one never notes the other."""
    script = f"""
        import subprocess, sys
        from nvmeter import descendants

        assert descendants.adopt_orphans()
        sleepers = [subprocess.Popen({SLEEP_600!r}, start_new_session=True) for _ in range(2)]
        trees = [descendants.Descendants(p.pid) for p in sleepers]
        for tree in trees:
            tree.note()
        adopted = descendants.Descendants(0, reaped=True).left_running(session_id=-1)  # orphans only
        print([tree.pids() for tree in trees], adopted, flush=True)
        for p in sleepers:
            p.kill()
            p.wait()
    """
    done = subprocess.run([PY, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[(), ()] ()", done.stderr


def test_adopted_orphans_that_end_are_reaped(tmp_path):
    """Nothing else waits for them: without the reaping each would stay nvmeter's zombie."""
    script = """
        import subprocess, time
        from nvmeter import descendants

        assert descendants.adopt_orphans()
        subprocess.run(["sh", "-c", "sleep 0.2 &"])  # the sleep is orphaned at once, then ends
        time.sleep(1.0)
        print(descendants.reap_orphans() != (), descendants.reap_orphans(), flush=True)
    """
    done = subprocess.run([PY, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True ()", done.stderr


def test_a_child_the_process_had_before_it_adopted_or_in_its_own_session_is_no_orphan():
    """A wrapper's helper (`helper & exec nvmeter ...`) was frozen, ended and named as the command's."""
    script = f"""
        import os, subprocess, sys
        from nvmeter import descendants

        # as a wrapper's helper, started before the exec (a session of its own: that alone is no proof)
        before = subprocess.Popen({SLEEP_600!r}, start_new_session=True)
        assert descendants.adopt_orphans()
        after = subprocess.Popen({SLEEP_600!r})  # not a Descendants root, in this process's session
        root = subprocess.Popen({SLEEP_600!r}, start_new_session=True)
        tree = descendants.Descendants(root.pid)
        tree.note()
        adopted = descendants.Descendants(0, reaped=True).left_running(session_id=-1)  # orphans only
        print(tree.pids(), adopted, flush=True)
        for p in (before, after, root):
            p.kill()
            p.wait()
        print(p.returncode, descendants.reap_orphans(), flush=True)  # its Popen reaped it, not reap_orphans
    """
    done = subprocess.run([PY, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=60)
    assert done.stdout.split("\n")[:2] == ["() ()", "-9 ()"], done.stdout + done.stderr


def test_orphans_that_end_while_a_worker_works_are_reaped_as_they_end(tmp_path):
    """Under nvmeter score they were reaped only when the worker closed: 2,101 zombies at once."""
    (tmp_path / "spawning_handlers.py").write_text(
        "import subprocess, sys\n"
        "def spawn(request, engine):\n"
        "    return {'pid': subprocess.Popen([sys.executable, '-c', request['script']]).pid}\n"
        "HANDLERS = {'spawn': spawn}\n"
    )
    orphans = "import os\\nfor _ in range(50):\\n    if os.fork() == 0:\\n        os._exit(0)\\n"
    script = f"""
        import time
        import psutil
        from nvmeter import descendants
        from nvmeter.worker.process import WorkerProcess

        assert descendants.adopt_orphans()
        with WorkerProcess("cpu", handlers="spawning_handlers") as worker:
            worker.request("spawn", script="{orphans}")
            time.sleep(1.0)  # the spawner and its 50 children have ended: nvmeter's orphans
            worker.ping()
            zombies = [c for c in psutil.Process().children() if c.status() == psutil.STATUS_ZOMBIE]
            print(len(zombies), flush=True)
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [PY, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.stdout.strip() == "0", done.stdout + done.stderr


def test_a_child_it_had_before_it_adopted_is_reaped_when_it_ends():
    """Nothing else waits for a wrapper's helper: left a zombie, it sent every later reap to the slow scan."""
    script = """
        import os, subprocess, sys, time
        from nvmeter import descendants

        helper = subprocess.Popen(["sleep", "0.2"])  # as a wrapper's, before its exec: no one waits for it
        assert descendants.adopt_orphans()
        time.sleep(1.0)
        print(descendants.reap_orphans() == (helper.pid,), descendants.reap_orphans(), flush=True)
    """
    done = subprocess.run([PY, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "True ()", done.stdout + done.stderr
