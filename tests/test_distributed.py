"""DistributedWindow across real processes: gloo ranks (2 and 4) on simulated boards.

Each rank is a real process (tests/dist_rank.py) on a file-store process group; the two
worlds start together and every scenario of a world runs on its one process group, so the
whole file costs one torch start per rank (~20 s on a 2-core machine). Every wait is
bounded: the ranks' own window timeout, the process group's, and a kill after 150 s.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nvmeter.meter.jobmeasurement import JobMeasurement

RANK = Path(__file__).with_name("dist_rank.py")
FOUR = ["plain", "shared", "missing", "unsupported", "calls", "mixed", "two_each", "hosts", "hang", "again"]
TWO = ["plain", "shared", "result_on", "max_rel_err", "caught", "again", "reopen", "again2"]
KILL_AFTER_S = 150


def start(world: int, scenarios: list[str], folder: Path) -> list[subprocess.Popen]:
    # loopback only: gloo would otherwise pick the interface the host name resolves to
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo")
    folder.mkdir()
    return [
        subprocess.Popen(
            [
                sys.executable,
                str(RANK),
                str(r),
                str(world),
                str(folder / "store"),
                str(folder / f"{r}.json"),
                *scenarios,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(world)
    ]


def finish(procs: list[subprocess.Popen], folder: Path) -> list[dict]:
    logs = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=KILL_AFTER_S)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        logs.append(err)
    out = []
    for r, p in enumerate(procs):
        assert p.returncode == 0, logs[r][-3000:]
        out.append(json.loads((folder / f"{r}.json").read_text()))
    return out


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    root = tmp_path_factory.mktemp("dist")
    four, two = start(4, FOUR, root / "four"), start(2, TWO, root / "two")
    return {4: finish(four, root / "four"), 2: finish(two, root / "two")}


def scenario(worlds, world, name):
    records = [ranks[name] for ranks in worlds[world]]
    for r in records:
        assert "crash" not in r, r["crash"]
    return records


def result(record) -> JobMeasurement:
    return JobMeasurement.from_dict(record["result"])


@pytest.mark.parametrize("world", [2, 4])
def test_every_rank_holds_the_job_and_it_matches_the_boards_truth(worlds, world):
    records = scenario(worlds, world, "plain")
    jobs = [result(r) for r in records]
    job = jobs[0]
    assert job.reliable, job.reason
    assert len(job.boards) == world and [r.rank for r in job.ranks] == list(range(world))
    assert {b.rank for b in job.boards} == set(range(world))  # each rank metered its own board
    assert all(j.to_dict()["derived"] == job.to_dict()["derived"] for j in jobs)
    truth_j = sum(sum(r["truth_j"]) for r in records)
    assert abs(job.above_idle_j - truth_j) <= job.err_j
    assert abs(job.above_idle_j / truth_j - 1) < 0.01
    assert job.calls == 20 and job.per_step_mj == pytest.approx(job.above_idle_j * 1e3 / 20)
    # every rank's raw readings travel: each board's counter reads and samples
    for part in job.to_dict()["boards"]:
        assert part["measurement"]["start"]["energy_mj"] and part["measurement"]["samples"]


@pytest.mark.parametrize("world", [2, 4])
def test_ranks_on_one_board_count_it_once(worlds, world):
    records = scenario(worlds, world, "shared")
    job = result(records[0])
    assert job.reliable, job.reason
    (board,) = job.boards
    assert board.ranks == tuple(range(world)) and board.rank == 0
    assert list(job.shared.values()) == [tuple(range(world))]
    # simulated: each rank's board is its own simulation, so the owner says it meters them as one
    (warned,) = records[0]["warnings"]
    assert f"ranks {', '.join(map(str, range(world)))} each opened a simulated board" in warned
    assert all(not r["warnings"] for r in records[1:])
    # rank 0's board is the one metered; the others' copies of it were never read
    assert abs(job.above_idle_j - sum(records[0]["truth_j"])) <= job.err_j
    shares = [row["share_per_step_mj"] for row in job.rank_rows()]
    assert sum(shares) == pytest.approx(job.per_step_mj) and max(shares) == pytest.approx(min(shares))


def test_the_host_tells_apart_boards_of_one_uuid_and_one_rank_holds_the_result(worlds):
    records = scenario(worlds, 4, "hosts")
    assert all("result" not in r for r in records[1:])  # result_on=0
    job = result(records[0])
    assert job.reliable, job.reason
    assert [(b.host, b.ranks, b.rank) for b in job.boards] == [("host0", (0, 1), 0), ("host1", (2, 3), 2)]
    truth_j = sum(records[0]["truth_j"]) + sum(records[2]["truth_j"])
    assert abs(job.above_idle_j - truth_j) <= job.err_j


def test_ranks_given_different_result_on_are_refused_at_entry_not_at_the_time_out(worlds):
    """An adversarial review: each rank waited for the process group's time-out, then named no rank."""
    for r in scenario(worlds, 2, "result_on"):
        assert r["error"] == "UsageError: the ranks gave different result_on (rank 0: 'all', rank 1: 0): " + (
            "give every rank the same"
        )


def test_ranks_given_different_max_rel_err_are_refused_at_entry(worlds):
    """An adversarial review: one job's figure read NOT RELIABLE on rank 0 and reliable on rank 1."""
    for r in scenario(worlds, 2, "max_rel_err"):
        said = "the ranks gave different max_rel_err (rank 0: 0.001, rank 1: None)"
        assert r["error"] == f"UsageError: {said}: give every rank the same"


def test_a_board_missing_on_one_host_stops_every_rank_naming_it(worlds):
    for r in scenario(worlds, 4, "missing"):
        assert r["error"].startswith("DistributedError: rank 3 (host ")
        assert "no device 1" in r["error"]


def test_a_board_without_the_counter_is_named_never_zero(worlds):
    job = result(scenario(worlds, 4, "unsupported")[0])
    assert not job.reliable and "NotSupported" in job.reason and "(rank 1)" in job.reason
    assert math.isnan(job.above_idle_j) and math.isnan(job.per_step_mj)
    assert len(job.metered) == 3 and job.measured_above_idle_j > 0


def test_ranks_that_disagree_on_calls_make_it_unreliable(worlds):
    job = result(scenario(worlds, 4, "calls")[0])
    assert not job.calls_agree and job.calls == 20
    assert "rank 1 19" in job.reason
    assert math.isfinite(job.above_idle_j)  # the energy stands; the per-step split is what is in doubt


def test_mixed_models_get_their_own_profiles(worlds):
    records = scenario(worlds, 4, "mixed")
    job = result(records[0])
    assert job.reliable, job.reason
    sources = {b.device.name: b.measurement.profile.source for b in job.boards}
    assert sources["Simulated H100"] == "test:H100" and sources["Simulated H200"].startswith("defaults:")
    truth_j = sum(sum(r["truth_j"]) for r in records)
    assert abs(job.above_idle_j - truth_j) <= job.err_j


def test_several_boards_a_rank(worlds):
    records = scenario(worlds, 4, "two_each")
    job = result(records[0])
    assert job.reliable, job.reason
    assert len(job.boards) == 8 and sorted(b.rank for b in job.boards) == sorted(list(range(4)) * 2)
    truth_j = sum(sum(r["truth_j"]) for r in records)
    assert abs(job.above_idle_j - truth_j) <= job.err_j


def test_a_rank_that_never_reaches_the_exit_is_an_error_on_the_others_not_a_hang(worlds):
    records = scenario(worlds, 4, "hang")
    assert records[0]["error"] == (
        "DistributedError: rank(s) 3 did not reach the window's exit (rank 0 of 4, host "
        + records[0]["error"].split("host ")[1].split(")")[0]
        + ") within 3 s"
    )
    for r in records[1:3]:
        assert (
            "not every rank reached the window's exit" in r["error"] and "rank 0's error names" in r["error"]
        )
    # they gave up after the timeout, before the late rank arrived
    assert max(r["left_s"] for r in records[:3]) < records[3]["left_s"]


@pytest.mark.parametrize(("world", "failure"), [(4, "hang"), (2, "caught")])
def test_after_a_time_out_the_job_s_group_and_the_next_window_still_work(worlds, world, failure):
    """A time-out closes gloo's connections for good: the meter's own group is lost, not the job's.

    Before, the meter talked over the job's gloo group, and after a rank caught its exception
    inside the block the job's next ``all_reduce`` failed on every rank (an adversarial review).
    """
    failed = scenario(worlds, world, failure)
    if failure == "caught":
        assert failed[-1]["error"] == "ValueError: the rank's own failure"
        assert all("DistributedError" in r["error"] for r in failed[:-1])
    assert [r["all_reduce"] for r in failed] == [float(world)] * world
    for r in scenario(worlds, world, "again"):
        assert "error" not in r, r["error"]
        assert result(r).reliable


def test_a_rank_that_caught_its_exception_can_open_the_next_window_at_once(worlds):
    """Its next window meets the others' after they timed out, not their old exit barrier."""
    failed = scenario(worlds, 2, "reopen")
    assert failed[0]["error"].startswith("DistributedError: ")
    for r in scenario(worlds, 2, "again2"):
        assert "error" not in r, r["error"]
        assert result(r).reliable


def test_the_gather_is_timed(worlds):
    for r in scenario(worlds, 2, "plain"):
        timing = r["timing_s"]
        assert set(timing) == {"exit_barrier_s", "exit_skew_s", "gather_s"}
        assert 0 < timing["gather_s"] < 5  # seconds; the H200 figure is in docs/window-log.md
        assert result(r).gather_s == pytest.approx(timing["gather_s"])


def test_ranks_that_opened_one_simulated_uuid_are_warned_that_it_is_metered_once():
    """A new user's two ranks, each with its own SimulatedBoard(), read as one board without a word."""
    from nvmeter import SimulatedBoard
    from nvmeter.boards.simulated import SimConfig
    from nvmeter.meter.distributed import shared_simulated

    board = SimulatedBoard()
    uuid = board.identity().uuid
    (line,) = shared_simulated([board], "vm", {("vm", uuid): (0, 1)})
    assert f"ranks 0, 1 each opened a simulated board {uuid}: metered once, by rank 0" in line
    assert "SimConfig(uuid=...)" in line
    assert shared_simulated([board], "vm", {("vm", uuid): (0,)}) == []
    other = SimulatedBoard(SimConfig(uuid="GPU-5157a7ed-0000-4000-8000-000000000001"))
    assert shared_simulated([other], "vm", {("vm", uuid): (0, 1)}) == []


@pytest.mark.parametrize("local_rank", ["abc", "١", "-1", "1.0", ""])
def test_a_local_rank_that_is_no_cuda_index_is_a_usage_error_naming_it(monkeypatch, local_rank):
    """A breaker: LOCAL_RANK=abc raised a bare ValueError on one rank, and int() took '١' for 1."""
    from nvmeter import errors
    from nvmeter.meter import distributed

    monkeypatch.setenv("LOCAL_RANK", local_rank)
    with pytest.raises(errors.UsageError) as refused:
        distributed._default_devices()
    assert str(refused.value).startswith(f"LOCAL_RANK is {local_rank!r}, not a CUDA index (ASCII digits")


def test_local_rank_gives_the_default_device_where_torch_has_not_chosen_one(monkeypatch):
    from nvmeter.meter import distributed

    monkeypatch.setenv("LOCAL_RANK", "3")
    assert distributed._default_devices() == [3]
    monkeypatch.delenv("LOCAL_RANK")
    assert distributed._default_devices() == [0]
