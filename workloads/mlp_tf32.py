"""Method 2: an eager MLP with TF32 matmuls, 100 steps (difficulty 1).

Recipe (docs/task.md): 60-1024-1024-10, ReLU, dropout 0.1, 100 steps of 512 rows
shuffled per epoch, fused AdamW lr 0.004 weight decay 1e-2, 10% warm-up then cosine, input
noise 0.3, label smoothing 0.1, EMA 0.96 of the weights with bias correction.
A100: 191.3 ms a call, 94.98% on MNIST.
"""

from __future__ import annotations

import torch
from torch import nn

from nvmeter.workloads.training import dropout_mlp, matmul_precision, warmup_cosine

DIFFICULTY = 1
STEPS = 100
BATCH = 512
LR = 4e-3
EMA = 0.96
WIDTH = 1024


def _batches(rows: int, device) -> torch.Tensor:
    """(STEPS, BATCH) row indices: each epoch a fresh permutation, its last partial batch dropped."""
    per_epoch = rows // BATCH
    epochs = -(-STEPS // per_epoch)
    perms = [torch.randperm(rows, device=device)[: per_epoch * BATCH] for _ in range(epochs)]
    return torch.cat(perms).view(-1, BATCH)[:STEPS]


def method(train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor) -> torch.Tensor:
    """Train the TF32 MLP on (n, 60) float32 / (n,) int64 and return (m,) int64 labels for test_x."""
    device = train_x.device
    with matmul_precision(tf32=True):
        model = dropout_mlp(WIDTH, device)
        params = list(model.parameters())
        ema = [torch.zeros_like(p) for p in params]
        opt = torch.optim.AdamW(params, lr=LR, weight_decay=1e-2, fused=device.type == "cuda")
        loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
        lrs = [LR * f for f in warmup_cosine(STEPS, 0.1)]
        for step, idx in enumerate(_batches(train_x.shape[0], device)):
            opt.param_groups[0]["lr"] = lrs[step]
            xb = train_x[idx]
            loss = loss_fn(model(xb + 0.3 * torch.randn_like(xb)), train_y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            with torch.no_grad():
                torch._foreach_lerp_(ema, [p.detach() for p in params], 1.0 - EMA)
        model.eval()
        with torch.no_grad():
            # the EMA started at zero: divide by 1 - decay^steps to undo that bias
            torch._foreach_copy_(params, torch._foreach_div(ema, 1.0 - EMA**STEPS))
            return model(test_x).argmax(1)
