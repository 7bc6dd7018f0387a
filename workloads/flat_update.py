"""One optimiser step for a whole net: AdamW and the weights' EMA over flat buffers.

The CUDA-graph MLP spent a quarter of its kernel time in PyTorch's multi-tensor kernels
(fused AdamW, the EMA's ``_foreach_lerp_``): 36.6 µs a step on the H200 for 84k weights
(bench/graph_mlp_step.py, results/graph-mlp-step-h200). Those kernels give each tensor chunk of
up to 65,536 elements one thread block (ATen's MultiTensorApply), so the net's six tensors make
six blocks; that this, rather than launches, is what costs was not profiled apart. Here the weights,
gradients, moments and EMA each live in one flat float32 buffer, and one Triton kernel with
one program per 1,024 elements does the whole update, reading the learning rate from the
schedule at the step counter (which a graph cannot take from the host).

The arithmetic is ``torch.optim.AdamW``'s (decoupled weight decay, bias-corrected moments,
``eps`` added to the corrected root) followed by ``torch.lerp`` of the EMA towards the new
weights: :func:`adamw_ema_reference_` writes it in PyTorch operations, and the tests hold
the kernel and ``torch.optim.AdamW`` to it.
"""

from __future__ import annotations

import torch

# torch.optim.AdamW's defaults, which every recipe here uses.
BETAS = (0.9, 0.999)
EPS = 1e-8


def _check(buffers: dict[str, torch.Tensor], lr_table: torch.Tensor, step: torch.Tensor) -> None:
    n = buffers["param"].numel()
    for name, t in buffers.items():
        if t.dtype != torch.float32 or t.dim() != 1 or t.numel() != n or not t.is_contiguous():
            raise ValueError(
                f"{name} must be a contiguous (n,) float32 buffer like param, not {tuple(t.shape)} {t.dtype}"
            )
    if step.dtype != torch.int64 or step.numel() != 1:
        raise ValueError(f"step must be a (1,) int64 tensor, not {tuple(step.shape)} {step.dtype}")
    if lr_table.dtype != torch.float32 or lr_table.dim() != 1:
        raise ValueError(
            f"lr_table must be a (steps,) float32 tensor, not {tuple(lr_table.shape)} {lr_table.dtype}"
        )


def adamw_ema_(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    ema: torch.Tensor,
    lr_table: torch.Tensor,
    step: torch.Tensor,
    *,
    weight_decay: float,
    ema_decay: float,
) -> None:
    """One AdamW step, then one EMA step, in place, in one Triton kernel.

    Args:
        param: (n,) contiguous float32 weights, updated.
        grad: (n,) float32 gradients, read.
        exp_avg: (n,) float32 first moments, updated.
        exp_avg_sq: (n,) float32 second moments, updated.
        ema: (n,) float32 EMA of the weights, updated.
        lr_table: (steps,) float32, the learning rate of each step.
        step: (1,) int64, the steps already taken (0 before the first); read, not changed,
            so that a CUDA graph can replay the kernel (the caller increments it after).
        weight_decay: AdamW's decoupled weight decay.
        ema_decay: The EMA's decay: ``ema += (1 - ema_decay) * (param - ema)``.

    Runs on CUDA tensors, or on CPU tensors under the Triton interpreter (``TRITON_INTERPRET=1``
    set before the kernel module is imported).

    Raises:
        ValueError: a buffer of another shape, dtype or layout.

    """
    _check(dict(param=param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq, ema=ema), lr_table, step)
    from nvmeter.workloads import flat_update_kernel  # Triton only where the kernel runs

    flat_update_kernel.launch(
        param, grad, exp_avg, exp_avg_sq, ema, lr_table, step, BETAS, EPS, weight_decay, 1.0 - ema_decay
    )


@torch.no_grad()
def adamw_ema_reference_(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    ema: torch.Tensor,
    lr_table: torch.Tensor,
    step: torch.Tensor,
    *,
    weight_decay: float,
    ema_decay: float,
) -> None:
    """:func:`adamw_ema_` in PyTorch operations (any device; the CPU trainer uses it)."""
    _check(dict(param=param, grad=grad, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq, ema=ema), lr_table, step)
    beta1, beta2 = BETAS
    lr = lr_table[step]
    t = (step + 1).to(torch.float32)
    param.mul_(1.0 - lr * weight_decay)
    exp_avg.lerp_(grad, 1.0 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
    step_size = lr / (1.0 - beta1**t)
    denom = exp_avg_sq.sqrt() / (1.0 - beta2**t).sqrt() + EPS
    param.sub_(step_size * exp_avg / denom)
    ema.lerp_(param, 1.0 - ema_decay)
