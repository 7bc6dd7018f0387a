"""bench/accuracy on a real GPU: the kinds of work and one short run (pytest -m gpu, on the H200).

The kinds: ~20 s; the short run: ~70 s. On the H200:
    python -m pytest -m gpu -o addopts="" -v -s tests/test_bench_accuracy_gpu.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from accuracy import kinds, runner  # noqa: E402

# The call each kind aims at, ms (bench/accuracy/kinds.py); duty adds 15 ms of host sleep.
TARGET_MS = {"fp32": 41.0, "bf16cap": 40.0, "copy": 20.0, "duty": 30.0, "launch": 20.0, "fp32big": 40.0}


@pytest.mark.parametrize("name", kinds.ALL_KINDS)
def test_each_kind_calls_about_as_long_as_it_aims(name):
    work = kinds.build(name)
    try:
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            work.call()
            times.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        work.single()
        single_ms = (time.perf_counter() - t0) * 1e3
        print(
            name,
            work.params["units"],
            work.params["single_units"],
            f"{statistics.median(times):.1f} ms",
            single_ms,
        )
        assert 0.5 * TARGET_MS[name] < statistics.median(times) < 2.0 * TARGET_MS[name]
        assert single_ms < 1.5 * statistics.median(times)
        assert 0.0 < work.single_share <= 1.0
    finally:
        work.close()


def test_a_short_run_records_references_and_trials(tmp_path):
    out = tmp_path / "acc.json"
    runner.run(out, runner.Config(kinds=("fp32",), budget_s=60.0))
    part = json.loads(out.read_text())["kinds"]["fp32"]
    assert part["done"] and not part["errors"], part["errors"]
    types = {u["type"] for u in part["units"]}
    assert {"ref", "warm"} <= types
    refs = [u for u in part["units"] if u["type"] == "ref"]
    assert all(u["reliable"] and 15e3 < u["per_call_mj"] < 30e3 for u in refs)  # ~21.7 J (runs 1 and 2)
    assert all(isinstance(u["state_before"].get("temperature_c"), (int, float)) for u in refs)
