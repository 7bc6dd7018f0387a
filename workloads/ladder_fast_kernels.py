"""Faster fused Triton kernels for the Ladder's encoder and decoder layers (nvmeter's own recipe).

Same operations, signatures and in-kernel noise as :mod:`nvmeter.workloads.ladder_kernels`
(the seed's kernels, which stay as they are); what changes is how the work is spread over
the GPU. The seed's programs each own one block of 8 columns and loop over all rows of a
stream in tiles, two or four passes one after the other, with one 4-warp program per SM at
most: the loops are serial chains of load latency, every layer takes about as long as the
widest one, and the backward draws the noise again in each of its two passes
(docs/workloads.md, "Faster kernels").

Here:

* Encoder forward: a program owns one stream's whole column block (up to
  ``max_stream_rows`` rows), loaded once into registers: exact two-pass mean and variance
  in float32 without a second read, no row loop. Where a layer has few column blocks the
  rows are split among up to ``max_row_split`` programs (each computes the statistics of
  the whole column block itself, then draws the noise of its own rows only). It saves
  the per-stream mean and 1/std, and at the top layer the pre-gamma activation ``a``.
* Encoder backward: one program per (column block, stream), whole stream in registers;
  no statistics pass (saved by the forward) and no noise (the ReLU mask is ``h > 0``,
  which equals ``a > 0``; the top layer reads the saved ``a``). The two streams' dbeta
  (and dgamma) meet by float atomics in a buffer the forward zeroed: two addends onto
  zero, so the sum is the same whichever comes first (deterministic).
* Decoder forward: as the encoder forward, for the single stream of the top-down signal.
* Decoder backward: a 2-D grid of (column block, row block) tiles and two kernels. The
  first recomputes the combinator, stores dL/dz_noisy and dL/du, and writes each tile's 19
  column sums (17 parameter gradients, sum dL/du, sum dL/du * u); the second finishes
  dL/dv from those partial sums (summed in a fixed order: deterministic) and the tiles of
  row block 0 write the parameter gradients.

The noise is bit-identical to the seed's: the same Philox call (``tl.randn``) with key
``seed[0] * SEED_STRIDE + salt`` and counter ``row * n + column`` (int32).

Kernels run on CUDA tensors, or on CPU tensors under the Triton interpreter
(``TRITON_INTERPRET=1`` set before this module is imported). NOT YET TIMED ON A GPU:
the tile shapes below are first guesses for the H200, to be swept by bench/ladder_step.py.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from nvmeter.workloads import ladder_kernels
from nvmeter.workloads.ladder_kernels import SEED_STRIDE
from nvmeter.workloads.ladder_ops import BN_EPS, LEAK, N_COMBINATOR_PARAMS

# Column sums the decoder backward's first kernel writes per tile: the 17 parameter
# gradients (rows as in ladder_ops), then sum dL/du and sum dL/du * u.
N_DECODER_PARTIALS = N_COMBINATOR_PARAMS + 2
# The same, as the kernels read them (a jitted function sees only constexpr globals); 32 holds them all.
_PARTIALS = tl.constexpr(N_DECODER_PARTIALS)
_PARAMS = tl.constexpr(N_COMBINATOR_PARAMS)
_PARTIALS_P2 = tl.constexpr(32)

# Launch shapes, read at call time (tests and bench/ladder_step.py change them). First
# guesses for the H200 (132 SMs), not yet swept on it.
CONFIG = {
    # columns per program: 8 floats are one 32-byte sector of a row
    "block_n": 8,
    # the encoder backward takes 4 columns where 8 would give fewer than min_programs
    # programs (widths 500 and 250: 126 and 64 programs with 8)
    "block_n_small": 4,
    "min_programs": 128,
    # the forward kernels split a stream's rows among up to max_row_split programs until
    # there are this many programs (one per H200 SM); each computes the statistics itself
    "fwd_target_programs": 132,
    "max_row_split": 8,
    # elements of a whole-stream tile per thread: sets the warps (1 to 16)
    "elems_per_thread": 16,
    # the decoder backward's 2-D tiles
    "decoder_bwd_block_m": 128,
    "decoder_bwd_block_n": 8,
    "decoder_bwd_warps": 4,
    # longer streams go to the seed's kernels (a whole column block would not fit in registers)
    "max_stream_rows": 4096,
}


def _pow2(n: int) -> int:
    return triton.next_power_of_2(max(int(n), 1))


def _warps(elements: int) -> int:
    return max(1, min(16, elements // (32 * CONFIG["elems_per_thread"])))


def launch_shape(kind: str, stream_rows: int, n_streams: int, n_cols: int) -> dict:
    """The launch shape of a kernel for a layer: tile sizes, row split, warps and grid.

    Args:
        kind: ``"fwd"`` (encoder or decoder forward), ``"enc_bwd"`` or ``"dec_bwd"``.
        stream_rows: Rows of the longest stream (all rows for the decoder).
        n_streams: 2 for the encoder, 1 for the decoder.
        n_cols: Units in the layer.

    Returns:
        dict of the kernel's tile constants (BLOCK_M, BLOCK_N; ROW_SPLIT and SUB_M for
        "fwd"; N_RB and N_RB_P2 for "dec_bwd"), num_warps and grid.

    Raises:
        ValueError: For an unknown kind.
    """
    if kind == "dec_bwd":
        bm, bn = CONFIG["decoder_bwd_block_m"], CONFIG["decoder_bwd_block_n"]
        n_rb = triton.cdiv(stream_rows, bm)
        return {
            "BLOCK_M": bm,
            "BLOCK_N": bn,
            "N_RB": n_rb,
            "N_RB_P2": _pow2(n_rb),
            "num_warps": CONFIG["decoder_bwd_warps"],
            "grid": (triton.cdiv(n_cols, bn), n_rb),
        }
    block_m = _pow2(stream_rows)
    bn = CONFIG["block_n"]
    if kind == "fwd":
        blocks = triton.cdiv(n_cols, bn) * n_streams
        split = 1
        while (
            blocks * split < CONFIG["fwd_target_programs"]
            and split < CONFIG["max_row_split"]
            and block_m // (2 * split) >= 16
        ):
            split *= 2
        return {
            "BLOCK_M": block_m,
            "BLOCK_N": bn,
            "ROW_SPLIT": split,
            "SUB_M": block_m // split,
            "num_warps": _warps(block_m * bn),
            "grid": (triton.cdiv(n_cols, bn), n_streams * split),
        }
    if kind == "enc_bwd":
        if triton.cdiv(n_cols, bn) * n_streams < CONFIG["min_programs"]:
            bn = CONFIG["block_n_small"]
        return {
            "BLOCK_M": block_m,
            "BLOCK_N": bn,
            "num_warps": _warps(block_m * bn),
            "grid": (triton.cdiv(n_cols, bn), n_streams),
        }
    raise ValueError(f"unknown kernel kind {kind!r}")


@triton.jit
def _stream_block(x_ptr, start, count, cols, col_mask, n_cols, eps, BLOCK_M: tl.constexpr):
    """Rows [start, start + count) of a column block, loaded once, with their exact statistics.

    Returns the tile (rows at or past ``count`` zero), its row indices from ``start``, its
    mask, and each column's mean and 1/sqrt(var + eps) (two passes over the registers).
    """
    rows = tl.arange(0, BLOCK_M)
    mask = (rows < count)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + (start + rows)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    cnt = count * 1.0
    mean = tl.sum(x, axis=0) / cnt
    d = tl.where(mask, x - mean[None, :], 0.0)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.sum(d * d, axis=0) / cnt + eps))
    return x, rows, mask, mean, rstd


@triton.jit
def _own_rows(
    x_ptr,
    x_all,
    rows_all,
    mask_all,
    start,
    count,
    part,
    cols,
    col_mask,
    n_cols,
    ROW_SPLIT: tl.constexpr,
    SUB_M: tl.constexpr,
):
    """This program's rows of the stream: the whole tile without a split, else a reload (a cache hit)."""
    if ROW_SPLIT == 1:
        rows, mask, x = rows_all, mask_all, x_all
    else:
        rows = part * SUB_M + tl.arange(0, SUB_M)
        mask = (rows < count)[:, None] & col_mask[None, :]
        x = tl.load(x_ptr + (start + rows)[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    return rows, mask, x


@triton.jit
def _fast_encoder_fwd_kernel(
    z_ptr,
    beta_ptr,
    gamma_ptr,
    seed_ptr,
    h_ptr,
    zu_ptr,
    a_ptr,
    stats_ptr,
    gacc_ptr,
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
    ROW_SPLIT: tl.constexpr,
    SUB_M: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    stream = tl.program_id(1) // ROW_SPLIT
    part = tl.program_id(1) % ROW_SPLIT
    start = stream * n_labelled
    count = tl.where(stream == 0, n_labelled, n_rows - n_labelled)
    x_all, rows_all, mask_all, mean, rstd = _stream_block(
        z_ptr, start, count, cols, col_mask, n_cols, eps, BLOCK_M
    )
    first = col_mask & (part == 0)
    tl.store(stats_ptr + (2 * stream) * n_cols + cols, mean, mask=first)
    tl.store(stats_ptr + (2 * stream + 1) * n_cols + cols, rstd, mask=first)
    # zero the backward's dbeta (and dgamma) accumulators
    zero = tl.zeros((BLOCK_N,), tl.float32)
    tl.store(gacc_ptr + cols, zero, mask=first & (stream == 0))
    if TOP:
        tl.store(gacc_ptr + n_cols + cols, zero, mask=first & (stream == 0))
    rows, mask, x = _own_rows(
        z_ptr, x_all, rows_all, mask_all, start, count, part, cols, col_mask, n_cols, ROW_SPLIT, SUB_M
    )
    offs = (start + rows)[:, None] * n_cols + cols[None, :]
    z = (x - mean[None, :]) * rstd[None, :]
    if NOISY:
        seed = tl.load(seed_ptr) * SEED_STRIDE + salt
        z = z + noise_std * tl.randn(seed, offs)
    beta = tl.load(beta_ptr + cols, mask=col_mask, other=0.0)
    a = z + beta[None, :]
    if TOP:
        gamma = tl.load(gamma_ptr + cols, mask=col_mask, other=0.0)
        tl.store(h_ptr + offs, a * gamma[None, :], mask=mask)
        tl.store(a_ptr + offs, a, mask=mask)
    else:
        tl.store(h_ptr + offs, tl.maximum(a, 0.0), mask=mask)
    tl.store(zu_ptr + rows[:, None] * n_cols + cols[None, :], z, mask=mask & (stream == 1))


@triton.jit
def _fast_encoder_bwd_kernel(
    z_ptr,
    act_ptr,
    stats_ptr,
    gamma_ptr,
    gh_ptr,
    gzu_ptr,
    gx_ptr,
    gacc_ptr,
    n_rows: tl.constexpr,
    n_labelled: tl.constexpr,
    n_cols: tl.constexpr,
    TOP: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    stream = tl.program_id(1)
    start = stream * n_labelled
    count = tl.where(stream == 0, n_labelled, n_rows - n_labelled)
    rows = tl.arange(0, BLOCK_M)
    mask = (rows < count)[:, None] & col_mask[None, :]
    offs = (start + rows)[:, None] * n_cols + cols[None, :]
    z = tl.load(z_ptr + offs, mask=mask, other=0.0)
    gh = tl.load(gh_ptr + offs, mask=mask, other=0.0)
    # act: a = z_noisy + beta at the top layer, h = relu(a) below (h > 0 exactly where a > 0)
    act = tl.load(act_ptr + offs, mask=mask, other=0.0)
    gzu = tl.load(gzu_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask & (stream == 1), other=0.0)
    mean = tl.load(stats_ptr + (2 * stream) * n_cols + cols, mask=col_mask, other=0.0)
    rstd = tl.load(stats_ptr + (2 * stream + 1) * n_cols + cols, mask=col_mask, other=0.0)
    xhat = (z - mean[None, :]) * rstd[None, :]
    if TOP:
        gamma = tl.load(gamma_ptr + cols, mask=col_mask, other=0.0)
        ga = gh * gamma[None, :]
    else:
        ga = tl.where(act > 0.0, gh, 0.0)
    # masked entries carry zero gradients, so they add nothing to the sums
    gz = ga + gzu
    cnt = count.to(tl.float32)
    mean_g = tl.sum(gz, axis=0) / cnt
    mean_gx = tl.sum(gz * xhat, axis=0) / cnt
    gx = rstd[None, :] * (gz - mean_g[None, :] - xhat * mean_gx[None, :])
    tl.store(gx_ptr + offs, gx, mask=mask)
    # the two streams' sums meet in the accumulators the forward zeroed
    tl.atomic_add(gacc_ptr + cols, tl.sum(ga, axis=0), mask=col_mask, sem="relaxed")
    if TOP:
        tl.atomic_add(gacc_ptr + n_cols + cols, tl.sum(gh * act, axis=0), mask=col_mask, sem="relaxed")


@triton.jit
def _load_params(p_ptr, cols, col_mask, n_cols):
    """The 17 combinator parameters of a column block, each (1, BLOCK_N), numbered as in ladder_ops."""
    w = ()
    for k in tl.static_range(17):
        # tuple + (Triton's code generator has no starred unpacking)
        w = w + (tl.load(p_ptr + k * n_cols + cols, mask=col_mask, other=0.0)[None, :],)  # noqa: RUF005
    return w


@triton.jit
def _combinator(u, z, w, LEAK: tl.constexpr):
    """The unit-wise MLP 3 -> 2 -> 2 -> 1 on (u, z, u * z): its pre-activations, hidden values, output."""
    uz = u * z
    pre1a = w[0] * u + w[1] * z + w[2] * uz + w[6]
    pre1b = w[3] * u + w[4] * z + w[5] * uz + w[7]
    h1a = tl.where(pre1a > 0.0, pre1a, LEAK * pre1a)
    h1b = tl.where(pre1b > 0.0, pre1b, LEAK * pre1b)
    pre2a = w[8] * h1a + w[9] * h1b + w[12]
    pre2b = w[10] * h1a + w[11] * h1b + w[13]
    h2a = tl.where(pre2a > 0.0, pre2a, LEAK * pre2a)
    h2b = tl.where(pre2b > 0.0, pre2b, LEAK * pre2b)
    out = w[14] * h2a + w[15] * h2b + w[16]
    return uz, pre1a, pre1b, h1a, h1b, pre2a, pre2b, h2a, h2b, out


@triton.jit
def _fast_decoder_fwd_kernel(
    v_ptr,
    zn_ptr,
    p_ptr,
    out_ptr,
    stats_ptr,
    n_rows: tl.constexpr,
    n_cols: tl.constexpr,
    eps,
    LEAK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ROW_SPLIT: tl.constexpr,
    SUB_M: tl.constexpr,
):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    part = tl.program_id(1)
    v_all, rows_all, mask_all, mean, rstd = _stream_block(
        v_ptr, 0, n_rows, cols, col_mask, n_cols, eps, BLOCK_M
    )
    first = col_mask & (part == 0)
    tl.store(stats_ptr + cols, mean, mask=first)
    tl.store(stats_ptr + n_cols + cols, rstd, mask=first)
    rows, mask, v = _own_rows(
        v_ptr, v_all, rows_all, mask_all, 0, n_rows, part, cols, col_mask, n_cols, ROW_SPLIT, SUB_M
    )
    offs = rows[:, None] * n_cols + cols[None, :]
    z = tl.load(zn_ptr + offs, mask=mask, other=0.0)
    u = (v - mean[None, :]) * rstd[None, :]
    w = _load_params(p_ptr, cols, col_mask, n_cols)
    _, _, _, _, _, _, _, _, _, out = _combinator(u, z, w, LEAK)
    tl.store(out_ptr + offs, out, mask=mask)


@triton.jit
def _fast_decoder_bwd_tile_kernel(
    v_ptr,
    zn_ptr,
    p_ptr,
    stats_ptr,
    g_ptr,
    gzn_ptr,
    gu_ptr,
    part_ptr,
    n_rows: tl.constexpr,
    n_cols: tl.constexpr,
    LEAK: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Per tile: the combinator's backward, dL/dz_noisy, dL/du and the tile's 19 column sums."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    rb = tl.program_id(1)
    rows = rb * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    offs = rows[:, None] * n_cols + cols[None, :]
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    z = tl.load(zn_ptr + offs, mask=mask, other=0.0)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0)
    mean = tl.load(stats_ptr + cols, mask=col_mask, other=0.0)
    rstd = tl.load(stats_ptr + n_cols + cols, mask=col_mask, other=0.0)
    u = (v - mean[None, :]) * rstd[None, :]
    w = _load_params(p_ptr, cols, col_mask, n_cols)
    uz, pre1a, pre1b, h1a, h1b, pre2a, pre2b, h2a, h2b, _ = _combinator(u, z, w, LEAK)
    g2a = g * w[14] * tl.where(pre2a > 0.0, 1.0, LEAK)
    g2b = g * w[15] * tl.where(pre2b > 0.0, 1.0, LEAK)
    g1a = (g2a * w[8] + g2b * w[10]) * tl.where(pre1a > 0.0, 1.0, LEAK)
    g1b = (g2a * w[9] + g2b * w[11]) * tl.where(pre1b > 0.0, 1.0, LEAK)
    g_uz = g1a * w[2] + g1b * w[5]
    gu = g1a * w[0] + g1b * w[3] + g_uz * z
    tl.store(gzn_ptr + offs, g1a * w[1] + g1b * w[4] + g_uz * u, mask=mask)
    tl.store(gu_ptr + offs, gu, mask=mask)
    # this tile's column sums, in the order of N_DECODER_PARTIALS; masked rows carry g = 0,
    # so every product is 0 there
    sums = (
        g1a * u, g1a * z, g1a * uz, g1b * u, g1b * z, g1b * uz, g1a, g1b,
        g2a * h1a, g2a * h1b, g2b * h1a, g2b * h1b, g2a, g2b, g * h2a, g * h2b, g,
        gu, gu * u,
    )  # fmt: skip
    for k in tl.static_range(19):
        tl.store(part_ptr + (rb * 19 + k) * n_cols + cols, tl.sum(sums[k], axis=0), mask=col_mask)


@triton.jit
def _sum_partials(part_ptr, cols, col_mask, n_cols, N_RB: tl.constexpr, N_RB_P2: tl.constexpr):
    """(32, BLOCK_N): every partial sum k < 19 over the row blocks (rows k >= 19 are 0).

    One load of all of them, then a tree over the row blocks in a fixed order (deterministic).
    One load, not one per k: a store between loads (the parameter gradients) may alias the
    partials for all the compiler knows, so loads interleaved with stores run one memory round
    trip after another (~7 us a launch on the H200, results/ladder-step-h200, layers).
    """
    rb = tl.arange(0, N_RB_P2)[:, None, None]
    k = tl.arange(0, _PARTIALS_P2)[None, :, None]
    c = cols[None, None, :]
    mask = (rb < N_RB) & (k < _PARTIALS) & col_mask[None, None, :]
    x = tl.load(part_ptr + (rb * _PARTIALS + k) * n_cols + c, mask=mask, other=0.0)
    return tl.sum(x, axis=0)


@triton.jit
def _row(totals, k: tl.constexpr):
    """Row k of a (32, BLOCK_N) block, as (BLOCK_N,)."""
    return tl.sum(tl.where(tl.arange(0, _PARTIALS_P2)[:, None] == k, totals, 0.0), axis=0)


@triton.jit
def _fast_decoder_bwd_finish_kernel(
    v_ptr,
    stats_ptr,
    gu_ptr,
    part_ptr,
    gv_ptr,
    gp_ptr,
    n_rows: tl.constexpr,
    n_cols: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    N_RB: tl.constexpr,
    N_RB_P2: tl.constexpr,
):
    """dL/dv through the batch norm from the summed partials; row block 0 writes dL/dparams."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    rb = tl.program_id(1)
    totals = _sum_partials(part_ptr, cols, col_mask, n_cols, N_RB, N_RB_P2)
    mean_gu = _row(totals, _PARAMS) / n_rows
    mean_guu = _row(totals, _PARAMS + 1) / n_rows
    rows = rb * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    offs = rows[:, None] * n_cols + cols[None, :]
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    gu = tl.load(gu_ptr + offs, mask=mask, other=0.0)
    mean = tl.load(stats_ptr + cols, mask=col_mask, other=0.0)
    rstd = tl.load(stats_ptr + n_cols + cols, mask=col_mask, other=0.0)
    u = (v - mean[None, :]) * rstd[None, :]
    gv = rstd[None, :] * (gu - mean_gu[None, :] - u * mean_guu[None, :])
    tl.store(gv_ptr + offs, gv, mask=mask)
    if rb == 0:
        k = tl.arange(0, _PARTIALS_P2)[:, None]
        pmask = (k < _PARAMS) & col_mask[None, :]
        tl.store(gp_ptr + k * n_cols + cols[None, :], totals, mask=pmask)


def _launch(kernel, shape: dict, *args, **constexprs):
    meta = {k: v for k, v in shape.items() if k not in ("grid",)}
    kernel[shape["grid"]](*args, **constexprs, **meta)


class _FastEncoderLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z_pre, beta, gamma, seed, n_labelled, noise_std, salt, eps):
        z_pre = z_pre.contiguous()
        n_rows, n_cols = z_pre.shape
        top = gamma is not None
        gamma_t = gamma if top else beta  # an unread stand-in for the pointer
        h = torch.empty_like(z_pre)
        z_u = z_pre.new_empty((n_rows - n_labelled, n_cols))
        a = torch.empty_like(z_pre) if top else h  # h: an unwritten stand-in below the top
        stats = z_pre.new_empty((4, n_cols))  # mean, rstd of the labelled stream; of the unlabelled
        gacc = z_pre.new_empty((2 if top else 1, n_cols))
        shape = launch_shape("fwd", max(n_labelled, n_rows - n_labelled), 2, n_cols)
        _launch(
            _fast_encoder_fwd_kernel, shape,
            z_pre, beta, gamma_t, seed, h, z_u, a, stats, gacc,
            n_rows, n_labelled, n_cols, salt, noise_std, eps,
            TOP=top, NOISY=noise_std != 0.0, SEED_STRIDE=SEED_STRIDE,
        )  # fmt: skip
        ctx.save_for_backward(z_pre, a, stats, gamma_t)
        ctx.gacc = gacc
        ctx.args = (top, n_labelled)
        return h, z_u

    @staticmethod
    def backward(ctx, g_h, g_zu):
        z_pre, act, stats, gamma_t = ctx.saved_tensors
        top, n_labelled = ctx.args
        n_rows, n_cols = z_pre.shape
        # the forward zeroed this accumulator; a second backward (retain_graph) gets a fresh one
        gacc, ctx.gacc = ctx.gacc, None
        if gacc is None:
            gacc = z_pre.new_zeros((2 if top else 1, n_cols))
        g_x = torch.empty_like(z_pre)
        shape = launch_shape("enc_bwd", max(n_labelled, n_rows - n_labelled), 2, n_cols)
        _launch(
            _fast_encoder_bwd_kernel, shape,
            z_pre, act, stats, gamma_t, g_h.contiguous(), g_zu.contiguous(), g_x, gacc,
            n_rows, n_labelled, n_cols, TOP=top,
        )  # fmt: skip
        return g_x, gacc[0], (gacc[1] if top else None), None, None, None, None, None


class _FastDecoderLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, v, z_noisy, params, eps):
        v = v.contiguous()
        z_noisy = z_noisy.contiguous()
        params = params.contiguous()
        n_rows, n_cols = v.shape
        out = torch.empty_like(v)
        stats = v.new_empty((2, n_cols))
        shape = launch_shape("fwd", n_rows, 1, n_cols)
        _launch(
            _fast_decoder_fwd_kernel, shape, v, z_noisy, params, out, stats, n_rows, n_cols, eps, LEAK=LEAK
        )
        ctx.save_for_backward(v, z_noisy, params, stats)
        return out

    @staticmethod
    def backward(ctx, g_out):
        v, z_noisy, params, stats = ctx.saved_tensors
        n_rows, n_cols = v.shape
        g_v = torch.empty_like(v)
        g_z = torch.empty_like(z_noisy)
        g_p = torch.empty_like(params)
        g_u = torch.empty_like(v)
        shape = launch_shape("dec_bwd", n_rows, 1, n_cols)
        partials = v.new_empty((shape["N_RB"], N_DECODER_PARTIALS, n_cols))
        tile = {k: shape[k] for k in ("BLOCK_M", "BLOCK_N", "num_warps", "grid")}
        _launch(
            _fast_decoder_bwd_tile_kernel, tile,
            v, z_noisy, params, stats, g_out.contiguous(), g_z, g_u, partials, n_rows, n_cols, LEAK=LEAK,
        )  # fmt: skip
        _launch(_fast_decoder_bwd_finish_kernel, shape, v, stats, g_u, partials, g_v, g_p, n_rows, n_cols)
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
    """One noisy encoder layer after its matmul, fused (see ladder_kernels.encoder_layer).

    The same arguments, outputs and noise as :func:`ladder_kernels.encoder_layer`; the
    backward reads neither ``seed`` nor the noise again. A stream longer than
    ``CONFIG["max_stream_rows"]`` rows goes to the seed's kernel.

    Raises:
        ValueError: On a bad shape, dtype, stream split or salt.
    """
    ladder_kernels._check_2d("z_pre", z_pre)
    if not 0 < n_labelled < z_pre.shape[0]:
        raise ValueError(f"n_labelled must lie in (0, {z_pre.shape[0]}), got {n_labelled}")
    if not 0 <= salt < SEED_STRIDE:
        raise ValueError(f"salt must lie in [0, {SEED_STRIDE}), got {salt}")
    if seed.dtype != torch.int64 or seed.numel() != 1:
        raise ValueError("seed must be a one-element int64 tensor")
    if max(n_labelled, z_pre.shape[0] - n_labelled) > CONFIG["max_stream_rows"]:
        return ladder_kernels.encoder_layer(z_pre, beta, gamma, n_labelled, noise_std, seed, salt, eps)
    return _FastEncoderLayer.apply(z_pre, beta, gamma, seed, n_labelled, float(noise_std), salt, eps)


def decoder_layer(
    v: torch.Tensor, z_noisy: torch.Tensor, params: torch.Tensor, eps: float = BN_EPS
) -> torch.Tensor:
    """One decoder layer after its matmul, fused (see ladder_kernels.decoder_layer).

    More than ``CONFIG["max_stream_rows"]`` rows go to the seed's kernel.

    Raises:
        ValueError: On a bad shape or dtype.
    """
    ladder_kernels._check_2d("v", v)
    if z_noisy.shape != v.shape or params.shape != (N_COMBINATOR_PARAMS, v.shape[1]):
        raise ValueError(
            f"shapes disagree: v {tuple(v.shape)}, z_noisy {tuple(z_noisy.shape)}, "
            f"params {tuple(params.shape)} (want ({N_COMBINATOR_PARAMS}, n))"
        )
    if v.shape[0] > CONFIG["max_stream_rows"]:
        return ladder_kernels.decoder_layer(v, z_noisy, params, eps)
    return _FastDecoderLayer.apply(v, z_noisy, params, eps)
