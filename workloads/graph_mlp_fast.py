"""nvmeter's own recipe beside method 3: the CUDA-graph MLP with all 200 steps in one graph.

The same net, data, schedule and optimiser as :mod:`nvmeter.workloads.graph_mlp` (60-256-256-10,
200 steps of 512 random rows, AdamW lr 1e-2 after a 10% warm-up then cosine, EMA 0.98); only the
capture differs: the 200 steps are one CUDA graph replayed once a call, not one step replayed 200
times, which saves a graph launch and its queueing between steps (issue 16: the seed's row is
31.5 ms a call on the H200, results/score-h200/graph_mlp). The random draws differ from the seed
row's (each step of the graph has its own Philox offset), so accuracy is judged anew.
"""

from __future__ import annotations

import torch

from nvmeter.workloads.training import Recipe, train_and_predict

DIFFICULTY = 1
RECIPE = Recipe(nets=1, width=256, steps=200, lr=1e-2, ema=0.98, steps_per_graph=200)


def method(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor) -> torch.Tensor:
    """Train on (n, 60) float32 / (n,) int64 and return (m,) int64 labels for test_x."""
    return train_and_predict(RECIPE, True, train_x, train_y, test_x)
