"""The Ladder network's per-layer operations in plain PyTorch: the reference for the fused kernels.

Two operations are fused on the GPU (:mod:`nvmeter.workloads.ladder_kernels`); these are their
unfused definitions, with the same signatures apart from how the noise is given:

* the encoder layer: batch norm of the pre-activation, separately for the labelled rows
  (the first ``n_labelled``) and the unlabelled rows; Gaussian noise; bias; ReLU, or at the
  top layer (z + beta) * gamma;
* the decoder layer: batch norm of the top-down signal and the unit-wise combinator
  g(z_noisy, u), an MLP 3 -> 2 -> 2 -> 1 with leaky ReLU applied to (u, z_noisy, u * z_noisy)
  with its own 17 parameters for every unit ("AMLP[2,2]", Pezeshki et al., ICML 2016).
"""

from __future__ import annotations

import torch

# Added to the batch variance before the square root. Large enough that a unit whose
# pre-activation is constant over a batch (a dead ReLU below) does not blow up.
BN_EPS = 1e-5
# Slope of the combinator's leaky ReLU for negative inputs (docs/task.md).
LEAK = 0.1
# Per-unit parameters of the combinator, rows of the (17, n) tensor:
# 0-5 first layer weights w1[j, k] at 3 j + k (j hidden unit, k input u, z, u*z);
# 6-7 first layer biases; 8-11 second layer weights w2[j, k] at 8 + 2 j + k;
# 12-13 second layer biases; 14-15 output weights; 16 output bias.
N_COMBINATOR_PARAMS = 17


def identity_combinator(n: int) -> torch.Tensor:
    """Combinator parameters for which every unit's output is its lateral input: g(u, z) = z.

    The published Ladders start their combinators deaf to the top-down signal u: the
    Ladder code of Pezeshki et al. (github.com/mpezeshki/ladder_network, ladder.py, ``g``)
    starts at z_hat = z + sigmoid(z), and the vanilla g of Rasmus et al. (NIPS 2015) starts
    at z_hat = 0 (its u terms are multiplied by weights that start at 0). The reconstruction
    cost then sends no gradient through u into the encoder at the start: the encoder first
    learns from the labels while the decoder learns to use the top-down signal. A random
    start instead lets 2000 x the input MSE drive the encoder from the first step; it learns
    to carry the input for the decoder rather than the class (train accuracy at chance after
    60 steps on MNIST; 50% on the H200 after 900 steps, results/ladder-h200-evaluate.log).

    The exact identity through two leaky-ReLU layers uses lrelu(a) - lrelu(-a) = (1 + LEAK) a:
    hidden layer 1 holds (lrelu(z), lrelu(-z)), hidden layer 2 holds lrelu(+-(1 + LEAK) z),
    and the output weights +-1 / (1 + LEAK)^2 give back z.

    Args:
        n: Units in the layer.

    Returns:
        Tensor (17, n) float32, rows as in ``N_COMBINATOR_PARAMS``: weights on z only, on
        the u and u * z inputs zero, all biases zero.
    """
    p = torch.zeros(N_COMBINATOR_PARAMS, n)
    # first layer w1[j, k] at 3 j + k, input k = 1 is z
    p[3 * 0 + 1], p[3 * 1 + 1] = 1.0, -1.0
    # second layer w2[j, k] at 8 + 2 j + k: unit 0 gets h1_0 - h1_1, unit 1 its negative
    p[8], p[9], p[10], p[11] = 1.0, -1.0, -1.0, 1.0
    p[14], p[15] = 1.0 / (1.0 + LEAK) ** 2, -1.0 / (1.0 + LEAK) ** 2
    return p


def batch_norm(x: torch.Tensor, eps: float = BN_EPS) -> torch.Tensor:
    """Normalise each column by its batch mean and biased variance, no affine part.

    Args:
        x: Tensor (rows, n).
        eps: Added to the variance.

    Returns:
        Tensor (rows, n).
    """
    mean = x.mean(0)
    centred = x - mean
    var = (centred * centred).mean(0)
    return centred * torch.rsqrt(var + eps)


def encoder_layer(
    z_pre: torch.Tensor,
    beta: torch.Tensor,
    gamma: torch.Tensor | None,
    n_labelled: int,
    noise: torch.Tensor | None,
    eps: float = BN_EPS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One noisy encoder layer after its matmul.

    Args:
        z_pre: Tensor (rows, n): the layer's pre-activation h @ W; the first ``n_labelled``
            rows are the labelled stream, the rest the unlabelled one.
        beta: Tensor (n,): the bias added after normalisation.
        gamma: Tensor (n,) for the top layer (output (z + beta) * gamma), None for a hidden
            layer (output relu(z + beta)).
        n_labelled: Rows of the labelled stream, 0 < n_labelled < rows.
        noise: Tensor (rows, n) already scaled by the noise level, or None for a clean pass.
        eps: Added to the batch variance.

    Returns:
        (h, z_noisy_unlabelled): the activation, Tensor (rows, n), and the normalised noisy
        pre-activation of the unlabelled rows, Tensor (rows - n_labelled, n), the decoder's
        lateral input.
    """
    z = torch.cat([batch_norm(z_pre[:n_labelled], eps), batch_norm(z_pre[n_labelled:], eps)])
    if noise is not None:
        z = z + noise
    h = torch.relu(z + beta) if gamma is None else (z + beta) * gamma
    return h, z[n_labelled:]


def _leaky_relu(x: torch.Tensor) -> torch.Tensor:
    return torch.where(x > 0, x, LEAK * x)


def combinator(u: torch.Tensor, z_noisy: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
    """The unit-wise AMLP combinator: each unit's MLP 3 -> 2 -> 2 -> 1 on (u, z, u * z).

    Args:
        u: Tensor (rows, n): the normalised top-down signal.
        z_noisy: Tensor (rows, n): the lateral (noisy encoder) signal.
        params: Tensor (17, n): each unit's parameters, rows as in ``N_COMBINATOR_PARAMS``.

    Returns:
        Tensor (rows, n): the denoised estimate z_hat.
    """
    # one unbind (one backward node) rather than 17 selects, each of which would
    # allocate and fill a (17, n) gradient in the backward
    p = params.unbind(0)
    inputs = (u, z_noisy, u * z_noisy)
    h1 = [_leaky_relu(sum(p[3 * j + k] * inputs[k] for k in range(3)) + p[6 + j]) for j in range(2)]
    h2 = [_leaky_relu(p[8 + 2 * j] * h1[0] + p[9 + 2 * j] * h1[1] + p[12 + j]) for j in range(2)]
    return p[14] * h2[0] + p[15] * h2[1] + p[16]


def decoder_layer(
    v: torch.Tensor, z_noisy: torch.Tensor, params: torch.Tensor, eps: float = BN_EPS
) -> torch.Tensor:
    """One decoder layer after its matmul: batch norm of the top-down signal, then the combinator.

    Args:
        v: Tensor (rows, n): the top-down signal before normalisation (z_hat above @ V, or
            the softmax output at the top).
        z_noisy: Tensor (rows, n): the lateral input from the noisy encoder.
        params: Tensor (17, n): the combinator's per-unit parameters.
        eps: Added to the batch variance.

    Returns:
        Tensor (rows, n): z_hat.
    """
    return combinator(batch_norm(v, eps), z_noisy, params)
