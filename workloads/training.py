"""What the MLP methods share: matmul precision, the lr schedule, and a batched trainer.

The trainer trains E nets at once, eagerly or as one replayed CUDA graph per step.

The trainer is the CUDA-graph recipe of docs/task.md: one whole training step
(random batch indices, gather, input noise, the learning rate read from a schedule tensor,
forward with dropout, soft-target cross-entropy, backward, fused capturable AdamW, EMA of
the weights, the step counter) is captured once into a CUDA graph and replayed ``steps``
times per call. Weights, optimizer state, EMA and step counter are reset in place at the
start of every call, so a call's cost is only copies, replays and the prediction. E nets
are trained at once with batched matmuls (``baddbmm``); each net draws its own batch.
On CPU, or with ``graph=False``, the same step runs eagerly (tests, and the eager ensemble).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from nvmeter.workloads.task import CLASSES, COMPONENTS

# Steps run on a side stream before capture, so that lazy state (optimizer moments, grads,
# cuBLAS workspaces) exists before the graph records (torch.cuda.graphs docs use 3).
_WARMUP_STEPS = 3
# Initial weights are the same on every call and every machine.
_INIT_SEED = 0


def dropout_mlp(width: int, device, dropout: float = 0.1) -> nn.Sequential:
    """The eager methods' net: 60-width-width-10, ReLU, dropout after each hidden layer."""
    return nn.Sequential(
        nn.Linear(COMPONENTS, width),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(width, width),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(width, CLASSES),
    ).to(device)


@contextlib.contextmanager
def matmul_precision(tf32: bool):
    """Allow TF32 float32 matmuls (``tf32=True``) or force full FP32 inside the block."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def warmup_cosine(steps: int, warmup_frac: float) -> list[float]:
    """Learning-rate factors per step: linear warm-up over ``warmup_frac`` of the steps, then cosine to ~0."""
    warm = max(1, round(steps * warmup_frac))
    out = []
    for s in range(steps):
        if s < warm:
            out.append((s + 1) / warm)
        else:
            out.append(0.5 * (1.0 + math.cos(math.pi * (s - warm) / (steps - warm))))
    return out


def soft_targets(smoothing: float, device) -> torch.Tensor:
    """(10, 10) float32: row ``k`` is class ``k``'s label-smoothed target distribution."""
    eye = torch.eye(CLASSES, device=device)
    return eye * (1.0 - smoothing) + smoothing / CLASSES


@dataclass(frozen=True)
class Recipe:
    """A batched-MLP recipe: E nets of 60-width-width-10 with ReLU.

    Attributes:
        nets: Nets trained at once (E).
        width: Hidden units per layer.
        steps: Optimizer steps per call.
        batch: Rows per net per step.
        lr: Peak learning rate (AdamW), reached after the warm-up.
        weight_decay: AdamW's decoupled weight decay.
        ema: EMA decay of the weights (bias-corrected at the end).
        noise: Std of Gaussian noise added to the (whitened, unit-variance) inputs.
        dropout: Dropout after each hidden layer.
        smoothing: Label smoothing of the soft targets.
        warmup: Fraction of the steps spent warming up the learning rate.
        tf32: Whether float32 matmuls may use TF32.
        steps_per_graph: Steps captured in one CUDA graph (graph mode); ``steps`` must be a
            multiple. 1 is the seed's recipe. On the H200 10 steps a graph gave 31.4 ms a call
            against 31.7 (medians of 30; the ranges, 31.1-31.8 and 31.5-32.1 ms, overlap) and
            200 steps 37.5 ms, slower
            (bench/graph_mlp_step.py, results/graph-mlp-step-h200).

    """

    nets: int
    width: int
    steps: int
    lr: float
    ema: float
    batch: int = 512
    weight_decay: float = 0.01
    noise: float = 0.3
    dropout: float = 0.1
    smoothing: float = 0.1
    warmup: float = 0.1
    tf32: bool = True
    steps_per_graph: int = 1

    def __post_init__(self) -> None:
        for name in ("steps", "steps_per_graph"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, not {value!r}")
        if self.steps % self.steps_per_graph:
            raise ValueError(f"steps_per_graph={self.steps_per_graph} must divide steps={self.steps}")


def _forward(x: torch.Tensor, params: list[torch.Tensor], dropout: float) -> torch.Tensor:
    w1, b1, w2, b2, w3, b3 = params
    h = F.relu(torch.baddbmm(b1, x, w1))
    if dropout:
        h = F.dropout(h, dropout, training=True)
    h = F.relu(torch.baddbmm(b2, h, w2))
    if dropout:
        h = F.dropout(h, dropout, training=True)
    return torch.baddbmm(b3, h, w3)


class Trainer:
    """Trains a :class:`Recipe` on (rows, 60) inputs on one device; reusable across calls.

    Build one per (recipe, device, rows, graph) and call it like a method.
    """

    def __init__(self, recipe: Recipe, device: torch.device, rows: int, graph: bool) -> None:
        self.recipe = recipe
        self.device = device
        self.rows = rows
        self.graph_mode = graph and device.type == "cuda"
        r = recipe
        gen = torch.Generator().manual_seed(_INIT_SEED)
        params = []
        for fan_in, fan_out in ((COMPONENTS, r.width), (r.width, r.width), (r.width, CLASSES)):
            # nn.Linear's default init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases
            bound = 1.0 / math.sqrt(fan_in)
            params.append((torch.rand(r.nets, fan_in, fan_out, generator=gen) * 2 - 1) * bound)
            params.append((torch.rand(r.nets, 1, fan_out, generator=gen) * 2 - 1) * bound)
        self.params = [p.to(device).requires_grad_() for p in params]
        self.initial = [p.detach().clone() for p in self.params]
        self.ema = [torch.zeros_like(p, requires_grad=False) for p in self.params]
        self.x = torch.zeros(rows, COMPONENTS, device=device)
        self.y = torch.zeros(rows, dtype=torch.int64, device=device)
        self.targets = soft_targets(r.smoothing, device)
        self.lr_host = [r.lr * f for f in warmup_cosine(r.steps, r.warmup)]
        self.lr_table = torch.tensor(self.lr_host, dtype=torch.float32, device=device)
        self.step_t = torch.zeros(1, dtype=torch.int64, device=device)
        if self.graph_mode:
            # A device-tensor lr that the graph overwrites from the schedule each step.
            self.opt = torch.optim.AdamW(
                self.params,
                lr=torch.tensor(r.lr, device=device),
                weight_decay=r.weight_decay,
                fused=True,
                capturable=True,
            )
            self.lr = self.opt.param_groups[0]["lr"]
        else:
            self.opt = torch.optim.AdamW(
                self.params, lr=r.lr, weight_decay=r.weight_decay, fused=device.type == "cuda"
            )
        self.graph: torch.cuda.CUDAGraph | None = None

    def _step(self, host_step: int | None) -> None:
        """One training step; ``host_step`` None means the lr comes from the schedule tensor."""
        r = self.recipe
        idx = torch.randint(0, self.rows, (r.nets, r.batch), device=self.device)
        xb = self.x[idx]  # a fresh gathered tensor, so the noise can go in place (one kernel, not two)
        xb.add_(torch.randn_like(xb), alpha=r.noise)
        tb = self.targets[self.y[idx]]
        if host_step is None:
            self.lr.copy_(self.lr_table.index_select(0, self.step_t).squeeze(0))
        else:
            self.opt.param_groups[0]["lr"] = self.lr_host[host_step]
        logits = _forward(xb, self.params, r.dropout)
        # the sum over nets of each net's mean soft-target cross-entropy, in as few kernels as it takes
        loss = (tb * logits.log_softmax(-1)).sum() * (-1.0 / r.batch)
        loss.backward()
        self.opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(self.ema, [p.detach() for p in self.params], 1.0 - r.ema)
            self.step_t += 1

    def _reset(self) -> None:
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.initial)
            torch._foreach_zero_(self.ema)
            self.step_t.zero_()
            for state in self.opt.state.values():
                for key in ("exp_avg", "exp_avg_sq", "step"):
                    if key in state:
                        state[key].zero_()

    def _capture(self) -> None:
        with warnings.catch_warnings():
            # AdamW warns when a capturable instance steps outside a capture: the warm-up does
            warnings.filterwarnings("ignore", message=".*capturable=True.*")
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(_WARMUP_STEPS):
                    self.opt.zero_grad(set_to_none=True)
                    self._step(None)
            torch.cuda.current_stream(self.device).wait_stream(side)
            self._reset()
            # grads set to None so backward allocates them from the graph's private pool
            self.opt.zero_grad(set_to_none=True)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for i in range(self.recipe.steps_per_graph):
                    if i:  # a later step's backward would accumulate into the grads of the one before
                        self.opt.zero_grad(set_to_none=True)
                    self._step(None)
        self.graph = graph

    def __call__(self, train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor) -> torch.Tensor:
        """Train on (train_x, train_y) from the initial weights and label test_x.

        Args:
            train_x: (rows, 60) float32 on the trainer's device.
            train_y: (rows,) int64 in 0..9.
            test_x: (m, 60) float32.

        Returns:
            (m,) int64 labels: the argmax of the nets' softmax outputs summed.

        """
        r = self.recipe
        self.x.copy_(train_x)
        self.y.copy_(train_y)
        if self.graph_mode:
            if self.graph is None:
                self._capture()
            self._reset()
            for _ in range(r.steps // r.steps_per_graph):
                self.graph.replay()
        else:
            self._reset()
            for s in range(r.steps):
                self.opt.zero_grad(set_to_none=True)
                self._step(s)
        return self.predict(test_x)

    @torch.no_grad()
    def predict(self, test_x: torch.Tensor) -> torch.Tensor:
        """Label (m, 60) inputs with the bias-corrected EMA weights; (m,) int64."""
        r = self.recipe
        weights = torch._foreach_div(self.ema, 1.0 - r.ema**r.steps)
        logits = _forward(test_x.expand(r.nets, -1, -1), weights, 0.0)
        return logits.softmax(-1).sum(0).argmax(-1)


_TRAINERS: dict[tuple, Trainer] = {}


def train_and_predict(
    recipe: Recipe, graph: bool, train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor
) -> torch.Tensor:
    """Run ``recipe`` as a method, reusing one :class:`Trainer` per (recipe, device, rows, graph).

    The first call on a device builds the trainer and, for ``graph=True`` on CUDA, captures
    the step (warm-up calls absorb this); on CPU ``graph`` is ignored and the step runs eagerly.

    Returns:
        (m,) int64 labels on test_x's device.

    """
    key = (recipe, graph, train_x.device, train_x.shape[0])
    with matmul_precision(recipe.tf32):
        trainer = _TRAINERS.get(key)
        if trainer is None:
            trainer = _TRAINERS[key] = Trainer(recipe, train_x.device, train_x.shape[0], graph)
        return trainer(train_x, train_y, test_x)
