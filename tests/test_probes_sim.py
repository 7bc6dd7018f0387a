"""The probes recover what the simulated board was built with."""

import dataclasses
import json

import pytest

from nvmeter import records
from nvmeter.boards.simulated import SimConfig
from nvmeter.probes.report import ProbeReport, load_report, run_probes
from nvmeter.worker.rig import Rig


@pytest.fixture(scope="module")
def report():
    return run_probes(Rig.open(simulate=True, config=SimConfig(seed=11)), quick=False)


def test_every_probe_ran_and_has_rows(report):
    assert list(report.probes) == [
        "read_cost",
        "polling",
        "idle",
        "samples",
        "step",
        "bursts",
        "reference",
        "cadence",
    ]
    assert all(rec.rows() for rec in report.probes.values())


def test_derived_figures_match_the_model(report):
    config = SimConfig()
    d = report.derived()
    for phase in ("context", "load", "no_context"):
        assert d["cadence"][phase]["gap_ms"]["median"] == pytest.approx(100, abs=4)
    assert d["read_cost"]["energy"]["median"] == pytest.approx(2900, abs=300)
    assert d["idle"]["no_context"]["power_w"] == pytest.approx(config.idle_no_context_w, abs=1.5)
    assert d["idle"]["context"]["power_w"] == pytest.approx(config.idle_context_w, abs=1.5)
    assert d["polling"]["artefact_w"] == pytest.approx(config.polling_extra_w, abs=1.5)
    assert d["samples"]["spacing_ms"]["median"] == pytest.approx(20, abs=1.5)
    assert d["samples"]["load_ratio"] == pytest.approx(1.0, abs=0.01)
    ref = d["reference"]["constant"]
    assert ref["exact"] is True
    assert ref["tflops"] == pytest.approx(51.2, rel=0.01)
    expected = config.load_above_idle_w["constant"] / 51.2
    assert ref["j_per_tflop"] == pytest.approx(expected, rel=0.03)


def test_sample_buffer_beats_counter_edges_on_short_bursts(report):
    d = report.derived()["bursts"]
    short = next(k for k in d if k.endswith("ms") and k.startswith(("19", "20", "21")))
    assert d[short]["samples"]["mean_abs"] < 0.15
    assert d[short]["edges"]["mean_abs"] > 2 * d[short]["samples"]["mean_abs"]


def test_report_round_trips_and_recomputes(report, tmp_path):
    path = tmp_path / "probe.json"
    records.write_json(path, report.to_dict())
    stored = json.loads(path.read_text())
    assert stored["schema_version"] == records.CURRENT["probe"]
    again = load_report(path)
    assert json.loads(json.dumps(records._clean(again.derived()))) == stored_derived(stored)


def stored_derived(stored):
    return {name: entry["derived"] for name, entry in stored["probes"].items()}


def test_load_report_refuses_another_board(report, tmp_path):
    path = tmp_path / "probe.json"
    records.write_json(path, report.to_dict())
    other = dataclasses.replace(report.board, uuid="GPU-other")
    with pytest.raises(records.errors.RecordError, match="not on this board"):
        load_report(path, board=other)


def test_quick_run_fits_its_budget():
    rig = Rig.open(simulate=True)
    t0 = rig.clock.now()
    quick = run_probes(rig, quick=True)
    assert rig.clock.now() - t0 < 20.0  # issue 16; tests/test_probe_schedule.py has the details
    assert set(quick.probes) == {"read_cost", "idle", "bursts", "reference", "cadence"}


def test_full_run_fits_its_budget():
    rig = Rig.open(simulate=True)
    t0 = rig.clock.now()
    run_probes(rig, quick=False)
    assert rig.clock.now() - t0 < 60.0


def test_worker_is_closed_even_when_a_probe_fails(monkeypatch):
    from nvmeter.probes import schedule

    rig = Rig.open(simulate=True)

    def boom(session):
        session.context().freeze()
        raise RuntimeError("probe failed")

    failing = tuple(
        dataclasses.replace(s, make=boom) if s.NAME == "idle_context" else s for s in schedule.STEPS
    )
    monkeypatch.setattr(schedule, "STEPS", failing)
    with pytest.raises(RuntimeError):
        run_probes(rig, only=("idle",))
    assert rig.board.compute_process_count() == 0
    assert isinstance(ProbeReport, type)
