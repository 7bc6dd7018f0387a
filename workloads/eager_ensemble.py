"""Method 5: the eager ensemble of 16 MLPs (difficulty 2).

Recipe (docs/task.md): 16 nets of 60-1024-1024-10, 400 steps, EMA 0.99, the
16 nets batched through ``baddbmm`` and stepped eagerly (no graph), TF32 matmuls, fused
AdamW lr 4e-3 (the other eager recipes' rate), softmax summed over the nets.
A100: 927.3 ms a call, 96.78% on MNIST.
"""

from __future__ import annotations

import torch

from nvmeter.workloads.training import Recipe, train_and_predict

DIFFICULTY = 2
RECIPE = Recipe(nets=16, width=1024, steps=400, lr=4e-3, ema=0.99)


def method(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor) -> torch.Tensor:
    """Train on (n, 60) float32 / (n,) int64 and return (m,) int64 labels for test_x."""
    return train_and_predict(RECIPE, False, train_x, train_y, test_x)
