"""The CUDA-graph MLP with AdamW and the EMA in one kernel (nvmeter's own recipe, difficulty 1).

The seed's recipe (:mod:`nvmeter.workloads.graph_mlp`: 60-256-256-10, 200 steps of 512
random rows, AdamW lr 1e-2, EMA 0.98), trained by :class:`flat_training.FlatTrainer`: the
same arithmetic, with the optimiser step in one Triton kernel over flat buffers instead of
PyTorch's multi-tensor kernels.
"""

from __future__ import annotations

import torch

from nvmeter.workloads import flat_training
from nvmeter.workloads.graph_mlp import DIFFICULTY, RECIPE

__all__ = ["DIFFICULTY", "RECIPE", "method"]


def method(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor) -> torch.Tensor:
    """Train on (n, 60) float32 / (n,) int64 and return (m,) int64 labels for test_x."""
    return flat_training.train_and_predict(RECIPE, train_x, train_y, test_x)
