"""Methods and their harness on CPU; the CUDA paths are in test_workloads_gpu.py."""

import dataclasses
import itertools

import pytest
import torch

from nvmeter import errors
from nvmeter.workloads import (
    eager_ensemble,
    graph_mlp,
    harness,
    judge,
    mlp_fp32,
    mlp_tf32,
    task,
    training,
)


@pytest.fixture(scope="module")
def draw(mnist_root):
    return task.draw("mnist", 11, root=mnist_root)


def tensors(draw):
    return torch.from_numpy(draw.train_x), torch.from_numpy(draw.train_y), torch.from_numpy(draw.test_x)


def test_graph_mlp_recipe_passes_difficulty_1_on_a_real_draw(draw):
    """The CUDA-graph MLP's step, run eagerly on CPU, from data to judged labels (~15 s on 2 cores)."""
    torch.manual_seed(0)
    labels = harness.call(graph_mlp.method, *tensors(draw), name="graph_mlp")
    verdict = judge.judge([judge.score(draw, labels)], [], graph_mlp.DIFFICULTY)
    assert verdict.passed, verdict.reasons


@pytest.mark.parametrize("steps_per_graph", [3, 201])
def test_recipe_refuses_steps_per_graph_that_do_not_divide_the_steps(steps_per_graph):
    with pytest.raises(ValueError, match="must divide steps=200"):
        dataclasses.replace(graph_mlp.RECIPE, steps_per_graph=steps_per_graph)


@pytest.mark.parametrize(
    ("field", "value"),
    [("steps_per_graph", 0), ("steps_per_graph", 2.0), ("steps_per_graph", True), ("steps_per_graph", "2"),
     ("steps_per_graph", None), ("steps", 0), ("steps", -200)],
)  # fmt: skip
def test_recipe_refuses_step_counts_that_are_not_whole_numbers_above_zero(field, value):
    with pytest.raises(ValueError, match=f"{field} must be a whole number >= 1"):
        dataclasses.replace(graph_mlp.RECIPE, **{field: value})


def test_random_classifier_fails_through_the_harness(draw):
    def random_method(train_x, train_y, test_x):
        return torch.randint(0, 10, (test_x.shape[0],))

    labels = harness.call(random_method, *tensors(draw), name="random")
    assert not judge.judge([judge.score(draw, labels)], [], 1).passed


def test_trainer_resets_between_calls(draw):
    """Two calls on the same draw from the same RNG state give the same labels: nothing carries over."""
    recipe = training.Recipe(nets=2, width=32, steps=20, lr=1e-2, ema=0.9)
    x, y, t = tensors(draw)
    torch.manual_seed(1)
    first = training.train_and_predict(recipe, True, x, y, t)
    torch.manual_seed(1)
    second = training.train_and_predict(recipe, True, x, y, t)
    assert torch.equal(first, second)
    assert len(training._TRAINERS) >= 1


@pytest.mark.parametrize("module", [mlp_fp32, mlp_tf32])
def test_eager_mlps_run_on_cpu(module, draw, monkeypatch):
    """The full-size eager recipes run on CPU (few steps here; their accuracy is judged on the GPU)."""
    monkeypatch.setattr(module, "STEPS", 8)
    labels = harness.call(module.method, *tensors(draw), name=module.__name__)
    assert labels.shape == (10_000,) and labels.dtype == torch.int64
    assert len(labels.unique()) > 1


def test_eager_ensemble_runs_on_cpu(draw, monkeypatch):
    small = dataclasses.replace(eager_ensemble.RECIPE, nets=3, width=64, steps=10)
    monkeypatch.setattr(eager_ensemble, "RECIPE", small)
    labels = harness.call(eager_ensemble.method, *tensors(draw), name="eager_ensemble")
    assert labels.shape == (10_000,)


def test_schedule():
    f = training.warmup_cosine(100, 0.1)
    assert f[0] == pytest.approx(0.1) and f[9] == 1.0
    assert f[10] == 1.0 and f[-1] < 0.01
    assert all(a >= b for a, b in itertools.pairwise(f[10:]))


def test_precision_is_restored():
    before = torch.get_float32_matmul_precision()
    with training.matmul_precision(tf32=True):
        assert torch.get_float32_matmul_precision() == "high"
    assert torch.get_float32_matmul_precision() == before


# --- the harness rejects bad input and bad output in one line ---

GOOD = (torch.zeros(20, 60), torch.zeros(20, dtype=torch.int64), torch.zeros(30, 60))


def ok_method(train_x, train_y, test_x):
    return torch.zeros(test_x.shape[0], dtype=torch.int64)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((GOOD[0].numpy(), GOOD[1], GOOD[2]), "train_x must be a torch.Tensor, not ndarray"),
        ((GOOD[0].double(), GOOD[1], GOOD[2]), "train_x must be float32"),
        ((torch.zeros(20, 59), GOOD[1], GOOD[2]), r"train_x must be float32 \(rows, 60\)"),
        ((GOOD[0], GOOD[1], torch.zeros(30, 60, 1)), "test_x must be float32"),
        ((GOOD[0], GOOD[1].int(), GOOD[2]), "train_y must be int64"),
        ((GOOD[0], torch.zeros(19, dtype=torch.int64), GOOD[2]), r"train_y must be int64 \(20,\)"),
        ((GOOD[0], torch.full((20,), 10), GOOD[2]), r"labels 10\.\.10, outside 0\.\.9"),
        ((GOOD[0], torch.full((20,), -1), GOOD[2]), "outside 0..9"),
        ((GOOD[0], GOOD[1], torch.zeros(30, 60, device="meta")), "test_x is on meta"),
    ],
    ids=[
        "numpy",
        "float64",
        "59-cols",
        "3-d",
        "int32-labels",
        "short-labels",
        "label-10",
        "label-neg",
        "device",
    ],
)
def test_bad_inputs(args, message):
    with pytest.raises(errors.UsageError, match=message) as info:
        harness.call(ok_method, *args)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        (lambda m: [0] * m, "returned list"),
        (lambda m: torch.zeros(m), "returned torch.float32 labels"),
        (lambda m: torch.zeros(m - 1, dtype=torch.int64), r"returned shape \(29,\), expected \(30,\)"),
        (lambda m: torch.zeros(m, 1, dtype=torch.int64), r"returned shape \(30, 1\)"),
        (lambda m: torch.full((m,), 12), r"returned labels 12\.\.12"),
        (lambda m: torch.zeros(m, dtype=torch.int64, device="meta"), "labels on meta"),
    ],
    ids=["list", "float", "short", "2-d", "range", "device"],
)
def test_bad_outputs(returned, message):
    with pytest.raises(errors.UsageError, match=message):
        harness.call(lambda a, b, c: returned(c.shape[0]), *GOOD, name="m")


def test_int32_output_is_accepted_as_int64():
    out = harness.call(lambda a, b, c: torch.zeros(c.shape[0], dtype=torch.int32), *GOOD)
    assert out.dtype == torch.int64


def test_a_method_that_raises_is_one_line():
    def broken(train_x, train_y, test_x):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore detail")

    with pytest.raises(harness.MethodFailed, match="broken raised RuntimeError: CUDA out of memory") as info:
        harness.call(broken, *GOOD, name="broken")
    assert "\n" not in str(info.value)
