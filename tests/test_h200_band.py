"""bench/h200_band.py: the H200 band's rule over synthetic boards, its board floor, and the independent check.

The synthetic boards are the committed quick probe of the H200 (results/probe-h200-quick.json:
5.78 J/TFLOP at 51.13 TFLOP/s) under other UUIDs, each with its products' FLOP count scaled, so
that its rate scales by the factor and its J/TFLOP by the inverse; the records are written
through ProbeReport.to_dict, so their stored figures match their raw series as a real file's do.
"""

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from nvmeter import records
from nvmeter.probes.bands import BANDS
from nvmeter.probes.reference import Reference
from nvmeter.probes.report import load_report

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "results" / "probe-h200-quick.json"
SCORE_RUN = ROOT / "results" / "score-h200" / "mlp_fp32" / "run-001.json"  # 5.70 J/TFLOP, 50.88 TFLOP/s
DERIVATION = ROOT / "results" / "h200-band" / "derivation.json"


def _bench():
    spec = importlib.util.spec_from_file_location("h200_band", ROOT / "bench" / "h200_band.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["h200_band"] = module  # its dataclasses look their module up while they are made
    spec.loader.exec_module(module)
    return module


band = _bench()


@pytest.fixture(scope="module")
def quick():
    return load_report(QUICK)


def uuid(i: int) -> str:
    return f"GPU-00000000-0000-0000-0000-{i:012d}"


def write_probe(
    report, path: Path, board_uuid: str, scale: float, name: str = "NVIDIA H200", later_s: float = 0.0
) -> Path:
    """The quick probe as made on ``board_uuid``, its rate x scale (J/TFLOP / scale).

    ``later_s`` moves the product job on the board's clock: another reading, not a copy of one.
    """
    trial = report.probes["reference"].trials["constant"]
    run = dataclasses.replace(
        trial.run, flops=trial.run.flops * scale, t0_s=trial.run.t0_s + later_s, t1_s=trial.run.t1_s + later_s
    )
    made = dataclasses.replace(
        report,
        board=dataclasses.replace(report.board, uuid=board_uuid, name=name),
        probes={**report.probes, "reference": Reference({"constant": dataclasses.replace(trial, run=run)})},
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    records.write_json(path, made.to_dict())
    return path


def write_score_run(path: Path, board_uuid: str) -> Path:
    data = json.loads(SCORE_RUN.read_text())
    data["board"]["uuid"] = board_uuid
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def derive(results: Path, out: Path, capsys) -> tuple[int, dict | None, str]:
    md = out.with_suffix(".md")
    code = band.main(["derive", "--results", str(results), "--out", str(out), "--md", str(md)])
    err = capsys.readouterr().err
    return code, json.loads(out.read_text()) if out.exists() else None, err


@pytest.fixture
def five_boards(tmp_path, quick):
    """Four probe boards at rates x0.9, x1.0, x1.05, x1.1 (one read twice), one score-run board."""
    results = tmp_path / "results"
    write_probe(quick, results / "a" / "probe.json", uuid(1), 0.9, later_s=1.0)
    write_probe(quick, results / "b" / "probe.json", uuid(2), 1.0, later_s=2.0)
    write_probe(quick, results / "c" / "probe.json", uuid(3), 1.05, later_s=3.0)
    write_probe(quick, results / "d" / "probe.json", uuid(4), 1.1, later_s=4.0)
    # board 4 read again, later: with x1.1 its median rate is x1.2
    write_probe(quick, results / "d" / "probe-again.json", uuid(4), 1.3, later_s=1000.0)
    write_score_run(results / "score" / "m" / "run-001.json", uuid(5))
    return results


def test_derive_applies_the_rule_to_each_boards_median(five_boards, tmp_path, capsys):
    (tmp_path / "h200-band").mkdir()
    code, record, err = derive(five_boards, tmp_path / "h200-band" / "derivation.json", capsys)
    assert code == 0, err
    assert record["kind"] == "h200-band" and record["schema_version"] == 1
    assert record["uuids"] == [uuid(i) for i in range(1, 6)]
    assert len(record["readings"]) == 6
    medians = {b["uuid"]: (b["j_per_tflop"], b["tflops"]) for b in record["boards"]}
    # board 4: the median of x1.1 and x1.3 is x1.2 in rate, (1/1.1 + 1/1.3) / 2 in J/TFLOP
    assert medians[uuid(4)][1] == pytest.approx(51.1314 * 1.2, rel=1e-5)
    assert medians[uuid(4)][0] == pytest.approx(5.78071 * (1 / 1.1 + 1 / 1.3) / 2, rel=1e-5)
    # lowest J/TFLOP 4.851 (board 4) x 0.83 = 4.026 -> 4.0; highest 6.423 (x0.9) x 1.2 = 7.708 -> 7.8
    # lowest rate 46.018 (x0.9) x 0.83 = 38.19 -> 38; highest 61.358 (board 4) x 1.2 = 73.63 -> 74
    # (the high edges rounded up, not to the nearest)
    assert record["band"]["j_per_tflop"] == [4.0, 7.8]
    assert record["band"]["tflops"] == [38.0, 74.0]
    assert record["spread"]["tflops"]["relative_range"] == pytest.approx(1.2 / 0.9 - 1, rel=1e-5)
    assert "0.83" in record["rule"] and "1.2" in record["rule"] and "5 distinct boards" in record["rule"]
    page = (tmp_path / "h200-band" / "derivation.md").read_text()
    assert "Band: 4-7.8 J/TFLOP, 38-74 TFLOP/s" in page and uuid(5) in page


def test_derive_leaves_out_other_families_copies_and_other_kinds(five_boards, tmp_path, quick, capsys):
    write_probe(
        quick, five_boards / "x" / "a100.json", uuid(6), 0.4, later_s=6.0, name="NVIDIA A100-SXM4-80GB"
    )
    write_probe(quick, five_boards / "x" / "gh200.json", uuid(7), 0.4, later_s=7.0, name="NVIDIA GH200 480GB")
    (five_boards / "x" / "copy.json").write_text((five_boards / "b" / "probe.json").read_text())
    records.write_json(five_boards / "x" / "other.json", {**records.header("job"), "x": 1})
    code, record, err = derive(five_boards, tmp_path / "derivation.json", capsys)
    assert code == 0, err
    assert record["uuids"] == [uuid(i) for i in range(1, 6)]  # the band is the same as without them
    assert record["band"]["j_per_tflop"] == [4.0, 7.8]
    why = {Path(x["file"]).name: x["why"] for x in record["left_out"]}
    assert why["a100.json"].startswith("not an H200") and why["gh200.json"].startswith("not an H200")
    assert why["copy.json"].startswith("the same measurement as")
    assert "other.json" not in why


def test_derive_with_four_boards_gives_no_band_and_says_so_in_one_line(five_boards, tmp_path, capsys):
    for f in (five_boards / "score").rglob("*.json"):
        f.unlink()
    code, record, err = derive(five_boards, tmp_path / "derivation.json", capsys)
    assert code == 1
    assert err.strip().splitlines() == [
        f"h200_band: 4 distinct H200 board(s) with a usable reference under {five_boards}, the rule needs 5: "
        f"no band (readings written to {tmp_path / 'derivation.json'})"
    ]
    assert record["band"] is None and record["enough_boards"] is False and len(record["boards"]) == 4
    assert "No band:" in (tmp_path / "derivation.md").read_text()


def test_derive_refuses_a_damaged_record(five_boards, tmp_path, capsys):
    data = json.loads((five_boards / "a" / "probe.json").read_text())
    data["probes"]["reference"]["derived"]["constant"]["j_per_tflop"] = 1.0
    (five_boards / "a" / "probe.json").write_text(json.dumps(data))
    code, _, err = derive(five_boards, tmp_path / "derivation.json", capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "j_per_tflop" in err


@pytest.fixture
def derived(five_boards, tmp_path, capsys):
    out = tmp_path / "derivation.json"
    assert derive(five_boards, out, capsys)[0] == 0
    return out


def check(files, derivation, capsys, out=None):
    argv = ["check", *map(str, files), "--derivation", str(derivation)]
    code = band.main([*argv, "--out", str(out)] if out else argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_check_refuses_a_board_the_derivation_used(derived, five_boards, capsys):
    code, _, err = check([five_boards / "b" / "probe.json"], derived, capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        f"h200_band: no independent board: {uuid(2)} was used for the derivation ({derived})"
    ]


def test_check_passes_an_independent_board_inside_and_reports_a_used_one_unjudged(
    derived, five_boards, tmp_path, quick, capsys
):
    new = write_probe(quick, tmp_path / "new" / "probe.json", uuid(8), 1.0, later_s=8.0)
    out = tmp_path / "check-new.json"
    code, text, err = check([new, five_boards / "b" / "probe.json"], derived, capsys, out)
    assert code == 0, err
    assert text.splitlines()[0].startswith(f"INSIDE: {uuid(8)} 5.78 J/TFLOP at 51.1 TFLOP/s")
    assert f"NOT INDEPENDENT: {uuid(2)}" in text
    record = json.loads(out.read_text())
    assert record["kind"] == "h200-band-check" and record["all_inside"] is True
    assert [b["uuid"] for b in record["boards"]] == [uuid(8)]
    assert [b["uuid"] for b in record["not_independent"]] == [uuid(2)]


def test_check_fails_an_independent_board_outside(derived, tmp_path, quick, capsys):
    # x0.7: 8.26 J/TFLOP (above 7.8) at 35.8 TFLOP/s (below 38)
    slow = write_probe(quick, tmp_path / "slow" / "probe.json", uuid(9), 0.7, later_s=9.0)
    code, text, _ = check([slow], derived, capsys)
    assert code == 1
    assert text.startswith(f"OUTSIDE: {uuid(9)}")


def test_check_on_bad_input_is_one_line_and_exit_2_without_a_traceback(five_boards, tmp_path, capsys):
    # a derivation without a band cannot judge anything
    for f in (five_boards / "score").rglob("*.json"):
        f.unlink()
    out = tmp_path / "derivation.json"
    assert derive(five_boards, out, capsys)[0] == 1
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "h200_band.py"),
            "check",
            str(five_boards / "b" / "probe.json"),
            "--derivation",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    expected = f"h200_band: {out} holds no band (4 board(s), the rule needs 5)"
    assert proc.stderr.strip().splitlines() == [expected]


def test_the_committed_derivation_and_the_h200_band_agree():
    record = records.read_json(DERIVATION, "h200-band")
    h200 = BANDS["H200"]
    if record["band"] is None:  # too few boards: the band stays provisional on what it rests on
        assert h200.provisional
        assert len(record["uuids"]) < band.MIN_BOARDS
        return
    assert not h200.provisional
    assert list(h200.j_per_tflop) == record["band"]["j_per_tflop"]
    assert list(h200.tflops) == record["band"]["tflops"]
    assert list(h200.uuids) == record["uuids"]
    assert "results/h200-band/derivation.json" in h200.source


def test_a_simulated_board_and_a_renamed_copy_never_count(five_boards, tmp_path, quick, capsys):
    # a fifth board that is only the simulator, and a copy of board 2 under a new UUID: four boards
    (five_boards / "score" / "m" / "run-001.json").unlink()
    sim = json.loads(write_probe(quick, tmp_path / "s.json", uuid(6), 1.0, later_s=6.0).read_text())
    sim["board"]["simulated"] = True
    (five_boards / "sim.json").write_text(json.dumps(sim))
    write_probe(quick, five_boards / "copy.json", uuid(7), 1.0, later_s=2.0)  # board 2's job, renamed
    code, record, err = derive(five_boards, tmp_path / "derivation.json", capsys)
    assert code == 1 and record["band"] is None and "4 distinct H200 board(s)" in err
    why = {Path(x["file"]).name: x["why"] for x in record["left_out"]}
    assert "simulated" in why["sim.json"] and why["copy.json"].startswith("the same measurement as")


@pytest.mark.parametrize(
    "tamper, says",
    [
        (lambda d: d["band"].update(j_per_tflop=[0.1, 100.0]), "its band disagrees"),
        (lambda d: d.update(uuids=[]), "its uuids disagrees"),
        (lambda d: d["readings"][0].update(j_per_tflop=5.0), "is not that file's"),
        (lambda d: d.pop("band"), "not a whole derivation record"),
        (lambda d: d.update(uuids=None), "its uuids disagrees"),
    ],
)
def test_check_refuses_an_altered_derivation(derived, tmp_path, quick, capsys, tamper, says):
    record = json.loads(Path(derived).read_text())
    tamper(record)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(record))
    new = write_probe(quick, tmp_path / "new" / "probe.json", uuid(8), 1.0, later_s=8.0)
    code, text, err = check([new], bad, capsys)
    assert code == 2 and text == "" and err.count("\n") == 1 and says in err


@pytest.mark.parametrize(
    ("j_per_tflop", "tflops", "words"),
    [
        (5.997, 20.0, ["5.997 J/TFLOP is below it"]),
        (7.0, float("nan"), ["nan TFLOP/s is not a number"]),
        (12.0, 10.0, ["12 J/TFLOP is above it", "10 TFLOP/s is below it"]),
        (6.0, 15.0, []),
    ],
)
def test_a_band_says_which_figure_lies_outside_it_and_on_which_side(j_per_tflop, tflops, words):
    """A new user's FAIL named the band, not the figure; a review: 5.997 printed as '6.00 ... below'."""
    a100 = BANDS["A100"]
    assert a100.outside(j_per_tflop, tflops) == words
    assert a100.contains(j_per_tflop, tflops) is (not words)
