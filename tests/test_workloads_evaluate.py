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

    def sources(self, scheme=2):
        return {f"stand-in.{self.name}": str(scheme) * 64}


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


def test_resume_keeps_finished_methods_and_merges_without_a_gpu(
    tmp_path, mnist_root, fashion_root, fake_methods, capsys
):
    base = ["--device", "cpu", "--data", str(mnist_root), "--mnist-draws", "2", "--holdout-draws", "1"]
    first = tmp_path / "first"
    assert evaluate.main(["--out", str(first), *base, "--methods", "nn", "broken"]) == 1
    done = json.loads((first / "workloads-cpu.json").read_text())
    # a second run resumes: the finished method is kept verbatim, the failed one runs again
    second = tmp_path / "second"
    argv = ["--out", str(second), *base, "--methods", "broken", "nn"]
    argv += ["--resume", str(first / "workloads-cpu.json")]
    assert evaluate.main(argv) == 1
    again = json.loads((second / "workloads-cpu.json").read_text())
    assert list(again["methods"]) == ["broken", "nn"]
    assert again["methods"]["nn"] == done["methods"]["nn"]
    assert again["methods"]["broken"]["warmup_ms"] == []  # ran again (and failed again)
    assert again["resumed_from"] == [
        {
            "file": "workloads-cpu.json",
            "created_utc": done["created_utc"],
            "board_uuid": None,
            "nvmeter_commit": done["provenance"]["nvmeter_commit"],
            "methods": ["nn"],
            "unversioned": [],
        }
    ]
    assert "== nn: kept" in (second / "workloads.log").read_text()
    # another version of a method's code runs again; a row from before versions were kept is kept
    other = tmp_path / "other.json"
    changed = {**done, "methods": {**done["methods"], "nn": {**done["methods"]["nn"], "sources": {"x": "1"}}}}
    other.write_text(json.dumps(changed))
    evaluate.main(["--out", str(tmp_path / "third"), *base, "--methods", "nn", "--resume", str(other)])
    third = json.loads((tmp_path / "third" / "workloads-cpu.json").read_text())
    assert (
        "== nn: kept" not in (tmp_path / "third" / "workloads.log").read_text()
        and not third["resumed_from"][0]["methods"]
    )
    legacy = {**done, "methods": {**done["methods"], "nn": {**done["methods"]["nn"], "sources": None}}}
    other.write_text(json.dumps(legacy))
    evaluate.main(["--out", str(tmp_path / "fourth"), *base, "--methods", "nn", "--resume", str(other)])
    fourth = json.loads((tmp_path / "fourth" / "workloads-cpu.json").read_text())
    assert fourth["resumed_from"][0]["unversioned"] == ["nn"]
    # a v4 record hashed its sources with scheme 1: compared so, the same code is kept
    row = {k: v for k, v in done["methods"]["nn"].items() if k != "sources_scheme"}
    for sources, kept in ((fake_methods["nn"].sources(1), True), (fake_methods["nn"].sources(2), False)):
        other.write_text(
            json.dumps(
                {
                    **done,
                    "schema_version": 4,
                    "methods": {**done["methods"], "nn": {**row, "sources": sources}},
                }
            )
        )
        out = tmp_path / f"v4-{kept}"
        evaluate.main(["--out", str(out), *base, "--methods", "nn", "--resume", str(other)])
        record = json.loads((out / "workloads-cpu.json").read_text())
        assert (record["resumed_from"][0]["methods"] == ["nn"]) is kept
    # nothing left to run: a merge, which needs neither data nor a device
    merged = tmp_path / "merged"
    capsys.readouterr()
    argv = [
        "--out",
        str(merged),
        "--device",
        "7",
        "--methods",
        "nn",
        "--mnist-draws",
        "2",
        "--holdout-draws",
        "1",
    ]
    argv += ["--resume", str(second / "workloads-cpu.json")]
    assert evaluate.main(argv) == 1  # nn finished but did not pass its difficulty
    assert "merged 1 finished method(s) from 1 record(s)" in capsys.readouterr().out
    record = json.loads((merged / "workloads-cpu.json").read_text())
    assert list(record["methods"]) == ["nn"] and record["run"] == done["run"]


def test_resume_refuses_a_record_of_another_plan(tmp_path, mnist_root, fashion_root, fake_methods, capsys):
    base = ["--device", "cpu", "--data", str(mnist_root), "--holdout-draws", "1", "--methods", "nn"]
    assert evaluate.main(["--out", str(tmp_path / "a"), *base, "--mnist-draws", "2"]) == 1
    capsys.readouterr()
    argv = ["--out", str(tmp_path / "b"), *base, "--mnist-draws", "3", "--methods", "nn", "broken"]
    argv += ["--resume", str(tmp_path / "a" / "workloads-cpu.json")]
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "made with another plan" in err
    assert not (tmp_path / "b" / "workloads-cpu.json").exists()


def interrupt(train_x, train_y, test_x):
    raise KeyboardInterrupt


def _first_record(tmp_path, mnist_root, base):
    assert evaluate.main(["--out", str(tmp_path / "first"), *base, "--methods", "nn"]) == 1
    return tmp_path / "first" / "workloads-cpu.json"


@pytest.mark.parametrize(
    "tamper, says",
    [
        (lambda nn: nn.update(passed=True), "its passed disagrees with its calls"),
        (lambda nn: nn["calls"][0].update(correct=0), "its verdict disagrees with its calls"),
        (lambda nn: nn["calls"].reverse(), "not the plan's draws in the plan's order"),
        (lambda nn: nn["calls"][1].update(ms=-1.0), "not a positive time"),
        (lambda nn: nn.update(difficulty=3), "difficulty 3 is not the method's"),
        (lambda nn: nn.pop("calls"), "KeyError"),
    ],
)
def test_resume_refuses_an_altered_or_damaged_method(tmp_path, mnist_root, fashion_root, fake_methods, capsys,
                                                     tamper, says):  # fmt: skip
    base = ["--device", "cpu", "--data", str(mnist_root), "--mnist-draws", "2", "--holdout-draws", "1"]
    path = _first_record(tmp_path, mnist_root, base)
    record = json.loads(path.read_text())
    tamper(record["methods"]["nn"])
    path.write_text(json.dumps(record))
    capsys.readouterr()
    argv = ["--out", str(tmp_path / "second"), *base, "--methods", "nn", "--resume", str(path)]
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a whole workloads record" in err and says in err
    assert not (tmp_path / "second").exists()


def test_resume_refuses_another_device_kind_and_a_merge_asked_for_another_plan(
    tmp_path, mnist_root, fashion_root, fake_methods, capsys
):
    base = ["--device", "cpu", "--data", str(mnist_root), "--mnist-draws", "2", "--holdout-draws", "1"]
    path = _first_record(tmp_path, mnist_root, base)
    gpu = json.loads(path.read_text())
    gpu["device"].update(type="cuda", name="NVIDIA H200")
    (tmp_path / "gpu.json").write_text(json.dumps(gpu))
    capsys.readouterr()
    argv = ["--out", str(tmp_path / "m"), "--methods", "nn", "--mnist-draws", "2", "--holdout-draws", "1"]
    assert evaluate.main([*argv, "--resume", str(tmp_path / "gpu.json"), str(path)]) == 2
    assert "one kind of device" in capsys.readouterr().err
    assert evaluate.main([*argv, "--seed", "2", "--resume", str(path)]) == 2
    assert "asked for seed 2, 2 and 1" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_kept_methods_are_saved_before_the_run_reaches_them(tmp_path, mnist_root, fashion_root, fake_methods):
    fake_methods["stop"] = FakeSpec("stop", interrupt)
    base = ["--device", "cpu", "--data", str(mnist_root), "--mnist-draws", "2", "--holdout-draws", "1"]
    path = _first_record(tmp_path, mnist_root, base)
    # resumed into its own folder, and cut (Ctrl-C) in the first method: the kept one is still there
    argv = ["--out", str(path.parent), *base, "--methods", "stop", "nn", "--resume", str(path)]
    assert evaluate.main(argv) == 130
    record = json.loads(path.read_text())
    assert list(record["methods"]) == ["nn"] and record["resumed_from"][0]["methods"] == ["nn"]
    log = (path.parent / "workloads.log").read_text()
    assert log.count("== nn:") == 1 and log.count("== stop:") == 1 and "# ---" in log  # appended
