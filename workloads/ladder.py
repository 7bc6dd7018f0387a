"""The Ladder network method: semi-supervised MNIST training, one CUDA graph per step.

The recipe (docs/task.md, after Pezeshki et al., ICML 2016, AMLP[2,2] combinator):
encoder 60-1000-500-250-250-250-10, Gaussian noise 0.3 at the input and after every batch
norm, inputs scaled by 0.6; loss = cross-entropy on 1,000 labelled rows + 2000 x the mean
squared error between the decoder's reconstruction and the clean input of 1,000 unlabelled
rows (drawn from train_x and test_x together; test labels are never seen); Adam lr 0.008,
constant for the first 100/150 of the steps then linear to 0; at the end the batch-norm
statistics are calibrated on the training rows and a clean encoder pass predicts.
Labelled rows come from the loss-proportional sampler (:mod:`nvmeter.workloads.loss_sampler`).

On CUDA the whole training step (draws, gathers, noise, forward, backward, Adam, score
update, step counter) is captured once in a CUDA graph and replayed; each call copies its
inputs into static buffers and resets the weights and optimiser state in place. On CPU the
same step runs eagerly (tests).

Three variants share everything but the per-layer element-wise work: ``fused=False`` uses
:mod:`nvmeter.workloads.ladder_ops` (plain PyTorch), ``fused=True`` the Triton kernels of
:mod:`nvmeter.workloads.ladder_kernels` (the seed's), and ``fused=True, fast=True`` the faster
kernels of :mod:`nvmeter.workloads.ladder_fast_kernels` (nvmeter's own; the same operations and
the same in-kernel noise).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from nvmeter.workloads import ladder_ops, loss_sampler

# Architecture and recipe of the benchmark's Ladder (docs/task.md).
SIZES = (60, 1000, 500, 250, 250, 250, 10)
NOISE_STD = 0.3
INPUT_SCALE = 0.6
RECON_WEIGHT = 2000.0
BATCH_LABELLED = 1000
BATCH_UNLABELLED = 1000
LR = 0.008
DECAY_START_FRACTION = 100 / 150
# Steps and sampler mix per difficulty (docs/task.md, "Ladder, sampled" rows).
STEPS_D3, MIX_D3 = 900, 0.9
STEPS_D4, MIX_D4 = 1800, 0.5
# Steps run before capture, on a side stream: they compile the Triton kernels, pick the
# cuBLAS algorithms and create Adam's state, none of which may happen during capture.
_WARMUP_STEPS = 3
# Seed of the weight initialisation; every call starts from the same weights.
_INIT_SEED = 20160619


@dataclass(frozen=True)
class LadderRecipe:
    """Everything that defines one Ladder training run.

    Attributes:
        n_steps: Training steps (one labelled and one unlabelled batch each).
        mix: Plateau of the loss-proportional sampler's mix schedule, in [0, 1].
        fused: Use the fused Triton kernels for the per-layer element-wise work.
        fast: With ``fused``, the faster kernels of :mod:`ladder_fast_kernels` instead of
            the seed's :mod:`ladder_kernels` (same operations and noise).
        sizes: Layer widths, input first, classes last.
        noise_std: Noise added at the input and after each batch norm (noisy encoder).
        input_scale: Factor applied to the released features.
        recon_weight: Weight of the input reconstruction MSE in the loss.
        batch_labelled: Labelled rows per step.
        batch_unlabelled: Unlabelled rows per step.
        lr: Adam's learning rate before the decay.
        decay_start_fraction: Fraction of the steps after which lr falls linearly to 0.
    """

    n_steps: int = STEPS_D3
    mix: float = MIX_D3
    fused: bool = False
    fast: bool = False
    sizes: tuple[int, ...] = SIZES
    noise_std: float = NOISE_STD
    input_scale: float = INPUT_SCALE
    recon_weight: float = RECON_WEIGHT
    batch_labelled: int = BATCH_LABELLED
    batch_unlabelled: int = BATCH_UNLABELLED
    lr: float = LR
    decay_start_fraction: float = DECAY_START_FRACTION

    def __post_init__(self) -> None:
        if self.n_steps < 1 or len(self.sizes) < 2 or min(self.sizes) < 1:
            raise ValueError(f"bad recipe: n_steps={self.n_steps}, sizes={self.sizes}")
        if min(self.batch_labelled, self.batch_unlabelled) < 2:
            raise ValueError("batch norm needs at least 2 rows in each stream")
        if self.fast and not self.fused:
            raise ValueError("fast names the fused kernels' faster variant: it needs fused=True")
        if len(self.sizes) - 1 >= 64:
            raise ValueError("at most 63 noisy layers (the fused kernels' Philox salts)")


def lr_schedule(recipe: LadderRecipe, device: torch.device | str = "cpu") -> torch.Tensor:
    """Adam's learning rate at each step: constant, then linear to 0 at the end.

    Args:
        recipe: Gives n_steps, lr and decay_start_fraction.
        device: Where the schedule lives.

    Returns:
        Tensor (n_steps,) float32; step s >= n_steps * decay_start_fraction gets
        lr * (n_steps - s) / (n_steps - decay start).
    """
    n = recipe.n_steps
    start = n * recipe.decay_start_fraction
    steps = torch.arange(n, dtype=torch.float64)
    decay = (n - steps) / max(n - start, 1e-9)
    lr = recipe.lr * torch.where(steps < start, torch.ones_like(steps), decay.clamp(0.0, 1.0))
    return lr.to(device=device, dtype=torch.float32)


class LadderNet(torch.nn.Module):
    """The Ladder's parameters and its training loss.

    Parameters: encoder weights ``w[l]`` (sizes[l], sizes[l+1]) (no bias: batch norm follows),
    ``beta[l]`` (sizes[l+1],), ``gamma`` (classes,) at the top; decoder weights ``v[l]``
    (sizes[l+1], sizes[l]); combinator parameters ``comb[l]`` (17, sizes[l]) for l = 0..L,
    starting as the identity on the lateral input (:func:`ladder_ops.identity_combinator`).
    """

    def __init__(self, sizes: tuple[int, ...], generator: torch.Generator) -> None:
        super().__init__()

        def normal(rows: int, cols: int) -> torch.nn.Parameter:
            # unit-variance pre-activations for unit-variance inputs
            return torch.nn.Parameter(torch.randn(rows, cols, generator=generator) / math.sqrt(rows))

        n_layers = len(sizes) - 1
        self.w = torch.nn.ParameterList([normal(sizes[i], sizes[i + 1]) for i in range(n_layers)])
        self.beta = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(n)) for n in sizes[1:]])
        self.gamma = torch.nn.Parameter(torch.ones(sizes[-1]))
        self.v = torch.nn.ParameterList([normal(sizes[i + 1], sizes[i]) for i in range(n_layers)])
        # each unit's combinator starts as z_hat = z_noisy, deaf to the top-down signal
        # (see ladder_ops.identity_combinator: a random start does not learn)
        self.comb = torch.nn.ParameterList(
            [torch.nn.Parameter(ladder_ops.identity_combinator(n)) for n in sizes]
        )

    def loss(
        self,
        x_labelled: torch.Tensor,
        y_labelled: torch.Tensor,
        x_unlabelled: torch.Tensor,
        recipe: LadderRecipe,
        noise_key: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The training loss of one step (noisy encoder, decoder), graph-capturable.

        Args:
            x_labelled: Tensor (batch_labelled, sizes[0]) float32, already scaled.
            y_labelled: Tensor (batch_labelled,) int64.
            x_unlabelled: Tensor (batch_unlabelled, sizes[0]) float32, already scaled: the
                clean input the decoder reconstructs.
            recipe: Noise level, reconstruction weight, and ``fused``.
            noise_key: Tensor (1,) int64 seeding the fused kernels' noise (unused if not fused).

        Returns:
            (ce_rows, loss): per-row cross-entropy of the labelled rows, Tensor
            (batch_labelled,), and the scalar loss.
        """
        n_lab = x_labelled.shape[0]
        n_layers = len(self.w)
        x = torch.cat([x_labelled, x_unlabelled])
        z0 = x + recipe.noise_std * torch.randn_like(x) if recipe.noise_std else x
        h = z0
        laterals = [z0[n_lab:]]
        for i in range(n_layers):
            gamma = self.gamma if i == n_layers - 1 else None
            z_pre = h @ self.w[i]
            h, z_u = _encode(z_pre, self.beta[i], gamma, n_lab, recipe, noise_key, salt=i)
            laterals.append(z_u)
        ce_rows = F.cross_entropy(h[:n_lab], y_labelled, reduction="none")
        top_down = torch.softmax(h[n_lab:], dim=1)
        for i in range(n_layers, -1, -1):
            z_hat = _decode(top_down, laterals[i], self.comb[i], recipe)
            if i:
                top_down = z_hat @ self.v[i - 1]
        recon = F.mse_loss(z_hat, x_unlabelled)
        return ce_rows, ce_rows.mean() + recipe.recon_weight * recon

    @torch.no_grad()
    def predict(self, calib_x: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Clean encoder pass with batch-norm statistics calibrated on ``calib_x``.

        The statistics are those of all of ``calib_x`` at once (the mean over its
        minibatches, without their sampling noise).

        Args:
            calib_x: Tensor (n_calib, sizes[0]) float32, scaled training rows.
            x: Tensor (n, sizes[0]) float32, scaled rows to classify.

        Returns:
            Tensor (n,) int64: predicted classes.
        """
        h_c, h = calib_x, x
        n_layers = len(self.w)
        for i in range(n_layers):
            z_c, z = h_c @ self.w[i], h @ self.w[i]
            mean = z_c.mean(0)
            rstd = torch.rsqrt(((z_c - mean) ** 2).mean(0) + ladder_ops.BN_EPS)
            a_c = (z_c - mean) * rstd + self.beta[i]
            a = (z - mean) * rstd + self.beta[i]
            if i == n_layers - 1:
                h = a * self.gamma
            else:
                h_c, h = torch.relu(a_c), torch.relu(a)
        return h.argmax(dim=1)


def _kernels(recipe):
    if recipe.fast:
        from nvmeter.workloads import ladder_fast_kernels

        return ladder_fast_kernels
    from nvmeter.workloads import ladder_kernels

    return ladder_kernels


def _encode(z_pre, beta, gamma, n_lab, recipe, noise_key, salt):
    if recipe.fused:
        return _kernels(recipe).encoder_layer(z_pre, beta, gamma, n_lab, recipe.noise_std, noise_key, salt)
    noise = recipe.noise_std * torch.randn_like(z_pre) if recipe.noise_std else None
    return ladder_ops.encoder_layer(z_pre, beta, gamma, n_lab, noise)


def _decode(v, z_noisy, params, recipe):
    if recipe.fused:
        return _kernels(recipe).decoder_layer(v, z_noisy, params)
    return ladder_ops.decoder_layer(v, z_noisy, params)


def _resolved(device: torch.device) -> torch.device:
    """``cuda`` as the current CUDA device with its index, so it equals the inputs' ``cuda:0``."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


@contextlib.contextmanager
def _tf32() -> Iterator[None]:
    # TF32 matmuls (recipe) without leaving the process-wide setting changed
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


class LadderTrainer:
    """One Ladder set up for inputs of fixed shapes on one device, reusable across calls.

    Args:
        recipe: The run's recipe.
        n_train: Labelled rows per call.
        n_test: Test rows per call.
        device: Where it runs; CUDA captures the step in a graph, anything else runs eagerly.
        use_graph: Capture the step in a CUDA graph (CUDA only; default: on CUDA).

    Raises:
        ValueError: If use_graph is asked for off CUDA.
    """

    def __init__(
        self,
        recipe: LadderRecipe,
        n_train: int,
        n_test: int,
        device: torch.device | str,
        use_graph: bool | None = None,
    ) -> None:
        self.recipe = recipe
        self.device = _resolved(torch.device(device))
        on_cuda = self.device.type == "cuda"
        self.use_graph = on_cuda if use_graph is None else use_graph
        if self.use_graph and not on_cuda:
            raise ValueError("CUDA graphs need a CUDA device")
        dev = self.device
        gen = torch.Generator().manual_seed(_INIT_SEED)
        self.net = LadderNet(recipe.sizes, gen).to(dev)
        self._init = [p.detach().clone() for p in self.net.parameters()]
        n_in = recipe.sizes[0]
        # static buffers: the graph reads and writes these addresses on every replay
        self.train_x = torch.zeros(n_train, n_in, device=dev)
        self.train_y = torch.zeros(n_train, dtype=torch.int64, device=dev)
        self.pool_x = torch.zeros(n_train + n_test, n_in, device=dev)
        self.scores = torch.full((n_train,), loss_sampler.INITIAL_SCORE, device=dev)
        self.step = torch.zeros(1, dtype=torch.int64, device=dev)
        # counts every step ever run, so the fused kernels' noise never repeats across calls
        self.noise_key = torch.zeros(1, dtype=torch.int64, device=dev)
        self.mix = loss_sampler.mix_schedule(recipe.n_steps, recipe.mix, dev)
        self.lr_sched = lr_schedule(recipe, dev)
        self.lr = torch.tensor(recipe.lr, device=dev)
        self.last_loss = torch.zeros((), device=dev)
        if on_cuda:
            self.opt = torch.optim.Adam(self.net.parameters(), lr=self.lr, fused=True, capturable=True)
        else:
            self.opt = torch.optim.Adam(self.net.parameters(), lr=self.lr, foreach=False)
        self.graph: torch.cuda.CUDAGraph | None = None

    def _step(self) -> None:
        """One training step; no host synchronisation, so it can be captured."""
        r = self.recipe
        mix = self.mix.index_select(0, self.step)
        rows = loss_sampler.draw_rows(self.scores, mix, r.batch_labelled)
        rows_u = torch.randint(0, self.pool_x.shape[0], (r.batch_unlabelled,), device=self.device)
        ce_rows, loss = self.net.loss(
            self.train_x.index_select(0, rows),
            self.train_y.index_select(0, rows),
            self.pool_x.index_select(0, rows_u),
            r,
            self.noise_key,
        )
        loss.backward()
        self.lr.copy_(self.lr_sched.index_select(0, self.step).squeeze(0))
        self.opt.step()
        loss_sampler.record_losses(self.scores, rows, ce_rows)
        self.last_loss.copy_(loss.detach())
        self.step.add_(1)
        self.noise_key.add_(1)

    def _reset(self) -> None:
        with torch.no_grad():
            for p, p0 in zip(self.net.parameters(), self._init, strict=True):
                p.copy_(p0)
            for state in self.opt.state.values():
                for value in state.values():
                    value.zero_()
        self.scores.fill_(loss_sampler.INITIAL_SCORE)
        self.step.zero_()

    def _capture(self) -> None:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(_WARMUP_STEPS):
                self.opt.zero_grad(set_to_none=True)
                self._step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.step.zero_()
        # grads are None at capture, so the captured backward writes them (no accumulation)
        self.opt.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._step()
        self.graph = graph

    def load(self, train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor) -> None:
        """Copy one call's inputs into the static buffers and reset the weights and optimiser.

        Captures the CUDA graph on the first call.

        Args:
            train_x: Tensor (n_train, sizes[0]) float32.
            train_y: Tensor (n_train,) int64, classes in [0, sizes[-1]).
            test_x: Tensor (n_test, sizes[0]) float32.

        Raises:
            ValueError: If a shape, dtype or device does not match the trainer's.
        """
        n_train, n_in = self.train_x.shape
        n_test = self.pool_x.shape[0] - n_train
        want = {"train_x": (n_train, n_in), "train_y": (n_train,), "test_x": (n_test, n_in)}
        for name, t in (("train_x", train_x), ("train_y", train_y), ("test_x", test_x)):
            if tuple(t.shape) != want[name] or t.device != self.device:
                raise ValueError(
                    f"{name}: want {want[name]} on {self.device}, got {tuple(t.shape)} on {t.device}"
                )
        if train_x.dtype != torch.float32 or test_x.dtype != torch.float32 or train_y.dtype != torch.int64:
            raise ValueError("want float32 features and int64 labels")
        s = self.recipe.input_scale
        with torch.no_grad():
            self.train_x.copy_(train_x).mul_(s)
            self.train_y.copy_(train_y)
            self.pool_x[:n_train].copy_(self.train_x)
            self.pool_x[n_train:].copy_(test_x).mul_(s)
        if self.use_graph and self.graph is None:
            with _tf32():
                self._capture()
        self._reset()

    def run_steps(self, n: int) -> None:
        """Run n training steps (graph replays on CUDA); the schedules index by the step counter.

        Args:
            n: Steps; the step counter must stay below recipe.n_steps.
        """
        if self.graph is not None:
            for _ in range(n):
                self.graph.replay()
            return
        with _tf32():
            for _ in range(n):
                self.opt.zero_grad(set_to_none=True)
                self._step()

    def predict(self, test_x: torch.Tensor) -> torch.Tensor:
        """Classify test_x after training: calibrate batch norm on the training rows, clean pass.

        Args:
            test_x: Tensor (n, sizes[0]) float32 (unscaled, as released).

        Returns:
            Tensor (n,) int64 on the trainer's device.
        """
        with _tf32():
            return self.net.predict(self.train_x, test_x * self.recipe.input_scale)

    def __call__(self, train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor) -> torch.Tensor:
        """Train from scratch on one draw and label its test rows (see :meth:`load`)."""
        self.load(train_x, train_y, test_x)
        self.run_steps(self.recipe.n_steps)
        return self.predict(test_x)


class LadderMethod:
    """A benchmark method ``method(train_x, train_y, test_x) -> labels`` backed by cached trainers.

    One :class:`LadderTrainer` (and, on CUDA, one captured graph) is kept per device and
    input shape, so only the first call of a shape pays for setup and capture.

    Args:
        name: The method's name in :data:`METHODS`.
        difficulty: The benchmark difficulty level it targets.
        recipe: Its recipe.
    """

    def __init__(self, name: str, difficulty: int, recipe: LadderRecipe) -> None:
        self.name = name
        self.difficulty = difficulty
        self.recipe = recipe
        self._trainers: dict[tuple, LadderTrainer] = {}

    def trainer(self, train_x: torch.Tensor, test_x: torch.Tensor) -> LadderTrainer:
        """The cached trainer for these inputs' device and shapes (built on first use)."""
        key = (train_x.device, train_x.shape[0], test_x.shape[0])
        if key not in self._trainers:
            self._trainers[key] = LadderTrainer(
                self.recipe, train_x.shape[0], test_x.shape[0], train_x.device
            )
        return self._trainers[key]

    def __call__(self, train_x: torch.Tensor, train_y: torch.Tensor, test_x: torch.Tensor) -> torch.Tensor:
        """Train on (train_x, train_y) and label test_x.

        Args:
            train_x: Tensor (10000, 60) float32 on the GPU (any n_train x sizes[0]).
            train_y: Tensor (10000,) int64, classes 0-9.
            test_x: Tensor (10000, 60) float32.

        Returns:
            Tensor (n_test,) int64 on the inputs' device.

        Raises:
            ValueError: On inputs of the wrong shape, dtype or device.
        """
        return self.trainer(train_x, test_x)(train_x, train_y, test_x)

    def __repr__(self) -> str:
        return f"LadderMethod({self.name!r}, difficulty={self.difficulty}, {self.recipe})"


def _methods() -> dict[str, LadderMethod]:
    out = {}
    for difficulty, steps, mix in ((3, STEPS_D3, MIX_D3), (4, STEPS_D4, MIX_D4)):
        for kind, fused, fast in (("plain", False, False), ("fused", True, False), ("fast", True, True)):
            name = f"ladder_d{difficulty}_{kind}"
            recipe = LadderRecipe(n_steps=steps, mix=mix, fused=fused, fast=fast)
            out[name] = LadderMethod(name, difficulty, recipe)
    return out


#: The Ladder methods by name; each has ``.difficulty`` and ``.recipe``.
METHODS: dict[str, LadderMethod] = _methods()

__all__ = ["METHODS", "LadderMethod", "LadderNet", "LadderRecipe", "LadderTrainer", "lr_schedule", "replace"]
