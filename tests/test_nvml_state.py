"""The board's state (clocks, temperature, clock-event reasons) through a fake pynvml."""

import math

import pytest
from test_nvml import FakeNVMLError

from nvmeter.boards import nvml
from nvmeter.boards.protocol import BoardState


def with_state(module, reasons=0x4, fail=()):
    module.NVML_CLOCK_SM, module.NVML_CLOCK_MEM, module.NVML_TEMPERATURE_GPU = 1, 2, 0

    def answer(name, value):
        def call(*args):
            if name in fail:
                raise FakeNVMLError(module.NVML_ERROR_NOT_SUPPORTED)
            return value(*args)

        setattr(module, name, call)

    answer("nvmlDeviceGetClockInfo", lambda h, kind: {1: 1545, 2: 3201}[kind])
    answer("nvmlDeviceGetTemperature", lambda h, kind: 57)
    answer("nvmlDeviceGetCurrentClocksEventReasons", lambda h: reasons)
    return module


@pytest.fixture
def board(fake):
    def make(**kwargs):
        with_state(fake(), **kwargs)  # the installed module, given its state queries
        return nvml.NvmlBoard(0)

    return make


def test_the_state_reads_clocks_temperature_and_reasons(board):
    state = board().state()
    assert (state.sm_clock_mhz, state.memory_clock_mhz, state.temperature_c) == (1545, 3201, 57)
    assert state.reasons == ("sw_power_cap",) and state.limited


def test_a_query_the_board_does_not_support_reads_unknown_not_zero(board):
    state = board(fail=("nvmlDeviceGetTemperature", "nvmlDeviceGetCurrentClocksEventReasons")).state()
    assert math.isnan(state.temperature_c) and state.clock_event_reasons == -1
    assert state.reasons == () and not state.limited
    assert BoardState.from_dict({**state.to_dict(), "temperature_c": None}).clock_event_reasons == -1


def test_an_idle_board_is_not_limited(board):
    state = board(reasons=0x1).state()
    assert state.reasons == ("gpu_idle",) and not state.limited
