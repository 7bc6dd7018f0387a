import torch

from nvmeter.workloads import ladder_ops


def test_batch_norm_gives_zero_mean_unit_variance():
    x = torch.randn(300, 7, dtype=torch.float64) * 3 + 5
    y = ladder_ops.batch_norm(x, eps=0.0)
    assert torch.allclose(y.mean(0), torch.zeros(7, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(y.var(0, unbiased=False), torch.ones(7, dtype=torch.float64), atol=1e-12)


def test_encoder_layer_normalises_each_stream_apart():
    z = torch.cat([torch.randn(40, 5) * 2 + 10, torch.randn(60, 5) * 0.5 - 3])
    beta = torch.zeros(5)
    h, z_u = ladder_ops.encoder_layer(z, beta, torch.ones(5), 40, noise=None)
    for part in (h[:40], h[40:]):
        assert part.mean(0).abs().max() < 1e-5
        assert (part.var(0, unbiased=False) - 1).abs().max() < 1e-3
    assert torch.equal(z_u, h[40:])
    # hidden layers: ReLU after the bias
    h_relu, _ = ladder_ops.encoder_layer(z, torch.full((5,), 0.5), None, 40, noise=None)
    assert torch.equal(h_relu, torch.relu(h + 0.5))


def test_encoder_layer_adds_the_given_noise_before_the_bias():
    z = torch.randn(10, 3)
    noise = torch.randn(10, 3)
    beta, gamma = torch.randn(3), torch.randn(3)
    h0, _ = ladder_ops.encoder_layer(z, beta, gamma, 4, None)
    h1, z_u = ladder_ops.encoder_layer(z, beta, gamma, 4, noise)
    assert torch.allclose(h1, h0 + noise * gamma, atol=1e-6)
    assert torch.allclose(z_u, h1[4:] / gamma - beta, atol=1e-5)


def _unit_mlp(u, z, p):
    """One unit's AMLP written out with explicit matrices."""
    lrelu = torch.nn.functional.leaky_relu
    x = torch.stack([u, z, u * z], dim=1)
    w1, b1 = p[0:6].reshape(2, 3), p[6:8]
    w2, b2 = p[8:12].reshape(2, 2), p[12:14]
    w3, b3 = p[14:16], p[16]
    h1 = lrelu(x @ w1.T + b1, 0.1)
    h2 = lrelu(h1 @ w2.T + b2, 0.1)
    return h2 @ w3 + b3


def test_combinator_matches_a_per_unit_mlp():
    torch.manual_seed(0)
    u, z, p = torch.randn(50, 4), torch.randn(50, 4), torch.randn(17, 4)
    out = ladder_ops.combinator(u, z, p)
    for j in range(4):
        assert torch.allclose(out[:, j], _unit_mlp(u[:, j], z[:, j], p[:, j]), atol=1e-5)


def test_decoder_layer_normalises_the_top_down_signal():
    torch.manual_seed(1)
    v, z, p = torch.randn(50, 4) * 7 + 2, torch.randn(50, 4), torch.randn(17, 4)
    assert torch.allclose(
        ladder_ops.decoder_layer(v, z, p), ladder_ops.combinator(ladder_ops.batch_norm(v), z, p), atol=1e-6
    )


def test_identity_combinator_passes_the_lateral_input_and_ignores_u():
    torch.manual_seed(2)
    u = torch.randn(64, 5, requires_grad=True)
    z = torch.randn(64, 5) * 3
    out = ladder_ops.combinator(u, z, ladder_ops.identity_combinator(5))
    assert torch.allclose(out, z, rtol=1e-6, atol=1e-6)
    # no gradient reaches the top-down path (and so the encoder above) at the start
    (g_u,) = torch.autograd.grad(out.square().sum(), u)
    assert torch.equal(g_u, torch.zeros_like(g_u))
