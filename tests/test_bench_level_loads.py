"""bench/level_loads.py: the run-level probe's restarts at two loads, on the simulated board."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nvmeter.probes.runlevels import RunLevels

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "level_loads.py"


def test_two_sizes_alternate_and_each_keeps_a_run_level_record(tmp_path):
    out = tmp_path / "ll.json"
    cmd = [sys.executable, str(SCRIPT), "--simulate", "--starts", "2", "--sizes", "4096,1024"]
    done = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert (
        data["kind"] == "bench-level-loads" and data["schema_version"] == 2 and data["sizes"] == [4096, 1024]
    )
    for size in ("4096", "1024"):
        rec = RunLevels.from_dict(data["levels"][size])
        assert len(rec.runs) == 2 and {r.n for r in rec.runs} == {int(size)}
    # alternating: each 1024² run started after the 4096² run before it
    starts = [RunLevels.from_dict(data["levels"][s]).runs[k].t0_s for k in range(2) for s in ("4096", "1024")]
    assert starts == sorted(starts)
    assert "| 4096² |" in done.stdout and "| 1024² |" in done.stdout
    again = subprocess.run([*cmd[:2], "--table", str(out)], capture_output=True, text=True, timeout=60)
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert again.returncode == 0 and again.stdout.splitlines() == table  # the same table, read back


def test_a_committed_schema_1_record_prints_its_table_with_the_warming():
    """Call 86 on GPU-497e4db9: the runs rose with the board's temperature, 51 -> 58.7 °C at 4096²."""
    path = Path(__file__).resolve().parents[1] / "results/enclose/call86-e5f25b5-h100af-level-loads.json.gz"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--table", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if line.startswith("| 4096² |"))
    assert row.endswith("| +1.96 (+0.36%) |") and "51.0, 54.0" in row


def test_a_table_of_another_kind_of_record_is_one_line(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"kind": "probe"}')
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--table", str(other)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"level_loads: {other} is not a record of bench/level_loads.py"
    ]


def test_bad_sizes_are_one_line_and_no_file(tmp_path):
    out = tmp_path / "ll.json"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--simulate", "--sizes", "4096,x", "--out", str(out)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: d.__setitem__("levels", []), "damaged level-loads record"),
        (lambda d: d["levels"].__setitem__("-5", d["levels"].pop("4096")), "size -5 holds runs of"),
        (lambda d: d.__setitem__("schema_version", True), "schema True"),
        (lambda d: d.__setitem__("levels", {}), "no sizes"),
        (lambda d: d["levels"]["4096"].__setitem__("idle", None), "damaged level-loads record"),
    ],
)
def test_a_damaged_record_s_table_is_one_line(tmp_path, change, why):
    """A breaker: tracebacks, and a counter running backwards tabled as -1351 W."""
    out = tmp_path / "ll.json"
    made = subprocess.run(
        [sys.executable, str(SCRIPT), "--simulate", "--starts", "2", "--sizes", "4096", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    data = json.loads(out.read_text())
    change(data)
    out.write_text(json.dumps(data))
    done = subprocess.run([sys.executable, str(SCRIPT), "--table", str(out)], capture_output=True, text=True)
    assert done.returncode == 2 and why in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_counter_running_backwards_is_no_table(tmp_path):
    out = tmp_path / "ll.json"
    subprocess.run(
        [sys.executable, str(SCRIPT), "--simulate", "--starts", "2", "--sizes", "4096", "--out", str(out)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    data = json.loads(out.read_text())
    energy = data["levels"]["4096"]["counters"][0]["energy_mj"]
    energy[-1] = energy[0] - 5000
    out.write_text(json.dumps(data))
    done = subprocess.run([sys.executable, str(SCRIPT), "--table", str(out)], capture_output=True, text=True)
    assert done.returncode == 2 and "the energy counter goes backwards" in done.stderr
