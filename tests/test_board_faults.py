"""NVML's failure modes on the simulated board: windows, probes and identities see them right.

The GH200's module-wide counter and a lost board are simulated only: we have neither a
Grace Hopper module nor a board we may pull off its bus (docs/failures.md).
"""

import json

import pytest

from nvmeter import errors
from nvmeter.boards.simulated import Fault, SimConfig, SimulatedBoard
from nvmeter.meter.window import EnergyWindow
from nvmeter.probes.bands import BANDS
from nvmeter.probes.check import Verdict, check
from nvmeter.probes.report import load_report, run_probes
from nvmeter.worker.rig import Rig
from nvmeter.worker.simulated import SimWorker

LOAD_W = 550.0
GH200 = "NVIDIA GH200 480GB"
OTHER_UUID = "GPU-5157a7ed-0000-4000-8000-000000000001"


def busy_window(board: SimulatedBoard, calls: int = 10, call_s: float = 0.04) -> EnergyWindow:
    board.set_context(True)
    # a real context takes its time to open; the simulated one opens at once, and a window at that
    # very instant would find the board under the context idle it is given (quiet_below_idle)
    board.clock.sleep(0.5)
    with EnergyWindow(board, sync="none", idle=board.config.idle_context_w) as w:
        for _ in range(calls):
            board.set_load(LOAD_W)
            board.clock.sleep(call_s)
            w.call()
        board.set_load(0.0)
    return w


# -- NOT_READY: a distinct error, never 0 mJ, never cached ---------------------------------------
def test_a_board_not_ready_is_a_telemetry_error_not_zero_then_works():
    board = SimulatedBoard(SimConfig(seed=11))
    now = board.clock.now()
    board.inject(Fault.NOT_READY, at_s=now, until_s=now + 2.0)
    with pytest.raises(errors.NotReady, match="counter not ready") as info:
        busy_window(board)
    assert info.value.exit_code == 3
    board.clock.sleep(2.0)
    w = busy_window(board)  # ready now: the same board object works
    assert w.result.per_call_mj == pytest.approx(LOAD_W * 40, rel=0.05)


# -- two boards, one without power telemetry ------------------------------------------------------
def test_a_board_without_power_telemetry_is_unsupported_and_the_other_unaffected():
    bad = SimulatedBoard(SimConfig(seed=21, uuid=OTHER_UUID))
    bad.inject(Fault.NOT_SUPPORTED)
    for read in (bad.energy_mj, bad.power_instant_w, bad.power_average_w, bad.power_samples):
        with pytest.raises(errors.NotSupported, match=OTHER_UUID):
            read()
    with pytest.raises(errors.NotSupported):  # the probe says unsupported, never 0 W
        run_probes(Rig(bad, lambda: SimWorker(bad)), quick=True, only=("idle",))
    assert bad.identity().uuid == OTHER_UUID  # still named
    assert bad.utilization().gpu_pct == 0.0  # what it does report, it still reports

    good, twin = SimulatedBoard(SimConfig(seed=22)), SimulatedBoard(SimConfig(seed=22))
    beside = busy_window(good)
    alone = busy_window(twin)
    assert beside.result.per_call_mj == alone.result.per_call_mj
    assert beside.result.reliable


# -- a board lost between a window's entry and exit ------------------------------------------------
def test_a_board_lost_inside_a_window_raises_naming_it():
    board = SimulatedBoard(SimConfig(seed=31))
    board.set_context(True)
    with pytest.raises(errors.GpuLost, match=board.identity().uuid):  # noqa: SIM117
        with EnergyWindow(board, sync="none", idle=121.2) as w:
            board.set_load(LOAD_W)
            board.clock.sleep(0.2)
            board.inject(Fault.GPU_LOST)
            board.clock.sleep(0.2)
            w.call()
    assert w.result is None


# -- Grace Hopper: the counter covers the module ----------------------------------------------------
def test_the_scope_is_derived_from_the_name():
    assert SimulatedBoard(SimConfig(name=GH200)).identity().energy_scope == "module"
    assert SimulatedBoard().identity().energy_scope == "board"
    assert SimulatedBoard(SimConfig(name="NVIDIA H200 NVL")).identity().energy_scope == "board"


def test_a_gh200_is_labelled_module_wide_in_probe_window_and_records(tmp_path):
    board = SimulatedBoard(SimConfig(seed=41, name=GH200))
    report = run_probes(Rig(board, lambda: SimWorker(board)), quick=True, only=("idle", "reference"))
    rows = dict(report.rows())
    assert "module-wide" in rows["energy scope"]
    path = tmp_path / "gh200.json"
    path.write_text(json.dumps(report.to_dict()))
    assert json.loads(path.read_text())["board"]["energy_scope"] == "module"
    assert "module-wide" in dict(load_report(path).rows())["energy scope"]
    w = busy_window(board)
    assert "module-wide" in repr(w.result)
    assert w.result.to_dict()["device"]["energy_scope"] == "module"
    # the H200's band rests on a board-only counter: it does not judge a module
    assert check(board.identity(), report.probes["reference"].trials["constant"]).verdict is Verdict.NO_BAND
    h200 = SimulatedBoard(SimConfig(seed=42))
    plain = run_probes(Rig(h200, lambda: SimWorker(h200)), quick=True, only=("idle", "reference"))
    assert "energy scope" not in dict(plain.rows())
    h200_trial = plain.probes["reference"].trials["constant"]
    assert check(h200.identity(), h200_trial).band is BANDS["H200"]
