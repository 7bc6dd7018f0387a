"""The fused kernels against the plain PyTorch layers (Triton interpreter on CPU, small shapes).

Shapes are chosen so that row and column blocks have ragged edges (masks exercised) and
the two streams have different sizes.
"""

import pytest
import torch

pytest.importorskip("triton")

from nvmeter.workloads import ladder_kernels, ladder_ops

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# Relative error (max |fused - reference| / max |reference|) allowed against a float64
# reference: float32 rounding of sums over ~100 rows, with margin. Measured ~1e-7 to 5e-7.
REL_TOL = 3e-6
N_ROWS, N_LABELLED, N_COLS = 150, 70, 20


@pytest.fixture(params=["tall_tiles", "short_tiles"])
def tiles(request, monkeypatch):
    """The shipped tile shapes (one tile per stream here) and short ones (several per stream)."""
    if request.param == "short_tiles":
        monkeypatch.setitem(ladder_kernels.BLOCK_SHAPES, "encoder_m", 32)
        monkeypatch.setitem(ladder_kernels.BLOCK_SHAPES, "decoder_m", 16)
    return request.param


def rel_err(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


def unit_noise(seed, salt, shape):
    """The kernel's standard normal noise, read through a top layer with beta 0 and gamma 1."""
    z = torch.randn(shape, device=DEVICE)
    ones, zeros = torch.ones(shape[1], device=DEVICE), torch.zeros(shape[1], device=DEVICE)
    noisy, _ = ladder_kernels.encoder_layer(z, zeros, ones, N_LABELLED, 1.0, seed, salt)
    clean, _ = ladder_kernels.encoder_layer(z, zeros, ones, N_LABELLED, 0.0, seed, salt)
    return noisy - clean


@pytest.mark.parametrize("top", [False, True])
@pytest.mark.parametrize("noise_std", [0.0, 0.3])
def test_encoder_matches_plain(top, noise_std, tiles):
    torch.manual_seed(0)
    seed = torch.tensor([7], device=DEVICE)
    z = (torch.randn(N_ROWS, N_COLS, device=DEVICE) * 2 + 1).requires_grad_()
    beta = (torch.randn(N_COLS, device=DEVICE) * 0.5).requires_grad_()
    gamma = (torch.randn(N_COLS, device=DEVICE) + 1).requires_grad_() if top else None
    leaves = [z, beta] + ([gamma] if top else [])
    h, z_u = ladder_kernels.encoder_layer(z, beta, gamma, N_LABELLED, noise_std, seed, 3)

    noise = noise_std * unit_noise(seed, 3, (N_ROWS, N_COLS)).double() if noise_std else None
    leaves64 = [t.detach().double().requires_grad_() for t in leaves]
    gamma64 = leaves64[2] if top else None
    h_ref, z_u_ref = ladder_ops.encoder_layer(leaves64[0], leaves64[1], gamma64, N_LABELLED, noise)
    assert rel_err(h, h_ref) < REL_TOL, f"h: relative error {rel_err(h, h_ref):.2e}"
    assert rel_err(z_u, z_u_ref) < REL_TOL, f"z_u: relative error {rel_err(z_u, z_u_ref):.2e}"

    g_h, g_zu = torch.randn_like(h), torch.randn_like(z_u)
    grads = torch.autograd.grad((h * g_h).sum() + (z_u * g_zu).sum(), leaves)
    grads_ref = torch.autograd.grad((h_ref * g_h.double()).sum() + (z_u_ref * g_zu.double()).sum(), leaves64)
    for name, g, g_ref in zip(["z_pre", "beta", "gamma"][: len(grads)], grads, grads_ref, strict=True):
        assert rel_err(g, g_ref) < REL_TOL, f"d{name}: relative error {rel_err(g, g_ref):.2e}"


def test_encoder_noise_statistics():
    seed = torch.tensor([11], device=DEVICE)
    shape = (N_ROWS, 64)
    e = unit_noise(seed, 0, shape)
    n = e.numel()  # 9,600 draws: mean sd 0.010, variance sd 0.014
    assert abs(e.mean().item()) < 0.045, e.mean().item()
    assert abs(e.var().item() - 1) < 0.07, e.var().item()
    # reproducible from the same key, independent across steps and layers
    assert torch.allclose(unit_noise(seed, 0, shape), e, atol=1e-6)
    for other in (unit_noise(torch.tensor([12], device=DEVICE), 0, shape), unit_noise(seed, 1, shape)):
        corr = torch.corrcoef(torch.stack([e.flatten(), other.flatten()]))[0, 1].item()
        assert abs(corr) < 4.5 / n**0.5, corr


def test_encoder_noise_key_follows_the_seed_tensor_in_place():
    seed = torch.tensor([5], device=DEVICE)
    first = unit_noise(seed, 0, (N_ROWS, 8))
    seed.add_(1)  # what the training step does; a captured graph sees the new value
    assert not torch.allclose(unit_noise(seed, 0, (N_ROWS, 8)), first)


def test_decoder_matches_plain(tiles):
    torch.manual_seed(1)
    rows, cols = 100, 30
    v = (torch.randn(rows, cols, device=DEVICE) * 3 - 1).requires_grad_()
    z = torch.randn(rows, cols, device=DEVICE).requires_grad_()
    p = torch.randn(17, cols, device=DEVICE).requires_grad_()
    out = ladder_kernels.decoder_layer(v, z, p)
    leaves64 = [t.detach().double().requires_grad_() for t in (v, z, p)]
    ref = ladder_ops.decoder_layer(*leaves64)
    assert rel_err(out, ref) < REL_TOL, f"z_hat: relative error {rel_err(out, ref):.2e}"
    g = torch.randn_like(out)
    grads = torch.autograd.grad((out * g).sum(), [v, z, p])
    grads_ref = torch.autograd.grad((ref * g.double()).sum(), leaves64)
    for name, gk, g_ref in zip(["v", "z_noisy", "params"], grads, grads_ref, strict=True):
        assert rel_err(gk, g_ref) < REL_TOL, f"d{name}: relative error {rel_err(gk, g_ref):.2e}"


def test_decoder_starts_as_the_identity_on_the_lateral_input():
    # the network's starting combinator (ladder_ops.identity_combinator), through the kernel
    torch.manual_seed(2)
    v = (torch.randn(40, 12, device=DEVICE) * 3).requires_grad_()
    z = torch.randn(40, 12, device=DEVICE) * 2
    out = ladder_kernels.decoder_layer(v, z, ladder_ops.identity_combinator(12).to(DEVICE))
    assert torch.allclose(out, z, rtol=1e-6, atol=1e-6)
    (g_v,) = torch.autograd.grad(out.square().sum(), v)
    assert torch.equal(g_v, torch.zeros_like(g_v))


def test_kernels_reject_bad_arguments():
    z = torch.randn(10, 4, device=DEVICE)
    b = torch.zeros(4, device=DEVICE)
    seed = torch.tensor([0], device=DEVICE)
    with pytest.raises(ValueError, match="n_labelled"):
        ladder_kernels.encoder_layer(z, b, None, 10, 0.3, seed, 0)
    with pytest.raises(ValueError, match="salt"):
        ladder_kernels.encoder_layer(z, b, None, 5, 0.3, seed, ladder_kernels.SEED_STRIDE)
    with pytest.raises(ValueError, match="seed"):
        ladder_kernels.encoder_layer(z, b, None, 5, 0.3, seed.float(), 0)
    with pytest.raises(ValueError, match="shapes disagree"):
        ladder_kernels.decoder_layer(z, z, torch.zeros(16, 4, device=DEVICE))
