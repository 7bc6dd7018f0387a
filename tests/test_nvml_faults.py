"""NVML's failure modes that users of other GPU-energy tools reported, against a mocked pynvml.

Each is an NVML return code (nvml.h) at a given moment: NOT_READY on a board that has just
started, GPU_IS_LOST, NOT_SUPPORTED on one board of two, FUNCTION_NOT_FOUND for the process
list, and "Uninitialized" in a child forked after NVML was initialised.
"""

import math
import os

import pytest
from test_nvml import UUIDS, FakeNVMLError

from nvmeter import errors
from nvmeter.boards import nvml

NOT_READY, FUNCTION_NOT_FOUND, GPU_IS_LOST, NOT_SUPPORTED, UNINITIALIZED = 27, 13, 15, 3, 1


@pytest.fixture
def slept(monkeypatch):
    waits = []
    monkeypatch.setattr(nvml, "_sleep", waits.append)
    return waits


def failing_first(times: int, code: int, value):
    """An NVML call that answers ``code`` ``times`` times, then ``value``; counts its calls."""
    calls = []

    def call(*_args):
        calls.append(1)
        if len(calls) <= times:
            raise FakeNVMLError(code)
        return value

    call.calls = calls
    return call


# -- NOT_READY: retried a bounded number of times, then a distinct error; never cached, never 0 --------
def test_a_counter_not_ready_for_a_moment_is_retried(fake, slept):
    m = fake()
    m.nvmlDeviceGetTotalEnergyConsumption = failing_first(3, NOT_READY, 123_456)
    assert nvml.NvmlBoard(0).energy_mj() == 123_456
    assert slept == [0.01, 0.02, 0.04]


def test_a_counter_that_stays_not_ready_is_a_distinct_error_then_recovers(fake, slept):
    m = fake()
    read = failing_first(nvml.NOT_READY_TRIES, NOT_READY, 777)
    m.nvmlDeviceGetTotalEnergyConsumption = read
    board = nvml.NvmlBoard(0)
    with pytest.raises(errors.NotReady, match=f"energy counter of {UUIDS[0]}: counter not ready"):
        board.energy_mj()
    assert not isinstance(errors.NotReady("x"), errors.NotSupported)
    assert len(read.calls) == nvml.NOT_READY_TRIES
    assert sum(slept) < 0.5  # bounded: an edge read is never stalled for long
    assert board.energy_mj() == 777  # not cached as unsupported: the next read works


def test_a_power_field_not_ready_is_retried_too(fake, slept):
    import types

    m = fake()
    answers = [NOT_READY, NOT_READY, 0]

    def fields(handle, ids):
        return [types.SimpleNamespace(nvmlReturn=answers.pop(0), value=types.SimpleNamespace(uiVal=350_000))]

    m.nvmlDeviceGetFieldValues = fields
    assert nvml.NvmlBoard(0).power_instant_w() == 350.0
    assert len(slept) == 2


# -- GPU_IS_LOST, NOT_SUPPORTED on one board of two: named, never 0 W -----------------------------------
def test_a_lost_gpu_is_named(fake):
    m = fake()
    board = nvml.NvmlBoard(2)
    m.nvmlDeviceGetTotalEnergyConsumption = failing_first(99, GPU_IS_LOST, 0)
    with pytest.raises(errors.GpuLost, match=f"energy counter of {UUIDS[2]}.*fell off the bus"):
        board.energy_mj()


def test_one_board_without_power_telemetry_beside_a_good_one(fake):
    m = fake()
    bad = 1

    def unless_bad(name, value):
        original = getattr(m, name)

        def call(handle, *args):
            if handle == bad:
                raise FakeNVMLError(NOT_SUPPORTED)
            return original(handle, *args) if value is None else value

        setattr(m, name, call)

    for name in ("nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetFieldValues", "nvmlDeviceGetSamples"):
        unless_bad(name, None)
    unless_bad("nvmlDeviceGetEnforcedPowerLimit", None)
    good, unsupported = nvml.NvmlBoard(0), nvml.NvmlBoard(bad)
    ident = unsupported.identity()  # the board is still named and listed
    assert ident.uuid == UUIDS[bad] and math.isnan(ident.power_limit_w)
    for read in (unsupported.energy_mj, unsupported.power_instant_w, unsupported.power_samples):
        with pytest.raises(errors.NotSupported, match=UUIDS[bad]):
            read()
    assert good.energy_mj() == 123_456_789 and good.power_instant_w() == 350.25
    assert good.identity().power_limit_w == 700.0


# -- FUNCTION_NOT_FOUND: the process list is unknown, energy unaffected ---------------------------------
def test_a_driver_without_the_process_listing_function(fake):
    fake({"nvmlDeviceGetComputeRunningProcesses": FUNCTION_NOT_FOUND})
    board = nvml.NvmlBoard(0)
    with pytest.raises(errors.NotSupported, match="lacks the NVML function"):
        board.compute_pids()
    assert board.energy_mj() == 123_456_789


@pytest.mark.parametrize(
    ("code", "error", "words"),
    [
        (NOT_READY, errors.NotReady, "counter not ready"),
        (FUNCTION_NOT_FOUND, errors.NotSupported, "lacks the NVML function"),
        (UNINITIALIZED, errors.TelemetryError, "Uninitialized"),
    ],
)
def test_the_new_codes_are_in_the_map(code, error, words, fake):
    fake()
    assert isinstance(nvml._translate(FakeNVMLError(code), "x"), error)
    assert words in str(nvml._translate(FakeNVMLError(code), "x"))


# -- a child forked after NVML was initialised -------------------------------------------------------
def test_a_forked_child_initialises_nvml_again(fake):
    """As multiprocessing's fork start method: the child's library answers Uninitialized until nvmlInit."""
    m = fake()
    initialised_in = set()

    def init():
        initialised_in.add(os.getpid())

    def needs_init(fn):
        def call(*args):
            if os.getpid() not in initialised_in:
                raise FakeNVMLError(UNINITIALIZED)
            return fn(*args)

        return call

    m.nvmlInit = init
    for name in ("nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByUUID",
                 "nvmlDeviceGetUUID", "nvmlDeviceGetTotalEnergyConsumption"):  # fmt: skip
        setattr(m, name, needs_init(getattr(m, name)))
    parent_board = nvml.NvmlBoard(0)
    assert parent_board.energy_mj() == 123_456_789
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a new board, and the parent's board object, must both work
        status = 0
        try:
            assert nvml.NvmlBoard(1).energy_mj() == 123_456_789
            assert parent_board.energy_mj() == 123_456_789
        except BaseException as exc:
            os.write(write, repr(exc).encode())
            status = 1
        finally:
            os._exit(status)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    message = os.read(read, 4096).decode()
    os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0, message
    assert parent_board.energy_mj() == 123_456_789  # the parent is untouched
