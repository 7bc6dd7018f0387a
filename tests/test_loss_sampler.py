import pytest
import torch

from nvmeter.workloads import loss_sampler


def test_mix_schedule_phases():
    mix = loss_sampler.mix_schedule(100, 0.9)
    assert mix.shape == (100,) and mix.dtype == torch.float32
    assert torch.all(mix[:10] == 0)
    assert torch.allclose(mix[10:60], torch.full((50,), 0.9))
    # linear fall from 0.9 at 60% to 0 at 90%
    assert mix[75].item() == pytest.approx(0.9 * 0.5, abs=1e-6)
    assert torch.all(mix[61:90].diff() < 0)
    assert torch.all(mix[90:] == 0)


@pytest.mark.parametrize(("n_steps", "mix"), [(0, 0.5), (10, -0.1), (10, 1.5)])
def test_mix_schedule_rejects(n_steps, mix):
    with pytest.raises(ValueError):
        loss_sampler.mix_schedule(n_steps, mix)


def test_draw_uniform_when_mix_is_zero():
    torch.manual_seed(0)
    scores = torch.tensor([100.0, 1.0, 1.0, 1.0])
    rows = loss_sampler.draw_rows(scores, torch.tensor([0.0]), 40000)
    freq = torch.bincount(rows, minlength=4).float() / rows.numel()
    assert torch.allclose(freq, torch.full((4,), 0.25), atol=0.01)


def test_draw_follows_scores_when_mixed():
    torch.manual_seed(0)
    scores = torch.tensor([6.0, 2.0, 0.0, 2.0])
    mix = 0.5
    rows = loss_sampler.draw_rows(scores, torch.tensor([mix]), 40000)
    freq = torch.bincount(rows, minlength=4).float() / rows.numel()
    want = (1 - mix) / 4 + mix * scores / scores.sum()
    assert torch.allclose(freq, want, atol=0.01)
    assert rows.min() >= 0 and rows.max() <= 3


def test_draw_never_picks_zero_probability_rows():
    torch.manual_seed(1)
    scores = torch.tensor([0.0, 0.0, 5.0, 0.0])
    rows = loss_sampler.draw_rows(scores, torch.tensor([1.0]), 1000)
    assert torch.all(rows == 2)


def test_record_losses():
    scores = torch.ones(5)
    loss_sampler.record_losses(scores, torch.tensor([1, 3]), torch.tensor([0.5, 2.0], requires_grad=True))
    assert scores.tolist() == [1.0, 0.5, 1.0, 2.0, 1.0]
