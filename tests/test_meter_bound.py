"""The honest bound (error model 2) on the simulated board: edges inside the work, the board's
state, transient windows, impossible readings, misuse, and measure()'s sub-windows."""

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from simboards import LEVEL_GIVEN, pulsed_window

from nvmeter import errors
from nvmeter.boards import profile as profiles
from nvmeter.boards.protocol import BoardIdentity, BoardState
from nvmeter.boards.simulated import Fault, SimConfig, SimulatedBoard
from nvmeter.meter import errormodel, spread
from nvmeter.meter.adaptive import measure
from nvmeter.meter.baseline import IdleBaseline
from nvmeter.meter.contexts import ContextRead
from nvmeter.meter.measurement import SCHEMA_VERSION, Measurement
from nvmeter.meter.series import Step
from nvmeter.meter.window import EnergyWindow
from nvmeter.probes.report import run_probes
from nvmeter.worker.rig import Rig
from nvmeter.worker.simulated import SimWorker

LOAD_W = 550.0
CALL_S = 0.04


def make_board(**config) -> SimulatedBoard:
    board = SimulatedBoard(SimConfig(seed=11, **config))
    board.set_context(True)
    board.clock.sleep(1.0)
    return board


def calls(board, seconds, load_w=LOAD_W, window=None):
    """Back-to-back calls at ``load_w`` for ``seconds``, then the board idles (as after a sync)."""
    end, n = board.clock.now() + seconds, 0
    while board.clock.now() < end:
        board.set_load(load_w)
        board.clock.sleep(CALL_S)
        n += 1
        if window is not None:
            window.call()
    board.set_load(0.0)
    return n


def idle_of(board) -> IdleBaseline:
    return IdleBaseline.given(board.config.idle_context_w, 0.2)


def steady_mj(board, load_w=LOAD_W) -> float:
    """The model's true per-call energy above idle in steady state."""
    t0 = board.clock.now()
    calls(board, 4.0, load_w)
    t1 = board.clock.now()
    n = round((t1 - t0) / CALL_S)
    return (
        (board.true_energy_j(t0 + 1.0, t1) - board.config.idle_context_w * (t1 - t0 - 1.0)) * 1e3 / (n - 25)
    )


# -- edges inside the work ------------------------------------------------------------
def test_a_window_inside_a_run_starts_its_edge_inside_the_work_and_is_warm():
    board = make_board()
    calls(board, 2.0)
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        entered_s = board.clock.now()
        calls(board, 1.0, window=w)
    board.set_load(0.0)
    m = w.result
    assert m.in_work and not m.transient and m.gap_s < 0.05
    assert entered_s - m.work_t0_s < 0.001  # entry did not wait for a counter step
    assert m._edges[0] > m.work_t0_s and m.head_j > 0
    truth = LOAD_W * CALL_S * 1e3
    assert abs(m.per_call_mj - truth) <= m.per_call_mj_err
    assert abs(m.per_call_mj / truth - 1) < 0.01


def test_a_quiet_board_gets_its_start_edge_before_the_work():
    board = make_board()
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        calls(board, 0.5, window=w)
    board.set_load(0.0)
    assert not w.result.in_work and w.result.cold and w.result.transient


# -- transient and limited windows -------------------------------------------------------
def test_a_window_after_a_pause_at_the_power_limit_is_transient_and_its_bound_covers_the_overshoot():
    board = make_board(overshoot_rel=0.03, overshoot_tau_s=0.25)
    load_w = 650.0  # 121 W idle + 650 W asks for more than the 700 W limit
    steady = steady_mj(board, load_w)
    calls(board, 2.0, load_w)
    board.set_load(0.0)
    board.clock.sleep(0.3)  # a pause: the limiter overshoots again
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        calls(board, 0.5, load_w, window=w)
    board.set_load(0.0)
    m = w.result
    assert m.transient and m.gap_s == pytest.approx(0.3, abs=0.05)
    assert m.limited and "sw_power_cap" in repr(m)
    assert m.per_call_mj > steady * 1.005  # the calls really cost more right after the pause
    assert abs(m.per_call_mj - steady) <= m.per_call_mj_err
    assert m.reliable


def test_the_board_state_is_read_at_the_edges_and_kept_raw():
    board = make_board()
    calls(board, 1.0)
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        calls(board, 1.0, window=w)
    board.set_load(0.0)
    m = w.result
    assert len(m.states) == 2 and all(isinstance(s, BoardState) for s in m.states)
    assert m.states[0].sm_clock_mhz == board.config.sm_boost_mhz and not m.limited
    again = Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert again.states == m.states and again.to_dict()["derived"] == m.to_dict()["derived"]


# -- impossible readings and misuse ----------------------------------------------------
def test_an_idle_above_what_the_window_drew_is_not_reliable():
    board = make_board()
    with EnergyWindow(board, idle=IdleBaseline.given(400.0, 0.1), sync="none") as w:
        calls(board, 0.5, load_w=50.0, window=w)
    board.set_load(0.0)
    assert not w.result.reliable and "below minus its bound" in w.result.reason


def test_a_window_in_which_no_virtual_time_passed_is_not_reliable():
    board = make_board()
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        w.call(3)  # a real time.sleep would not move the board's clock either
    assert not w.result.reliable and "no time passed" in w.result.reason


def test_a_window_is_entered_once():
    board = make_board()
    w = EnergyWindow(board, idle=idle_of(board), sync="none")
    with pytest.raises(errors.UsageError, match=r"before|inside"):
        w.call()
    with w:
        calls(board, 0.3, window=w)
        with pytest.raises(errors.UsageError, match="entered already"), w:
            pass
    board.set_load(0.0)
    with pytest.raises(errors.UsageError, match="entered already"), w:
        pass
    with pytest.raises(errors.UsageError, match="inside"):
        w.call()


@pytest.mark.parametrize("n", [-12, 0, 0.5, True, "3"])
def test_call_counts_are_whole_and_positive(n):
    board = make_board()
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        board.clock.sleep(0.1)
        with pytest.raises(errors.UsageError, match="whole number"):
            w.call(n)
        w.call()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"calls": True},
        {"calls": -1},
        {"control_mj": float("nan")},
        {"control_mj": "abc"},
        {"control_err_mj": -1e6},
        {"max_rel_err": float("inf")},
        {"tail_s": -0.1},
    ],
)
def test_bad_window_arguments_are_one_line_errors(kwargs):
    with pytest.raises(errors.UsageError):
        EnergyWindow(make_board(), sync="none", **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"control_mj": float("nan")}, "control_mj must be a finite number, not nan"),
        ({"control_err_mj": -1.0}, "control_err_mj must be a finite number >= 0, not -1.0"),
        ({"tail_s": 60.0}, "tail_s must be a finite number >= 0 and <= 10, not 60.0"),
    ],
)
def test_a_bad_window_argument_names_only_the_bounds_there_are(kwargs, says):
    # an unbounded side read "a finite number >= -inf"
    with pytest.raises(errors.UsageError) as refused:
        EnergyWindow(make_board(), sync="none", **kwargs)
    assert str(refused.value) == says


# -- measure(): sub-windows of one run -------------------------------------------------
def call_on(board, load_w=LOAD_W):
    def call():
        board.set_load(load_w)
        board.clock.sleep(CALL_S)
        board.set_load(0.0)  # the call is over: the board idles until the next one starts

    return call


def test_measure_takes_its_state_term_from_its_own_sub_windows():
    board = make_board()
    m = measure(call_on(board), device=board, sync="none", target_rel_err=0.015, profile=LEVEL_GIVEN)
    assert m.reliable, m.reason
    assert len(m.subwindow_mj) >= 3 and not m.transient
    truth = LOAD_W * CALL_S * 1e3
    assert abs(m.per_call_mj - truth) <= m.per_call_mj_err and abs(m.per_call_mj / truth - 1) < 0.01
    assert_state_term_is_its_sub_windows(m)


def assert_state_term_is_its_sub_windows(m, scattered: bool = False) -> None:
    """The state term lies between the model's floor and the floor plus a plain Student-t interval of the
    sub-windows' own figures, which the meter narrows by what the edges' placement explains (scipy here,
    not the meter's spread: a review found the formula mirrored)."""
    from scipy import stats

    sub_mj, floor_j = m.subwindow_mj, m.model.state_floor_rel * m.above_idle_j
    plain_mj = stats.t.ppf(0.5 + m.model.confidence / 2, len(sub_mj) - 1) * np.std(sub_mj, ddof=1)
    plain_j = plain_mj / math.sqrt(len(sub_mj)) * m.calls / 1e3
    assert plain_j > 0 and floor_j <= m.state_err_j <= floor_j + plain_j * (1 + 1e-9)
    if scattered:
        assert m.state_err_j > floor_j  # the calls' own scatter is in it, beyond what the edges explain


def test_calls_that_cost_differently_widen_the_state_term_by_their_own_scatter():
    board = make_board()
    rng = np.random.default_rng(7)

    def call():  # each call draws 400 W +- 5% (SD) above idle: under the simulated power cap
        board.set_load(400.0 * (1 + 0.05 * rng.standard_normal()))
        board.clock.sleep(CALL_S)
        board.set_load(0.0)

    m = measure(call, device=board, sync="none", target_rel_err=0.03, profile=LEVEL_GIVEN)
    assert m.reliable and not m.limited, m
    assert_state_term_is_its_sub_windows(m, scattered=True)


def test_measure_reports_drift_and_widens_its_bound_on_drifting_work():
    board = make_board(drift_rel_per_s=0.004, drift_max_rel=0.5)
    # a target under the model's floor ends the run at its fewest sub-windows: 14 hold it for ~8 s
    run = {
        "sync": "none",
        "target_rel_err": 0.002,
        "max_window_s": 8.0,
        "min_windows": 14,
        "profile": LEVEL_GIVEN,
    }
    m = measure(call_on(board), device=board, **run)
    assert "under the error model's floor of 0.7%" in m.reason
    drift = m.drift
    assert drift is not None and drift.significant and drift.rel_per_s > 0
    assert "drift" in repr(m)
    other = make_board()
    steady = measure(call_on(other), device=other, **run)
    assert m.state_err_j / m.above_idle_j > steady.state_err_j / steady.above_idle_j


def test_model_9_batches_the_sub_windows_into_two_seconds_and_keeps_too_short_runs_as_they_were():
    model_9, model_8 = errormodel.model(9), errormodel.model(8)
    steps = [Step(0.5 * i, 1000.0 * i, 0.001) for i in range(21)]  # a step every 0.5 s for 10 s
    assert [t for t, _, _ in spread.batch_steps(steps, model_9)] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    run_6_5_s = steps[:14]  # three batches, the last 2.5 s with the remainder in it
    assert [t for t, _, _ in spread.batch_steps(run_6_5_s, model_9)] == [0.0, 2.0, 4.0, 6.5]
    assert spread.batch_steps(steps[:11], model_9) == steps[:11]  # 5 s: two batches, too few
    assert spread.batch_steps(steps, model_8) == steps


def swinging_call_on(board, period_s, low_w=LOAD_W - 40.0, high_w=LOAD_W + 40.0):
    """A call whose power swings between two levels every ``period_s`` of the board's time."""

    def call():
        phase = int(board.clock.now() / period_s) % 2
        board.set_load(high_w if phase else low_w)
        board.clock.sleep(CALL_S)
        board.set_load(0.0)

    return call


@pytest.mark.parametrize(("period_s", "wider"), [(0.5, False), (3.0, True)])
def test_model_9s_state_part_is_never_narrower_and_wider_where_sub_windows_are_alike(period_s, wider):
    # a swing every 0.5 s makes neighbouring 0.5 s sub-windows differ (anti-correlated): the
    # sub-windows' interval already covers it. One every 3 s makes them alike (positively
    # correlated), which only the 2 s batches' spread shows
    board = make_board()
    run = measure(
        swinging_call_on(board, period_s), device=board, sync="none", max_window_s=12.0, min_windows=23
    )  # 23 sub-windows: the whole 12 s
    own = spread.state_halfwidth_mj(replace(run, model_version=8))
    batched = spread.state_halfwidth_mj(replace(run, model_version=9))
    assert own is not None and batched is not None
    assert batched > 1.5 * own if wider else batched == own
    assert replace(run, model_version=9).per_call_mj == run.per_call_mj  # the figure does not move


def cycling_call_on(board, calls=24, low_w=50.0, high_w=650.0):
    """``calls`` calls light, then as many heavy, and so on: a cycle of 2 x calls x CALL_S."""
    count = itertools.count()

    def call():
        board.set_load(high_w if next(count) // calls % 2 else low_w)
        board.clock.sleep(CALL_S)
        board.set_load(0.0)

    return call


def test_model_9_holds_on_work_that_cycles_with_its_batches_length():
    # an adversarial review's case: a 1.92 s cycle, so each 2 s batch holds one whole cycle and
    # the batches agree, while a 6.8 s run ends part-way through one (a batches-only interval
    # read +4.0% outside ±1.2%)
    reference = make_board()
    call = cycling_call_on(reference)
    for _ in range(4 * 48):  # past the first cycles' lead-in
        call()
    t0 = reference.clock.now()
    for _ in range(20 * 48):
        call()
    t1 = reference.clock.now()
    above_j = reference.true_energy_j(t0, t1) - reference.config.idle_context_w * (t1 - t0)
    steady_mj = above_j * 1e3 / (20 * 48)
    board = make_board()
    run = measure(
        cycling_call_on(board),
        device=board,
        sync="none",
        target_rel_err=1e-4,
        max_window_s=6.8,
        idle=board.config.idle_context_w,
    )
    run = replace(run, model_version=9)
    assert len(spread.batch_steps(spread.boundaries(run), run.model)) - 1 >= 3  # batches were used
    assert abs(run.per_call_mj - steady_mj) <= run.per_call_mj_err
    assert spread.state_halfwidth_mj(run) == spread.state_halfwidth_mj(replace(run, model_version=8))


def capped_window_with_marks(seed: int, n: int, marks: tuple[int, ...]) -> tuple[Measurement, float]:
    """``n`` 20 ms calls at the cap of a limiter swinging +-6% every 2 s, marked after the calls ``marks``.

    Returns:
        (the window's Measurement, the steady per-call cost above idle in mJ: the cap's mean).
    """
    board = SimulatedBoard(SimConfig(seed=seed, cap_swing_rel=0.06, cap_swing_period_s=2.0))
    board.set_context(True)
    idle_w = board.config.idle_context_w

    def call():
        board.set_load(800.0)  # demand above the 700 W cap: the limiter binds
        board.clock.sleep(0.02)

    for _ in range(int((2.5 + 0.5 * seed) / 0.02)):  # warm, and at another place in the swing each seed
        call()
    with EnergyWindow(board, sync="none", idle=idle_w) as w:
        for i in range(n):
            call()
            w.call()
            if i in marks:
                w.mark()
        board.set_load(0.0)
    return w.result, (board.config.power_limit_w - idle_w) * 0.02 * 1e3


@pytest.mark.parametrize(
    "seed, marks",
    [(7, (20, 26, 32)), (1, (20, 26, 32)), (3, (12, 24, 36)), (7, (12, 24, 36))],
)
def test_marks_that_do_not_stand_for_the_window_do_not_narrow_its_state_part(seed, marks):
    # an expert review (errormodel history 12): three marks 0.12 s apart in a 1 s window at the cap set
    # a half-width of 0 and dropped model 10's cap term: +4.8% off at a bound of +-1.8%, reliable
    m, steady_mj = capped_window_with_marks(seed, 50, marks)
    old = replace(m, model_version=11)
    assert m.limited and len(m.subwindow_mj) == 3
    assert old.reliable and abs(old.per_call_mj - steady_mj) > old.per_call_mj_err
    assert m.model_version >= 12 and abs(m.per_call_mj - steady_mj) <= m.per_call_mj_err
    assert m.state_err_j >= old.state_err_j  # never narrower


def test_the_first_look_does_not_hold_back_a_run_at_its_shortest_max_window():
    # the first look (error model 12's quiet stretch) pushed the next back by its cost: runs of heavy
    # calls at max_window_s 2 s, the least for three 0.5 s sub-windows, went to the limit (a review);
    # heavy calls now take no such look, and a light run's serves its round's check too
    stopped = []
    for seed in (0, 1, 3, 6):
        board = SimulatedBoard(SimConfig(seed=seed))
        board.set_context(True)

        def call(board=board):
            board.set_load(300.0)
            board.clock.sleep(0.05)

        m = measure(call, device=board, sync="none", idle=board.config.idle_context_w, max_window_s=2.0)
        stopped.append(m.work_s < 1.95)
    assert any(stopped)


def test_measure_can_wait_for_the_temperature_to_settle():
    board = make_board(thermal_tau_s=2.0)
    m = measure(call_on(board), device=board, sync="none", settle="temperature", max_window_s=3.0)
    first, last = m.states[0].temperature_c, m.states[-1].temperature_c
    assert abs(last - first) <= 1.0


@pytest.mark.parametrize(
    "kwargs", [{"min_windows": 2}, {"settle": -1}, {"settle": "hot"}, {"min_window_s": math.inf}]
)
def test_measure_refuses_bad_arguments(kwargs):
    board = make_board()
    with pytest.raises(errors.UsageError):
        measure(call_on(board), device=board, sync="none", **kwargs)


# -- profiles ----------------------------------------------------------------------------
def identity(name="NVIDIA H200", uuid="GPU-1234"):
    return BoardIdentity(name, uuid, "0000:00:00.0", "580", "", 700.0, 143771.0)


def test_profiles_come_by_family_and_are_wider_than_the_board_we_measured():
    hopper, other = profiles.default_profile("NVIDIA H200"), profiles.default_profile("Tesla T4")
    assert "Hopper" in hopper.source and other is profiles.GENERIC
    assert hopper.polling_artefact_w > profiles.H200_V1.polling_artefact_w
    assert other.polling_artefact_w > hopper.polling_artefact_w
    assert profiles.default_profile("NVIDIA A100-SXM4-80GB").polling_artefact_w >= 30


def test_a_stored_profile_is_used_for_its_board_and_refused_for_another(tmp_path, monkeypatch):
    monkeypatch.setenv("NVMETER_CACHE_DIR", str(tmp_path))
    board, mine = SimulatedBoard(SimConfig(seed=5)), identity(uuid="GPU-12345678-9abc-def0-1234-56789abcdef0")
    report = replace(run_probes(Rig(board, lambda: SimWorker(board)), only=("polling",)), board=mine)
    path = profiles.store_probe(report.to_dict(), mine)
    assert path.parent == tmp_path
    stored = profiles.resolve_profile(None, mine).polling_artefact_w
    assert stored == report.profile().polling_artefact_w != profiles.HOPPER.polling_artefact_w
    assert profiles.resolve_profile(None, identity(uuid="GPU-9999")).source.startswith("defaults:Hopper")
    with pytest.raises(errors.RecordError, match="not on this board GPU-9999: probe this board"):
        profiles.resolve_profile(path, identity(uuid="GPU-9999"))
    simulated = replace(identity(uuid="GPU-9999"), simulated=True)  # a second SimulatedBoard() of a process
    with pytest.raises(errors.RecordError, match=r"SimConfig\(uuid='GPU-12345678"):
        profiles.resolve_profile(path, simulated)


def test_a_window_names_its_profile_in_its_record():
    board = make_board()
    chosen = profiles.HOPPER.with_(source="test", tail_s=0.08)
    with EnergyWindow(board, idle=idle_of(board), sync="none", profile=chosen) as w:
        calls(board, 0.3, window=w)
    board.set_load(0.0)
    record = w.result.to_dict()
    assert record["profile"]["source"] == "test" and record["tail_s"] == 0.08
    assert record["schema_version"] == SCHEMA_VERSION and record["model_version"] == errormodel.CURRENT


def test_a_probe_file_gives_its_board_s_profile_and_windows_can_use_it(tmp_path, sim_rig):
    from nvmeter import records
    from nvmeter.probes.report import load_report, run_probes

    report = run_probes(sim_rig, quick=False, only=("polling", "samples", "step", "cadence"))
    path = tmp_path / "probe.json"
    records.write_json(path, report.to_dict())
    stored = records.read_json(path, "probe")["profile"]
    fresh = load_report(path).profile()
    assert stored["polling_artefact_w"] == pytest.approx(fresh.polling_artefact_w)
    assert 1.0 < fresh.polling_artefact_w < 5.0  # the simulated board polls at +2.8 W
    assert fresh.power_lag_s == profiles.HOPPER.power_lag_s  # fitted on the bench, not probed
    board = sim_rig.board
    board.set_context(True)
    with EnergyWindow(board, idle=idle_of(board), sync="none", profile=path) as w:
        calls(board, 0.3, window=w)
    assert str(path) in w.result.profile.source


@pytest.mark.parametrize("removed", ["deleted", None])
def test_a_probe_file_without_its_profile_block_gives_the_profile_its_probes_derive(tmp_path, removed):
    # the block deleted or null had left a window given the file on the family's defaults (a breaker)
    from nvmeter.probes.report import load_report

    full = load_report(Path(__file__).parent.parent / "results" / "probe-h200.json").to_dict()
    assert "profile" in full  # as this nvmeter writes it
    (tmp_path / "whole.json").write_text(json.dumps(full))
    stored = profiles.load_profile(tmp_path / "whole.json")
    if removed == "deleted":
        del full["profile"]
    else:
        full["profile"] = removed
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(full))
    derived = profiles.load_profile(path)
    assert derived.with_(source="") == stored.with_(source="") and derived.source.startswith(str(path))


def test_a_profile_files_source_says_it_is_taken_as_it_stands():
    # it had shown the file's own "probe ..." claim as where the figures came from (a breaker's trial)
    fixture = Path(__file__).parent / "fixtures" / "profile-v1.json"
    source = profiles.load_profile(fixture).source
    assert source.startswith(f"{fixture} (a profile file, taken as it stands; it says: probe GPU-5157a7ed")


def test_the_committed_h200_probe_derives_its_profile():
    from pathlib import Path

    from nvmeter.probes.report import load_report

    results = Path(__file__).parent.parent / "results"
    full = load_report(results / "probe-h200.json").profile()
    assert "cadence, polling, samples" in full.source
    assert full.polling_artefact_w == pytest.approx(2.81, abs=0.01)
    quick = load_report(results / "probe-h200-quick.json").profile()
    assert quick.polling_artefact_w == profiles.HOPPER.polling_artefact_w  # quick skips polling


def test_a_tiny_transient_window_is_bound_by_its_own_energy_not_a_vanishing_time():
    board = SimulatedBoard(SimConfig(seed=4))
    board.set_context(True)
    board.clock.sleep(1.0)
    with EnergyWindow(board, sync="none", idle=board.config.idle_context_w) as w:
        board.set_load(550.0)
        board.clock.sleep(0.0005)  # a ~0.5 ms command
        board.set_load(0.0)
        w.call()
    m = w.result
    assert m.transient and m.model_version == errormodel.CURRENT >= 3
    old, three = replace(m, model_version=2), replace(m, model_version=3)  # records keep their figures
    fixed_s = errormodel.model(3).transient_fixed_s
    assert old.state_err_j - three.state_err_j == pytest.approx(fixed_s * m.work_w - abs(m.above_idle_j))
    assert m.above_idle_j > 0 and three.state_err_j < 1.1 * m.above_idle_j < old.state_err_j / 4
    # from model 13 the run level (the Hopper defaults' 3%) in place of the 0.7% state share
    assert m.state_err_j - three.state_err_j == pytest.approx((0.03 - 0.007) * abs(m.above_idle_j))


# -- a figure that cannot be right is not reliable (adversarial review) -----------------
def _window(board, **kwargs):
    with EnergyWindow(board, sync="none", idle=idle_of(board), **kwargs) as w:
        calls(board, 0.5, window=w)
    return w.result


def test_a_counter_that_jumps_forward_is_not_reliable():
    board = make_board()
    m = _window(board)
    assert m.reliable
    jumped = replace(m.end, energy_mj=tuple(e + 10**9 for e in m.end.energy_mj))
    forged = replace(m, end=jumped)
    assert not forged.reliable and "the counter jumped" in forged.reason
    assert "1,400 W" in forged.reason  # twice the simulated board's 700 W limit
    unknown = replace(forged, device=replace(forged.device, power_limit_w=0.0))
    assert "5,000 W" in unknown.reason  # no limit known: no board draws this much


def test_calls_given_and_counted_that_disagree_are_not_reliable():
    m = _window(make_board(), calls=5)
    assert not m.reliable and "calls=5 was given, but w.call() counted" in m.reason


def test_a_negative_control_is_not_reliable():
    m = _window(make_board(), control_mj=-1e9)
    assert not m.reliable and "the control is negative" in m.reason
    assert _window(make_board(), control_mj=-1.0, control_err_mj=2.0).reliable  # noise within its bound


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [({"calls": 10**30}, "calls must be a whole number from 0"), ({"tail_s": 1e9}, "tail_s must be")],
)
def test_absurd_counts_and_durations_are_refused_before_any_work(kwargs, says):
    with pytest.raises(errors.UsageError, match=says):
        EnergyWindow(make_board(), sync="none", **kwargs)


def test_measure_refuses_calls_that_barely_move_a_simulated_clock():
    board = make_board()
    with pytest.raises(errors.UsageError, match="each advanced by under 1 us"):
        measure(
            lambda: board.clock.sleep(1e-9), device=board, sync="none", idle=idle_of(board), control=False
        )


def test_an_edge_outside_the_work_is_bounded_at_the_power_sampled_there():
    board = make_board()
    with EnergyWindow(board, sync="none", idle=idle_of(board)) as w:
        board.set_load(LOAD_W)  # work the window's sync does not wait for: it runs on past the exit
        board.clock.sleep(0.5)
        w.call()
    m = replace(w.result, model_version=4)  # model 4 brought the sampled power at an outside edge
    t_a, t_b, _, _, hw_start, hw_end = m._edges
    then = replace(m, model_version=3)  # model 3 took both edges (at idle, outside the work) at idle power
    start_w, end_w = (m._outside_w(t, m.idle_w, before=t == t_a) for t in (t_a, t_b))
    assert m.reading_err_j - then.reading_err_j == pytest.approx(
        (start_w - m.idle_w) * hw_start + (end_w - m.idle_w) * hw_end
    )
    assert start_w - m.idle_w < 5.0  # the start edge, before the work, sampled the idle board
    assert m.reading_err_j - then.reading_err_j > 0.9 * LOAD_W * hw_end
    board.set_load(0.0)
    quiet = replace(_window(board), model_version=4)  # the calls end before the exit: its end edge is at idle
    assert quiet.reading_err_j - replace(quiet, model_version=3).reading_err_j < 0.01 * quiet.reading_err_j
    # a breaker: that bound is of the edge, not of the work the tail held (+17-42% as reliable figures)
    assert not m.reliable and "the board still drew" in m.reason and "exit='return'" in m.reason


@pytest.mark.parametrize("seed", [0, 1, 5, 8, 21])  # 8 and 21: end steps just past the tail
def test_work_left_running_past_the_exit_is_not_read_as_the_window_s(seed):
    """A breaker: a window inside a run of 40 ms calls left running (sync="none") read +17 to +34%, reliable;
    measure() +4 to +21%. The tail counted the board's power after the work as the work's."""
    board = SimulatedBoard(SimConfig(seed=seed))
    board.set_context(True)
    board.clock.sleep(3.0)
    board.set_load(550.0)
    board.clock.sleep(1.0)
    truth_mj = 550.0 * 0.04 * 1e3
    given = IdleBaseline.given(board.config.idle_context_w, 0.2)
    results = {}
    for exit_ in ("wait", "return"):
        board.set_load(550.0)
        board.clock.sleep(1.0)
        with EnergyWindow(board, sync="none", idle=given, exit=exit_) as w:
            for _ in range(12):
                board.set_load(550.0)
                board.clock.sleep(0.04)
                w.call()
        board.clock.sleep(0.5)
        results[exit_] = w.result
    wait, ret = results["wait"], results["return"]
    assert wait.per_call_mj > 1.1 * truth_mj and not wait.reliable and "the board still drew" in wait.reason
    # a review: a samples window's tail went unread
    with EnergyWindow(board, sync="none", idle=given, method="samples") as w:
        for _ in range(12):
            board.set_load(550.0)
            board.clock.sleep(0.04)
            w.call()
    board.clock.sleep(0.5)
    assert not w.result.reliable and "the board still drew" in w.result.reason
    assert ret.reliable and abs(ret.per_call_mj - truth_mj) <= ret.per_call_mj_err  # read to the work's end
    m = measure(
        lambda: (board.set_load(550.0), board.clock.sleep(0.04)), device=board, sync="none", idle=given
    )
    # nvmeter run's window: its command has exited, no own context is listed at the end, and a board
    # stays over its no-context idle after a CUDA process's exit (results/everyday/run-reference-h200.log)
    gone = tuple(ContextRead(r.t_s, ()) for r in wait.contexts)
    assert replace(wait, contexts=gone).after_work_w is None
    assert "the board still drew" not in (replace(wait, contexts=gone).reason or "")
    # its longer run dilutes the tail: refused, or within its bound
    assert (
        ("the board still drew" in m.reason)
        if not m.reliable
        else abs(m.per_call_mj - truth_mj) <= m.per_call_mj_err
    )
    board.set_load(0.0)


# -- model 6: a pause anywhere in the look-back --------------------------------------------------
def test_a_window_after_a_short_stall_inside_the_run_is_transient():
    """One call that waited 100 ms, 1 s before entry: the board was busy at entry, yet not settled."""
    board = make_board(overshoot_rel=0.03, overshoot_tau_s=0.25)
    load_w = 650.0  # at the 700 W limit
    steady = steady_mj(board, load_w)
    calls(board, 2.0, load_w)
    board.clock.sleep(0.1)
    calls(board, 1.0, load_w)
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        calls(board, 0.5, load_w, window=w)
    board.set_load(0.0)
    m = w.result
    assert m.gap_s < m.model.pause_gap_s  # busy right up to the entry: models 2-5 called it warm
    assert m.transient and m.since_pause_s == pytest.approx(1.0, abs=0.05)
    assert "a pause ended 1.0" in repr(m) and m.derived()["since_pause_s"] == m.since_pause_s
    assert abs(m.per_call_mj - steady) <= m.per_call_mj_err
    before = replace(m, model_version=5)
    assert not before.transient and before.since_pause_s is None and "since_pause_s" not in before.derived()


def test_a_run_started_from_idle_within_the_look_back_is_transient_and_one_past_it_is_warm():
    board = make_board()
    for lead_s, transient in ((1.0, True), (2.6, False)):
        board.clock.sleep(1.0)
        calls(board, lead_s)
        with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
            calls(board, 0.5, window=w)
        board.set_load(0.0)
        assert w.result.in_work and w.result.transient is transient, (lead_s, repr(w.result))


def test_an_altered_probe_file_is_refused_as_a_profile_and_as_an_idle(tmp_path, sim_rig):
    """A window reads the figures a probe file claims: one whose figures its raw series do not
    give (as nvmeter show refuses it) would make a wrong figure marked reliable."""
    import json

    from nvmeter import records
    from nvmeter.probes.report import run_probes

    report = run_probes(sim_rig, quick=True)
    genuine = tmp_path / "probe.json"
    records.write_json(genuine, report.to_dict())
    board = sim_rig.board
    board.set_context(True)
    assert IdleBaseline.from_probe(genuine, board).power_w > 0
    assert str(genuine) in profiles.resolve_profile(genuine, board.identity()).source

    lag = json.loads(genuine.read_text())
    lag["profile"] = {**lag["profile"], "power_lag_s": 0.5, "power_lag_err_s": 0.0}  # within the limits
    lagged = tmp_path / "lagged.json"
    lagged.write_text(json.dumps(lag))
    with pytest.raises(errors.RecordError, match="power_lag_err_s disagrees with its recomputation"):
        EnergyWindow(board, idle=121.2, sync="none", profile=lagged)

    doubled = json.loads(genuine.read_text())
    span = doubled["probes"]["idle"]["raw"]["spans"]["context"]
    for edge in ("start", "end"):  # twice the energy at every read: twice the idle
        span[edge]["energy_mj"] = [2 * e for e in span[edge]["energy_mj"]]
    scaled = tmp_path / "doubled.json"
    scaled.write_text(json.dumps(doubled))
    with pytest.raises(errors.RecordError, match=r"disagrees with its recomputation|damaged"):
        IdleBaseline.from_probe(scaled, board)


def duty_call(board, load_w=553.0, on_s=0.015, off_s=0.015):
    """A duty-cycled call: the GPU busy, then the host waiting (the bench's duty kind's twin)."""

    def fn():
        board.set_load(load_w)
        board.clock.sleep(on_s)
        board.set_load(0.0)
        board.clock.sleep(off_s)

    return fn


def marked_calls(w, fn, n: int, every: int | None) -> None:
    """``n`` calls of ``fn`` declared in ``w``, a sub-window marked after every ``every``-th (None: none)."""
    for i in range(n):
        fn()
        w.call()
        if every and i % every == every - 1:
            w.mark()


def test_a_provisional_measurement_ends_at_the_latest_found_sub_window():
    board = make_board()
    fn = duty_call(board)
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        assert w.provisional() is None  # no mark yet
        marked_calls(w, fn, 200, 17)  # 6 s, a mark every 0.5 s
        board.clock.sleep(0.3)  # the last marks' polls find their steps
        p = w.provisional()
        assert p is not None and p.end_in_work and 0 < p.calls <= 200
        assert p.work_t1_s <= w._inner[-1].t0_s and p.call_ends_s[-1] == p.work_t1_s
        assert p.idle == idle_of(board) and math.isfinite(p.err_j) and p.err_j > 0
    assert w.result.calls == 200


def test_a_provisional_measurement_needs_no_call_marked_alone():
    board = make_board()
    fn = duty_call(board)
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        for i in range(100):  # two calls declared at a time: their ends are unknown
            fn()
            fn()
            w.call(2)
            if i % 9 == 8:
                w.mark()
        board.clock.sleep(0.3)
        p = w.provisional()
        assert p is not None and p.calls == 198 and p.call_ends_s == ()  # the last mark, after call 198
        assert p.work_t1_s == w._marks[-1][0] and math.isfinite(p.err_j) and p.err_j > 0


def test_measure_s_stopping_rule_looks_at_a_mark_once_its_step_is_in(monkeypatch):
    from nvmeter.meter import adaptive

    board = make_board()
    seen = []

    def look(w, target, _first=None):
        p = w.provisional()
        seen.append((p.work_t1_s, w._marks[-1][0], len(w._inner), len(w.inner_steps())))
        return len(seen) == 3

    monkeypatch.setattr(adaptive, "_bound_within", look)
    fn = duty_call(board)
    measure(fn, device=board, sync="none", idle=idle_of(board), warmup_s=0.1, target_rel_err=0.5)
    assert len(seen) == 3
    for t1_s, mark_s, marks, steps in seen:  # the provisional window ends at the latest mark
        assert t1_s == mark_s and steps == marks + 1


def test_the_stopping_rule_s_looks_take_at_most_their_share_of_the_run():
    from nvmeter.meter import adaptive

    board = make_board()
    looks = adaptive._Looks(board)
    assert looks.due()
    looks.took(0.01)  # a look of 10 ms: the next one waits 10 ms / LOOK_SHARE
    board.clock.sleep(0.01 / adaptive.LOOK_SHARE * 0.99)
    assert not looks.due()
    board.clock.sleep(0.01 / adaptive.LOOK_SHARE * 0.02)
    assert looks.due()


def test_measure_imports_scipy_before_its_run_not_between_two_calls(monkeypatch):
    import sys

    board = make_board()
    seen = []
    fn = call_on(board)

    def call():
        seen.append("scipy.stats" in sys.modules)
        fn()

    monkeypatch.delitem(sys.modules, "scipy.stats", raising=False)
    measure(call, device=board, sync="none", target_rel_err=0.05, warmup_s=0.1)
    assert seen and all(seen)


def test_a_look_longer_than_its_limit_ends_the_looks():
    from nvmeter.meter import adaptive

    board = make_board()
    looks = adaptive._Looks(board)
    looks.took(adaptive.LOOK_MAX_S * 1.5)  # a pause in the work: the estimate decides from now on
    board.clock.sleep(1e6)
    assert looks.ended and not looks.due()


def _stop(target: float):
    from nvmeter.meter import adaptive

    floor_rel = errormodel.model(errormodel.CURRENT).state_floor_rel
    return adaptive._Stop(window_s=0.5, min_windows=3, target=target, max_s=30.0, floor_rel=floor_rel)


def test_once_the_looks_end_the_estimate_alone_stops_the_run(monkeypatch):
    from nvmeter.meter import adaptive

    board = make_board()
    looks = adaptive._Looks(board)
    looks.took(1.0)

    def no_look(w, target, _first=None):
        pytest.fail("no look once they ended")

    monkeypatch.setattr(adaptive, "_bound_within", no_look)
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        marked_calls(w, call_on(board), 100, 12)
        board.clock.sleep(0.3)
        assert adaptive._spread_within(w, _stop(0.5), looks, 0.03)  # a loose target the estimate meets
        monkeypatch.setattr(adaptive, "_unreachable", lambda *a: False)  # a target a longer run may meet
        assert not adaptive._spread_within(w, _stop(1e-6), looks, 0.03)


def test_a_provisional_measurement_leaves_the_whole_window_s_calls_check_to_the_end():
    board = make_board()
    fn = duty_call(board)
    with EnergyWindow(board, idle=idle_of(board), sync="none", calls=200) as w:
        marked_calls(w, fn, 150, 17)
        board.clock.sleep(0.3)
        p = w.provisional()
        assert p is not None and not any("calls=" in q for q in p.problems)
        marked_calls(w, fn, 50, None)  # the rest of the declared calls
    assert not any("calls=" in q for q in w.result.problems)


def test_one_long_call_entered_in_earlier_work_keeps_its_head_samples():
    """A call longer than the sample buffer, no w.call() inside it: its head is read from the
    buffer the start's poller read after its step, not a sample left seconds later."""
    board = make_board()
    idle_w = board.config.idle_context_w
    board.set_load(650.0)
    board.clock.sleep(2.0)  # earlier work up to the entry, which its sync ends
    board.set_load(0.0)
    with EnergyWindow(board, sync="none", idle=idle_w) as w:
        t0 = board.clock.now()
        board.set_load(650.0)
        board.clock.sleep(0.3)  # a heavy phase, then a light one: 2.8 s in all
        board.set_load(60.0)
        board.clock.sleep(2.5)
        board.set_load(0.0)
        t1 = board.clock.now()
        w.call()
    m = w.result
    assert m.in_work and m.reliable, m
    lag_s, tail_s = board.config.step_delay_s, 0.04  # the board answers late; the tail ends at idle
    truth_mj = (board.true_energy_j(t0 + lag_s, t1 + tail_s) - idle_w * (t1 + tail_s - t0 - lag_s)) * 1e3
    assert abs(m.per_call_mj - truth_mj) <= m.per_call_mj_err, (m.per_call_mj, truth_mj)


def test_a_cut_read_across_a_rolled_over_buffer_is_not_read():
    board = make_board()
    calls(board, 1.0)
    with EnergyWindow(board, sync="none", idle=idle_of(board), calls=1) as w:
        calls(board, 0.5)
    m = w.result
    assert m.in_work and math.isfinite(m.head_j) and m.reliable
    t_cut = m.work_t0_s
    rolled = tuple(s for s in m.samples if not t_cut - 0.01 < s.t_s < t_cut + 0.3)  # 0.31 s without a sample
    gapped = replace(m, samples=rolled)
    assert math.isnan(gapped.head_j) and not gapped.reliable
    assert gapped.reason.startswith("the sample buffer does not cover the window, or leaves a gap")


def test_a_samples_window_over_a_rolled_over_buffer_is_not_read():
    """One 6 s call, no w.call() inside it, read from the samples alone: the buffer (~2.4 s) rolled
    over, and the first sample after the gap stood for it (-65% as a reliable figure: an expert review)."""
    board = make_board()
    idle_w = board.config.idle_context_w
    with EnergyWindow(board, sync="none", idle=idle_w, method="samples") as w:
        board.set_load(600.0)
        board.clock.sleep(1.8)  # a heavy phase, then a light one
        board.set_load(80.0)
        board.clock.sleep(4.2)
        board.set_load(0.0)
        w.call()
    m = w.result
    assert math.isnan(m.energy_j) and not m.reliable, m
    assert m.reason.startswith("the sample buffer does not cover the window, or leaves a gap")


def test_other_meters_reads_inside_a_window_are_in_its_bound():
    """Windows inside a window on one board: their idle spans and edges poll the counter, which
    draws the polling artefact inside the outer one (+18% read as reliable before this was counted)."""
    board = make_board()
    load_w, call_s = 20.0, 0.04
    with EnergyWindow(board, sync="none", idle=board.config.idle_context_w) as outer:
        for _ in range(4):
            with EnergyWindow(board, sync="none") as inner:  # idle="measure": a span polled before each
                for _ in range(10):
                    board.set_load(load_w)
                    board.clock.sleep(call_s)
                    board.set_load(0.0)
                    inner.call()
                    outer.call()
    m = outer.result
    assert m.foreign_read_s > 1.0 and inner.result.foreign_read_s == 0.0
    assert "other meters read the board's counter" in repr(m)
    truth_mj = load_w * call_s * 1e3
    assert m.per_call_mj > truth_mj * 1.05  # the artefact is in the figure ...
    assert abs(m.per_call_mj - truth_mj) <= m.per_call_mj_err  # ... and in its bound
    alone = Measurement.from_dict({**m.to_dict(), "foreign_read_s": 0.0})
    assert alone.per_call_mj_err < abs(m.per_call_mj - truth_mj)  # the bound without them missed


def test_a_measurement_before_version_7_read_no_other_meters():
    board = make_board()
    with EnergyWindow(board, sync="none", idle=idle_of(board), calls=1) as w:
        calls(board, 0.5)
    stored = {**w.result.to_dict(), "schema_version": 6}
    del stored["foreign_read_s"], stored["contexts"], stored["others_idle"]
    back = Measurement.from_dict(stored)
    assert back.foreign_read_s == 0.0 and back.per_call_mj_err == w.result.per_call_mj_err


def test_one_step_found_by_two_marks_is_one_sub_window_edge():
    """Calls longer than a sub-window: two marks find the same counter step, which must not make
    a sub-window of no energy (it read -121 W, and the run ended NOT RELIABLE at ±51%)."""
    import itertools as it

    board = make_board()
    count = it.count()

    def fn():
        board.set_load(LOAD_W)
        board.clock.sleep(1.0 if next(count) % 50 == 49 else 0.01)
        board.set_load(0.0)

    m = measure(fn, device=board, sync="none", max_window_s=5)
    steps = spread.boundaries(m)
    assert all(b[1] > a[1] for a, b in itertools.pairwise(steps))
    assert min(m.subwindow_mj) > 0 and m.reliable, m


def test_a_window_s_own_pollers_are_its_own_reads_on_a_real_clock():
    """On a real clock the edges are polled by threads: their reads are the window's own, and only
    another window's count as foreign (the owner passed to the thread)."""
    from nvmeter.clock import RealClock

    board = SimulatedBoard(SimConfig(seed=5), clock=RealClock())
    board.set_context(True)
    board.set_load(LOAD_W)  # busy: every edge is polled inside the work, by a thread
    idle_w = board.config.idle_context_w
    with EnergyWindow(board, sync="none", idle=idle_w, calls=1) as outer:
        board.clock.sleep(0.3)
        with EnergyWindow(board, sync="none", idle=idle_w, calls=1, exit="return") as inner:
            inner.mark()
            board.clock.sleep(0.4)
        assert inner.result is not None  # its end poll's reads, in later work, are nobody's
        outer.mark()
        board.clock.sleep(0.4)
    board.set_load(0.0)
    reads = (inner.result.start, *inner.result.inner, inner.result.end)
    inner_s = sum(float(np.sum(np.subtract(s.t1_s, s.t0_s))) for s in reads)
    assert inner.result.foreign_read_s == 0.0
    # the outer window's foreign reads are the inner's, not its own polls' (0.1-0.2 s more)
    assert outer.result.foreign_read_s == pytest.approx(inner_s, abs=0.05)


def test_a_counter_reset_in_the_idle_span_after_the_window_leaves_the_span_before():
    """A driver reload during the span measured after the window: it read -455 kW, and the window
    a reliable figure 900 times the truth. Now the span before alone is the idle, and the window
    says why it is not reliable; its record reads back."""
    board = make_board()
    calls(board, 1.0)
    board.clock.sleep(0.5)
    for k in range(10):  # in the span after the exit and in the one measured again after it
        board.inject(Fault.COUNTER_RESET, board.clock.now() + 3.0 + 0.3 * k)
    with EnergyWindow(board, sync="none") as w:
        n = calls(board, 1.2, window=w)
    m = w.result
    assert len(m.idle.spans) == 1 and m.idle_w == pytest.approx(board.config.idle_context_w, abs=2)
    assert not m.reliable and "in two idle spans after the window" in m.reason
    assert n and abs(m.per_call_mj - LOAD_W * CALL_S * 1e3) <= m.per_call_mj_err
    assert Measurement.from_dict(json.loads(json.dumps(m.to_dict()))).reason == m.reason


def test_a_counter_reset_in_the_idle_span_before_the_window_is_measured_again():
    """A code review (2026-12-06): a reset during the span before the window read the idle at
    -455 kW, and the window a reliable 22,813,995.7 ± 24,121,083.3 mJ a call for 22,000. A reset
    is one event: the span is measured again."""
    board = make_board()
    board.clock.sleep(2.0)
    board.inject(Fault.COUNTER_RESET, board.clock.now() + 0.5)
    with EnergyWindow(board, sync="none") as w:
        calls(board, 0.6, window=w)
    m = w.result
    assert m.idle_w == pytest.approx(board.config.idle_context_w, abs=2) and m.idle.err_w < 5
    assert m.reliable and abs(m.per_call_mj - LOAD_W * CALL_S * 1e3) <= m.per_call_mj_err


def test_two_idle_spans_before_a_window_that_cannot_be_real_are_refused_before_the_work():
    board = make_board()
    for k in range(12):
        board.inject(Fault.COUNTER_RESET, board.clock.now() + 0.3 + 0.25 * k)
    window = EnergyWindow(board, sync="none")
    with pytest.raises(errors.TelemetryError, match=r"two idle spans in a row .* cannot be real"):
        window.__enter__()


def test_measure_reads_a_reset_in_its_idle_span_after_the_work_again(monkeypatch):
    board = make_board()

    def step():
        board.set_load(LOAD_W)
        board.clock.sleep(CALL_S)
        board.set_load(0.0)

    from nvmeter.meter import adaptive

    real, after = adaptive.idle_after, []

    def reset_during(board_, *args, **kwargs):  # the span after the work: a reset half a second into it
        after.append(board_.clock.now())
        board_.inject(Fault.COUNTER_RESET, board_.clock.now() + 0.5)
        return real(board_, *args, **kwargs)

    monkeypatch.setattr(adaptive, "idle_after", reset_during)
    m = measure(step, device=board, sync="none", target_rel_err=0.02, profile=LEVEL_GIVEN)
    assert len(after) == 1 and len(m.idle.spans) == 2  # the span after, measured again
    assert m.reliable and abs(m.per_call_mj - LOAD_W * CALL_S * 1e3) <= m.per_call_mj_err


@pytest.mark.parametrize("seed", range(6))
def test_an_a100_like_board_s_idle_is_bounded_at_its_family_s_polling_artefact(seed):
    """The idle spans' polling was bounded at the H200's 2.8 W whatever the board: on a board that
    draws 30 W more while polled (the public A100 probe: ~23-30 W, docs/facts.md) the idle read up to
    6.2 W high against a ~1 W bound, and 100 ms calls at 20 W above idle read -12% (3 of 20 outside a
    reliable bound; a code review, 2026-12-06). The Ampere defaults say 35 W."""
    board = SimulatedBoard(SimConfig(name="Simulated A100", polling_extra_w=30.0, seed=seed))
    board.set_context(True)
    board.clock.sleep(3.0)
    m = pulsed_window(board, 20.0, 0.1, 0.0, 50)
    assert m.profile.polling_artefact_w == profiles.AMPERE.polling_artefact_w
    span = m.idle.spans[0]
    assert m.idle.err_w >= m.profile.polling_artefact_w * span.polled_inside_s / span.duration_s
    assert m.reliable and abs(m.per_call_mj - 20.0 * 0.1 * 1e3) <= m.per_call_mj_err


def test_measure_s_bound_holds_its_marks_polls_at_the_board_s_polling_artefact():
    """Model 11: the sub-window marks' reads poll inside the window, about a tenth of a run; under
    model 10 the bound left them out (18 J, 5.6% of a figure bounded at ±3.3%, a code review)."""
    board = make_board()

    def step():
        board.set_load(60.0)
        board.clock.sleep(0.04)
        board.set_load(0.0)

    m = measure(step, device=board, sync="none", target_rel_err=0.05)
    assert m.model_version == errormodel.CURRENT >= 11 and len(m.inner) >= 3
    t_a, t_b = m.edge_steps_s
    inner_s = sum(min(c.t1_s[-1], t_b) - max(c.t0_s[0], t_a) for c in m.inner)
    before = replace(m, model_version=10)
    widened_j = m.reading_err_j - before.reading_err_j
    assert inner_s > 0.05 * m.window_s
    assert widened_j == pytest.approx(m.profile.polling_artefact_w * inner_s, rel=1e-9)


def _coverage_window(seed, on_s, off_s, load_w, calls, sensor_s=0.025):
    """A window on an A100-like simulated board whose counter senses ``sensor_s`` of each 0.1 s."""
    board = SimulatedBoard(
        SimConfig(name="Simulated A100", sensor_window_s=sensor_s, seed=seed, counter_jitter_s=0.0005)
    )
    board.set_context(True)
    board.clock.sleep(3.0 + 0.013 * seed)  # the calls' place in the counter's period moves with the seed
    return pulsed_window(board, load_w, on_s, off_s, calls), load_w * on_s * 1e3


@pytest.mark.parametrize("seed", range(6))
def test_work_locked_to_a_partial_counter_s_period_is_not_reliable(seed):
    """An adversarial review: calls locked to the period of a counter that senses 25 ms of each
    100 ms read +96%, reliable. The samples see every call: the counter against them says so
    (error model 11); here the counter sensed none of the calls, and read -100%."""
    m, _ = _coverage_window(seed, 0.025, 0.075, 400.0, 10)
    assert m.profile.counter_coverage == profiles.PARTIAL_COVERAGE
    assert not m.reliable and "the power samples and the counter disagree" in m.reason
    assert abs(m.counter_samples_share) > 0.5


@pytest.mark.parametrize("seed", range(6))
def test_a_partial_counter_s_disagreement_with_the_samples_joins_the_bound(seed):
    """Calls not locked to the period (30 ms on, 17 ms off): the counter reads -3% to -10% (seeds
    0-11), and model 10's bound missed one (-9.6% against ±9.5%); the disagreement with the
    samples widens it (±12.6-19.0%)."""
    m, truth_mj = _coverage_window(seed, 0.03, 0.017, 300.0, 20)
    assert m.reliable and abs(m.per_call_mj - truth_mj) <= m.per_call_mj_err
    assert m.reading_err_j - replace(m, model_version=10).reading_err_j == pytest.approx(
        abs(m.counter_samples_j), rel=0.2
    )


@pytest.mark.parametrize("offset_s", [0.0, 0.04, 0.06, 0.075])
def test_a_partial_counter_on_a_board_taken_as_full_is_refused_where_the_samples_contradict_it_2_to_1(
    offset_s,
):
    """A breaker and a review: a board named H200 (its family's counter senses all of each period)
    whose counter senses 25 ms of 100 ms read calls locked to its period -58 to -101% and +39 to +223%
    as reliable figures. Error model 15 refuses a window whose samples and counter disagree 2 to 1 or
    more (no board we measured came within a seventh of it), saying to probe the board; under that,
    the figure stands as before (the coverage probe finds such a board)."""
    refused = 0
    for seed in range(6):
        board = SimulatedBoard(SimConfig(sensor_window_s=0.025, seed=seed, counter_jitter_s=0.0005))
        board.set_context(True)
        board.clock.sleep(3.0 + 0.013 * seed + offset_s)
        m = pulsed_window(board, 400.0, 0.025, 0.075, 10)
        assert m.profile.counter_coverage == 1.0 and m.counter_samples_share is not None
        if abs(m.counter_samples_share) > errormodel.MODELS[15].full_counter_rel:
            refused += 1
            assert not m.reliable and "probe the board" in m.reason and "sense only part" in m.reason
            assert replace(
                m, model_version=14
            ).reliable  # model 14 did not hold a full counter to its samples
        else:
            assert "disagree" not in (m.reason or "")
    assert refused >= 3


@pytest.mark.parametrize("seed", range(4))
def test_a_call_shorter_than_a_sample_spacing_on_a_slowly_falling_board_is_refused(seed):
    """A breaker: a single 20 ms call on a board whose power fell over 0.2 s read -70% as a reliable
    figure with the default tail: no sample lay inside the work, so the check that the board ran on
    past the tail had nothing to compare with. Model 15 reads the samples that cover the work."""
    board = SimulatedBoard(SimConfig(seed=seed, tau_s=0.2))
    board.set_context(True)
    board.clock.sleep(3.0 + 0.013 * seed)
    m = pulsed_window(board, 550.0, 0.02, 0.0, 1)
    assert not m.reliable and "still drew" in m.reason
    assert replace(m, model_version=14).reliable  # model 14's reading, as its records keep it


def test_a_counter_of_full_coverage_keeps_its_bound_and_passes_the_check():
    board = make_board()
    with EnergyWindow(board, sync="none") as w:
        calls(board, 0.6, window=w)
    m = w.result
    assert m.profile.counter_coverage == 1.0 and m.counter_samples_share is not None
    assert abs(m.counter_samples_share) < 0.02 and m.reliable


def test_measure_s_rule_stops_where_no_run_length_meets_the_target(monkeypatch):
    from nvmeter.meter import adaptive

    board = make_board()
    looks = adaptive._Looks(board)
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        marked_calls(w, call_on(board), 100, 12)
        board.clock.sleep(0.3)
        assert adaptive._spread_within(w, _stop(0.005), looks, 0.03)  # under the model's 0.7% floor
        monkeypatch.setattr(adaptive, "_bound_within", lambda w, t, _first=None: False)
        assert not adaptive._spread_within(w, _stop(0.05), looks, 0.03)  # reachable: the look decides
