"""Fused Triton kernels for the Ladder network's encoder and decoder layers, wired into autograd.

Each kernel program owns all rows of a block of columns, so batch statistics are exact
(no cross-program reduction) and the per-unit parameter gradients need no atomics.
The backward kernels recompute the forward (statistics, noise, combinator) instead of
saving intermediates.

* :func:`encoder_layer`: per-stream batch norm of the labelled rows and the unlabelled rows
  separately, Gaussian noise drawn in the kernel (Philox, seeded from a step counter in
  device memory, so a CUDA graph replay draws fresh noise), bias, ReLU; at the top layer
  (z + beta) * gamma.
* :func:`decoder_layer`: batch norm of the top-down signal and the unit-wise AMLP combinator.

The unfused definitions, and the tests' reference, are in :mod:`nvmeter.workloads.ladder_ops`.
Kernels run on CUDA tensors, or on CPU tensors under the Triton interpreter
(``TRITON_INTERPRET=1`` set before this module is imported).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from nvmeter.workloads.ladder_ops import BN_EPS, LEAK, N_COMBINATOR_PARAMS

# Philox keys per step: the kernel's key is step * SEED_STRIDE + salt, so layers with
# different salts in [0, SEED_STRIDE) never share a noise stream with another step's layer.
SEED_STRIDE = 64
# Tile shapes. A program owns BLOCK_N columns and loops over all rows in tiles of
# BLOCK_M; the loops are latency-bound, so tiles are tall (few iterations, many loads in
# flight) and narrow (8 columns: 125 programs at 1,000 units, one per H200 SM; a row's
# 8 floats are one 32-byte sector, so no fetched byte is wasted). The decoder's backward
# keeps ~15 tiles live, hence its shorter tiles. Read at call time (tests shrink them to
# run the loops on small shapes).
BLOCK_SHAPES = {"encoder_m": 256, "decoder_m": 128, "n": 8}


def _grid(n_cols: int) -> tuple[int]:
    return (triton.cdiv(n_cols, BLOCK_SHAPES["n"]),)


@triton.jit
def _column_stats(
    x_ptr,
    row_start: tl.constexpr,
    row_end: tl.constexpr,
    cols,
    col_mask,
    n_cols,
    eps,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Mean and 1/sqrt(var + eps) of rows [row_start, row_end) of each column, two passes."""
    total = tl.zeros((BLOCK_N,), tl.float32)
    for r0 in range(row_start, row_end, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        mask = (rows < row_end)[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
        total += tl.sum(x, axis=0)
    count = (row_end - row_start) * 1.0
    mean = total / count
    sq = tl.zeros((BLOCK_N,), tl.float32)
    for r0 in range(row_start, row_end, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        mask = (rows < row_end)[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
        d = tl.where(mask, x - mean[None, :], 0.0)
        sq += tl.sum(d * d, axis=0)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(sq / count + eps))
    return mean, rstd


@triton.jit
def _noisy_tile(z_ptr, seed, rows, cols, mask, n_cols, mean, rstd, noise_std, NOISY: tl.constexpr):
    """Normalised pre-activation of a tile (x_hat) and its noisy version."""
    offs = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(z_ptr + offs, mask=mask, other=0.0)
    xhat = (x - mean[None, :]) * rstd[None, :]
    z = xhat
    if NOISY:
        z = xhat + noise_std * tl.randn(seed, offs)
    return xhat, z


# Loop bounds are passed to the helpers below as arguments, never assigned to a name
# first: the Triton interpreter turns every assigned value into a 1-element array,
# which numpy >= 2.4 refuses to use as a range() bound.


@triton.jit
def _encoder_fwd_stream(
    z_ptr,
    h_ptr,
    zu_ptr,
    seed,
    beta,
    gamma,
    cols,
    col_mask,
    row_start: tl.constexpr,
    row_end: tl.constexpr,
    n_labelled: tl.constexpr,
    n_cols: tl.constexpr,
    noise_std,
    eps,
    UNLABELLED: tl.constexpr,
    TOP: tl.constexpr,
    NOISY: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Forward over one stream's rows [row_start, row_end) of a block of columns."""
    mean, rstd = _column_stats(z_ptr, row_start, row_end, cols, col_mask, n_cols, eps, BLOCK_M, BLOCK_N)
    for r0 in range(row_start, row_end, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        mask = (rows < row_end)[:, None] & col_mask[None, :]
        _, z = _noisy_tile(z_ptr, seed, rows, cols, mask, n_cols, mean, rstd, noise_std, NOISY)
        a = z + beta[None, :]
        h = a * gamma[None, :] if TOP else tl.maximum(a, 0.0)
        tl.store(h_ptr + rows[:, None] * n_cols + cols[None, :], h, mask=mask)
        if UNLABELLED:
            tl.store(zu_ptr + (rows - n_labelled)[:, None] * n_cols + cols[None, :], z, mask=mask)


@triton.jit
def _encoder_fwd_kernel(
    z_ptr,
    beta_ptr,
    gamma_ptr,
    seed_ptr,
    h_ptr,
    zu_ptr,
    n_rows: tl.constexpr,
    n_labelled: tl.constexpr,
    n_cols: tl.constexpr,
    salt,
    noise_std,
    eps,
    TOP: tl.constexpr,
    NOISY: tl.constexpr,
    SEED_STRIDE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    beta = tl.load(beta_ptr + cols, mask=col_mask, other=0.0)
    gamma = tl.load(gamma_ptr + cols, mask=col_mask, other=0.0)
    seed = tl.load(seed_ptr) * SEED_STRIDE + salt
    _encoder_fwd_stream(
        z_ptr, h_ptr, zu_ptr, seed, beta, gamma, cols, col_mask, 0, n_labelled, n_labelled, n_cols,
        noise_std, eps, False, TOP, NOISY, BLOCK_M, BLOCK_N,
    )  # fmt: skip
    _encoder_fwd_stream(
        z_ptr, h_ptr, zu_ptr, seed, beta, gamma, cols, col_mask, n_labelled, n_rows, n_labelled, n_cols,
        noise_std, eps, True, TOP, NOISY, BLOCK_M, BLOCK_N,
    )  # fmt: skip


@triton.jit
def _encoder_grad_tile(
    z_ptr,
    gh_ptr,
    gzu_ptr,
    seed,
    rows,
    cols,
    mask,
    n_cols,
    n_labelled,
    mean,
    rstd,
    beta,
    gamma,
    noise_std,
    UNLABELLED: tl.constexpr,
    TOP: tl.constexpr,
    NOISY: tl.constexpr,
):
    """Recompute a tile's forward; return x_hat, z + beta, dL/dh, dL/d(z + beta) and dL/d(z noisy)."""
    xhat, z = _noisy_tile(z_ptr, seed, rows, cols, mask, n_cols, mean, rstd, noise_std, NOISY)
    a = z + beta[None, :]
    gh = tl.load(gh_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    ga = gh * gamma[None, :] if TOP else tl.where(a > 0.0, gh, 0.0)
    gz = ga
    if UNLABELLED:
        gz += tl.load(gzu_ptr + (rows - n_labelled)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    return xhat, a, gh, ga, gz


@triton.jit
def _encoder_bwd_stream(
    z_ptr,
    gh_ptr,
    gzu_ptr,
    gx_ptr,
    seed,
    beta,
    gamma,
    cols,
    col_mask,
    row_start: tl.constexpr,
    row_end: tl.constexpr,
    n_labelled: tl.constexpr,
    n_cols: tl.constexpr,
    noise_std,
    eps,
    UNLABELLED: tl.constexpr,
    TOP: tl.constexpr,
    NOISY: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Backward over one stream's rows; stores dL/dz_pre, returns this stream's dbeta, dgamma."""
    mean, rstd = _column_stats(z_ptr, row_start, row_end, cols, col_mask, n_cols, eps, BLOCK_M, BLOCK_N)
    gbeta = tl.zeros((BLOCK_N,), tl.float32)
    ggamma = tl.zeros((BLOCK_N,), tl.float32)
    sum_g = tl.zeros((BLOCK_N,), tl.float32)
    sum_gx = tl.zeros((BLOCK_N,), tl.float32)
    for r0 in range(row_start, row_end, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        mask = (rows < row_end)[:, None] & col_mask[None, :]
        xhat, a, gh, ga, gz = _encoder_grad_tile(
            z_ptr, gh_ptr, gzu_ptr, seed, rows, cols, mask, n_cols, n_labelled, mean, rstd,
            beta, gamma, noise_std, UNLABELLED, TOP, NOISY,
        )  # fmt: skip
        # masked entries carry zero gradients, so they add nothing below
        gbeta += tl.sum(ga, axis=0)
        if TOP:
            ggamma += tl.sum(gh * a, axis=0)
        sum_g += tl.sum(gz, axis=0)
        sum_gx += tl.sum(gz * xhat, axis=0)
    count = (row_end - row_start) * 1.0
    mean_g = sum_g / count
    mean_gx = sum_gx / count
    for r0 in range(row_start, row_end, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        mask = (rows < row_end)[:, None] & col_mask[None, :]
        xhat, a, gh, ga, gz = _encoder_grad_tile(
            z_ptr, gh_ptr, gzu_ptr, seed, rows, cols, mask, n_cols, n_labelled, mean, rstd,
            beta, gamma, noise_std, UNLABELLED, TOP, NOISY,
        )  # fmt: skip
        gx = rstd[None, :] * (gz - mean_g[None, :] - xhat * mean_gx[None, :])
        tl.store(gx_ptr + rows[:, None] * n_cols + cols[None, :], gx, mask=mask)
    return gbeta, ggamma


@triton.jit
def _encoder_bwd_kernel(
    z_ptr,
    beta_ptr,
    gamma_ptr,
    seed_ptr,
    gh_ptr,
    gzu_ptr,
    gx_ptr,
    gbeta_ptr,
    ggamma_ptr,
    n_rows: tl.constexpr,
    n_labelled: tl.constexpr,
    n_cols: tl.constexpr,
    salt,
    noise_std,
    eps,
    TOP: tl.constexpr,
    NOISY: tl.constexpr,
    SEED_STRIDE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    beta = tl.load(beta_ptr + cols, mask=col_mask, other=0.0)
    gamma = tl.load(gamma_ptr + cols, mask=col_mask, other=0.0)
    seed = tl.load(seed_ptr) * SEED_STRIDE + salt
    gbeta_l, ggamma_l = _encoder_bwd_stream(
        z_ptr, gh_ptr, gzu_ptr, gx_ptr, seed, beta, gamma, cols, col_mask, 0, n_labelled, n_labelled,
        n_cols, noise_std, eps, False, TOP, NOISY, BLOCK_M, BLOCK_N,
    )  # fmt: skip
    gbeta_u, ggamma_u = _encoder_bwd_stream(
        z_ptr, gh_ptr, gzu_ptr, gx_ptr, seed, beta, gamma, cols, col_mask, n_labelled, n_rows, n_labelled,
        n_cols, noise_std, eps, True, TOP, NOISY, BLOCK_M, BLOCK_N,
    )  # fmt: skip
    tl.store(gbeta_ptr + cols, gbeta_l + gbeta_u, mask=col_mask)
    if TOP:
        tl.store(ggamma_ptr + cols, ggamma_l + ggamma_u, mask=col_mask)


@triton.jit
def _lrelu(x, LEAK: tl.constexpr):
    return tl.where(x > 0.0, x, LEAK * x)


@triton.jit
def _lrelu_grad(x, LEAK: tl.constexpr):
    return tl.where(x > 0.0, 1.0, LEAK)


@triton.jit
def _load_param(p_ptr, k: tl.constexpr, cols, col_mask, n_cols):
    return tl.load(p_ptr + k * n_cols + cols, mask=col_mask, other=0.0)[None, :]


@triton.jit
def _decoder_tile(v_ptr, zn_ptr, p_ptr, rows, cols, col_mask, mask, n_cols, mean, rstd, LEAK: tl.constexpr):
    """Recompute a tile's forward: u, z, the inputs' product, pre-activations, output."""
    offs = rows[:, None] * n_cols + cols[None, :]
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    z = tl.load(zn_ptr + offs, mask=mask, other=0.0)
    u = (v - mean[None, :]) * rstd[None, :]
    uz = u * z
    pre1a = (
        _load_param(p_ptr, 0, cols, col_mask, n_cols) * u
        + _load_param(p_ptr, 1, cols, col_mask, n_cols) * z
        + _load_param(p_ptr, 2, cols, col_mask, n_cols) * uz
        + _load_param(p_ptr, 6, cols, col_mask, n_cols)
    )
    pre1b = (
        _load_param(p_ptr, 3, cols, col_mask, n_cols) * u
        + _load_param(p_ptr, 4, cols, col_mask, n_cols) * z
        + _load_param(p_ptr, 5, cols, col_mask, n_cols) * uz
        + _load_param(p_ptr, 7, cols, col_mask, n_cols)
    )
    h1a = _lrelu(pre1a, LEAK)
    h1b = _lrelu(pre1b, LEAK)
    pre2a = (
        _load_param(p_ptr, 8, cols, col_mask, n_cols) * h1a
        + _load_param(p_ptr, 9, cols, col_mask, n_cols) * h1b
        + _load_param(p_ptr, 12, cols, col_mask, n_cols)
    )
    pre2b = (
        _load_param(p_ptr, 10, cols, col_mask, n_cols) * h1a
        + _load_param(p_ptr, 11, cols, col_mask, n_cols) * h1b
        + _load_param(p_ptr, 13, cols, col_mask, n_cols)
    )
    h2a = _lrelu(pre2a, LEAK)
    h2b = _lrelu(pre2b, LEAK)
    out = (
        _load_param(p_ptr, 14, cols, col_mask, n_cols) * h2a
        + _load_param(p_ptr, 15, cols, col_mask, n_cols) * h2b
        + _load_param(p_ptr, 16, cols, col_mask, n_cols)
    )
    return u, z, uz, pre1a, pre1b, h1a, h1b, pre2a, pre2b, h2a, h2b, out


@triton.jit
def _decoder_fwd_kernel(
    v_ptr,
    zn_ptr,
    p_ptr,
    out_ptr,
    n_rows: tl.constexpr,
    n_cols: tl.constexpr,
    eps,
    LEAK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    mean, rstd = _column_stats(v_ptr, 0, n_rows, cols, col_mask, n_cols, eps, BLOCK_M, BLOCK_N)
    for r0 in range(0, n_rows, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        mask = (rows < n_rows)[:, None] & col_mask[None, :]
        _, _, _, _, _, _, _, _, _, _, _, out = _decoder_tile(
            v_ptr, zn_ptr, p_ptr, rows, cols, col_mask, mask, n_cols, mean, rstd, LEAK
        )
        tl.store(out_ptr + rows[:, None] * n_cols + cols[None, :], out, mask=mask)


@triton.jit
def _decoder_grad_tile(
    v_ptr, zn_ptr, p_ptr, g_ptr, rows, cols, col_mask, mask, n_cols, mean, rstd, LEAK: tl.constexpr
):
    """Recompute a tile's forward and back-propagate dL/dout through the combinator."""
    u, z, uz, pre1a, pre1b, h1a, h1b, pre2a, pre2b, h2a, h2b, _ = _decoder_tile(
        v_ptr, zn_ptr, p_ptr, rows, cols, col_mask, mask, n_cols, mean, rstd, LEAK
    )
    g = tl.load(g_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    g2a = g * _load_param(p_ptr, 14, cols, col_mask, n_cols) * _lrelu_grad(pre2a, LEAK)
    g2b = g * _load_param(p_ptr, 15, cols, col_mask, n_cols) * _lrelu_grad(pre2b, LEAK)
    g1a = (
        g2a * _load_param(p_ptr, 8, cols, col_mask, n_cols)
        + g2b * _load_param(p_ptr, 10, cols, col_mask, n_cols)
    ) * _lrelu_grad(pre1a, LEAK)
    g1b = (
        g2a * _load_param(p_ptr, 9, cols, col_mask, n_cols)
        + g2b * _load_param(p_ptr, 11, cols, col_mask, n_cols)
    ) * _lrelu_grad(pre1b, LEAK)
    g_u = g1a * _load_param(p_ptr, 0, cols, col_mask, n_cols) + g1b * _load_param(
        p_ptr, 3, cols, col_mask, n_cols
    )
    g_z = g1a * _load_param(p_ptr, 1, cols, col_mask, n_cols) + g1b * _load_param(
        p_ptr, 4, cols, col_mask, n_cols
    )
    g_uz = g1a * _load_param(p_ptr, 2, cols, col_mask, n_cols) + g1b * _load_param(
        p_ptr, 5, cols, col_mask, n_cols
    )
    gu = g_u + g_uz * z
    gz = g_z + g_uz * u
    return u, z, uz, h1a, h1b, h2a, h2b, g, g2a, g2b, g1a, g1b, gu, gz


@triton.jit
def _store_param_grad(gp_ptr, k: tl.constexpr, cols, col_mask, n_cols, value):
    tl.store(gp_ptr + k * n_cols + cols, value, mask=col_mask)


@triton.jit
def _decoder_bwd_kernel(
    v_ptr,
    zn_ptr,
    p_ptr,
    g_ptr,
    gv_ptr,
    gzn_ptr,
    gp_ptr,
    n_rows: tl.constexpr,
    n_cols: tl.constexpr,
    eps,
    LEAK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    mean, rstd = _column_stats(v_ptr, 0, n_rows, cols, col_mask, n_cols, eps, BLOCK_M, BLOCK_N)
    zero = mean * 0.0
    # per-unit sums over the rows of the parameter gradients (numbering as in ladder_ops)
    gw1a_u, gw1a_z, gw1a_uz, gw1b_u, gw1b_z, gw1b_uz = zero, zero, zero, zero, zero, zero
    gb1a, gb1b, gw2aa, gw2ab, gw2ba, gw2bb, gb2a, gb2b = zero, zero, zero, zero, zero, zero, zero, zero
    gw3a, gw3b, gb3, sum_gu, sum_guu = zero, zero, zero, zero, zero
    for r0 in range(0, n_rows, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        mask = (rows < n_rows)[:, None] & col_mask[None, :]
        u, z, uz, h1a, h1b, h2a, h2b, g, g2a, g2b, g1a, g1b, gu, gz = _decoder_grad_tile(
            v_ptr, zn_ptr, p_ptr, g_ptr, rows, cols, col_mask, mask, n_cols, mean, rstd, LEAK
        )
        tl.store(gzn_ptr + rows[:, None] * n_cols + cols[None, :], gz, mask=mask)
        # masked rows carry g = 0, so every product below is 0 there
        gw1a_u += tl.sum(g1a * u, axis=0)
        gw1a_z += tl.sum(g1a * z, axis=0)
        gw1a_uz += tl.sum(g1a * uz, axis=0)
        gw1b_u += tl.sum(g1b * u, axis=0)
        gw1b_z += tl.sum(g1b * z, axis=0)
        gw1b_uz += tl.sum(g1b * uz, axis=0)
        gb1a += tl.sum(g1a, axis=0)
        gb1b += tl.sum(g1b, axis=0)
        gw2aa += tl.sum(g2a * h1a, axis=0)
        gw2ab += tl.sum(g2a * h1b, axis=0)
        gw2ba += tl.sum(g2b * h1a, axis=0)
        gw2bb += tl.sum(g2b * h1b, axis=0)
        gb2a += tl.sum(g2a, axis=0)
        gb2b += tl.sum(g2b, axis=0)
        gw3a += tl.sum(g * h2a, axis=0)
        gw3b += tl.sum(g * h2b, axis=0)
        gb3 += tl.sum(g, axis=0)
        sum_gu += tl.sum(gu, axis=0)
        sum_guu += tl.sum(gu * u, axis=0)
    count = n_rows * 1.0
    mean_gu = sum_gu / count
    mean_guu = sum_guu / count
    for r0 in range(0, n_rows, BLOCK_M):
        rows = r0 + tl.arange(0, BLOCK_M)
        mask = (rows < n_rows)[:, None] & col_mask[None, :]
        u, _, _, _, _, _, _, _, _, _, _, _, gu, _ = _decoder_grad_tile(
            v_ptr, zn_ptr, p_ptr, g_ptr, rows, cols, col_mask, mask, n_cols, mean, rstd, LEAK
        )
        gv = rstd[None, :] * (gu - mean_gu[None, :] - u * mean_guu[None, :])
        tl.store(gv_ptr + rows[:, None] * n_cols + cols[None, :], gv, mask=mask)
    _store_param_grad(gp_ptr, 0, cols, col_mask, n_cols, gw1a_u)
    _store_param_grad(gp_ptr, 1, cols, col_mask, n_cols, gw1a_z)
    _store_param_grad(gp_ptr, 2, cols, col_mask, n_cols, gw1a_uz)
    _store_param_grad(gp_ptr, 3, cols, col_mask, n_cols, gw1b_u)
    _store_param_grad(gp_ptr, 4, cols, col_mask, n_cols, gw1b_z)
    _store_param_grad(gp_ptr, 5, cols, col_mask, n_cols, gw1b_uz)
    _store_param_grad(gp_ptr, 6, cols, col_mask, n_cols, gb1a)
    _store_param_grad(gp_ptr, 7, cols, col_mask, n_cols, gb1b)
    _store_param_grad(gp_ptr, 8, cols, col_mask, n_cols, gw2aa)
    _store_param_grad(gp_ptr, 9, cols, col_mask, n_cols, gw2ab)
    _store_param_grad(gp_ptr, 10, cols, col_mask, n_cols, gw2ba)
    _store_param_grad(gp_ptr, 11, cols, col_mask, n_cols, gw2bb)
    _store_param_grad(gp_ptr, 12, cols, col_mask, n_cols, gb2a)
    _store_param_grad(gp_ptr, 13, cols, col_mask, n_cols, gb2b)
    _store_param_grad(gp_ptr, 14, cols, col_mask, n_cols, gw3a)
    _store_param_grad(gp_ptr, 15, cols, col_mask, n_cols, gw3b)
    _store_param_grad(gp_ptr, 16, cols, col_mask, n_cols, gb3)


def _check_2d(name: str, x: torch.Tensor) -> None:
    if x.dim() != 2 or x.dtype != torch.float32:
        raise ValueError(f"{name} must be a 2-D float32 tensor, got {tuple(x.shape)} {x.dtype}")


class _EncoderLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z_pre, beta, gamma, seed, n_labelled, noise_std, salt, eps):
        z_pre = z_pre.contiguous()
        n_rows, n_cols = z_pre.shape
        top = gamma is not None
        gamma_t = gamma if top else beta  # an unread stand-in for the pointer
        h = torch.empty_like(z_pre)
        z_u = z_pre.new_empty((n_rows - n_labelled, n_cols))
        _encoder_fwd_kernel[_grid(n_cols)](
            z_pre, beta, gamma_t, seed, h, z_u, n_rows, n_labelled, n_cols, salt, noise_std, eps,
            TOP=top, NOISY=noise_std != 0.0, SEED_STRIDE=SEED_STRIDE,
            BLOCK_M=BLOCK_SHAPES["encoder_m"], BLOCK_N=BLOCK_SHAPES["n"],
        )  # fmt: skip
        ctx.save_for_backward(z_pre, beta, gamma_t, seed)
        ctx.args = (top, n_labelled, noise_std, salt, eps)
        return h, z_u

    @staticmethod
    def backward(ctx, g_h, g_zu):
        z_pre, beta, gamma_t, seed = ctx.saved_tensors
        top, n_labelled, noise_std, salt, eps = ctx.args
        n_rows, n_cols = z_pre.shape
        g_x = torch.empty_like(z_pre)
        g_beta = torch.empty_like(beta)
        g_gamma = torch.empty_like(beta) if top else g_beta
        _encoder_bwd_kernel[_grid(n_cols)](
            z_pre, beta, gamma_t, seed, g_h.contiguous(), g_zu.contiguous(), g_x, g_beta, g_gamma,
            n_rows, n_labelled, n_cols, salt, noise_std, eps,
            TOP=top, NOISY=noise_std != 0.0, SEED_STRIDE=SEED_STRIDE,
            BLOCK_M=BLOCK_SHAPES["encoder_m"], BLOCK_N=BLOCK_SHAPES["n"],
        )  # fmt: skip
        return g_x, g_beta, (g_gamma if top else None), None, None, None, None, None


class _DecoderLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v, z_noisy, params, eps):
        v = v.contiguous()
        z_noisy = z_noisy.contiguous()
        params = params.contiguous()
        n_rows, n_cols = v.shape
        out = torch.empty_like(v)
        _decoder_fwd_kernel[_grid(n_cols)](
            v,
            z_noisy,
            params,
            out,
            n_rows,
            n_cols,
            eps,
            LEAK=LEAK,
            BLOCK_M=BLOCK_SHAPES["decoder_m"],
            BLOCK_N=BLOCK_SHAPES["n"],
        )
        ctx.save_for_backward(v, z_noisy, params)
        ctx.eps = eps
        return out

    @staticmethod
    def backward(ctx, g_out):
        v, z_noisy, params = ctx.saved_tensors
        n_rows, n_cols = v.shape
        g_v = torch.empty_like(v)
        g_z = torch.empty_like(z_noisy)
        g_p = torch.empty_like(params)
        _decoder_bwd_kernel[_grid(n_cols)](
            v, z_noisy, params, g_out.contiguous(), g_v, g_z, g_p, n_rows, n_cols, ctx.eps,
            LEAK=LEAK, BLOCK_M=BLOCK_SHAPES["decoder_m"], BLOCK_N=BLOCK_SHAPES["n"],
        )  # fmt: skip
        return g_v, g_z, g_p, None


def encoder_layer(
    z_pre: torch.Tensor,
    beta: torch.Tensor,
    gamma: torch.Tensor | None,
    n_labelled: int,
    noise_std: float,
    seed: torch.Tensor,
    salt: int,
    eps: float = BN_EPS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One noisy encoder layer after its matmul, fused (see ladder_ops.encoder_layer).

    Noise: ``noise_std`` times a standard normal from Philox with key
    ``seed[0] * SEED_STRIDE + salt`` and counter ``row * n + column``; the backward reads
    ``seed`` again, so it must not change between forward and backward.

    Args:
        z_pre: Tensor (rows, n) float32: the pre-activation; first ``n_labelled`` rows labelled.
        beta: Tensor (n,) float32: bias after normalisation.
        gamma: Tensor (n,) float32 at the top layer ((z + beta) * gamma), None for ReLU layers.
        n_labelled: Rows of the labelled stream, 0 < n_labelled < rows.
        noise_std: Standard deviation of the added noise (0: clean, no random numbers drawn).
        seed: Tensor (1,) int64 on the kernel's device, typically the step counter.
        salt: This layer's key offset, 0 <= salt < SEED_STRIDE.
        eps: Added to the batch variance.

    Returns:
        (h, z_noisy_unlabelled): Tensor (rows, n) and Tensor (rows - n_labelled, n).

    Raises:
        ValueError: On a bad shape, dtype, stream split or salt.
    """
    _check_2d("z_pre", z_pre)
    if not 0 < n_labelled < z_pre.shape[0]:
        raise ValueError(f"n_labelled must lie in (0, {z_pre.shape[0]}), got {n_labelled}")
    if not 0 <= salt < SEED_STRIDE:
        raise ValueError(f"salt must lie in [0, {SEED_STRIDE}), got {salt}")
    if seed.dtype != torch.int64 or seed.numel() != 1:
        raise ValueError("seed must be a one-element int64 tensor")
    return _EncoderLayer.apply(z_pre, beta, gamma, seed, n_labelled, float(noise_std), salt, eps)


def decoder_layer(
    v: torch.Tensor, z_noisy: torch.Tensor, params: torch.Tensor, eps: float = BN_EPS
) -> torch.Tensor:
    """One decoder layer after its matmul, fused (see ladder_ops.decoder_layer).

    Args:
        v: Tensor (rows, n) float32: top-down signal before normalisation.
        z_noisy: Tensor (rows, n) float32: lateral input from the noisy encoder.
        params: Tensor (17, n) float32: the combinator's per-unit parameters.
        eps: Added to the batch variance.

    Returns:
        Tensor (rows, n): z_hat.

    Raises:
        ValueError: On a bad shape or dtype.
    """
    _check_2d("v", v)
    if z_noisy.shape != v.shape or params.shape != (N_COMBINATOR_PARAMS, v.shape[1]):
        raise ValueError(
            f"shapes disagree: v {tuple(v.shape)}, z_noisy {tuple(z_noisy.shape)}, "
            f"params {tuple(params.shape)} (want ({N_COMBINATOR_PARAMS}, n))"
        )
    return _DecoderLayer.apply(v, z_noisy, params, eps)
