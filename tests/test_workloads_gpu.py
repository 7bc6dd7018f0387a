"""The methods on the GPU (run on the H200: ``pytest -m gpu tests/test_workloads_gpu.py``).

Offline: set NVMETER_DATA_DIR to the carried cache. Each CUDA method must reach its
difficulty's per-draw floor on real MNIST draws, through the harness; the graph methods
must reset between calls.
The full judged run (11 + 4 draws, timing) is ``python -m nvmeter.workloads.evaluate``.
"""

import time

import pytest
import torch

from nvmeter import errors
from nvmeter.workloads import cache, data, harness, judge, methods, task

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def mnist_root():
    """The GPU machine is offline: use the carried cache ($NVMETER_DATA_DIR), verified on load."""
    data.load("mnist")
    return cache.root_dir()


@pytest.fixture(scope="module")
def cuda():
    if not torch.cuda.is_available():
        pytest.fail("no CUDA device: the gpu tests run on the H200")
    return torch.device("cuda", 0)


def on(device, draw):
    return (
        torch.from_numpy(draw.train_x).to(device),
        torch.from_numpy(draw.train_y).to(device),
        torch.from_numpy(draw.test_x).to(device),
    )


@pytest.mark.parametrize("name", list(methods.METHODS))
def test_method_reaches_its_floor_on_two_mnist_draws(name, cuda, mnist_root):
    spec = methods.spec(name)
    method = spec.load()
    scores = []
    for seed in (501, 502):
        draw = task.draw("mnist", seed, root=mnist_root)
        labels = harness.call(method, *on(cuda, draw), name=name)
        assert labels.device == cuda
        scores.append(judge.score(draw, labels))
    floor = judge.floor(10_000, spec.difficulty)
    print(name, [s.accuracy for s in scores])
    assert all(s.correct >= floor for s in scores), (name, [s.correct for s in scores], floor)


@pytest.mark.parametrize("name", ["graph_mlp", "graph_ensemble", "graph_mlp_flat"])
def test_graph_method_resets_between_calls(name, cuda, mnist_root):
    """A call on draw B after draws A gives what a call on B gives first: weights and state reset."""
    method = methods.spec(name).load()
    a = task.draw("mnist", 601, root=mnist_root)
    b = task.draw("mnist", 602, root=mnist_root)
    harness.call(method, *on(cuda, a), name=name)
    first = judge.score(b, harness.call(method, *on(cuda, b), name=name))
    for _ in range(3):
        harness.call(method, *on(cuda, a), name=name)
    again = judge.score(b, harness.call(method, *on(cuda, b), name=name))
    # the graph's RNG moves on, so labels differ a little; a missed reset shows as drift or collapse
    assert abs(first.correct - again.correct) < 60, (first.correct, again.correct)


def test_graph_mlp_speed(cuda, mnist_root):
    """Not a timed gate (issue 4 aims at <= 30 ms on the H200); prints what it reaches."""
    method = methods.spec("graph_mlp").load()
    draw = task.draw("mnist", 701, root=mnist_root)
    args = on(cuda, draw)
    method(*args)
    torch.cuda.synchronize()
    times_ms = []
    for _ in range(5):
        t0 = time.perf_counter()
        method(*args)
        torch.cuda.synchronize()
        times_ms.append((time.perf_counter() - t0) * 1e3)
    print(f"graph_mlp: {sorted(times_ms)[2]:.1f} ms a call (median of 5, host clock)")
    assert sorted(times_ms)[2] < 1_000


def test_harness_rejects_mixed_devices(cuda):
    x = torch.zeros(10, 60, device=cuda)
    y = torch.zeros(10, dtype=torch.int64, device=cuda)
    with pytest.raises(errors.UsageError, match="test_x is on cpu, expected cuda"):
        harness.call(methods.spec("graph_mlp").load(), x, y, torch.zeros(10, 60))
    with pytest.raises(errors.UsageError, match="returned labels on cpu"):
        harness.call(lambda a, b, c: torch.zeros(10, dtype=torch.int64), x, y, x)
