"""The released task: what a method sees of a dataset, draw by draw.

The release follows docs/task.md ("The release: what a method sees"):

1. pixels uint8 / 255, box-averaged 28x28 -> 9x9 with exact area-overlap weights
   (``W @ img @ W.T``, rows of ``W`` sum to 1), clipped to [0, 1]: 81 features;
2. the 60,000-row pool splits at random into halves; a draw takes 10,000 training rows
   from one half and 10,000 test rows from the other, without replacement;
3. the 10 classes get a secret per-draw permutation;
4. float64 PCA on the draw's training rows, top 60 of 81 directions, eigenvector signs
   pinned (largest-magnitude entry positive), whitened to unit variance; then a fresh
   Haar-random rotation ``Q`` (QR of a Gaussian, column signs fixed by ``diag(R)``);
   released ``z = (x - mu) @ basis @ Q`` as float32.

Seeds: the split comes from ``split_seed`` (a run shares one split across its draws), the
rest of a draw from its own ``seed``; both through numpy's SeedSequence, so a draw is the
same on every machine and numpy version that keeps PCG64.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nvmeter.workloads import data
from nvmeter.workloads.sources import SIDE_PX, TRAIN_ROWS

# Box-averaged side: 9 x 9 = 81 features (docs/task.md).
BOX_PX = 9
FEATURES = BOX_PX * BOX_PX
# Released columns: the top 60 of 81 principal directions (docs/task.md).
COMPONENTS = 60
# Rows per draw, train and test each (docs/task.md).
DRAW_ROWS = 10_000
CLASSES = 10
# Distinct SeedSequence keys so a split seed and a draw seed of equal value stay independent.
_SPLIT_KEY = 0x5B1
_DRAW_KEY = 0xD4A


def box_weights(src_px: int = SIDE_PX, dst_px: int = BOX_PX) -> np.ndarray:
    """Exact area-overlap weights for averaging ``src_px`` pixels into ``dst_px`` cells.

    Output cell ``i`` spans ``[i s, (i+1) s)`` input pixels with ``s = src_px / dst_px``;
    ``W[i, j]`` is the length of its overlap with pixel ``[j, j+1)``, divided by ``s``.

    Returns:
        (dst_px, src_px) float64; every row sums to 1.

    """
    w = np.zeros((dst_px, src_px))
    for i in range(dst_px):
        # bounds as i * src / dst, computed in that order to keep them exact where they are integers
        lo, hi = i * src_px / dst_px, (i + 1) * src_px / dst_px
        for j in range(int(lo), min(src_px, int(np.ceil(hi)))):
            w[i, j] = max(0.0, min(hi, j + 1) - max(lo, j))
    return w / w.sum(axis=1, keepdims=True)


def features(pixels: np.ndarray) -> np.ndarray:
    """Box-averaged features of uint8 images.

    Args:
        pixels: (n, 28, 28) uint8.

    Returns:
        (n, 81) float64 in [0, 1], row-major over the 9 x 9 cells.

    """
    w = box_weights()
    x = pixels.astype(np.float64) / 255.0
    boxed = np.einsum("ij,njk,lk->nil", w, x, w, optimize=True)
    return np.clip(boxed, 0.0, 1.0).reshape(len(pixels), FEATURES)


@functools.lru_cache(maxsize=4)
def _pool(name: str, root: Path | None) -> tuple[np.ndarray, np.ndarray]:
    images = data.load(name, root)
    return features(images.pixels), images.labels.astype(np.int64)


@dataclass(frozen=True, eq=False)
class Draw:
    """One draw of the task: what the method gets, and what the judge keeps.

    Attributes:
        dataset: ``mnist``, ``fashion`` or ``kmnist``.
        seed: The draw's seed.
        split_seed: The seed of the pool's split into halves.
        train_x: (10000, 60) float32, released training features.
        train_y: (10000,) int64 in 0..9, permuted training labels.
        test_x: (10000, 60) float32, released test features.
        test_y: (10000,) int64, permuted test labels (the judge's, never the method's).
        train_rows: (10000,) int64, rows of the 60k pool used for training.
        test_rows: (10000,) int64, rows used for testing (the other half).
        label_perm: (10,) int64, ``released label = label_perm[true label]``.
        mean: (81,) float64, the training rows' feature mean.
        basis: (81, 60) float64, whitening basis (eigenvectors / sqrt(eigenvalues)).
        rotation: (60, 60) float64, the Haar rotation.

    """

    dataset: str
    seed: int
    split_seed: int
    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    train_rows: np.ndarray
    test_rows: np.ndarray
    label_perm: np.ndarray
    mean: np.ndarray
    basis: np.ndarray
    rotation: np.ndarray


def split(split_seed: int, rows: int = TRAIN_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """The pool's random split into two halves of ``rows // 2`` row indices each."""
    order = np.random.default_rng([_SPLIT_KEY, split_seed]).permutation(rows)
    return order[: rows // 2], order[rows // 2 :]


def whitening(train: np.ndarray, components: int = COMPONENTS) -> tuple[np.ndarray, np.ndarray]:
    """Float64 PCA whitening fitted on ``train`` (n, d).

    Returns:
        ``(mean (d,), basis (d, components))`` such that ``(train - mean) @ basis`` has
        identity covariance (divisor n - 1). Eigenvectors come in decreasing eigenvalue
        order, each signed so that its largest-magnitude entry is positive.

    """
    mean = train.mean(axis=0)
    centred = train - mean
    cov = centred.T @ centred / (len(train) - 1)
    values, vectors = np.linalg.eigh(cov)
    top = np.argsort(values)[::-1][:components]
    values, vectors = values[top], vectors[:, top]
    # eigh returns each vector up to sign; pin it so the release does not depend on LAPACK
    peak = vectors[np.abs(vectors).argmax(axis=0), np.arange(components)]
    vectors = vectors * np.where(peak < 0, -1.0, 1.0)
    return mean, vectors / np.sqrt(values)


def haar_rotation(rng: np.random.Generator, n: int = COMPONENTS) -> np.ndarray:
    """A Haar-random (n, n) orthogonal matrix: QR of a Gaussian, columns signed by diag(R)."""
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def draw(dataset: str, seed: int, *, split_seed: int | None = None, root: Path | None = None) -> Draw:
    """Release one draw of ``dataset``.

    Args:
        dataset: ``mnist``, ``fashion`` or ``kmnist`` (it must be in the cache).
        seed: The draw's seed (rows, which half trains, label permutation, rotation).
        split_seed: The seed of the pool split shared by a run's draws (default: ``seed``).
        root: Data cache root (default ``$NVMETER_DATA_DIR`` or the user cache).

    Returns:
        The draw; equal seeds give identical arrays.

    Raises:
        UsageError: the dataset is unknown, not cached, or fails verification.

    """
    x_pool, y_pool = _pool(dataset, None if root is None else Path(root).resolve())
    halves = split(seed if split_seed is None else split_seed)
    rng = np.random.default_rng([_DRAW_KEY, seed])
    train_half = int(rng.integers(2))
    train_rows = rng.choice(halves[train_half], DRAW_ROWS, replace=False)
    test_rows = rng.choice(halves[1 - train_half], DRAW_ROWS, replace=False)
    label_perm = rng.permutation(CLASSES)
    mean, basis = whitening(x_pool[train_rows])
    rotation = haar_rotation(rng)
    project = basis @ rotation
    return Draw(
        dataset=dataset,
        seed=seed,
        split_seed=seed if split_seed is None else split_seed,
        train_x=((x_pool[train_rows] - mean) @ project).astype(np.float32),
        train_y=label_perm[y_pool[train_rows]],
        test_x=((x_pool[test_rows] - mean) @ project).astype(np.float32),
        test_y=label_perm[y_pool[test_rows]],
        train_rows=train_rows,
        test_rows=test_rows,
        label_perm=label_perm,
        mean=mean,
        basis=basis,
        rotation=rotation,
    )


# Seeds of a run's draws: run seed x 10,000 plus these, so one number reproduces a whole run
# (run seed 1 releases the draws of results/workloads-h200.json).
MNIST_SEED0, HOLDOUT_SEED0, WARMUP_SEED0 = 1_000, 2_000, 3_000
# Two warm-ups: the first builds the trainer and captures the graph, the second is steady.
WARMUP_CALLS = 2


def run_seeds(seed: int, seed0: int, n: int) -> tuple[int, ...]:
    """``n`` draw seeds of run ``seed`` from the block starting at ``seed0``."""
    return tuple(seed * 10_000 + seed0 + i for i in range(n))


@dataclass(frozen=True)
class Plan:
    """Which draws a run uses (all derived from ``seed``).

    Attributes:
        seed: The run seed (also the split seed of its draws).
        holdout: ``kmnist`` where cached, else ``fashion`` (docs/task.md).
        warmup_dataset: Warm-ups use the foreign set that is not the hold-out (Fashion-MNIST
            draws of other seeds where KMNIST is missing).
        mnist_seeds, holdout_seeds, warmup_seeds: Draw seeds.
        order: The timed calls' secret order, (dataset, seed) pairs.
    """

    seed: int
    holdout: str
    warmup_dataset: str
    mnist_seeds: tuple[int, ...]
    holdout_seeds: tuple[int, ...]
    warmup_seeds: tuple[int, ...]
    order: tuple[tuple[str, int], ...]

    @classmethod
    def make(
        cls, seed: int, kmnist: bool, mnist_draws: int, holdout_draws: int, warmup_calls: int = WARMUP_CALLS
    ) -> Plan:
        """The draws of run ``seed``; the hold-out is KMNIST only if ``kmnist`` (it is cached)."""
        mnist_seeds = run_seeds(seed, MNIST_SEED0, mnist_draws)
        holdout_seeds = run_seeds(seed, HOLDOUT_SEED0, holdout_draws)
        holdout = "kmnist" if kmnist else "fashion"
        calls = [("mnist", s) for s in mnist_seeds] + [(holdout, s) for s in holdout_seeds]
        order = tuple(calls[i] for i in np.random.default_rng([seed, 0x0D]).permutation(len(calls)))
        warmup_seeds = run_seeds(seed, WARMUP_SEED0, warmup_calls)
        return cls(seed, holdout, "fashion", mnist_seeds, holdout_seeds, warmup_seeds, order)
