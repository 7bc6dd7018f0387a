"""The faster fused kernels (ladder_fast_kernels) against the plain PyTorch layers and the seed's kernels.

Triton's interpreter on CPU (conftest sets TRITON_INTERPRET=1 where there is no GPU), float32
kernels against float64 and float32 references (ladder_ops). Small shapes have ragged row
and column blocks and streams of different sizes; each runs under three launch shapes: the
shipped one, one with the rows split among programs and several decoder row blocks (a count
that is not a power of two), and one with narrow 4-column blocks and no split. The network's
real shapes run where the interpreter is fast enough (the widest layers: tests/test_ladder_gpu.py).
"""

import pytest
import torch

pytest.importorskip("triton")

from nvmeter.workloads import ladder, ladder_fast_kernels, ladder_kernels, ladder_ops

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# max |kernel - reference| / max |reference|: float32 rounding of sums over <= 1,000 rows.
# Measured 1e-7 to 9e-7 (float64 and float32 references alike).
REL_TOL = 3e-6
N_ROWS, N_LABELLED, N_COLS = 150, 70, 20


@pytest.fixture(params=["shipped", "split_rows", "narrow_unsplit"])
def shapes(request, monkeypatch):
    """The shipped launch shapes, and two others that take the kernels' other paths."""
    cfg = ladder_fast_kernels.CONFIG
    if request.param == "split_rows":
        # forward: rows split 2 ways; decoder backward: 16-row tiles, 7 row blocks at 100 rows
        monkeypatch.setitem(cfg, "max_row_split", 2)
        monkeypatch.setitem(cfg, "decoder_bwd_block_m", 16)
    elif request.param == "narrow_unsplit":
        # 4 columns a block everywhere, no row split, 32-row decoder tiles
        monkeypatch.setitem(cfg, "block_n", 4)
        monkeypatch.setitem(cfg, "fwd_target_programs", 1)
        monkeypatch.setitem(cfg, "decoder_bwd_block_m", 32)
        monkeypatch.setitem(cfg, "decoder_bwd_block_n", 4)
    return request.param


def rel_err(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


def unit_noise(module, seed, salt, shape, n_labelled=N_LABELLED):
    """A kernel's standard normal noise, read through a top layer with beta 0 and gamma 1."""
    z = torch.randn(shape, generator=torch.Generator().manual_seed(99)).to(DEVICE)
    ones, zeros = torch.ones(shape[1], device=DEVICE), torch.zeros(shape[1], device=DEVICE)
    noisy, _ = module.encoder_layer(z, zeros, ones, n_labelled, 1.0, seed, salt)
    clean, _ = module.encoder_layer(z, zeros, ones, n_labelled, 0.0, seed, salt)
    return noisy - clean


def encoder_case(n_rows, n_labelled, n_cols, top, noise_std, seed, salt, margin=1e-4):
    """Inputs of an encoder layer and its noise, kept clear of the ReLU's kink.

    Where z + beta lies within float32 rounding of 0, the kernel and a reference may
    take different sides of the ReLU: a true non-differentiability, not an error. Such
    entries of z_pre are moved a little (in float64, with the kernel's own noise).
    """
    g = torch.Generator().manual_seed(n_rows * 1000 + n_cols)
    z = torch.randn(n_rows, n_cols, generator=g, dtype=torch.float64) * 2 + 1
    beta = torch.randn(n_cols, generator=g, dtype=torch.float64) * 0.5
    gamma = torch.randn(n_cols, generator=g, dtype=torch.float64) + 1 if top else None
    noise = None
    if noise_std:
        # the seed kernels' noise (quicker in the interpreter): the fast kernels must draw the same
        noise = noise_std * unit_noise(ladder_kernels, seed, salt, (n_rows, n_cols), n_labelled).double()
        noise = noise.cpu()
    for _ in range(50):
        if top:
            break
        pre = torch.cat([ladder_ops.batch_norm(z[:n_labelled]), ladder_ops.batch_norm(z[n_labelled:])])
        pre = pre + beta + (noise if noise is not None else 0.0)
        near = pre.abs() < margin
        if not near.any():
            break
        z[near] += 0.05
    leaves = [z.float().to(DEVICE).requires_grad_(), beta.float().to(DEVICE).requires_grad_()]
    if top:
        leaves.append(gamma.float().to(DEVICE).requires_grad_())
    return leaves, noise


def check_encoder(n_rows, n_labelled, n_cols, top, noise_std, seed, salt=3):
    leaves, noise = encoder_case(n_rows, n_labelled, n_cols, top, noise_std, seed, salt)
    gamma = leaves[2] if top else None
    h, z_u = ladder_fast_kernels.encoder_layer(leaves[0], leaves[1], gamma, n_labelled, noise_std, seed, salt)
    g_h, g_zu = torch.randn_like(h), torch.randn_like(z_u)
    grads = torch.autograd.grad((h * g_h).sum() + (z_u * g_zu).sum(), leaves)
    worst = {}
    for dtype in (torch.float64, torch.float32):
        ref = [t.detach().cpu().to(dtype).requires_grad_() for t in leaves]
        n = None if noise is None else noise.to(dtype)
        h_r, z_u_r = ladder_ops.encoder_layer(ref[0], ref[1], ref[2] if top else None, n_labelled, n)
        grads_r = torch.autograd.grad(
            (h_r * g_h.cpu().to(dtype)).sum() + (z_u_r * g_zu.cpu().to(dtype)).sum(), ref
        )
        errs = {"h": rel_err(h.cpu(), h_r), "z_u": rel_err(z_u.cpu(), z_u_r)}
        for name, g, g_r in zip(["d_z_pre", "d_beta", "d_gamma"], grads, grads_r, strict=False):
            errs[name] = rel_err(g.cpu(), g_r)
        for name, err in errs.items():
            assert err < REL_TOL, f"{name} vs {dtype}: relative error {err:.2e}"
        worst[str(dtype)] = max(errs.values())
    return worst


@pytest.mark.parametrize("top", [False, True])
@pytest.mark.parametrize("noise_std", [0.0, 0.3])
def test_encoder_matches_plain(top, noise_std, shapes):
    torch.manual_seed(0)
    check_encoder(N_ROWS, N_LABELLED, N_COLS, top, noise_std, torch.tensor([7], device=DEVICE))


@pytest.mark.parametrize("n_labelled", [1, 149, 128])
def test_encoder_stream_edges(n_labelled):
    # a one-row stream (variance 0: eps keeps it finite), and a stream of exactly one 128-row tile
    torch.manual_seed(1)
    check_encoder(N_ROWS, n_labelled, 12, False, 0.3, torch.tensor([2], device=DEVICE))


def test_encoder_noise_is_the_seed_kernels(shapes):
    """The same Philox draws as ladder_kernels (key step * 64 + salt, counter row * n + col)."""
    for step, salt, n_cols in ((7, 0, N_COLS), (123456789, 5, 10)):
        seed = torch.tensor([step], device=DEVICE)
        ours = unit_noise(ladder_fast_kernels, seed, salt, (N_ROWS, n_cols))
        theirs = unit_noise(ladder_kernels, seed, salt, (N_ROWS, n_cols))
        assert (ours - theirs).abs().max().item() < 1e-5
        assert 0.8 < ours.std().item() < 1.2
        # the next step draws afresh
        later = unit_noise(ladder_fast_kernels, seed + 1, salt, (N_ROWS, n_cols))
        assert (later - ours).abs().max().item() > 1


def test_encoder_matches_the_seed_kernels_with_noise(shapes):
    torch.manual_seed(3)
    seed = torch.tensor([41], device=DEVICE)
    z = (torch.randn(N_ROWS, N_COLS, device=DEVICE) * 2 + 1).requires_grad_()
    beta = torch.randn(N_COLS, device=DEVICE).requires_grad_()
    outs = []
    for module in (ladder_fast_kernels, ladder_kernels):
        h, z_u = module.encoder_layer(z, beta, None, N_LABELLED, 0.3, seed, 9)
        outs.append((h, z_u, torch.autograd.grad(h.square().sum() + z_u.sum(), [z, beta])))
    (h_f, z_u_f, g_f), (h_s, z_u_s, g_s) = outs
    assert rel_err(h_f, h_s) < REL_TOL and rel_err(z_u_f, z_u_s) < REL_TOL
    for a, b in zip(g_f, g_s, strict=True):
        assert rel_err(a, b) < REL_TOL


def decoder_case(n_rows, n_cols, margin=1e-4):
    """Inputs of a decoder layer whose combinator pre-activations stay clear of the leaky ReLU's kink.

    At a kink float32 and float64 (or two float32 summation orders) may take different
    slopes, 1 or 0.1: a true non-differentiability. z_noisy is moved a little where any of
    the four pre-activations lies within ``margin`` of 0 (in float64).
    """
    g = torch.Generator().manual_seed(n_rows * 1000 + n_cols)
    v = torch.randn(n_rows, n_cols, generator=g, dtype=torch.float64) * 3 - 1
    z = torch.randn(n_rows, n_cols, generator=g, dtype=torch.float64)
    p = torch.randn(17, n_cols, generator=g, dtype=torch.float64)
    u = ladder_ops.batch_norm(v)
    for _ in range(50):
        inputs = (u, z, u * z)
        pre1 = [sum(p[3 * j + k] * inputs[k] for k in range(3)) + p[6 + j] for j in range(2)]
        h1 = [torch.where(x > 0, x, ladder_ops.LEAK * x) for x in pre1]
        pre2 = [p[8 + 2 * j] * h1[0] + p[9 + 2 * j] * h1[1] + p[12 + j] for j in range(2)]
        near = torch.stack([x.abs() < margin for x in pre1 + pre2]).any(0)
        if not near.any():
            break
        z[near] += 0.05
    return [t.float().to(DEVICE).requires_grad_() for t in (v, z, p)]


def check_decoder(n_rows, n_cols):
    leaves = decoder_case(n_rows, n_cols)
    out = ladder_fast_kernels.decoder_layer(*leaves)
    g = torch.randn_like(out)
    grads = torch.autograd.grad((out * g).sum(), leaves)
    for dtype in (torch.float64, torch.float32):
        ref = [t.detach().cpu().to(dtype).requires_grad_() for t in leaves]
        out_r = ladder_ops.decoder_layer(*ref)
        grads_r = torch.autograd.grad((out_r * g.cpu().to(dtype)).sum(), ref)
        errs = {"z_hat": rel_err(out.cpu(), out_r)}
        for name, gk, g_r in zip(["d_v", "d_z_noisy", "d_params"], grads, grads_r, strict=True):
            errs[name] = rel_err(gk.cpu(), g_r)
        for name, err in errs.items():
            assert err < REL_TOL, f"{name} vs {dtype}: relative error {err:.2e}"


@pytest.mark.parametrize(("n_rows", "n_cols"), [(100, 30), (37, 3)])
def test_decoder_matches_plain(n_rows, n_cols, shapes):
    check_decoder(n_rows, n_cols)


def test_decoder_starts_as_the_identity_on_the_lateral_input():
    torch.manual_seed(2)
    v = (torch.randn(40, 12, device=DEVICE) * 3).requires_grad_()
    z = torch.randn(40, 12, device=DEVICE) * 2
    out = ladder_fast_kernels.decoder_layer(v, z, ladder_ops.identity_combinator(12).to(DEVICE))
    assert torch.allclose(out, z, rtol=1e-6, atol=1e-6)
    (g_v,) = torch.autograd.grad(out.square().sum(), v)
    assert torch.equal(g_v, torch.zeros_like(g_v))


# The network's real shapes: 2,000 rows (1,000 + 1,000) in the encoder, 1,000 in the decoder.
# The interpreter takes ~1-10 s a case; widths 1000 and 500 run on the GPU (test_ladder_gpu.py).
@pytest.mark.parametrize(("n_cols", "top"), [(250, False), (10, True)])
def test_encoder_full_shape(n_cols, top):
    torch.manual_seed(4)
    check_encoder(2000, 1000, n_cols, top, 0.3, torch.tensor([12345], device=DEVICE), salt=5)


@pytest.mark.parametrize("n_cols", [60, 10])
def test_decoder_full_shape(n_cols):
    torch.manual_seed(5)
    check_decoder(1000, n_cols)


def test_a_second_backward_gives_the_same_gradients_and_leaves_the_first_alone():
    # the forward zeroes the dbeta accumulator once; retain_graph's second backward gets a fresh one
    torch.manual_seed(6)
    z = torch.randn(N_ROWS, N_COLS, device=DEVICE).requires_grad_()
    beta = torch.randn(N_COLS, device=DEVICE).requires_grad_()
    gamma = torch.rand(N_COLS, device=DEVICE).requires_grad_()
    h, z_u = ladder_fast_kernels.encoder_layer(z, beta, gamma, N_LABELLED, 0.3, torch.tensor([1]), 0)
    loss = h.square().sum() + z_u.sum()
    first = torch.autograd.grad(loss, [z, beta, gamma], retain_graph=True)
    kept = [g.clone() for g in first]
    second = torch.autograd.grad(loss, [z, beta, gamma])
    for a, b, c in zip(first, second, kept, strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_long_streams_go_to_the_seed_kernels(monkeypatch):
    monkeypatch.setitem(ladder_fast_kernels.CONFIG, "max_stream_rows", 64)
    torch.manual_seed(7)
    seed = torch.tensor([3], device=DEVICE)
    z = torch.randn(N_ROWS, N_COLS, device=DEVICE)
    beta = torch.randn(N_COLS, device=DEVICE)
    for module_out in zip(
        ladder_fast_kernels.encoder_layer(z, beta, None, N_LABELLED, 0.3, seed, 1),
        ladder_kernels.encoder_layer(z, beta, None, N_LABELLED, 0.3, seed, 1),
        strict=True,
    ):
        assert torch.equal(*module_out)
    p = torch.randn(17, N_COLS, device=DEVICE)
    assert torch.equal(
        ladder_fast_kernels.decoder_layer(z[:100], z[:100], p),
        ladder_kernels.decoder_layer(z[:100], z[:100], p),
    )


def test_launch_shapes_at_the_networks_widths():
    shape = ladder_fast_kernels.launch_shape
    programs = {}
    for n in ladder.SIZES[1:]:
        fwd, bwd = shape("fwd", 1000, 2, n), shape("enc_bwd", 1000, 2, n)
        assert fwd["BLOCK_M"] == bwd["BLOCK_M"] == 1024 and fwd["SUB_M"] * fwd["ROW_SPLIT"] == 1024
        programs[("encoder", n)] = (fwd["grid"][0] * fwd["grid"][1], bwd["grid"][0] * bwd["grid"][1])
    for n in ladder.SIZES:
        fwd, bwd = shape("fwd", 1000, 1, n), shape("dec_bwd", 1000, 1, n)
        assert bwd["N_RB"] == 8 and bwd["grid"] == (-(-n // 8), 8)
        programs[("decoder", n)] = (fwd["grid"][0] * fwd["grid"][1], bwd["grid"][0] * bwd["grid"][1])
    # docs/workloads.md, "Faster kernels", gives these grids
    assert programs[("encoder", 1000)] == (250, 250)
    assert programs[("encoder", 500)] == (252, 250)
    assert programs[("encoder", 250)] == (256, 126)
    assert programs[("encoder", 10)] == (32, 6)
    assert programs[("decoder", 1000)] == (250, 1000)
    assert programs[("decoder", 60)] == (64, 64)
    assert shape("fwd", 1000, 2, 1000)["num_warps"] == 16
    with pytest.raises(ValueError, match="unknown kernel kind"):
        shape("sideways", 10, 1, 10)


def test_kernels_reject_bad_arguments():
    z = torch.randn(10, 4, device=DEVICE)
    b = torch.zeros(4, device=DEVICE)
    seed = torch.tensor([0], device=DEVICE)
    with pytest.raises(ValueError, match="n_labelled"):
        ladder_fast_kernels.encoder_layer(z, b, None, 10, 0.3, seed, 0)
    with pytest.raises(ValueError, match="salt"):
        ladder_fast_kernels.encoder_layer(z, b, None, 5, 0.3, seed, ladder_kernels.SEED_STRIDE)
    with pytest.raises(ValueError, match="seed"):
        ladder_fast_kernels.encoder_layer(z, b, None, 5, 0.3, seed.float(), 0)
    with pytest.raises(ValueError, match="float32"):
        ladder_fast_kernels.encoder_layer(z.double(), b, None, 5, 0.3, seed, 0)
    with pytest.raises(ValueError, match="shapes disagree"):
        ladder_fast_kernels.decoder_layer(z, z, torch.zeros(16, 4, device=DEVICE))


def test_the_kernels_compile_for_the_h200_without_spilling():
    """The interpreter accepts code the GPU compiler refuses: compile for sm_90 (ptxas of the triton
    wheel, no GPU needed) at the widest and the top layer's shapes, and refuse spills."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if not ptxas.exists():
        pytest.skip("this triton has no NVIDIA backend (ptxas)")
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    command = [
        sys.executable,
        str(root / "bench" / "ladder_sm90.py"),
        "--kernels",
        "fast",
        "--widths",
        "1000,10",
    ]
    proc = subprocess.run([*command, "--check"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count('"spill_store_bytes": 0, "spill_load_bytes": 0') == 10, proc.stdout


def test_the_spill_check_fails_on_a_kernel_that_spills():
    """A launch shape that holds far too many elements a thread must spill, and --check must say so."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import triton

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("this triton has no NVIDIA backend (ptxas)")
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = (
        "import sys; sys.path.insert(0, 'bench'); import ladder_sm90 as L; "
        "from nvmeter.workloads import ladder_fast_kernels as f; f.CONFIG['elems_per_thread'] = 256; "
        "sys.exit(L.main(['--kernels', 'fast', '--widths', '1000', '--check']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root, timeout=600
    )
    why = proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.returncode == 1 and "failed or spilled" in proc.stderr, why
    assert '"spill_store_bytes": 0' not in proc.stdout.splitlines()[0], why
