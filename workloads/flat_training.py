"""The CUDA-graph trainer with its optimiser step in one kernel (nvmeter's own recipe).

Same nets, batches, noise, dropout, loss and schedule as :class:`training.Trainer` (whose
code, and so the seed methods' versions, stay as they are); what changes is the update.
The weights are views of one flat buffer; after the backward one ``torch.cat`` gathers the
gradients into another, and :func:`flat_update.adamw_ema_` does AdamW and the EMA for every
weight at once, reading the learning rate at the step counter. That replaces PyTorch's fused
AdamW, the EMA's ``_foreach_lerp_`` and the learning-rate copy (docs/workloads.md,
"Faster kernels"). On CPU the same update runs as PyTorch operations.
"""

from __future__ import annotations

import torch

from nvmeter.workloads import flat_update, training
from nvmeter.workloads.training import Recipe, Trainer, matmul_precision


class _Grads:
    """What :class:`Trainer`'s capture and eager loop ask of an optimizer here: drop the gradients."""

    def __init__(self, params: list[torch.Tensor]) -> None:
        self.params = params

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None


class FlatTrainer(Trainer):
    """A :class:`Trainer` whose weights, gradients, moments and EMA are flat float32 buffers."""

    def __init__(self, recipe: Recipe, device: torch.device, rows: int, graph: bool) -> None:
        super().__init__(recipe, device, rows, graph)
        shapes = [p.shape for p in self.params]
        self.sizes = [p.numel() for p in self.params]
        self.flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        self.flat_initial = self.flat.clone()
        self.flat_grad = torch.zeros_like(self.flat)
        # exp_avg, exp_avg_sq and the EMA in one tensor: one kernel resets them
        self.state = torch.zeros(3, self.flat.numel(), device=device)
        # leaf views of the flat buffer: autograd gives each its own grad, the kernel writes the weights
        self.params = [
            v.view(s).requires_grad_() for v, s in zip(self.flat.split(self.sizes), shapes, strict=True)
        ]
        self.ema = [v.view(s) for v, s in zip(self.state[2].split(self.sizes), shapes, strict=True)]
        self.opt = _Grads(self.params)
        self.update = flat_update.adamw_ema_ if device.type == "cuda" else flat_update.adamw_ema_reference_

    def _step(self, host_step: int | None) -> None:
        """One training step; the learning rate always comes from the schedule at the step counter."""
        r = self.recipe
        idx = torch.randint(0, self.rows, (r.nets, r.batch), device=self.device)
        xb = self.x[idx]
        xb.add_(torch.randn_like(xb), alpha=r.noise)
        tb = self.targets[self.y[idx]]
        logits = training._forward(xb, self.params, r.dropout)
        loss = (tb * logits.log_softmax(-1)).sum() * (-1.0 / r.batch)
        loss.backward()
        with torch.no_grad():
            torch.cat([p.grad.reshape(-1) for p in self.params], out=self.flat_grad)
            exp_avg, exp_avg_sq, ema = self.state
            self.update(
                self.flat, self.flat_grad, exp_avg, exp_avg_sq, ema, self.lr_table, self.step_t,
                weight_decay=r.weight_decay, ema_decay=r.ema,
            )  # fmt: skip
            self.step_t += 1

    def _reset(self) -> None:
        with torch.no_grad():
            self.flat.copy_(self.flat_initial)
            self.state.zero_()
            self.step_t.zero_()


_TRAINERS: dict[tuple, FlatTrainer] = {}


def train_and_predict(
    recipe: Recipe, train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor
) -> torch.Tensor:
    """Run ``recipe`` as a method on a :class:`FlatTrainer` (graph mode on CUDA); (m,) int64 labels."""
    key = (recipe, train_x.device, train_x.shape[0])
    with matmul_precision(recipe.tf32):
        trainer = _TRAINERS.get(key)
        if trainer is None:
            trainer = _TRAINERS[key] = FlatTrainer(recipe, train_x.device, train_x.shape[0], True)
        return trainer(train_x, train_y, test_x)
