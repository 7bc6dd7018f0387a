"""The loss-proportional sampler: which labelled rows a training step draws.

Each step draws its labelled rows with replacement, with probability

    p_i = (1 - mix_t) / n + mix_t * score_i / sum(score),

where ``score_i`` is row i's latest cross-entropy (1 before the row is first seen) and
``mix_t`` follows a schedule: 0 for the first 10% of the steps (scores are still stale),
``mix`` until 60%, then linearly down to 0 at 90% so the last steps see the true
distribution again. Recipe of the mnist-a100 benchmark's Ladder (docs/task.md).

Everything here is tensor code with no host synchronisation, so a step that calls
:func:`draw_rows` and :func:`record_losses` can be captured in a CUDA graph.
"""

from __future__ import annotations

import torch

# Fractions of the run where the mix schedule changes (docs/task.md).
MIX_START_FRACTION = 0.1
MIX_HOLD_END_FRACTION = 0.6
MIX_END_FRACTION = 0.9
# A row's score before it has been drawn once: every row equally likely.
INITIAL_SCORE = 1.0


def mix_schedule(n_steps: int, mix: float, device: torch.device | str = "cpu") -> torch.Tensor:
    """The weight of the loss-proportional part at each step.

    Args:
        n_steps: Steps in the run (> 0).
        mix: The plateau value, in [0, 1] (0.9 at difficulty 3, 0.5 at difficulty 4).
        device: Where the schedule lives.

    Returns:
        Tensor (n_steps,) float32: 0 for step/n_steps < 0.1, ``mix`` until 0.6, then
        linear to 0 at 0.9 and 0 after.

    Raises:
        ValueError: If n_steps < 1 or mix is outside [0, 1].
    """
    if n_steps < 1:
        raise ValueError(f"n_steps must be at least 1, got {n_steps}")
    if not 0.0 <= mix <= 1.0:
        raise ValueError(f"mix must lie in [0, 1], got {mix}")
    frac = torch.arange(n_steps, dtype=torch.float64) / n_steps
    ramp = (MIX_END_FRACTION - frac) / (MIX_END_FRACTION - MIX_HOLD_END_FRACTION)
    out = torch.where(frac < MIX_HOLD_END_FRACTION, torch.ones_like(frac), ramp.clamp(0.0, 1.0))
    out = torch.where(frac < MIX_START_FRACTION, torch.zeros_like(frac), out) * mix
    return out.to(device=device, dtype=torch.float32)


def draw_rows(scores: torch.Tensor, mix: torch.Tensor, n_draw: int) -> torch.Tensor:
    """Draw row indices with probability (1 - mix)/n + mix * score/sum(score).

    Inverse-CDF sampling: a cumulative sum of the probabilities and a binary search
    (``searchsorted``) of uniform draws in it; no host synchronisation.

    Args:
        scores: Tensor (n,) float32, non-negative, not all zero: each row's latest loss.
        mix: Tensor (1,) float32 in [0, 1]: this step's weight of the loss-proportional part.
        n_draw: How many rows to draw (with replacement).

    Returns:
        Tensor (n_draw,) int64 of indices in [0, n), on ``scores``' device.
    """
    n = scores.shape[0]
    prob = (1.0 - mix) / n + mix * scores / scores.sum()
    cdf = torch.cumsum(prob, 0)
    # scaled by the last entry so rounding in the sum never leaves a gap at the top
    u = torch.rand(n_draw, device=scores.device, dtype=cdf.dtype) * cdf[-1:]
    return torch.searchsorted(cdf, u, right=True).clamp_(max=n - 1)


def record_losses(scores: torch.Tensor, rows: torch.Tensor, losses: torch.Tensor) -> None:
    """Store each drawn row's latest loss as its score, in place.

    A row drawn twice in one step keeps one of its two (equal-model) losses.

    Args:
        scores: Tensor (n,) float32, updated in place.
        rows: Tensor (k,) int64, the rows drawn this step.
        losses: Tensor (k,) float32, their per-row cross-entropy (detached here).
    """
    scores.index_put_((rows,), losses.detach().to(scores.dtype))
