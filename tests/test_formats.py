"""Record formats: every earlier version of every kind still loads, and docs/formats.md says what changed."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nvmeter import errors, formats, records
from nvmeter.formats import Format, Version
from nvmeter.provenance import PACKAGES, Provenance, collect

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
FIXTURES = Path(__file__).with_name("fixtures")

# One committed record of each version of each kind (every earlier one must be here).
COMMITTED = {
    ("probe", 1): RESULTS / "probe-h200-quick.json",
    ("probe", 2): FIXTURES / "probe-v2.json",
    ("probe", 3): RESULTS / "probe-h200-quick-84564389.json",
    ("probe", 4): RESULTS / "probe-speed" / "f2595641" / "new-full.json",
    ("probe", 5): RESULTS / "probe-h100-quick-546291fd.json",
    ("probe", 6): RESULTS / "enclose" / "call45-cbfd08c-h200j-cap-probe.json",
    ("probe", 7): RESULTS / "enclose" / "call62-ac338ed-h100w-cap-probe.json",
    ("probe", 8): RESULTS / "enclose" / "call78-c393e71-h100ac-cap-spread-probe.json",
    ("probe", 9): RESULTS / "enclose" / "call85-e5f25b5-h100af-run-levels-probe.json",
    ("probe", 10): RESULTS / "enclose" / "call88-1e6bb77-h100ag-run-levels-probe.json",
    ("probe", 11): RESULTS / "probe-step-h100-cb07ed95.json",
    ("profile", 1): FIXTURES / "profile-v1.json",
    ("profile", 2): FIXTURES / "profile-v2.json",
    ("profile", 3): FIXTURES / "profile-v3.json",
    ("score", 1): FIXTURES / "score-v1.json",
    ("score", 2): FIXTURES / "score-v2.json",
    ("score", 3): RESULTS / "score-h200" / "ladder_d4_fused" / "run-001.json",
    ("score", 4): RESULTS / "score-h200" / "graph_mlp_flat" / "run-001.json",
    ("workloads", 1): RESULTS / "workloads-h200-2026-11-29.json",
    ("workloads", 2): FIXTURES / "workloads-v2.json",
    ("workloads", 3): RESULTS / "workloads-h200.json",
    ("workloads", 4): FIXTURES / "workloads-v4.json",
    ("score-summary", 1): FIXTURES / "score-summary-v1.json",  # summarize at 54dae49, graph_mlp_flat
    ("score-summary", 2): FIXTURES / "score-summary-v2.json",  # summarize at 2dc3dbc, graph_mlp_flat
    ("run", 1): FIXTURES / "run-v1.json",
    ("run", 2): FIXTURES / "run-v2.json",
    ("pytest-energy", 1): FIXTURES / "pytest-energy-v1.json",
    ("pytest-energy", 2): FIXTURES / "pytest-energy-v2.json",
    ("window-accuracy", 1): RESULTS / "window-accuracy-h200.json",
    ("window-accuracy-summary", 1): RESULTS / "window-accuracy-h200-summary.json",
    ("ladder-h200", 1): RESULTS / "ladder-h200.json",
    ("ladder-sm90", 1): RESULTS / "ladder-sm90.json",
}


def _bench(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_earlier_version_of_every_kind_has_a_committed_record():
    earlier = {(kind, v.number) for kind, f in formats.FORMATS.items() for v in f.versions[:-1]}
    assert earlier <= set(COMMITTED), sorted(earlier - set(COMMITTED))


@pytest.mark.parametrize(
    ("kind", "version"), sorted(COMMITTED), ids=[f"{k}-v{v}" for k, v in sorted(COMMITTED)]
)
def test_a_committed_record_of_each_version_reads_as_the_current_version(kind, version):
    path = COMMITTED[(kind, version)]
    raw = json.loads(path.read_text())
    assert raw.get("schema_version", 1) == version
    data = records.read_json(path, kind)
    assert data["kind"] == kind and data["schema_version"] == formats.CURRENT[kind]
    if "provenance" in data:  # every kind has it from its current version on
        Provenance.from_dict(data["provenance"])
    assert json.loads(path.read_text()) == raw  # reading never changes the file


def test_probe_v1_loads_recomputes_and_keeps_its_host_as_provenance():
    from nvmeter.probes.report import load_report

    path = COMMITTED[("probe", 1)]
    stored = json.loads(path.read_text())
    report = load_report(path)
    assert report.provenance.nvmeter == stored["host"]["nvmeter"] == "0.1.0"
    assert report.provenance.packages == {"torch": "2.11.0", "nvidia-ml-py": "13.610.43"}
    assert report.provenance.host is None  # v1 did not keep it
    fresh = json.loads(json.dumps(records._clean(report.derived())))
    assert fresh == {name: entry["derived"] for name, entry in stored["probes"].items()}


def test_probe_v3_idle_waits_become_one_per_level():
    from nvmeter.probes.report import load_report

    data = records.read_json(COMMITTED[("probe", 3)], "probe")
    assert data["probes"]["idle"]["raw"]["settle_s"] == {"no_context": 0.3, "context": 0.3, "frozen": 0.3}
    assert load_report(COMMITTED[("probe", 3)]).probes["idle"].settle_s["frozen"] == 0.3


def test_probe_v2_fixture_loads_and_recomputes():
    from nvmeter.probes.report import load_report

    path = COMMITTED[("probe", 2)]
    stored = json.loads(path.read_text())
    report = load_report(path)
    assert report.board.simulated and set(report.probes) == {"idle", "read_cost"}
    fresh = json.loads(json.dumps(records._clean(report.derived())))
    assert fresh == {name: entry["derived"] for name, entry in stored["probes"].items()}


@pytest.mark.parametrize("version", [1, 2])
def test_score_records_load_and_recompute_to_their_stored_figures(version):
    from nvmeter.score.summarize import load_records

    path = COMMITTED[("score", version)]
    ((_, record),) = load_records([path])  # verify() compares every stored figure with its recomputation
    assert record.passed and record.energy_valid
    stored = json.loads(path.read_text())
    if version == 1:
        assert record.provenance.host == stored["host"]
        assert record.provenance.nvmeter_commit == stored["software"]["nvmeter_commit"]
        assert record.provenance.packages["nvidia-ml-py"] == stored["software"]["nvidia_ml_py"]
        assert record.rederived == tuple(stored["rederived"])
    else:
        assert record.provenance == Provenance.from_dict(stored["provenance"])
        assert record.rederived == tuple(stored["rederived"])  # the band's re-derivation (8885be4)


def test_a_v1_score_record_is_rewritten_in_the_current_version():
    from nvmeter.score.record import RunRecord

    data = records.read_json(COMMITTED[("score", 1)], "score")
    again = formats.upgrade(json.loads(json.dumps(RunRecord.from_dict(data).to_dict())), "score")
    assert again["schema_version"] == formats.CURRENT["score"]
    assert again["provenance"] == data["provenance"] and again["derived"] == data["derived"]


def test_workloads_v1_splits_board_and_device_and_gives_every_method_all_keys():
    from nvmeter.workloads import evaluate

    stored = json.loads(COMMITTED[("workloads", 1)].read_text())
    data = records.read_json(COMMITTED[("workloads", 1)], "workloads")
    assert data["board"]["uuid"] == stored["board"]["uuid"] and "cuda_index" not in data["board"]
    assert data["board_error"] is None
    assert data["device"]["index"] == stored["board"]["cuda_index"]
    assert data["device"]["cuda"] == stored["software"]["cuda"]
    keys = {frozenset(r) for r in data["methods"].values()}
    assert len(keys) == 1  # one shape for every method
    rows = evaluate.table(data).splitlines()
    assert rows[0].startswith("| method | difficulty | NVIDIA H200 ms")
    assert len(rows) == 2 + len(stored["methods"])


def test_workloads_v1_cpu_dry_run_and_nvml_failure_upgrade():
    base = json.loads(COMMITTED[("workloads", 1)].read_text())
    dry = {**base, "board": {"name": "cpu", "uuid": None, "dry_run": True}}
    up = formats.upgrade(dry, "workloads")
    assert up["board"] is None and up["board_error"] == "dry run on the CPU" and up["device"]["type"] == "cpu"
    lost = {**base, "board": {"name": "NVIDIA H200", "cuda_index": 0, "memory_mib": 1.0, "uuid": "GPU-x"}}
    lost["board"]["nvml_error"] = "NVML Shared Library Not Found"
    up = formats.upgrade(lost, "workloads")
    assert up["board"] is None and up["board_error"] == "NVML Shared Library Not Found"


@pytest.mark.parametrize("run", ["window-accuracy-h200", "window-accuracy-h200-run2"])
def test_window_accuracy_v1_records_recompute_their_committed_summaries(run):
    wa = _bench("window_accuracy")
    summary = json.loads(json.dumps(wa.analyze(RESULTS / f"{run}.json", None)))
    committed = records.read_json(RESULTS / f"{run}-summary.json", "window-accuracy-summary")
    for key in ("kind", "schema_version", "source", "provenance"):
        summary.pop(key, None), committed.pop(key)
    assert summary == committed


def test_window_accuracy_v1_without_warmup_reads_as_cold_trials():
    run1 = records.read_json(RESULTS / "window-accuracy-h200.json", "window-accuracy")
    run2 = records.read_json(RESULTS / "window-accuracy-h200-run2.json", "window-accuracy")
    assert run1["warmup_s"] == 0.0 and {t["warmup_s"] for t in run1["trials"]} == {0.0}
    raw2 = json.loads((RESULTS / "window-accuracy-h200-run2.json").read_text())
    assert run2["warmup_s"] == raw2["warmup_s"] > 0  # a v1 file that had it keeps its own
    assert [t["warmup_s"] for t in run2["trials"]] == [t["warmup_s"] for t in raw2["trials"]]


def test_ladder_v1_unlabelled_reads_with_its_versions_as_provenance():
    data = records.read_json(COMMITTED[("ladder-h200", 1)], "ladder-h200")
    assert data["provenance"]["packages"] == {"torch": "2.11.0+cu130", "triton": "3.6.0"}
    assert "torch" not in data and set(data["parts"]) >= {"kernels", "timing"}


def test_records_written_now_carry_the_current_version_and_read_back_unchanged(tmp_path):
    for kind in formats.FORMATS:
        record = {**records.header(kind), "provenance": collect().to_dict(), "x": [1, 2]}
        path = tmp_path / f"{kind}.json"
        records.write_json(path, record)
        assert records.read_json(path, kind) == json.loads(path.read_text())


# -- what is refused ------------------------------------------------------------------------
def _written(tmp_path, data):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    return path


def test_a_newer_version_another_kind_or_an_unlabelled_stranger_is_refused(tmp_path):
    score = json.loads(COMMITTED[("score", 1)].read_text())
    with pytest.raises(
        errors.RecordError, match=r"schema_version 99 is not one this nvmeter reads.*upgrade nvmeter"
    ):
        records.read_json(_written(tmp_path, {**score, "schema_version": 99}), "score")
    with pytest.raises(
        errors.RecordError, match=r"schema_version 0 is not one this nvmeter reads \(an integer: [\d, ]+\)$"
    ):
        records.read_json(_written(tmp_path, {**score, "schema_version": 0}), "score")  # no newer one
    with pytest.raises(errors.RecordError, match="schema_version True"):
        records.read_json(_written(tmp_path, {**score, "schema_version": True}), "score")
    with pytest.raises(errors.RecordError, match="not an nvmeter probe record"):
        records.read_json(_written(tmp_path, score), "probe")
    with pytest.raises(errors.RecordError, match=r"not an nvmeter probe record \(kind 'score'\)"):
        records.read_json(_written(tmp_path, score), "probe")
    with pytest.raises(errors.RecordError, match=r"ladder-h200 record \(it has no `kind` field\)"):
        records.read_json(_written(tmp_path, {"parts": {}}), "ladder-h200")
    with pytest.raises(errors.RecordError, match=r"summary record \(a JSON array, not an object\)"):
        records.read_json(_written(tmp_path, [1, 2]), "window-accuracy-summary")
    with pytest.raises(errors.RecordError, match="not an nvmeter window-accuracy-summary record"):
        records.read_json(_written(tmp_path, [1, 2]), "window-accuracy-summary")
    # JSON's names, not Python's: "a JSON NoneType" for a file holding null (a breaker's trial)
    for value, name in ((None, "null"), ("x", "string"), (True, "true or false"), (1.5, "number")):
        with pytest.raises(errors.RecordError, match=rf"probe record \(a JSON {name}, not an object\)"):
            records.read_json(_written(tmp_path, value), "probe")


@pytest.mark.parametrize(
    ("kind", "field"), [("probe", "host"), ("score", "software"), ("workloads", "board")]
)
def test_an_earlier_version_lacking_a_field_of_that_version_is_a_damaged_record(tmp_path, kind, field):
    data = json.loads(COMMITTED[(kind, 1)].read_text())
    del data[field]
    with pytest.raises(
        errors.RecordError, match=rf"damaged {kind} record \(schema_version 1\).*\(no field '{field}'\)"
    ):
        records.read_json(_written(tmp_path, data), kind)


def test_a_current_record_lacking_a_field_is_refused_not_defaulted(tmp_path):
    from nvmeter.probes.report import load_report

    data = json.loads(COMMITTED[("probe", 2)].read_text())
    del data["provenance"]
    with pytest.raises(errors.RecordError, match="lacks 'provenance'"):
        load_report(_written(tmp_path, data))


def test_the_cli_says_a_damaged_old_record_in_one_line(tmp_path):
    data = json.loads(COMMITTED[("probe", 1)].read_text())
    del data["host"]
    path = _written(tmp_path, data)
    proc = subprocess.run(
        [sys.executable, "-m", "nvmeter", "show", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"nvmeter: {path}: damaged probe record (schema_version 1): a field its version has is "
        "missing or malformed (no field 'host'); edited, or cut short?"
    ]


def test_a_record_relabelled_to_an_older_version_names_the_version_it_says(tmp_path):
    data = json.loads(COMMITTED[("probe", 2)].read_text())
    data["schema_version"] = 1  # a current record claiming to be a first-version one
    with pytest.raises(errors.RecordError, match=r"\(schema_version 1\).*edited, or cut short\?"):
        records.read_json(_written(tmp_path, data), "probe")


def test_versions_must_be_numbered_in_order_with_an_upgrade_for_each():
    with pytest.raises(ValueError, match="numbered"):
        Format("x", (Version(1, "a"), Version(3, "b", formats.unchanged)))
    with pytest.raises(ValueError, match="needs an upgrade"):
        Format("x", (Version(1, "a"), Version(2, "b")))

    def rename(d):
        d["y"] = d.pop("z")
        return d

    two = Format("x", (Version(1, "a"), Version(2, "b", rename)))
    assert two.upgrade({"kind": "x", "schema_version": 1, "z": 5}, "here") == {
        "kind": "x",
        "schema_version": 2,
        "y": 5,
    }


# -- docs/formats.md -----------------------------------------------------------------------
def _documented() -> dict[str, list[str]]:
    """Kind -> its version bullets in docs/formats.md, continuation lines joined."""
    found: dict[str, list[str]] = {}
    kind = None
    for line in (ROOT / "docs" / "formats.md").read_text().splitlines():
        heading = re.fullmatch(r"## `([a-z0-9-]+)`", line)
        if heading:
            kind = heading.group(1)
            found[kind] = []
        elif kind and line.startswith("- "):
            found[kind].append(line[2:])
        elif kind and line.startswith("  ") and found[kind]:
            found[kind][-1] += " " + line.strip()
    return found


def test_docs_formats_md_gives_each_kind_a_section_with_one_line_per_version():
    documented = _documented()
    assert set(documented) == set(formats.FORMATS)
    for kind, f in formats.FORMATS.items():
        lines = documented[kind]
        assert len(lines) == len(f.versions), kind
        for line, version in zip(lines, f.versions, strict=True):
            assert line.startswith(f"v{version.number}: {version.note}"), (kind, line)


# -- provenance -----------------------------------------------------------------------------
def test_provenance_names_the_machine_the_software_and_no_import_of_torch():
    code = (
        "import sys, json; from nvmeter.provenance import collect; p = collect(argv=['x']); "
        "print(json.dumps([p.to_dict(), 'torch' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    data, torch_loaded = json.loads(out)
    assert not torch_loaded
    assert set(data["packages"]) == set(PACKAGES) and data["packages"]["numpy"]
    assert data["argv"] == ["x"] and data["python"] == ".".join(map(str, sys.version_info[:3]))
    assert data["host"] and data["platform"] and data["board"] is None
    p = Provenance.from_dict(data)
    assert Provenance.from_dict(p.to_dict()) == p


def test_provenance_keeps_a_board_given_to_it(sim_board):
    p = collect(board=sim_board.identity())
    assert p.board == sim_board.identity().to_dict()


def test_workloads_v2_names_each_methods_board_from_the_record():
    data = records.read_json(COMMITTED[("workloads", 2)], "workloads")
    assert data["resumed_from"] == []
    assert {r["board_uuid"] for r in data["methods"].values()} == {None}  # a CPU dry run: no board
    up = formats.upgrade(json.loads(COMMITTED[("workloads", 1)].read_text()), "workloads")
    assert {r["board_uuid"] for r in up["methods"].values()} == {up["board"]["uuid"]}


def test_a_record_of_another_kind_show_reads_says_so(tmp_path):
    # Measurement.load of a run record said only "kind 'run'" (a new user's trial, 2026-12-06)
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"kind": "run", "schema_version": 1}))
    with pytest.raises(
        errors.RecordError, match=r"not an nvmeter window record \(kind 'run'; `nvmeter show` reads it\)"
    ):
        records.read_json(path, "window")
