"""The GPU evaluation's plumbing, dry-run on CPU with stand-in methods (the real run is on the H200)."""

import json
from dataclasses import dataclass

import pytest
import torch

from nvmeter.workloads import evaluate, methods, task


def nearest_neighbour(train_x, train_y, test_x):
    """1-NN on the released features: a real classifier, ~91% on MNIST draws (under difficulty 1)."""
    return train_y[torch.cdist(test_x, train_x).argmin(1)]


def broken(train_x, train_y, test_x):
    raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")


@dataclass(frozen=True)
class FakeSpec:
    name: str
    fn: object
    title: str = "stand-in"
    difficulty: int = 1
    a100_ms: float = 1.0
    a100_mnist: float = 0.97

    def load(self):
        return self.fn


@pytest.fixture
def fake_methods(monkeypatch):
    fakes = {"nn": FakeSpec("nn", nearest_neighbour), "broken": FakeSpec("broken", broken)}
    monkeypatch.setattr(methods, "METHODS", fakes)
    return fakes


def test_dry_run_writes_a_judged_record(tmp_path, mnist_root, fashion_root, fake_methods, capsys):
    argv = ["--out", str(tmp_path), "--device", "cpu", "--data", str(mnist_root), "--mnist-draws", "2"]
    argv += ["--holdout-draws", "1", "--methods", "nn", "broken"]
    code = evaluate.main(argv)
    assert code == 1  # one method failed
    record = json.loads((tmp_path / "workloads-cpu.json").read_text())
    assert record["kind"] == "workloads" and record["schema_version"] == evaluate.SCHEMA_VERSION
    run = record["run"]
    assert run["holdout"] == "fashion" and run["kmnist_available"] is False
    assert len(run["order"]) == 3 and len(run["mnist_seeds"]) == 2
    nn = record["methods"]["nn"]
    assert nn["error"] is None and nn["passed"] is False
    assert nn["verdict"]["reasons"][0].startswith("MNIST") and nn["verdict"]["mnist_required"] == 18_920
    assert [c["dataset"] for c in nn["calls"]].count("mnist") == 2
    assert all(c["ms"] > 0 and c["rows"] == 10_000 for c in nn["calls"])
    assert 0.85 < nn["mnist_accuracy"] < 0.946 and nn["holdout_accuracy"] > 0.5
    assert len(nn["warmup_ms"]) == 2
    bad = record["methods"]["broken"]
    assert bad["passed"] is False and "broken raised RuntimeError: CUDA error" in bad["error"]
    capsys.readouterr()
    assert evaluate.main(["--table", str(tmp_path / "workloads-cpu.json")]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[2].startswith("| nn | 1 |") and rows[2].endswith("| FAIL |")
    assert rows[3].endswith("| ERROR |")
    log = (tmp_path / "workloads.log").read_text()
    assert "broken: FAILED" in log and "nn              FAIL  d1" in log


def test_no_gpu_is_a_usage_error(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    assert evaluate.main(["--out", str(tmp_path)]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_plan_is_seeded_and_complete():
    a = task.Plan.make(3, False, 11, 4)
    assert a == task.Plan.make(3, False, 11, 4)
    assert len(a.order) == 15 and len(set(a.order)) == 15
    assert not set(a.warmup_seeds) & set(a.holdout_seeds)
    assert a.order != task.Plan.make(4, False, 11, 4).order
    assert task.Plan.make(3, True, 11, 4).holdout == "kmnist"


def test_steps_come_from_the_method_or_its_module():
    # the kernels-a-step figure divides by this; the Ladder methods used to read None (0.0 a step)
    for name, steps in (("ladder_d3_fused", 900), ("ladder_d4_plain", 1800), ("graph_mlp", 200)):
        assert evaluate._steps(methods.spec(name).load()) == steps
    assert evaluate._steps(nearest_neighbour) is None
