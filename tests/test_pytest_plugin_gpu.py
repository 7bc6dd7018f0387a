"""The pytest plugin on a real GPU (the H200): budgets held and broken by torch matmuls."""

import json

import pytest

pytestmark = pytest.mark.gpu
pytest_plugins = ["pytester"]

# 4096² FP32 products of random operands: ~1.5 J each on our H200 (the probe's random
# reference: 10.83 J/TFLOP, 0.137 TFLOP a product; results/probe-h200.json).
INNER = """
import pytest
import torch

N = 4096
CALLS = 400


@pytest.fixture(scope="module")
def operands():
    a = torch.randn(N, N, device="cuda")
    b = torch.randn(N, N, device="cuda")
    for _ in range(100):  # warm: the clocks ramp for ~0.3 s after idle
        torch.mm(a, b)
    torch.cuda.synchronize()
    return a, b


@pytest.mark.energy(max_mj_per_call=1e6)
def test_fixture_within_budget(energy, operands):
    a, b = operands
    with energy(device=0) as w:
        for _ in range(CALLS):
            torch.mm(a, b)
            w.call()
    assert w.result.reliable, w.result.reason


@pytest.mark.energy(max_mj_per_call=10.0)
def test_fixture_over_budget(energy, operands):
    a, b = operands
    with energy(device=0, calls=CALLS):
        for _ in range(CALLS):
            torch.mm(a, b)


@pytest.mark.energy(max_mj_per_call=1e6, calls=CALLS)
def test_marker_meters_the_call(operands):
    a, b = operands
    for _ in range(CALLS):
        torch.mm(a, b)
    torch.cuda.synchronize()
"""


def test_budgets_on_the_gpu(pytester, tmp_path):
    pytester.makepyfile(INNER)
    out = tmp_path / "energy.json"
    # a subprocess keeps the CUDA context out of this test process
    result = pytester.runpytest_subprocess("-rsw", f"--energy-json={out}", timeout=300)
    print(result.stdout.str()[-6000:])
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*nvmeter energy*"])
    result.stdout.fnmatch_lines(["*test_fixture_over_budget*exceeds the budget of 10.0 mJ/call*"])
    entries = {e["nodeid"].split("::")[-1]: e for e in json.loads(out.read_text())["entries"]}
    assert [entries[k]["outcome"] for k in sorted(entries)] == ["fail", "pass", "pass"]
    for entry in entries.values():
        derived = entry["window"]["derived"]
        assert derived["reliable"], derived["reason"]
        # a 4096² FP32 product costs about a joule on an H200: a loose sanity range, mJ
        assert 100 < derived["per_call_mj"] < 20_000, derived
