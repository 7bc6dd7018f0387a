"""Other processes' contexts on a window's board: their work would read as the window's."""

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from nvmeter import errors
from nvmeter.boards.simulated import Fault, SimConfig, SimulatedBoard
from nvmeter.meter import contexts, sanity
from nvmeter.meter.adaptive import measure
from nvmeter.meter.contexts import ContextRead
from nvmeter.meter.job import JobWindow
from nvmeter.meter.measurement import Measurement
from nvmeter.meter.monitor import EnergyMonitor
from nvmeter.meter.window import EnergyWindow

LOAD_W, CALL_S = 300.0, 0.04
OTHER_PID = os.getppid()  # a process that runs and is not this one's descendant: pytest's parent


def _board() -> SimulatedBoard:
    board = SimulatedBoard(SimConfig(seed=5))
    board.set_context(True)  # this process's
    board.clock.sleep(1.0)
    return board


def _window(board, burst_w: float = 0.0, **kwargs):
    """0.5 s of this process's calls; another process adds ``burst_w`` W for 0.2 s in the middle."""
    idle_w = board.config.idle_context_w
    with EnergyWindow(board, sync="none", idle=idle_w, **kwargs) as w:
        for i in range(12):
            board.set_load(LOAD_W + (burst_w if 4 <= i < 9 else 0.0))
            board.clock.sleep(CALL_S)
            w.call()
        board.set_load(0.0)
    return w.result


def test_another_process_s_work_inside_a_window_is_not_reliable_and_named():
    """An expert review: 29 of 30 such windows read +21% median as reliable figures."""
    board = _board()
    board.other_pids.append(OTHER_PID)
    m = _window(board, burst_w=200.0)
    truth_mj = LOAD_W * CALL_S * 1e3
    assert m.per_call_mj - truth_mj > m.per_call_mj_err  # the other's work read as this window's
    assert not m.reliable and f"other process ({OTHER_PID})" in m.reason
    assert "others_idle=True" in m.reason
    assert [r.others for r in m.contexts] == [(OTHER_PID,), (OTHER_PID,)]


def test_the_caller_can_say_the_others_did_no_work():
    board = _board()
    board.other_pids.append(OTHER_PID)
    m = _window(board, others_idle=True)
    assert m.reliable, m
    assert f"other process ({OTHER_PID}) held a context, taken as idle" in repr(m)


def test_a_board_with_only_this_process_s_context_is_read_as_before():
    m = _window(_board())
    assert m.reliable and [r.pids for r in m.contexts] == [(os.getpid(),)] * 2
    assert contexts.others(m.contexts) == ((), 0)


def test_this_process_s_children_are_its_own():
    """nvmeter run's command, a probe's worker: a child's context is the window's work."""
    board = _board()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        board.other_pids.append(child.pid)
        m = _window(board)
    finally:
        child.kill()
        child.wait()
    assert m.reliable and m.contexts[0].pids == (os.getpid(), child.pid), m


def test_pids_of_another_namespace_are_counted_not_named(monkeypatch):
    """In a container the driver lists host pids: this process's is not among them."""
    monkeypatch.setattr(contexts, "_host_namespace", lambda: False)
    monkeypatch.setattr(contexts, "_may_hold_context", lambda pid: pid == os.getpid())  # it loaded CUDA
    board = _board()
    board.set_context(True, pid=900_001)  # this process, as the host numbers it
    m = _window(board)
    assert m.reliable and m.contexts[0].unattributed == 0
    board.other_pids.append(900_002)
    m = _window(board)
    assert m.contexts[0] == ContextRead(m.contexts[0].t_s, (900_001, 900_002), (), 1)
    assert not m.reliable and "1 more process than this one and its children that loaded CUDA" in m.reason


def test_in_another_namespace_an_own_process_without_cuda_hides_no_other(monkeypatch):
    """nvmeter run's own process holds no context: one other context had read as its (a breaker's trial)."""
    monkeypatch.setattr(contexts, "_host_namespace", lambda: False)
    board = _board()
    board.set_context(False)
    board.other_pids.append(900_002)
    m = _window(board)  # this test's process has not loaded libcuda
    assert [r.unattributed for r in m.contexts] == [1, 1] and not m.reliable


def test_a_process_hidden_from_this_one_is_not_taken_as_ended(monkeypatch):
    """/proc mounted hidepid=2 hides another user's processes: psutil reads them as gone (a breaker)."""
    import psutil

    def hidden(pid):
        raise psutil.NoSuchProcess(pid)

    monkeypatch.setattr(contexts.psutil, "Process", hidden)
    board = _board()
    board.other_pids.append(OTHER_PID)  # runs: os.kill(pid, 0) says so
    assert not _window(board).reliable


def test_a_board_that_does_not_list_its_processes_reads_as_not_known():
    board = _board()
    board.inject(Fault.NO_PROCESS_LIST)
    m = _window(board)
    assert m.reliable and all(r.pids is None for r in m.contexts)
    assert "other processes not checked: the board does not list its compute processes" in repr(m)


def test_measure_takes_others_idle():
    board = _board()
    board.other_pids.append(OTHER_PID)

    def step():
        board.set_load(LOAD_W)
        board.clock.sleep(CALL_S)
        board.set_load(0.0)

    kwargs = {"device": board, "idle": board.config.idle_context_w, "sync": "none", "max_window_s": 6.0}
    with pytest.warns(errors.NvmeterWarning, match=f"measure\\(\\): process\\(es\\) {OTHER_PID} hold a CUDA"):
        m = measure(step, **kwargs)  # said before the run, not only after it
    assert f"other process ({OTHER_PID})" in (m.reason or "")
    assert "taken as idle" in repr(measure(step, others_idle=True, **kwargs))
    with pytest.raises(errors.UsageError, match="others_idle is True or False"):
        measure(step, others_idle="yes", **kwargs)
    with pytest.raises(errors.UsageError, match="others_idle is True or False"):
        EnergyWindow(board, others_idle=1)


def test_a_record_keeps_its_contexts_and_an_older_one_reads_as_not_looked_for():
    board = _board()
    board.other_pids.append(OTHER_PID)
    m = _window(board)
    back = Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back.contexts == m.contexts and back.reason == m.reason
    older = {k: v for k, v in m.to_dict().items() if k not in ("contexts", "others_idle")}
    older["schema_version"] = 7
    assert Measurement.from_dict(older).contexts == ()
    with pytest.raises(errors.RecordError, match="version 8 added"):
        Measurement.from_dict({**m.to_dict(), "schema_version": 7})


@pytest.mark.parametrize(
    "read, why",
    [
        ({"pids": [1, "2"]}, "whose pids are not whole numbers"),
        ({"pids": [1], "others": [7]}, "that counts others it does not list"),
        ({"pids": [1], "unattributed": 2}, "that counts others it does not list"),
        ({"pids": [1, 2], "others": [2], "unattributed": 2}, "that counts others it does not list"),
        ({"pids": [1, 1]}, "that lists a pid twice"),
        ({"t_s": None}, "without a time"),
    ],
)
def test_a_damaged_read_of_the_processes_is_refused(read, why):
    raw = {"t_s": 1.0, "pids": [1], "others": [], "unattributed": 0, **read}
    assert [w for _, w in sanity.faults({"contexts": [raw]})] == [f"a read of the compute processes {why}"]


def test_a_measurement_replaced_with_others_idle_drops_the_reason():
    board = _board()
    board.other_pids.append(OTHER_PID)
    m = _window(board)
    assert not m.reliable and replace(m, others_idle=True).reliable


def test_processes_named_as_the_window_s_own_are_not_others():
    """A distributed job's other ranks on this host (DistributedWindow passes their pids)."""
    board = _board()
    board.other_pids.append(OTHER_PID)
    assert _window(board, own_pids=(OTHER_PID,)).reliable
    with EnergyWindow(
        devices=[board], sync="none", idle=board.config.idle_context_w, own_pids=(OTHER_PID,)
    ) as w:
        board.set_load(LOAD_W)
        board.clock.sleep(0.5)
        board.set_load(0.0)
        w.call()
    assert w.result.reliable, w.result
    for bad in ((0,), "4242", (True,)):
        with pytest.raises(errors.UsageError, match="own_pids is a tuple of process ids"):
            EnergyWindow(board, own_pids=bad)
    # pid 1 is every process's ancestor: as the window's own it had switched the check off (a breaker)
    assert not _window(board, own_pids=(1,)).reliable
    for make in (lambda: EnergyMonitor(board, others_idle="yes"), lambda: JobWindow([], others_idle="yes")):
        with pytest.raises(errors.UsageError, match="others_idle is True or False"):
            make()


def test_a_process_that_has_ended_is_not_another_s_work():
    """The driver may list a process a moment after it ended (a command at nvmeter run's exit)."""
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    board = _board()
    board.other_pids.append(ended.pid)
    m = _window(board)
    assert m.reliable and contexts.others(m.contexts) == ((), 0), m


def test_a_record_whose_contexts_are_no_list_of_two_reads_is_refused():
    m = _window(_board())
    for bad in ({}, [m.contexts[0].to_dict()] * 3):
        with pytest.raises(errors.RecordError, match="contexts"):
            Measurement.from_dict({**m.to_dict(), "contexts": bad})


@pytest.mark.parametrize("pid", [4294967295, 0, -1])
def test_a_pid_no_process_can_have_reads_as_a_list_not_known(pid):
    """A breaker: nvidia-ml-py built for another driver lists 0 and 4294967295 (nvitop issue 75), and
    os.kill raised OverflowError out of the window."""
    board = _board()
    board.other_pids.append(pid)
    m = _window(board)
    assert [r.pids for r in m.contexts] == [None, None]
    assert "other processes not checked: the board does not list its compute processes" in repr(m)
