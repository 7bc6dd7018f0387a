"""The release's invariants, on real MNIST."""

import numpy as np
import pytest

from nvmeter.workloads import task


@pytest.fixture(scope="module")
def draw(mnist_root):
    return task.draw("mnist", 7, root=mnist_root)


@pytest.fixture(scope="module")
def pool(mnist_root):
    return task._pool("mnist", mnist_root.resolve())


def test_box_weights_are_exact_area_overlaps():
    w = task.box_weights()
    assert w.shape == (9, 28)
    np.testing.assert_allclose(w.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    s = 28 / 9
    # cell 0 covers pixels 0, 1, 2 fully and 1/9 of pixel 3
    np.testing.assert_allclose(w[0, :4], [1 / s, 1 / s, 1 / s, (s - 3) / s], rtol=1e-14)
    assert (w[0, 4:] == 0).all()
    # symmetric about the centre, as the grid is
    np.testing.assert_allclose(w, w[::-1, ::-1], atol=1e-15)
    # every pixel is fully shared out: columns sum to 9/28
    np.testing.assert_allclose(w.sum(axis=0), 9 / 28, rtol=1e-12)


def test_features_of_a_constant_image():
    assert np.allclose(task.features(np.full((1, 28, 28), 255, np.uint8)), 1.0)
    assert task.features(np.zeros((2, 28, 28), np.uint8)).shape == (2, 81)


def test_shapes_and_types(draw):
    assert draw.train_x.shape == (10_000, 60) and draw.train_x.dtype == np.float32
    assert draw.test_x.shape == (10_000, 60) and draw.test_x.dtype == np.float32
    assert draw.train_y.shape == (10_000,) and draw.train_y.dtype == np.int64
    assert set(np.unique(draw.train_y)) == set(range(10))


def test_rotation_is_orthogonal_and_haar_signed(draw):
    q = draw.rotation
    np.testing.assert_allclose(q.T @ q, np.eye(60), atol=1e-12)
    np.testing.assert_allclose(q @ q.T, np.eye(60), atol=1e-12)


def test_training_covariance_is_whitened(draw):
    cov = np.cov(draw.train_x.astype(np.float64), rowvar=False)
    np.testing.assert_allclose(cov, np.eye(60), atol=1e-4)
    np.testing.assert_allclose(draw.train_x.mean(axis=0), 0.0, atol=1e-5)


def test_pca_signs_pinned_and_order(draw, pool):
    x = pool[0][draw.train_rows]
    basis = draw.basis
    vectors = basis / np.linalg.norm(basis, axis=0)
    peak = vectors[np.abs(vectors).argmax(axis=0), np.arange(60)]
    assert (peak > 0).all()
    variances = 1.0 / np.linalg.norm(basis, axis=0) ** 2
    assert (np.diff(variances) <= 1e-12).all()
    # these are the top 60 eigenvalues of the training rows' covariance
    top = np.sort(np.linalg.eigvalsh(np.cov(x, rowvar=False)))[::-1][:60]
    np.testing.assert_allclose(variances, top, rtol=1e-8)


def test_test_rows_use_the_training_transform(draw, pool):
    x = pool[0][draw.test_rows]
    expected = (x - draw.mean) @ draw.basis @ draw.rotation
    np.testing.assert_allclose(draw.test_x, expected, rtol=1e-5, atol=1e-5)


def test_label_permutation_is_consistent(draw, pool):
    perm = draw.label_perm
    assert sorted(perm.tolist()) == list(range(10))
    y = pool[1]
    np.testing.assert_array_equal(draw.train_y, perm[y[draw.train_rows]])
    np.testing.assert_array_equal(draw.test_y, perm[y[draw.test_rows]])


def test_permutations_differ_between_draws(mnist_root):
    perms = {tuple(task.draw("mnist", s, root=mnist_root).label_perm) for s in range(6)}
    assert len(perms) == 6


def test_no_row_overlap_and_halves(draw):
    train, test = set(draw.train_rows.tolist()), set(draw.test_rows.tolist())
    assert len(train) == 10_000 and len(test) == 10_000
    assert not train & test
    halves = [set(h.tolist()) for h in task.split(draw.split_seed)]
    assert not halves[0] & halves[1]
    assert (train <= halves[0] and test <= halves[1]) or (train <= halves[1] and test <= halves[0])


def test_determinism_by_seed(mnist_root, draw):
    again = task.draw("mnist", 7, root=mnist_root)
    for field in ("train_x", "train_y", "test_x", "test_y", "train_rows", "label_perm", "rotation"):
        np.testing.assert_array_equal(getattr(again, field), getattr(draw, field))
    other = task.draw("mnist", 8, root=mnist_root)
    assert not np.array_equal(other.train_rows, draw.train_rows)
    assert not np.allclose(other.rotation, draw.rotation)


def test_a_run_shares_its_split(mnist_root):
    a = task.draw("mnist", 1, split_seed=99, root=mnist_root)
    b = task.draw("mnist", 2, split_seed=99, root=mnist_root)
    halves = [set(h.tolist()) for h in task.split(99)]
    for d in (a, b):
        rows = set(d.train_rows.tolist()) | set(d.test_rows.tolist())
        assert rows & halves[0] and rows & halves[1]
        assert any(set(d.train_rows.tolist()) <= h for h in halves)
    assert not np.array_equal(a.train_rows, b.train_rows)
