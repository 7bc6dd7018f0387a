"""Boards slower than their profile says: power that trails the work longer.

An adversarial review on the simulated board (2026-12-07) found warm windows on a board whose power
trails by 30-50 ms outside reliable bounds: the family's lag kept though the step probe saw the delay.
"""

from pathlib import Path

import pytest

from nvmeter.boards.profile import GENERIC, HOPPER
from nvmeter.boards.simulated import SimConfig, SimulatedBoard
from nvmeter.meter.baseline import IdleBaseline
from nvmeter.meter.window import EnergyWindow
from nvmeter.probes.report import load_report, run_probes
from nvmeter.worker.rig import Rig

LOAD_W = 550.0
CALL_S = 0.04
RESULTS = Path(__file__).resolve().parents[1] / "results"


def board_of(seed: int, **config) -> SimulatedBoard:
    board = SimulatedBoard(SimConfig(seed=seed, **config))
    board.set_context(True)
    board.clock.sleep(1.0)
    return board


def probed(quick: bool, **config):
    """A probe report of a board of ``config`` (seed 999, the windows' twin)."""
    return run_probes(Rig.open(simulate=True, config=SimConfig(seed=999, **config)), quick=quick)


def warm_window(board, window_s: float, **kwargs):
    """A window inside a run of calls at LOAD_W, the board idle after (exit "wait"); (m, true mJ/call)."""
    for _ in range(round(2.0 / CALL_S)):
        board.set_load(LOAD_W)
        board.clock.sleep(CALL_S)
    n = round(window_s / CALL_S)
    idle = IdleBaseline.given(board.config.idle_context_w, 0.2)
    with EnergyWindow(board, idle=idle, sync="none", **kwargs) as w:
        board.clock.sleep(window_s)
        w.call(n)
        board.set_load(0.0)  # the exit's sync: the work is done
    return w.result, LOAD_W * window_s * 1e3 / n


# -- the power lag ----------------------------------------------------------------------------------
LAG_30_MS = {"step_delay_s": 0.015, "tau_s": 0.015}


@pytest.fixture(scope="module")
def trailing():
    return probed(False, **LAG_30_MS)


def test_a_probe_of_a_board_whose_power_trails_widens_the_lag_bound_to_the_counters_delay(trailing):
    profile = trailing.profile()
    delays = trailing.derived()["step"]["counter"]
    latest_s = max(delays["rise_delay_ms"], delays["fall_delay_ms"]) / 1e3
    assert latest_s > 0.025  # the step probe sees the 30 ms lag
    assert profile.power_lag_s == HOPPER.power_lag_s  # the fitted lag is kept, its bound reaches further
    assert profile.power_lag_s + profile.power_lag_err_s > latest_s
    assert profile.source.endswith("step")


def test_warm_windows_on_a_trailing_board_hold_with_its_probe(trailing):
    # Hopper's 7.5 +- 5 ms held none of 20 such windows (+9.9% against +-8.2%)
    for seed in range(3):
        m, truth = warm_window(board_of(seed, **LAG_30_MS), 0.25, profile=trailing.profile())
        assert m.reliable, m.reason
        assert abs(m.per_call_mj - truth) <= m.per_call_mj_err, (m.per_call_mj / truth - 1, m)


def test_a_step_of_derivation_1_leaves_the_lag_bound_as_the_family_has_it():
    # its rise misfits to 179 ms in a gap a slow read left; the record's profile verifies as it was made
    report = load_report(RESULTS / "probe-speed" / "f2595641" / "new-full.json")
    assert report.derived()["step"]["counter"]["rise_delay_ms"] > 100
    assert report.profile().power_lag_err_s == HOPPER.power_lag_err_s


def test_a_family_none_was_measured_on_reaches_a_longer_lag():
    # its power may take 0.1 s to fall where Hopper's takes 0.06 s: its lag may reach as much further
    reach_s = (HOPPER.power_lag_s + HOPPER.power_lag_err_s) * GENERIC.tail_s / HOPPER.tail_s
    assert GENERIC.power_lag_s + GENERIC.power_lag_err_s == pytest.approx(reach_s)
    assert GENERIC.power_lag_s - GENERIC.power_lag_err_s < 0  # the bound reaches a lag of 0 as well
    # the review's 50 ms lag on such a board: this window read +8.2% against +-8.0% before
    board = board_of(14, step_delay_s=0.025, tau_s=0.025, name="Simulated L40S")
    m, truth = warm_window(board, 0.5)
    assert m.profile.source == GENERIC.source
    assert abs(m.per_call_mj - truth) <= m.per_call_mj_err
