"""JobWindow on simulated boards of one host (one virtual clock), and the clock's concurrency."""

import dataclasses
import math
import threading
import time

import numpy as np
import pytest

from nvmeter import errors
from nvmeter.boards.factory import open_boards, simulated_host
from nvmeter.boards.profile import H200_V1
from nvmeter.boards.simulated import Fault, SimConfig, SimulatedBoard
from nvmeter.clock import RealClock, VirtualClock, run_concurrently
from nvmeter.meter.job import JobWindow
from nvmeter.meter.jobmeasurement import BoardPart, JobMeasurement, RankRecord
from nvmeter.meter.window import EnergyWindow

LOADS_W = [550.0, 300.0, 100.0, 0.0]


def host(n=4, seed=3):
    boards = simulated_host(n, config=SimConfig(seed=seed))
    for b in boards:
        b.set_context(True)
    boards[0].clock.sleep(1.0)
    return boards


def work(boards, seconds, loads=LOADS_W, steps=10, w=None):
    """The job's steps: each board at its load for ``seconds``; returns the truth, J above idle."""
    clock = boards[0].clock
    t0 = clock.now()
    for b, load in zip(boards, loads, strict=False):
        b.set_load(load)
    for _ in range(steps):
        clock.sleep(seconds / steps)
        if w is not None:
            w.call()
    for b in boards:
        b.set_load(0.0)
    t1 = t0 + seconds + 0.3
    return [b.true_energy_j(t0, t1) - b.config.idle_context_w * (t1 - t0) for b in boards]


# -- the clock -----------------------------------------------------------------
def test_lanes_run_side_by_side_in_virtual_time_and_in_time_order():
    clock = VirtualClock(0.0)
    seen = []

    def lane(name, step_s):
        def run():
            for _ in range(3):
                seen.append((round(clock.now(), 6), name))
                clock.sleep(step_s)
            return name

        return run

    assert clock.concurrently([lane("a", 0.1), lane("b", 0.15), lane("c", 0.05)]) == ["a", "b", "c"]
    assert clock.now() == pytest.approx(0.45)  # the longest lane, not the 0.9 s sum
    assert seen == sorted(seen)  # every lane's reads in one time order, whatever the threads did


def test_a_lane_error_is_raised_after_every_lane_finished():
    clock = VirtualClock(0.0)
    done = []

    def bad():
        clock.sleep(0.1)
        raise errors.GpuLost("lost")

    def good():
        clock.sleep(1.0)
        done.append(clock.now())

    with pytest.raises(errors.GpuLost):
        run_concurrently(clock, [bad, good])
    assert done == [1.0] and clock.now() == 1.0
    with pytest.raises(RuntimeError, match="nest"):
        clock.concurrently([lambda: clock.concurrently([lambda: None])])


def test_on_the_host_clock_the_functions_run_in_threads_at_once():
    t0 = time.perf_counter()
    names = run_concurrently(RealClock(), [lambda: (time.sleep(0.3), threading.current_thread().name)[1]] * 4)
    assert time.perf_counter() - t0 < 1.0  # 4 x 0.3 s would be 1.2 s
    assert len(set(names)) == 4


# -- the factory -----------------------------------------------------------------
def test_a_simulated_host_has_distinct_boards_on_one_clock():
    boards = simulated_host(3)
    assert len({b.identity().uuid for b in boards}) == 3
    assert all(b.clock is boards[0].clock for b in boards)
    assert SimulatedBoard().identity().uuid not in {b.identity().uuid for b in boards}  # nor a board apart
    picked = open_boards([2, boards[2].identity().uuid, 0], available=boards)
    assert picked == [boards[2], boards[0]]  # named twice, opened once
    with pytest.raises(errors.DeviceNotFound, match="no device 3"):
        open_boards([3], available=boards)
    with pytest.raises(errors.UsageError):
        simulated_host(0)


# -- the window ------------------------------------------------------------------
def test_the_job_is_the_sum_of_its_boards_within_the_combined_bound():
    boards = host()
    with JobWindow(boards, sync="none") as w:
        truth = work(boards, 2.0, w=w)
    job = w.result
    assert job.reliable, job.reason
    assert [b.device.uuid for b in job.boards] == [b.identity().uuid for b in boards]
    for part, t in zip(job.boards, truth, strict=True):
        assert abs(part.above_idle_j - t) <= part.err_j
    assert abs(job.above_idle_j - sum(truth)) <= job.err_j
    assert abs(job.above_idle_j / sum(truth) - 1) < 0.01
    assert job.err_j == pytest.approx(sum(b.err_j for b in job.boards))  # a plain sum, not in quadrature
    assert job.calls == 10 and job.per_step_mj == pytest.approx(job.above_idle_j * 100)
    assert "mJ/step above idle over 4 board(s), 1 rank(s) (10 steps" in repr(job)


@pytest.mark.parametrize(("idle", "periods"), [(121.2, 1), ("measure", 2)])
def test_edges_of_n_boards_cost_the_slowest_one_not_their_sum(idle, periods):
    # each board alone, on a fresh copy of the host: its entry and exit in virtual time
    alone_in, alone_out = [], []
    for i in range(4):
        boards = host()
        clock = boards[0].clock
        t = clock.now()
        with EnergyWindow(boards[i], sync="none", idle=idle) as w:
            alone_in.append(clock.now() - t)
            work(boards, 1.0)
            w.call(10)
            t = clock.now()
        alone_out.append(clock.now() - t)
    boards = host()
    clock = boards[0].clock
    t = clock.now()
    with JobWindow(boards, sync="none", idle=idle) as w:
        job_in = clock.now() - t
        work(boards, 1.0)
        w.call(10)
        t = clock.now()
    job_out = clock.now() - t
    # the boards' lanes run side by side: the job waits exactly as long as its slowest board
    assert job_in == pytest.approx(max(alone_in), abs=1e-9)
    assert job_in < sum(alone_in) and job_out < sum(alone_out)
    # the boards differ only in where their counters step and in which steps a slow read blurred:
    # an edge polls past those (span.sharp_edge), so at most its time-out an edge (an idle span adds two)
    slack_s = periods * (H200_V1.edge_timeout_s + 0.02)
    assert job_in <= min(alone_in) + slack_s
    # the exit's edges fall on other counter phases than alone (the work started later)
    assert job_out <= max(alone_out) + slack_s


def test_a_long_window_keeps_every_boards_sample_buffer_whole():
    boards = host(3)
    with JobWindow(boards, sync="none") as w:
        work(boards, 12.0, loads=[400.0] * 3, steps=600, w=w)
    for part in w.result.boards:
        m = part.measurement
        t = np.array([s.t_s for s in m.samples])
        inside = t[(t > m.work_t0_s) & (t < m.work_t1_s)]
        assert inside[0] - m.work_t0_s < 0.05 and m.work_t1_s - inside[-1] < 0.05
        assert np.diff(inside).max() < 0.05  # ~20 ms apart: the ~2.4 s buffer never rolled over


def test_a_board_without_the_counter_is_named_and_leaves_the_total_unknown():
    boards = host(3)
    boards[1].inject(Fault.NOT_SUPPORTED)
    with JobWindow(boards, sync="none") as w:
        truth = work(boards, 1.0, w=w)
    job = w.result
    assert not job.reliable
    assert (
        "NotSupported" in job.reason
        and "not 0 J" in job.reason
        and boards[1].identity().uuid[-4:] in job.reason
    )
    assert math.isnan(job.above_idle_j) and math.isnan(job.per_step_mj)
    assert job.boards[1].measurement is None
    assert abs(job.measured_above_idle_j - truth[0] - truth[2]) <= job.boards[0].err_j + job.boards[2].err_j


def test_a_board_lost_inside_the_window_is_named():
    boards = host(2)
    boards[0].inject(Fault.GPU_LOST, at_s=boards[0].clock.now() + 2.0)
    with JobWindow(boards, sync="none") as w:
        work(boards, 1.0, w=w)
    job = w.result
    assert job.boards[0].error.startswith("GpuLost") and job.boards[1].measurement is not None
    assert not job.reliable and math.isnan(job.above_idle_j)


def test_mixed_models_with_profiles_by_name_and_idle_by_uuid():
    clock = VirtualClock()
    h200 = SimulatedBoard(SimConfig(seed=1), clock)
    h100 = SimulatedBoard(
        SimConfig(
            seed=2,
            name="Simulated H100",
            uuid="GPU-11000000-0000-4000-8000-000000000000",
            counter_period_s=0.05,
        ),
        clock,
    )
    for b in (h200, h100):
        b.set_context(True)
    clock.sleep(1.0)
    profile = {"Simulated H100": H200_V1.with_(source="test:H100", counter_period_s=0.05)}
    idle = {h100.identity().uuid: h100.config.idle_context_w}  # the other board measures its own
    with JobWindow([h200, h100], sync="none", profile=profile, idle=idle) as w:
        truth = work([h200, h100], 2.0, loads=[500.0, 500.0], w=w)
    a, b = w.result.boards
    assert (
        a.measurement.profile.source.startswith("defaults:") and b.measurement.profile.source == "test:H100"
    )
    assert a.measurement.idle.source == "quiescent" and b.measurement.idle.source == "given"
    assert abs(w.result.above_idle_j - sum(truth)) <= w.result.err_j


def test_bad_input():
    boards = host(2)
    other = SimulatedBoard(SimConfig(uuid="GPU-5157a7ed-0000-4000-8000-00000000000f"))  # its own clock
    with pytest.raises(errors.UsageError, match="one VirtualClock"):
        JobWindow([boards[0], other])
    with pytest.raises(errors.UsageError, match="max_rel_err"):
        JobWindow(boards, max_rel_err=0)
    with pytest.raises(errors.UsageError, match="method"):
        JobWindow(boards, method="magic")
    with pytest.raises(errors.DeviceNotFound):
        JobWindow([0, 5], available=boards)


def test_an_exception_in_the_block_propagates_and_leaves_no_result():
    boards = host(2)
    with pytest.raises(KeyError), JobWindow(boards, sync="none") as w:
        raise KeyError("boom")
    assert w.result is None


def test_the_job_bound_is_judged_whole_not_board_by_board():
    boards = host(2)
    with JobWindow(boards, sync="none", max_rel_err=0.1) as w:
        # the idle board's own relative bound is huge; the busy one starts cold (a transient term)
        work(boards, 1.0, loads=[500.0, 0.0], w=w)
    assert w.result.reliable, w.result.reason
    with JobWindow(boards, sync="none", max_rel_err=0.001) as w:
        work(boards, 1.0, loads=[500.0, 0.0], w=w)
    assert "exceeds the accepted 0.1%" in w.result.reason


def test_the_record_round_trips(tmp_path):
    boards = host(2)
    with JobWindow(boards, sync="none") as w:
        work(boards, 1.0, w=w)
    path = tmp_path / "job.json"
    w.result.save(path)
    back = JobMeasurement.load(path)
    for key in ("above_idle_j", "err_j", "per_step_mj", "per_step_mj_err", "window_s", "reliable"):
        assert back.to_dict()["derived"][key] == pytest.approx(w.result.to_dict()["derived"][key])
    assert back.boards[0].measurement.profile == w.result.boards[0].measurement.profile
    from nvmeter import records

    data = records.read_json(path, "job")
    data["schema_version"] = 99
    records.write_json(path, data)
    with pytest.raises(errors.RecordError, match="schema_version"):
        JobMeasurement.load(path)


def test_a_record_whose_reasons_an_earlier_nvmeter_worded_otherwise_still_loads(tmp_path):
    """A review (2026-12-07): a job record saved before "0.0%" became "0.010%" was refused at load."""
    from nvmeter import records

    boards = host(1)
    with JobWindow(boards, sync="none", max_rel_err=0.0001) as w:
        work(boards, 1.0, w=w)
    path = tmp_path / "job.json"
    w.result.save(path)
    data = records.read_json(path, "job")
    assert data["derived"]["reason"] and not data["derived"]["reliable"]
    data["derived"]["reason"] = "bound 1.0% exceeds the accepted 0.0% (worded as an earlier nvmeter did)"
    records.write_json(path, data)
    assert JobMeasurement.load(path).reason == w.result.reason  # the prose is recomputed, not compared
    data["derived"]["reason"] = None  # but a reason removed is an altered verdict
    records.write_json(path, data)
    with pytest.raises(errors.RecordError, match=r"derived\.reason"):
        JobMeasurement.load(path)


def test_rank_rows_split_a_shared_board_evenly():
    boards = host(1)
    with JobWindow(boards, sync="none") as w:
        work(boards, 1.0, w=w)
    part = w.result.boards[0]
    shared = BoardPart(part.host, part.device, 0, (0, 1), part.measurement)
    job = JobMeasurement((shared,), (RankRecord(0, "h", 10, ()), RankRecord(1, "h", 10, ())))
    rows = job.rank_rows()
    assert rows[0]["share_per_step_mj"] == pytest.approx(job.per_step_mj / 2) == rows[1]["share_per_step_mj"]
    assert rows[0]["metered"] and not rows[1]["metered"]
    assert job.shared == {shared.label: (0, 1)}
    assert "| 1 | h | 10 |" in job.table()


def test_one_real_uuid_on_two_hosts_is_flagged():
    boards = host(1)
    with JobWindow(boards, sync="none") as w:
        work(boards, 1.0, w=w)
    part = w.result.boards[0]
    from dataclasses import replace

    real = replace(part.device, simulated=False)
    parts = (replace(part, device=real, host="a"), replace(part, device=real, host="b", rank=1, ranks=(1,)))
    job = JobMeasurement(parts, (RankRecord(0, "a", 10, ()), RankRecord(1, "b", 10, ())))
    assert "metered on hosts a, b" in job.reason


def test_a_distributed_window_needs_a_process_group():
    from nvmeter.meter.distributed import DistributedWindow

    with pytest.raises(errors.UsageError, match="init_process_group"):
        DistributedWindow()


def test_torch_all_sync_is_a_named_choice_and_harmless_without_cuda():
    from nvmeter.meter.sync import resolve

    fn, name = resolve("torch_all")
    assert name == "torch_all"
    fn()  # no CUDA here: nothing to synchronise, and no context opened
    with pytest.raises(errors.UsageError, match="torch_all"):
        resolve("torch-every")


def test_the_jobs_line_carries_each_boards_warnings():
    boards = host()
    with JobWindow(boards, sync="none") as w:
        work(boards, 2.0, w=w)  # from idle: each board's window starts cold, so transient
    job = w.result
    notes = [(b.label, n) for b in job.boards for n in b.measurement.notes]
    assert notes and any(n.startswith("transient") for _, n in notes)
    line = repr(job)
    # a note two boards share is said once, after both (here: one board's window given to a twin)
    first = job.boards[0]
    twin = dataclasses.replace(first, device=job.boards[1].device)
    shared = dataclasses.replace(job, boards=(first, twin))
    note = first.measurement.notes[0]
    assert repr(shared).count(note) == 1 and f"{first.label}, {twin.label}: {note}" in repr(shared)
    for label, note in notes:
        said = line.split(f": {note}")[0].rsplit("[", 1)[-1].rsplit("; ", 1)[-1]
        assert label in said.split(", ")  # each note once, after every board that has it
        assert line.count(f": {note}") == 1


def test_boards_that_share_several_notes_are_named_once_for_them_all():
    """A new user's trial: two boards' list was said again before each note they shared."""
    (board,) = host(1)
    board.clock.sleep(5.0)  # the SM clock falls to its idle's
    with JobWindow([board], sync="none") as w:
        board.set_load(300.0)
        board.clock.sleep(1.0)
        board.set_load(0.0)
        w.call(10)
    first = w.result.boards[0]
    notes = first.measurement.notes  # from idle: cold, and the SM clock rose
    assert len(notes) >= 2
    # another board: its UUID's last digit changed (a board whose UUID ended in 9 had been its own twin)
    last = "8" if first.device.uuid.endswith("9") else "9"
    other = dataclasses.replace(first.device, uuid=first.device.uuid[:-1] + last)
    twin = dataclasses.replace(first, device=other)
    line = repr(dataclasses.replace(w.result, boards=(first, twin)))
    assert line.count(first.label) == 1 and f"{first.label}, {twin.label}: {'; '.join(notes)}]" in line
