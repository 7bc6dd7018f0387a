import pytest
import torch

from nvmeter.workloads import ladder
from nvmeter.workloads.ladder import LadderRecipe, LadderTrainer

SMALL = {"sizes": (60, 128, 10), "batch_labelled": 100, "batch_unlabelled": 100}


@pytest.fixture(autouse=True)
def one_thread():
    # two threads on a shared 2-core runner are ~10x slower than one
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def clusters(n, seed, spread=0.3, noise=0.3):
    """Ten Gaussian clusters in 60 dimensions (fixed centres), released-format tensors."""
    centres = torch.randn(10, 60, generator=torch.Generator().manual_seed(1)) * spread
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 10, (n,), generator=g)
    return centres[y] + torch.randn(n, 60, generator=g) * noise, y


def test_lr_schedule():
    lr = ladder.lr_schedule(LadderRecipe(n_steps=150))
    assert torch.allclose(lr[:101], torch.full((101,), 0.008))
    assert lr[125].item() == pytest.approx(0.004)
    assert lr[149].item() == pytest.approx(0.008 / 50)
    assert torch.all(lr[100:].diff() < 0)


@pytest.mark.parametrize(
    "kwargs",
    [{"n_steps": 0}, {"sizes": (60,)}, {"batch_labelled": 1}, {"sizes": (60,) + (4,) * 64}, {"fast": True}],
)
def test_recipe_rejects(kwargs):
    with pytest.raises(ValueError):
        LadderRecipe(**kwargs)


def test_methods_table():
    assert set(ladder.METHODS) == {
        f"ladder_d{d}_{kind}" for d in (3, 4) for kind in ("plain", "fused", "fast")
    }
    for name, method in ladder.METHODS.items():
        assert method.name == name
        assert method.recipe.fused == (not name.endswith("plain"))
        assert method.recipe.fast == name.endswith("fast")
        steps, mix = (900, 0.9) if method.difficulty == 3 else (1800, 0.5)
        assert (method.recipe.n_steps, method.recipe.mix) == (steps, mix)
        assert method.recipe.sizes == (60, 1000, 500, 250, 250, 250, 10)


def test_plain_ladder_learns_clusters():
    torch.manual_seed(0)
    train_x, train_y = clusters(1000, seed=2)
    test_x, test_y = clusters(1000, seed=3)
    method = ladder.LadderMethod("small", 0, LadderRecipe(n_steps=100, mix=0.9, **SMALL))
    labels = method(train_x, train_y, test_x)
    assert labels.shape == (1000,) and labels.dtype == torch.int64
    trainer = method.trainer(train_x, test_x)
    assert trainer.step.item() == 100
    # the sampler recorded losses: scores no longer all at their initial value
    assert (trainer.scores != 1.0).sum() > 500
    accuracy = (labels == test_y).float().mean().item()
    # chance is 0.1; 1.0 measured at 100 steps (0.75 when the combinators started at random)
    assert accuracy > 0.9, accuracy


def test_ladder_learns_a_real_mnist_draw(mnist_root):
    """The recipe's loss (2000 x input MSE, noise 0.3, scale 0.6) on a real draw, network shrunk.

    With randomly started combinators the reconstruction drives the encoder and this ends
    near chance (0.11-0.19 over three draws); started as the identity it reaches 0.88-0.89
    (100 steps of 200 + 200 rows, ~2 s; the H200 reached 50% at full size before the fix).
    """
    from nvmeter.workloads import task

    draw = task.draw("mnist", 1, root=mnist_root)
    rows = 2000
    train_x, train_y, test_x, test_y = (
        torch.from_numpy(a[:rows]) for a in (draw.train_x, draw.train_y, draw.test_x, draw.test_y)
    )
    recipe = LadderRecipe(n_steps=100, sizes=(60, 200, 100, 10), batch_labelled=200, batch_unlabelled=200)
    torch.manual_seed(0)
    labels = LadderTrainer(recipe, rows, rows, "cpu")(train_x, train_y, test_x)
    accuracy = (labels == test_y).float().mean().item()
    assert accuracy > 0.8, accuracy


def test_each_call_starts_from_the_same_state():
    recipe = LadderRecipe(n_steps=5, **SMALL)
    a_x, a_y = clusters(300, seed=4)
    b_x, b_y = clusters(300, seed=5)
    trainer = LadderTrainer(recipe, 300, 300, "cpu")
    torch.manual_seed(1)
    first = trainer(a_x, a_y, b_x)
    trainer(b_x, b_y, a_x)  # another draw in between
    torch.manual_seed(1)
    again = trainer(a_x, a_y, b_x)
    assert torch.equal(first, again)


def test_load_rejects_bad_inputs():
    trainer = LadderTrainer(LadderRecipe(n_steps=1, **SMALL), 300, 200, "cpu")
    x, y = clusters(300, seed=6)
    with pytest.raises(ValueError, match="test_x"):
        trainer.load(x, y, x)
    with pytest.raises(ValueError, match="int64"):
        trainer.load(x, y.int(), x[:200])
    with pytest.raises(ValueError, match="train_x"):
        trainer.load(x[:, :50], y, x[:200])


def one_step_and_three(recipe, variants):
    """Per variant (fused, fast): one step's loss and gradients after a seeded nudge, then 3 steps' losses."""
    x, y = clusters(64, seed=7)
    runs = []
    for fused, fast in variants:
        trainer = LadderTrainer(ladder.replace(recipe, fused=fused, fast=fast), 64, 64, "cpu")
        torch.manual_seed(3)
        trainer.load(x, y, x)
        # the combinators start deaf to the top-down signal, so nothing reaches the decoder's
        # weights; a seeded nudge of every parameter opens all the paths the gradients compare
        nudge = torch.Generator().manual_seed(4)
        with torch.no_grad():
            for p in trainer.net.parameters():
                p.add_(0.3 * torch.randn(p.shape, generator=nudge))
        # the gradients of one step's loss, through the whole network
        _, loss = trainer.net.loss(x[:24], y[:24], x[24:44], trainer.recipe, trainer.noise_key)
        grads = torch.autograd.grad(loss, list(trainer.net.parameters()))
        losses = []
        for _ in range(3):
            trainer.run_steps(1)
            losses.append(trainer.last_loss.item())
        runs.append((loss.item(), grads, losses))
    return runs


@pytest.mark.parametrize("fast", [False, True])
def test_fused_training_matches_plain_without_noise(fast):
    pytest.importorskip("triton")
    # noise 0: both variants see the same batches from the same RNG stream
    recipe = LadderRecipe(
        n_steps=3, noise_std=0.0, sizes=(60, 12, 10), batch_labelled=24, batch_unlabelled=20
    )
    (loss_p, grads_p, losses_p), (loss_f, grads_f, losses_f) = one_step_and_three(
        recipe, [(False, False), (True, fast)]
    )
    assert loss_f == pytest.approx(loss_p, rel=1e-6)
    for g_f, g_p in zip(grads_f, grads_p, strict=True):
        err = ((g_f - g_p).abs().max() / g_p.abs().max()).item()
        assert err < 1e-5, err
    # Adam's first steps amplify rounding (step ~ lr * sign(g) where g ~ 0), hence 1e-3
    assert losses_f == pytest.approx(losses_p, rel=1e-3)


def test_fast_training_matches_the_seed_kernels_with_noise():
    """With noise on, the fast kernels draw the seed kernels' noise: one step's loss and
    gradients agree to rounding, through the whole network (input noise from the same RNG)."""
    pytest.importorskip("triton")
    recipe = LadderRecipe(n_steps=3, sizes=(60, 12, 10), batch_labelled=24, batch_unlabelled=20)
    (loss_s, grads_s, losses_s), (loss_f, grads_f, losses_f) = one_step_and_three(
        recipe, [(True, False), (True, True)]
    )
    assert loss_f == pytest.approx(loss_s, rel=1e-6)
    for g_f, g_s in zip(grads_f, grads_s, strict=True):
        err = ((g_f - g_s).abs().max() / g_s.abs().max()).item()
        assert err < 1e-5, err
    assert losses_f == pytest.approx(losses_s, rel=1e-3)
