"""The coverage probe (nvmeter probe --coverage): a counter that senses part of each period, found."""

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from simboards import pulsed_window

from nvmeter import errors, records
from nvmeter.boards import profile as profiles
from nvmeter.boards.simulated import SimConfig, SimulatedBoard
from nvmeter.probes import coverage
from nvmeter.probes.report import for_cache, load_report, run_probes
from nvmeter.worker.rig import Rig
from nvmeter.worker.simulated import SimWorker

PARTIAL = {"sensor_window_s": 0.025}  # SC24's ~25 ms of each ~100 ms


def probe(seed: int, **config):
    board = SimulatedBoard(SimConfig(seed=seed, **config))
    return run_probes(Rig(board, lambda: SimWorker(board)), only=("coverage",))


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"read_spike_s": 0.03},  # slow reads twice the H200's longest blur a third of the steps
        {"tau_s": 0.2},  # a power that falls over 0.2 s
        {"step_delay_s": 0.2},
        {"counter_period_s": 0.2, "sensor_window_s": 0.2},  # a slower counter, its own period
    ],
)
def test_a_counter_that_senses_all_of_each_period_is_read_as_full(config):
    """A review: slow reads' blurred steps (131-155 W for a 124 W idle), a slow fall and the family's
    period in place of the board's judged full counters partial, in 4 to 20 of 40 probes."""
    for seed in range(4):
        d = probe(seed, **config).probes["coverage"].derived()
        assert d["read"] >= coverage.MIN_READ and d["coverage"] == 1.0, d
        assert min(r for r in d["ratios"] if r is not None) > coverage.UNSEEN


def test_a_counter_too_slow_for_the_bursts_is_not_read_and_keeps_the_family_s():
    report = probe(0, counter_period_s=1.0, sensor_window_s=1.0)
    record = report.probes["coverage"]
    assert record.derived()["coverage"] is None and len(record.trials) == 1  # it stopped at once
    assert "too slow" in record.rows()[0][1] and report.profile().counter_coverage == 1.0


def test_a_counter_that_never_steps_is_not_read():
    """A review: a long load that read no energy divided by zero in the rows, the profile and the loader."""
    record = probe(0, counter_period_s=1000.0).probes["coverage"]
    assert record.derived()["coverage"] is None and "not read" in record.rows()[0][1]


@pytest.mark.parametrize("seed", range(4))
def test_a_counter_that_senses_a_quarter_of_each_period_is_found_and_the_profile_keeps_it(seed):
    report = probe(seed, **PARTIAL)
    d = report.probes["coverage"].derived()
    assert d["unseen"] >= 7 and 0.1 <= d["coverage"] <= 0.45
    assert report.profile().counter_coverage == d["coverage"]
    assert "about" in report.probes["coverage"].rows()[0][1]


def test_a_board_the_probe_found_partial_refuses_the_single_calls_it_read_as_nothing():
    """A breaker: on a board named H200 whose counter sensed 25 ms of each 100 ms, single 20 ms calls
    read -94 to -100% as reliable figures under the family's profile. With the probe's, error model
    11 checks them against the samples, and a window too short to check is not reliable."""
    profile = probe(1, **PARTIAL).profile()
    for seed in range(6):
        board = SimulatedBoard(SimConfig(seed=seed, **PARTIAL))
        board.set_context(True)
        board.clock.sleep(3.0 + 0.0137 * seed)
        family = pulsed_window(board, 550.0, 0.02, 0.0, 1)
        board.clock.sleep(1.0)
        probed = pulsed_window(board, 550.0, 0.02, 0.0, 1, profile=profile)
        assert family.profile.counter_coverage == 1.0 and probed.profile.counter_coverage < 1
        assert not probed.reliable, probed


def test_the_profile_never_widens_a_family_s_coverage():
    """An A100's family default is SC24's quarter: sixteen bursts that all landed are no proof of a
    full counter, so the probe keeps the family's."""
    report = probe(2, name="Simulated A100")
    assert report.probes["coverage"].derived()["coverage"] == 1.0
    assert report.profile().counter_coverage == profiles.AMPERE.counter_coverage < 1


def test_the_cache_keeps_the_lower_coverage(tmp_path, monkeypatch):
    monkeypatch.setenv("NVMETER_CACHE_DIR", str(tmp_path))
    partial, full = probe(3, **PARTIAL), probe(3)
    real = replace(partial.board, simulated=False)  # the cache keeps no simulated board's
    profiles.store_probe(replace(partial, board=real).to_dict(), real)
    later = for_cache(replace(full, board=real))  # a later probe that saw every burst
    figure = partial.probes["coverage"].derived()["coverage"]
    assert figure < 1 and later.probes["coverage"].derived()["coverage"] == pytest.approx(figure)
    assert later.profile().counter_coverage == pytest.approx(figure)
    profiles.store_probe(replace(full, board=real).to_dict(), real)
    assert for_cache(replace(partial, board=real)).probes["coverage"] is partial.probes["coverage"]


def test_a_probe_record_of_the_coverage_survives_json_and_is_verified(tmp_path):
    out = tmp_path / "p.json"
    report = probe(0, **PARTIAL)
    records.write_json(out, report.to_dict())
    again = load_report(out)
    assert again.profile().counter_coverage == report.profile().counter_coverage < 1
    data = json.loads(out.read_text())
    data["profile"]["counter_coverage"] = 1.0  # the check turned off by hand
    out.write_text(json.dumps(data))
    with pytest.raises(errors.RecordError, match=r"profile\.counter_coverage disagrees with its"):
        load_report(out)


def test_a_burst_s_phase_outside_the_period_is_a_damaged_record(tmp_path):
    out = tmp_path / "p.json"
    records.write_json(out, probe(0).to_dict())
    data = json.loads(out.read_text())
    data["probes"]["coverage"]["raw"]["trials"][0]["phase"] = 7
    out.write_text(json.dumps(data))
    with pytest.raises(errors.RecordError, match="phase must be in"):
        load_report(out)


def test_the_cli_runs_it_on_request_and_shows_its_row(tmp_path):
    out = tmp_path / "probe.json"
    run = [sys.executable, "-m", "nvmeter", "probe", "--simulate", "--coverage", "--out", str(out)]
    result = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "counter coverage" in result.stdout and "all of each period" in result.stdout
    quick_run = [*run[:-2], "--quick", "--out", str(tmp_path / "q.json")]
    quick = subprocess.run(quick_run, capture_output=True, text=True, timeout=120)
    assert quick.returncode == 2 and "--quick skips the coverage probe" in quick.stderr


def test_a_counter_whose_every_read_is_slow_is_not_read_and_the_probe_stops_early():
    record = probe(0, read_spike_p=1.0).probes["coverage"]  # no step is sharp
    assert record.derived()["coverage"] is None and len(record.trials) == coverage.NO_READ_STOP
    assert "0 of 4 bursts read between sharp counter steps" in record.rows()[0][1]
