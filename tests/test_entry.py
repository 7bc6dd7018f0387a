"""A window's entry inside work: the caller's thread reads only the sample buffer (edges' docstring)."""

import threading
import time
import types

import pytest

from nvmeter import errors
from nvmeter.boards.simulated import SimConfig, SimulatedBoard
from nvmeter.clock import RealClock
from nvmeter.meter import edges
from nvmeter.meter.window import ENTRY_PARTS, EXIT_PARTS, EnergyWindow


class _StateThreads(SimulatedBoard):
    """A simulated board on real time that notes which thread read its state, and can fail it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.state_threads: list[str] = []
        self.fail_state = False
        self.fail_energy = False

    def energy_mj(self):
        if self.fail_energy:
            raise errors.TelemetryError("the energy counter of GPU-sim: NVML error")
        return super().energy_mj()

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
    # read at the work's start and end (a loaded machine may start the poller's thread late)
    assert len(m.states) == 2 and m.states[0].t_s < m.work_t1_s <= m.states[1].t_s
    assert m.in_work and m.end_in_work


def test_entry_parts_say_where_the_entrys_time_went(monkeypatch):
    board = _busy_board()
    entered_s = []
    enter = EnergyWindow.__enter__

    def timed_enter(self):
        entered_s.append(board.clock.now())  # not the constructor's time: the entry's alone
        return enter(self)

    monkeypatch.setattr(EnergyWindow, "__enter__", timed_enter)
    w = _window(board)
    parts = w.entry_parts_s
    assert tuple(parts) == ENTRY_PARTS and all(v >= 0 for v in parts.values())
    # the parts tile the entry, from its first step to the work's start (timed from before the
    # constructor, a machine running three test suites at once put 2 ms of it outside the parts)
    assert sum(parts.values()) == pytest.approx(w.result.work_t0_s - entered_s[0], abs=2e-3)
    assert parts["idle_s"] < 0.01  # a given idle is no span


def test_exit_parts_say_where_the_exits_time_went():
    board = _busy_board()
    synced = []
    with EnergyWindow(
        board,
        sync=lambda: synced.append(board.clock.sleep(0.004)),
        exit="return",
        idle=board.config.idle_context_w,
    ) as w:
        board.clock.sleep(0.6)
        w.call()
        block_end_s = board.clock.now()
    after_s = board.clock.now()
    parts = w.exit_parts_s
    assert tuple(parts) == EXIT_PARTS and all(v >= 0 for v in parts.values())
    assert parts["sync_s"] >= 0.004  # the caller's sync, timed as its own part
    assert sum(parts.values()) <= after_s - block_end_s
    assert w.result.end_in_work


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


class _LateEvent(threading.Event):
    """An Event whose set() lingers in the setting thread: what follows it there runs late."""

    def set(self) -> None:
        super().set()
        time.sleep(0.3)


def test_a_failed_state_read_is_never_read_as_no_state(monkeypatch):
    # the waiter may run between the poller's event and its note of the error: it must raise, not get None
    monkeypatch.setattr(edges, "threading", types.SimpleNamespace(Event=_LateEvent, Thread=threading.Thread))
    board = _busy_board()
    board.fail_state = True
    poll = edges.poll_in_background(board, 0.35, with_state=True)
    with pytest.raises(errors.TelemetryError, match="temperature"):
        poll.state()
    with pytest.raises(errors.TelemetryError, match="temperature"):
        poll.result()


def test_a_state_read_that_hangs_in_the_poller_ends_in_one_error_naming_it(monkeypatch):
    monkeypatch.setattr(edges, "HUNG_S", 0.5)
    board = _busy_board()
    release = threading.Event()
    hangs = iter([True])  # the entry's state read hangs (until the test ends); the others answer
    read = board.state

    def state():
        if next(hangs, False):
            release.wait(30)
        return read()

    board.state = state
    try:
        w = _window(board)
        began = time.perf_counter()
        with pytest.raises(errors.TelemetryError, match="the board's state did not answer"):
            _ = w.result
        assert time.perf_counter() - began < 5
    finally:
        release.set()


def test_a_mark_whose_state_read_failed_leaves_no_mark_behind():
    # on a virtual clock the state is read as the poll is made, in the caller's thread
    board = _StateThreads(SimConfig(seed=11))
    board.set_context(True)
    board.set_load(300.0)
    board.clock.sleep(1.0)
    with EnergyWindow(board, sync="none", idle=board.config.idle_context_w) as w:
        for i in range(8):
            board.clock.sleep(0.2)
            w.call()
            board.fail_state = i == 2
            try:
                w.mark()
            except errors.TelemetryError:
                assert i == 2
        board.fail_state = False
        board.clock.sleep(0.5)
        m = w.provisional()
    # the latest mark was made after the 8th call: the provisional window ends there
    assert m.calls == 8 and len(m.states) == 1 + 7


def test_states_are_kept_in_the_order_they_were_read():
    board = _busy_board()
    go = threading.Event()
    read = board.state

    def state():
        if threading.current_thread().name == "nvmeter-edge" and not go.is_set():
            go.wait(1.0)  # the entry's poller reads its state after the caller's exit read
        return read()

    board.state = state
    with EnergyWindow(board, sync="none", idle=board.config.idle_context_w) as w:
        w.call()
    go.set()
    m = w.result
    assert len(m.states) == 2 and m.states[0].t_s <= m.states[1].t_s


def test_a_failed_end_in_later_work_fails_every_read_of_the_result():
    board = _busy_board()
    with EnergyWindow(board, sync="none", idle=board.config.idle_context_w, exit="return") as w:
        board.clock.sleep(0.6)
        w.call()
        board.fail_energy = True  # the end's poller, started at exit, fails
    for _ in range(2):
        with pytest.raises(errors.TelemetryError, match="energy counter"):
            _ = w.result


def test_a_probe_files_idle_is_read_at_the_simulated_boards_level(simulated_idle_probe):
    from nvmeter.boards.simulated import FIRST_UUID

    probe = simulated_idle_probe
    for context in (False, True):
        board = SimulatedBoard(SimConfig(uuid=FIRST_UUID, seed=3))
        board.set_context(context)
        board.clock.sleep(1.0)
        with EnergyWindow(board, sync="none", idle=probe) as w:
            board.set_load(300.0)
            board.clock.sleep(1.0)
            board.set_load(0.0)
            w.call(10)
        # 300 W for 1 s over 10 calls; the context's ~42 W subtracted from a board without one read 16% low
        assert abs(w.result.per_call_mj / 30_000 - 1) < 0.03, (context, w.result)
