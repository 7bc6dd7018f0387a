"""The quiet entry's phase dither: where a short block falls in the counter's period."""

import numpy as np
import pytest

from nvmeter.boards.simulated import SimConfig, SimulatedBoard
from nvmeter.meter.dither import PhaseDither
from nvmeter.meter.window import EnergyWindow

BURST_W, BURST_S = 500.0, 0.020


def _board(**config) -> SimulatedBoard:
    b = SimulatedBoard(SimConfig(seed=11, **config))
    b.set_context(True)
    b.clock.sleep(1.0)
    return b


def _burst(board, **kwargs):
    """One isolated ~20 ms call after a pause: (Measurement, start after the start step s, true J)."""
    board.clock.sleep(0.4)
    with EnergyWindow(board, sync="none", calls=1, idle=board.config.idle_context_w, **kwargs) as w:
        t0 = board.clock.now()
        board.set_load(BURST_W)
        board.clock.sleep(BURST_S)
        board.set_load(0.0)
    t1 = t0 + BURST_S + 0.2
    truth_j = board.true_energy_j(t0, t1) - board.config.idle_context_w * (t1 - t0)
    return w.result, w.result.work_t0_s - w.result.edge_steps_s[0], truth_j


def test_shares_cover_the_period_evenly():
    dither = PhaseDither()
    shares = [dither.next_share() for _ in range(20)]
    assert all(0 <= s < 1 for s in shares)
    assert shares[0] > 0  # the first window does not start at the step
    # every tenth of the period holds a share of the first 20 (three-gap theorem: gaps <= 2.6/N)
    assert set(np.floor(np.array(shares) * 10).astype(int)) == set(range(10))


def test_delays_are_shares_of_the_period():
    a, b = PhaseDither(), PhaseDither()
    assert [a.next_delay_s(0.1) for _ in range(5)] == pytest.approx([b.next_share() * 0.1 for _ in range(5)])


def test_dithered_entries_start_across_the_period_and_undithered_at_the_step():
    board = _board()
    dithered = [_burst(board, dither=True)[1] for _ in range(12)]
    fixed = [_burst(board)[1] for _ in range(12)]  # the default
    assert max(fixed) < 0.015  # a read or two after the step
    assert min(dithered) < 0.03 and max(dithered) > 0.07
    # shares of the profile's period (the Hopper defaults' 0.12 s: wider than the board's 0.1 s)
    assert max(dithered) < EnergyWindow(board, idle=121.2).profile.counter_period_s + 0.015


def test_an_entry_inside_the_work_never_waits():
    board = _board()
    board.set_load(BURST_W)
    board.clock.sleep(0.5)
    for _ in range(5):
        t_before = board.clock.now()
        with EnergyWindow(board, sync="none", calls=1, idle=board.config.idle_context_w, dither=True) as w:
            t_entered = board.clock.now()
            board.clock.sleep(0.3)
        assert t_entered - t_before < 0.01
        assert w.result.in_work


def test_the_bound_holds_at_every_phase():
    board = _board()
    for _ in range(16):
        m, _, truth_j = _burst(board, dither=True)
        assert abs(m.above_idle_j - truth_j) <= m.err_j


def test_dithered_windows_average_out_a_sensor_that_sees_part_of_the_period():
    # SC24's A100/H100: the sensor sees the last ~25 ms of each ~100 ms; here the last 60 ms.
    # Right after the step a 20 ms burst falls wholly outside what the next update sees.
    board = _board(sensor_window_s=0.06, noise_w=0.0)
    fixed = [(m.above_idle_j / t - 1) for m, _, t in (_burst(board) for _ in range(20))]
    dithered = [(m.above_idle_j / t - 1) for m, _, t in (_burst(board, dither=True) for _ in range(40))]
    assert np.mean(fixed) < -0.5  # one phase: a bias the board alone sets
    # many phases: near their mean (a burst wholly outside what the sensor sees reads -100%, wholly
    # inside +67%: 100/60 ms; the power's lag smears the two)
    assert abs(np.mean(dithered)) < 0.2


def test_a_window_on_several_boards_takes_no_dither():
    from nvmeter import errors

    boards = [_board(), SimulatedBoard(SimConfig(seed=12, uuid="GPU-00000000-0000-4000-8000-0000000000b2"))]
    with pytest.raises(errors.UsageError, match="dither meters one board"):
        EnergyWindow(devices=boards, dither=True)


@pytest.mark.parametrize("bad", ["no", 1, None])
def test_dither_takes_only_a_bool(bad):
    from nvmeter import errors

    with pytest.raises(errors.UsageError, match="dither is True or False"):
        EnergyWindow(_board(), idle=121.2, dither=bad)
