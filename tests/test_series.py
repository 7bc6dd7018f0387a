"""Estimators on hand-made series whose answers are known."""

import numpy as np
import pytest

from nvmeter.boards.protocol import PowerSample
from nvmeter.meter.series import CounterSeries, integrate_samples_j, merge_samples
from nvmeter.meter.span import measure_span


def _series(updates_s, power_w, read_s=0.003, t_end=1.0):
    """Reads back to back of a counter that updates at ``updates_s`` with constant power."""
    t0s, t1s, vals = [], [], []
    t = 0.0
    while t < t_end:
        done = [u for u in updates_s if u <= t + read_s / 2]
        value = round(power_w * (done[-1] if done else 0.0) * 1e3)
        t0s.append(t)
        t1s.append(t + read_s)
        vals.append(value)
        t += read_s
    return CounterSeries(tuple(t0s), tuple(t1s), tuple(vals))


def test_steps_are_placed_within_one_read():
    updates = [0.1, 0.2, 0.31, 0.4, 0.52]
    steps = _series(updates, 100.0).steps
    assert len(steps) == len(updates)
    assert np.all(np.abs(steps.t_s - updates) <= steps.half_width_s + 1e-12)
    assert np.all(steps.half_width_s <= 0.003 + 1e-12)  # the two reads around each update


def test_step_power_is_exact_for_constant_power():
    steps = _series([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], 250.0).steps
    assert steps.power_w() == pytest.approx(250.0, rel=0.03)


def test_no_step_gives_nan_power():
    series = CounterSeries((0.0, 0.01), (0.003, 0.013), (5, 5))
    assert len(series.steps) == 0
    assert np.isnan(series.steps.power_w())


def test_monotonic_flag():
    assert not CounterSeries((0, 1, 2), (0, 1, 2), (5, 7, 6)).is_monotonic()
    assert CounterSeries((0, 1, 2), (0, 1, 2), (5, 5, 6)).is_monotonic()


def test_round_trip_through_json():
    series = _series([0.1, 0.2], 80.0, t_end=0.3)
    assert CounterSeries.from_dict(series.to_dict()).steps.power_w() == pytest.approx(series.steps.power_w())


def test_sample_integration_holds_each_sample_backwards():
    samples = tuple(PowerSample(t, p) for t, p in [(0.0, 100.0), (0.02, 200.0), (0.04, 300.0)])
    # (0, 0.02] at 200 W and (0.02, 0.04] at 300 W
    assert integrate_samples_j(samples, 0.0, 0.04) == pytest.approx(0.02 * 200 + 0.02 * 300)
    assert integrate_samples_j(samples, 0.01, 0.03) == pytest.approx(0.01 * 200 + 0.01 * 300)
    with pytest.raises(ValueError):
        integrate_samples_j(samples, -0.1, 0.03)


def test_merge_keeps_one_sample_per_timestamp():
    a = (PowerSample(1.0, 10.0), PowerSample(2.0, 20.0))
    b = (PowerSample(2.0, 20.0), PowerSample(3.0, 30.0))
    assert [s.t_s for s in merge_samples(b, a)] == [1.0, 2.0, 3.0]


def test_aligned_span_recovers_the_true_energy(sim_board):
    """Edges on counter steps: the span's power matches the model's truth."""
    sim_board.set_context(True)
    sim_board.set_load(300.0)
    clock = sim_board.clock
    clock.sleep(0.3)
    errors = []
    for _ in range(10):
        span = measure_span(sim_board, clock, 0.5)
        truth = sim_board.true_energy_j(span.t_a_s, span.t_b_s) / span.duration_s
        errors.append(span.power_w / truth - 1)
        assert span.aligned
        assert span.samples_power_w == pytest.approx(truth, rel=0.01)
        # the energy between steps is exact; only the span's length is uncertain
        assert abs(errors[-1]) <= span.edge_uncertainty_s / span.duration_s + 0.001
    assert np.median(np.abs(errors)) < 0.006
