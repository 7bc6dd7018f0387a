"""Method 1, the example: an eager MLP in full FP32 (difficulty 1).

Recipe (docs/task.md): 60-1024-1024-10, ReLU, dropout 0.1, AdamW lr 4e-3 weight
decay 0.01 under OneCycle (10% warm-up), 400 steps of 512 random rows, Gaussian input noise
0.3, label smoothing 0.1. TF32 is off. A100: 762.4 ms a call, 96.77% on MNIST.
"""

from __future__ import annotations

import torch
from torch import nn

from nvmeter.workloads.training import dropout_mlp, matmul_precision

DIFFICULTY = 1
STEPS = 400
BATCH = 512
LR = 4e-3
WIDTH = 1024


def method(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor) -> torch.Tensor:
    """Train the example MLP on (n, 60) float32 / (n,) int64 and return (m,) int64 labels for test_x."""
    device = train_x.device
    with matmul_precision(tf32=False):
        model = dropout_mlp(WIDTH, device)
        opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
        schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=LR, total_steps=STEPS, pct_start=0.1)
        loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
        for _ in range(STEPS):
            idx = torch.randint(0, train_x.shape[0], (BATCH,), device=device)
            xb = train_x[idx]
            loss = loss_fn(model(xb + 0.3 * torch.randn_like(xb)), train_y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            schedule.step()
        model.eval()
        with torch.no_grad():
            return model(test_x).argmax(1)
