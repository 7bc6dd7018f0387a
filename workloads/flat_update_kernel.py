"""The Triton kernel of :func:`nvmeter.workloads.flat_update.adamw_ema_` (imported only where it runs)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# Elements a program: 83,978 weights make 83 programs, enough to spread over the H200's 132 SMs
# in one wave; each element is 5 loads and 4 stores, so a program's work is small either way.
BLOCK = 1024


@triton.jit
def _adamw_ema_kernel(
    p_ptr, g_ptr, m_ptr, v_ptr, ema_ptr, lr_ptr, step_ptr, n,
    beta1, beta2, eps, weight_decay, ema_weight,
    BLOCK: tl.constexpr,
):  # fmt: skip
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    step = tl.load(step_ptr)
    lr = tl.load(lr_ptr + step)
    t = (step + 1).to(tl.float32)
    # beta ** t as exp(t * log(beta)): float32, as torch's capturable AdamW takes it from a float32 step
    bias1 = 1.0 - tl.exp(t * tl.log(beta1))
    bias2_sqrt = tl.sqrt(1.0 - tl.exp(t * tl.log(beta2)))
    p = tl.load(p_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    m = tl.load(m_ptr + offs, mask=mask)
    v = tl.load(v_ptr + offs, mask=mask)
    e = tl.load(ema_ptr + offs, mask=mask)
    p = p * (1.0 - lr * weight_decay)
    m = m + (1.0 - beta1) * (g - m)
    v = v * beta2 + (1.0 - beta2) * g * g
    p = p - (lr / bias1) * m / (tl.sqrt(v) / bias2_sqrt + eps)
    e = e + ema_weight * (p - e)
    tl.store(p_ptr + offs, p, mask=mask)
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)
    tl.store(ema_ptr + offs, e, mask=mask)


def launch(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    ema: torch.Tensor,
    lr_table: torch.Tensor,
    step: torch.Tensor,
    betas: tuple[float, float],
    eps: float,
    weight_decay: float,
    ema_weight: float,
) -> None:
    """Launch the kernel over checked buffers (see adamw_ema_)."""
    n = param.numel()
    _adamw_ema_kernel[(triton.cdiv(n, BLOCK),)](
        param, grad, exp_avg, exp_avg_sq, ema, lr_table, step, n,
        betas[0], betas[1], eps, weight_decay, ema_weight,
        BLOCK=BLOCK,
    )  # fmt: skip
