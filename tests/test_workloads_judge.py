import numpy as np
import pytest

from nvmeter import errors
from nvmeter.workloads import judge, task
from nvmeter.workloads.judge import Score


@pytest.mark.parametrize(
    ("level", "total", "floor"),
    [(1, 104_060, 9_310), (2, 106_260, 9_510), (3, 107_030, 9_580), (4, 107_470, 9_620), (5, 107_910, 9_660)],
)
def test_thresholds_match_the_published_table(level, total, floor):
    assert judge.required(110_000, level) == total
    assert judge.floor(10_000, level) == floor


def mnist(correct, seed=0):
    return Score("mnist", seed, correct, 10_000)


def fashion(correct, seed=100):
    return Score("fashion", seed, correct, 10_000)


def test_pass_at_exact_thresholds():
    scores = [mnist(9_460, s) for s in range(11)]  # 104,060 in total
    v = judge.judge(scores, [fashion(1_500, s) for s in range(4)], 1)
    assert v.passed, v.reasons
    assert (v.mnist_required, v.holdout_required) == (104_060, 6_000)


def test_one_short_of_the_total_fails():
    scores = [mnist(9_460, s) for s in range(10)] + [mnist(9_459, 10)]
    v = judge.judge(scores, [fashion(1_500)] * 4, 1)
    assert not v.passed
    assert "104,060" in v.reasons[0]


def test_a_draw_under_its_floor_fails_even_if_the_total_passes():
    scores = [mnist(9_700, s) for s in range(10)] + [mnist(9_309, 10)]
    v = judge.judge(scores, [fashion(5_000)] * 4, 1)
    assert v.mnist_correct >= v.mnist_required
    assert not v.passed and v.below_floor == (10,)


def test_holdout_under_15_percent_fails():
    v = judge.judge([mnist(9_900, s) for s in range(11)], [fashion(1_499)] * 4, 2)
    assert not v.passed and "hold-out" in v.reasons[0]


def test_random_classifier_fails_on_a_real_draw(mnist_root):
    draw = task.draw("mnist", 3, root=mnist_root)
    labels = np.random.default_rng(0).integers(0, 10, size=10_000)
    s = judge.score(draw, labels)
    assert 800 < s.correct < 1_200
    assert not judge.judge([s], [], 1).passed


def test_true_labels_pass_on_a_real_draw(mnist_root):
    draw = task.draw("mnist", 3, root=mnist_root)
    assert judge.judge([judge.score(draw, draw.test_y)], [], 5).passed


def test_bad_calls():
    with pytest.raises(errors.UsageError, match="difficulty"):
        judge.judge([mnist(10_000)], [], 6)
    with pytest.raises(errors.UsageError, match="at least one MNIST"):
        judge.judge([], [fashion(10_000)], 1)
    with pytest.raises(errors.UsageError, match="mixed up"):
        judge.judge([fashion(10_000)], [], 1)
