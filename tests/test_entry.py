"""A window's entry inside work: the caller's thread reads only the sample buffer (edges' docstring)."""

import threading

import pytest

from nvmeter import errors
from nvmeter.boards.simulated import SimConfig, SimulatedBoard
from nvmeter.clock import RealClock
from nvmeter.meter.window import ENTRY_PARTS, EnergyWindow


class _StateThreads(SimulatedBoard):
    """A simulated board on real time that notes which thread read its state, and can fail it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.state_threads: list[str] = []
        self.fail_state = False

    def state(self):
        self.state_threads.append(threading.current_thread().name)
        if self.fail_state:
            raise errors.TelemetryError("the temperature of GPU-sim: NVML error")
        return super().state()


def _busy_board() -> _StateThreads:
    board = _StateThreads(SimConfig(seed=11), RealClock())  # real time: the poller is a thread
    board.set_context(True)
    board.set_load(300.0)
    board.clock.sleep(0.3)  # samples of the work before entry: the board is not quiet
    return board


def _window(board, **kwargs):
    with EnergyWindow(board, sync="none", idle=board.config.idle_context_w, exit="return", **kwargs) as w:
        board.clock.sleep(0.6)
        w.call()
    return w


def test_an_entry_inside_work_reads_the_state_in_the_pollers_thread():
    board = _busy_board()
    w = _window(board)
    m = w.result
    me = threading.current_thread().name
    # entry's and exit's state reads both ran in their pollers' threads, none in the caller's
    assert board.state_threads and all(name == "nvmeter-edge" for name in board.state_threads), (
        board.state_threads,
        me,
    )
    assert len(m.states) == 2 and m.states[0].t_s <= m.work_t0_s + 0.05 and m.states[1].t_s >= m.work_t1_s
    assert m.in_work and m.end_in_work


def test_entry_parts_say_where_the_entrys_time_went():
    board = _busy_board()
    before_s = board.clock.now()
    w = _window(board)
    parts = w.entry_parts_s
    assert tuple(parts) == ENTRY_PARTS and all(v >= 0 for v in parts.values())
    # the parts tile the entry, from its first step to the work's start
    assert sum(parts.values()) == pytest.approx(w.result.work_t0_s - before_s, abs=2e-3)
    assert parts["idle_s"] < 0.01  # a given idle is no span


def test_a_quiet_board_reads_its_state_before_the_edge_in_the_callers_thread():
    board = _StateThreads(SimConfig(seed=11), RealClock())
    board.set_context(True)
    board.clock.sleep(0.3)
    with EnergyWindow(board, sync="none", idle=board.config.idle_context_w) as w:
        board.set_load(300.0)
        board.clock.sleep(0.3)
        board.set_load(0.0)
        w.call()
    assert board.state_threads[0] == threading.current_thread().name
    assert len(w.result.states) == 2


def test_a_state_read_that_fails_in_the_poller_reaches_the_caller():
    board = _busy_board()
    board.fail_state = True
    window = EnergyWindow(board, sync="none", idle=board.config.idle_context_w)
    with pytest.raises(errors.TelemetryError, match="temperature"), window as w:
        board.clock.sleep(0.3)
        w.call()
        board.fail_state = False  # the exit's own read succeeds: the entry's failure must still show
    assert w.result is None
