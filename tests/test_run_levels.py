"""Run levels: the board profile's figure, the probe that measures it, error model 13."""

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from simboards import LEVEL_GIVEN
from test_meter_bound import CALL_S, LOAD_W, call_on, calls, idle_of, make_board

from nvmeter import errors, probes, records
from nvmeter.boards import profile as profiles
from nvmeter.boards.simulated import SimConfig, SimulatedBoard
from nvmeter.meter import errormodel
from nvmeter.meter.adaptive import measure
from nvmeter.meter.window import EnergyWindow
from nvmeter.probes import runlevels
from nvmeter.probes.report import for_cache, load_report, run_probes
from nvmeter.worker.rig import Rig
from nvmeter.worker.simulated import SimWorker

# As on the H100 of call 79: whole runs 2.5% above the level the references took, about one in three
SECOND = {"second_level_rel": 0.025, "second_level_p": 0.4}
TRUTH_MJ = LOAD_W * CALL_S * 1e3  # the lower level's per-call energy above idle


def probe(seed: int, **config):
    board = SimulatedBoard(SimConfig(seed=seed, **config))
    return run_probes(Rig(board, lambda: SimWorker(board)), only=("run_levels",))


def runs_of(board, n: int, **kwargs) -> list:
    """``n`` measure() runs, each after its own idle span (a pause: a new start, a new level)."""
    return [measure(call_on(board), device=board, sync="none", **kwargs) for _ in range(n)]


def test_model_13_holds_runs_at_a_second_level_that_model_12_misses():
    runs = runs_of(make_board(**SECOND), 6)
    upper = [m for m in runs if m.per_call_mj > TRUTH_MJ * 1.015]
    assert 1 <= len(upper) < len(runs)  # both levels ran (1 of 6 upper when written, +2.58%)
    for m in runs:
        assert m.model_version == errormodel.CURRENT >= 13 and m.reliable, m.reason  # 14 keeps 13's run level
        assert abs(m.per_call_mj - TRUTH_MJ) <= m.per_call_mj_err  # the family's 3%: the unprobed board
        assert m.floor_rel == m.run_level_rel == profiles.HOPPER.run_level_rel
    old = [replace(m, model_version=12) for m in upper]
    assert all(abs(m.per_call_mj - TRUTH_MJ) > m.per_call_mj_err for m in old)  # their own runs agreed
    assert all(m.floor_rel == m.model.state_floor_rel == 0.007 for m in old)  # records keep their model


def test_a_window_without_sub_windows_takes_the_run_level_as_its_least_state_share():
    board = make_board()
    calls(board, 2.5)
    with EnergyWindow(board, idle=idle_of(board), sync="none") as w:
        calls(board, 0.5, window=w)
    m = w.result
    assert not m.transient and not m.limited and m.subwindow_halfwidth_w is None
    assert m.state_rel == profiles.HOPPER.run_level_rel > errormodel.model(13).state_rel
    assert m.state_err_j == pytest.approx(0.03 * m.above_idle_j)
    assert replace(m, model_version=12).state_rel == errormodel.model(12).state_rel == 0.007


def test_the_probe_sees_a_second_level_and_the_profile_keeps_its_figure():
    plain, leveled = probe(3), probe(3, **SECOND)
    flat, two = plain.probes["run_levels"].derived(), leveled.probes["run_levels"].derived()
    assert flat["runs"] == two["runs"] == two["runs_with_figure"] == 8
    # no second level: the runs' scatter, under the error model's own floor; the profile keeps the
    # family's default all the same (eight runs cannot rule out a rarer level)
    assert flat["run_level_rel"] < errormodel.model(13).state_floor_rel
    assert plain.profile().run_level_rel == profiles.HOPPER.run_level_rel
    assert "run_levels" not in plain.profile().source
    assert 0.02 < two["range_rel"] < 0.03  # the two levels, 2.5% apart
    assert two["run_level_rel"] == pytest.approx(runlevels.MARGIN * two["range_rel"])
    assert leveled.profile().run_level_rel == pytest.approx(two["run_level_rel"])
    assert dict(plain.rows())["run level kept"].startswith("3.0%, the family's default: a probe widens it")
    assert dict(leveled.rows())["run level kept"] == (
        f"{100 * two['run_level_rel']:.2f}%, this probe's, over the family's 3.0%"
    )
    assert "run_levels" in leveled.profile().source
    # a board whose probe kept a figure: a window on it takes that, not the family's
    board = make_board(**SECOND)
    m = measure(call_on(board), device=board, sync="none", profile=leveled.profile())
    assert m.run_level_rel == pytest.approx(two["run_level_rel"]) and m.floor_rel == m.run_level_rel


@pytest.mark.parametrize("seed", [2, 9, 10])
def test_a_board_that_takes_each_level_half_the_time_reads_the_whole_gap(seed):
    """A review: the largest distance from the median read half the gap when the runs split 4/4."""
    d = probe(seed, second_level_rel=0.025, second_level_p=0.5).probes["run_levels"].derived()
    assert d["range_rel"] > 0.022 and d["run_level_rel"] > 0.025


def test_a_load_the_board_limited_keeps_the_family_s_run_level():
    """A review: a board capped at 450 W read 0.58% for a level of 2.5%; the limiter hides it."""
    report = probe(3, power_limit_w=450.0, **SECOND)
    d = report.probes["run_levels"].derived()
    assert d["limited_share"] >= runlevels.LIMITED_SHARE and d["run_level_rel"] is None
    assert report.profile().run_level_rel == profiles.HOPPER.run_level_rel
    assert "limiter hides a level" in report.probes["run_levels"].rows()[0][1]


def test_runs_of_another_dtype_are_refused_as_a_record_error():
    rec = probe(3).probes["run_levels"]
    data = rec.to_dict()
    data["runs"][0]["dtype"] = "bf16"
    with pytest.raises(errors.RecordError, match="FP32 products of one size"):
        runlevels.RunLevels.from_dict(data)


def test_a_probe_record_of_the_run_levels_survives_json_and_is_verified(tmp_path):
    out = tmp_path / "p.json"
    report = probe(4, **SECOND)
    records.write_json(out, report.to_dict())
    again = load_report(out)
    assert again.profile().run_level_rel == report.profile().run_level_rel
    data = json.loads(out.read_text())
    data["profile"]["run_level_rel"] = 0.001  # a narrower floor than the probe measured
    out.write_text(json.dumps(data))
    with pytest.raises(errors.RecordError, match=r"profile\.run_level_rel disagrees with its recomputation"):
        load_report(out)


def test_a_profile_from_before_the_run_level_reads_the_family_s():
    old = {k: v for k, v in profiles.HOPPER.to_dict().items() if k != "run_level_rel"}
    prof = profiles.BoardProfile.from_dict(old)
    assert prof.run_level_rel is None and prof.run_level_or("NVIDIA H200") == 0.03
    assert prof.run_level_or("NVIDIA A100-SXM4-80GB") == pytest.approx(1.5 * 0.03)
    with pytest.raises(errors.RecordError, match="run_level_rel"):
        profiles.HOPPER.with_(run_level_rel=0.9)


def test_every_family_has_a_run_level_and_the_unmeasured_ones_are_wider():
    hopper = profiles.HOPPER.run_level_rel
    assert (
        hopper == 0.03 and profiles.AMPERE.run_level_rel > hopper and profiles.GENERIC.run_level_rel > hopper
    )
    assert LEVEL_GIVEN.run_level_rel < errormodel.model(13).state_floor_rel  # the tests' probed board


def test_the_run_level_probe_is_opt_in_and_refused_with_quick(tmp_path):
    cmd = [sys.executable, "-m", "nvmeter", "probe", "--simulate", "--quick", "--run-levels", "--out"]
    done = subprocess.run([*cmd, str(tmp_path / "q.json")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--quick skips the run-level probe" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "q.json").exists()
    assert "run_levels" not in [m.NAME for m in probes.selected(False)]


def test_the_reason_names_where_the_run_level_came_from_and_what_narrows_it():
    """New users' trials: the run level's source (a repository path) and a probe hint that did nothing."""
    board = make_board()
    m = measure(call_on(board), device=board, sync="none", target_rel_err=0.02)
    assert "the run level is the family's default, the largest seen on its boards" in m.reason
    assert "cannot narrow it" in m.reason
    probed = replace(
        m, profile=m.profile.with_(source="probe GPU-x 2026: cadence, run_levels", run_level_rel=0.04)
    )
    assert "the run level is this board's own, probed, wider than its family's" in probed.reason
    # a path may hold any word: only the probes the source lists count (a breaker's trial)
    named = m.profile.with_(source="my_run_levels.json (probe GPU-x 2026: cadence)", run_level_rel=0.04)
    assert "given profile's (my_run_levels.json" in replace(m, profile=named).reason
    given = replace(m, profile=m.profile.with_(source="mine.json", run_level_rel=0.04))
    assert (
        "the board's run level alone, 4.0%" in given.reason and "given profile's (mine.json)" in given.reason
    )
    # with the idle's part: the same source, not a different story
    assert "the run level is the family's default" in replace(m, max_rel_err=0.031).reason


def test_a_bound_just_over_the_target_is_not_printed_as_equal_to_it():
    from nvmeter.meter.reasons import figure_reason

    assert "bound 1.020% exceeds the accepted 1.000%" in figure_reason(100.0, 1.02, 0.01, "a call")


def test_a_run_level_given_under_the_family_s_is_said_in_the_line():
    """A breaker's trial: a profile with run level 0 switched model 13 off without a word."""
    board = make_board()
    given = measure(call_on(board), device=board, sync="none", profile=LEVEL_GIVEN)
    assert "run level 0.3% as the profile gives it, under the family's 3.0%" in repr(given)
    assert "as the profile gives it" in "; ".join(given.notes)
    default = measure(call_on(board), device=board, sync="none")
    assert "as the profile gives it" not in repr(default)
    assert "as the profile gives it" not in repr(
        replace(given, model_version=12)
    )  # model 12 has no run level


@pytest.mark.parametrize(
    "path",
    sorted((Path(__file__).resolve().parents[1] / "results" / "enclose").glob("*-run-levels-probe.json")),
    ids=lambda p: p.name,
)
def test_every_committed_run_level_probe_verifies_and_keeps_at_least_the_family_s(path):
    report = load_report(path)  # its derived blocks and profile recomputed from its raw series
    assert report.profile().run_level_rel >= profiles.default_profile(report.board.name).run_level_rel


def test_the_cache_keeps_the_widest_run_level_a_board_s_probes_read(tmp_path, monkeypatch):
    """Three probes of one H100 read 3.09%, 3.46%, then 1.81%: a later probe that missed it undid it."""
    monkeypatch.setenv("NVMETER_CACHE_DIR", str(tmp_path))
    leveled, plain = probe(3, **SECOND), probe(3)
    real = replace(leveled.board, simulated=False)  # the cache keeps no simulated board's
    first = replace(leveled, board=real)
    profiles.store_probe(first.to_dict(), real)
    later = for_cache(replace(plain, board=real))
    figure = first.probes["run_levels"].derived()["run_level_rel"]
    assert later.probes["run_levels"].derived()["run_level_rel"] == pytest.approx(figure)
    assert later.profile().run_level_rel == first.profile().run_level_rel > profiles.HOPPER.run_level_rel
    profiles.store_probe(replace(plain, board=real).to_dict(), real)
    wider = for_cache(first)  # the other way round: the new, wider probe replaces the kept one
    assert wider.probes["run_levels"] is first.probes["run_levels"]


HARDWARE_PROBES = Path(__file__).resolve().parents[1] / "results" / "enclose"


@pytest.mark.parametrize(
    ("name", "warmed"),
    [
        ("call80-a03b62f-h100ad", False),
        ("call81-a03b62f-h100ad", False),
        ("call82-32106c6-h100ad", False),
        ("call83-ff0e4be-h100ae", False),
        ("call84-e5f25b5-h100af", True),
        ("call85-e5f25b5-h100af", True),
    ],
)
def test_a_board_s_warming_is_left_out_of_its_run_level(name, warmed):
    """GPU-497e4db9 warmed 53 -> 61 °C through its probe and read the warming as a level (4.84%).

    The other boards' runs held within ~1.3 °C, and their levels read as before.
    """
    old = load_report(HARDWARE_PROBES / f"{name}-run-levels-probe.json").probes["run_levels"]
    assert old.derivation == 1  # v9 records: derived as they were written
    new = replace(old, derivation=2).derived()
    temperatures = new["run_temperature_c"]
    assert (max(temperatures) - min(temperatures) > runlevels.WARMING_C) == warmed
    before = old.derived()["run_level_rel"]
    if warmed:  # ~0.48% a °C out: under the family's default, which the profile then keeps
        assert new["warming_mj_per_c"] > 0
        assert before > profiles.HOPPER.run_level_rel > new["run_level_rel"]
    else:
        assert new["warming_mj_per_c"] is None and new["run_level_rel"] == pytest.approx(before)


def warming_probe(seed: int, runs: list[int]) -> runlevels.RunLevels:
    """A simulated probe warming ~1 °C a run whose ``runs`` took a 4% level (the others none)."""
    rec = probe(seed, c_per_w=0.03).probes["run_levels"]
    d = rec.derived()
    assert d["warming_mj_per_c"] is not None  # it warmed: the warming-free reading
    scale = [1.04 if k in runs else 1.0 for k in range(len(rec.runs))]
    return rec, [v * f for v, f in zip(d["run_mj"], scale, strict=True)], d["run_temperature_c"]


@pytest.mark.parametrize(
    "runs",
    [[0], [7], [4, 5, 6, 7], [0, 1, 2, 3], [1, 4]],
    ids=["first-alone", "last-alone", "last-four", "first-four", "two-apart"],
)
def test_a_level_is_not_taken_for_warming_wherever_its_runs_fall(runs):
    """Each warming-free reading alone missed one: a lone run (no neighbour), a block at one end (slope)."""
    rec, runs_mj, temps_c = warming_probe(3, runs)
    kept = list(zip(runs_mj, temps_c, strict=True))
    level_mj = runlevels._range_mj(kept, rec.warming_mj_per_c(runs_mj, temps_c))
    assert level_mj / np.median(runs_mj) > 0.035  # a 4% level, with the scatter of the runs


def test_a_hidden_temperature_reads_the_runs_as_they_are():
    rec = probe(3, **SECOND).probes["run_levels"]
    hidden = replace(rec, states=tuple(replace(s, temperature_c=float("nan")) for s in rec.states))
    d, as_they_are = hidden.derived(), replace(rec, derivation=1).derived()
    assert d["warming_mj_per_c"] is None and d["range_rel"] == pytest.approx(as_they_are["range_rel"])
    assert "°C" not in hidden.rows()[0][1]


@pytest.mark.parametrize("bad", [0, 3, True, 2.0, "2"])
def test_a_derivation_nvmeter_never_wrote_is_refused(bad):
    data = probe(3).probes["run_levels"].to_dict()
    data["derivation"] = bad
    with pytest.raises(errors.RecordError, match="derivation must be one of"):
        runlevels.RunLevels.from_dict(data)


def test_the_probe_s_line_names_the_warming_it_left_out():
    steady = probe(3, c_per_w=0.0, **SECOND).probes["run_levels"]
    d = steady.derived()
    assert steady.derivation == runlevels.DERIVATION == 2 and d["warming_mj_per_c"] is None
    assert 0.02 < d["range_rel"] < 0.03 and "with the warming" not in steady.rows()[0][1]
    warming = probe(3, **SECOND).probes["run_levels"]  # the simulated board warms ~1.7 °C a run
    w = warming.derived()
    assert w["warming_mj_per_c"] is not None and w["range_rel"] == pytest.approx(d["range_rel"], rel=0.2)
    assert "with the warming left out (the runs at 36-47 °C; Theil-Sen slope" in warming.rows()[0][1]


def test_the_cache_reads_a_kept_probe_by_the_current_derivation(tmp_path, monkeypatch):
    """Call 85's probe read GPU-497e4db9's warming as 4.84%: kept as read, it outlasted every later probe."""
    monkeypatch.setenv("NVMETER_CACHE_DIR", str(tmp_path))
    old = load_report(HARDWARE_PROBES / "call85-e5f25b5-h100af-run-levels-probe.json")
    profiles.store_probe(old.to_dict(), old.board)
    later = for_cache(replace(probe(3), board=old.board))
    kept = later.probes["run_levels"]
    assert kept.derivation == 2 and kept.runs == old.probes["run_levels"].runs  # the old runs, read anew
    assert later.profile().run_level_rel == profiles.HOPPER.run_level_rel < old.profile().run_level_rel


def test_a_newer_nvmeter_s_kept_probe_is_not_replaced(tmp_path, monkeypatch):
    """A breaker: the cache took a newer record for a damaged one and dropped its wider run level."""
    monkeypatch.setenv("NVMETER_CACHE_DIR", str(tmp_path))
    report = probe(3, **SECOND)
    real = replace(report.board, simulated=False)
    path = profiles.store_probe(replace(report, board=real).to_dict(), real)
    data = json.loads(path.read_text())
    data["schema_version"] += 1
    path.write_text(json.dumps(data))
    with pytest.raises(errors.NewerRecord, match=r"upgrade nvmeter.*or probe with --no-cache"):
        for_cache(replace(probe(3), board=real))
    assert json.loads(path.read_text()) == data


def test_a_temperature_no_gpu_reads_is_a_damaged_record(tmp_path):
    """A breaker: 1e308 °C in one state set the run level to its 50% cap, marked as the board's own."""
    out = tmp_path / "p.json"
    data = probe(3).to_dict()
    data["probes"]["run_levels"]["raw"]["states"][2]["temperature_c"] = 1e308
    out.write_text(json.dumps(data))
    with pytest.raises(
        errors.RecordError, match=r"a board state's temperature_c is 1e\+308, outside any board's"
    ):
        load_report(out)


@pytest.mark.parametrize("uuid", [None, 12, "", "GPU-1\nGPU-2"])
def test_a_profile_with_a_damaged_board_uuid_is_damaged_not_another_board_s(tmp_path, uuid):
    out = tmp_path / "p.json"
    data = probe(3).to_dict()
    data["board"]["uuid"] = uuid
    out.write_text(json.dumps(data))
    with pytest.raises(errors.RecordError, match=r"damaged record: its board\.uuid") as caught:
        profiles.load_profile(out, probe(3).board)
    assert "\n" not in str(caught.value)
