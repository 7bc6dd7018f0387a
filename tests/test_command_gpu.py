"""``nvmeter run`` on a real GPU (the H200): a whole process against a reference around it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]


def test_run_matches_a_reference_around_the_whole_process(tmp_path):
    """bench/run_reference.py, one trial: ``nvmeter run -- python bench/matmul_loop.py`` (~5 s)."""
    out = tmp_path / "reference.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run_reference.py"), "--trials", "1", "--seconds", "5",
         "--out", str(out), "--keep", str(tmp_path)],
        capture_output=True, text=True, timeout=240, cwd=ROOT,
    )  # fmt: skip
    print(result.stdout[-6000:], result.stderr[-3000:])
    trial = json.loads(out.read_text())["trials"][0]
    assert trial["nvmeter_exit"] == 0, trial
    n, ref = trial["nvmeter"], trial["reference"]
    assert n["reliable"] and ref["aligned"]
    # the loop ran: ~5 s of products inside a window that holds the process's whole life
    assert trial["loop"]["seconds"] >= 5.0
    assert n["window_s"] > trial["loop"]["seconds"]
    assert abs(trial["diff_j"]) <= n["err_j"] + ref["err_j"], trial["diff_j"]
    assert result.returncode == 0


def test_run_passes_a_failing_command_through_on_the_gpu(tmp_path):
    out = tmp_path / "run.json"
    code = "import torch, sys; torch.ones(1, device='cuda'); sys.exit(5)"
    result = subprocess.run(
        [sys.executable, "-m", "nvmeter", "run", "--json", str(out), "--", sys.executable, "-c", code],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    print(result.stderr)
    assert result.returncode == 5
    data = json.loads(out.read_text())
    board = data["derived"]["boards"][0]
    # a CUDA context and its start-up cost energy above the no-context idle
    assert board["reliable"] and board["above_idle_j"] > board["err_j"]
