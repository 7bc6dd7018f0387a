"""The NVML board against a fake pynvml: error map, device mapping, units."""

import time
import types

import pytest

from nvmeter import errors
from nvmeter.boards import nvml

UUIDS = ["GPU-aaaa-0000", "GPU-bbbb-1111", "GPU-cccc-2222"]


class FakeNVMLError(Exception):
    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


def fake_pynvml(fail=None):
    """A pynvml stand-in with three GPUs; ``fail`` maps a function name to an NVML code."""
    m = types.SimpleNamespace(
        NVMLError=FakeNVMLError,
        NVML_SUCCESS=0,
        NVML_ERROR_NOT_SUPPORTED=3,
        NVML_ERROR_NO_PERMISSION=4,
        NVML_ERROR_NOT_FOUND=6,
        NVML_ERROR_INVALID_ARGUMENT=2,
        NVML_ERROR_DRIVER_NOT_LOADED=9,
        NVML_ERROR_LIBRARY_NOT_FOUND=12,
        NVML_ERROR_GPU_IS_LOST=15,
        NVML_FI_DEV_POWER_INSTANT=186,
        NVML_FI_DEV_POWER_AVERAGE=185,
        NVML_TOTAL_POWER_SAMPLES=0,
        NVML_PROCESSOR_CLK_SAMPLES=5,
    )
    fail = fail or {}

    def api(name, fn):
        def call(*args):
            if name in fail:
                raise FakeNVMLError(fail[name])
            return fn(*args)

        setattr(m, name, call)

    api("nvmlInit", lambda: None)
    api("nvmlDeviceGetCount", lambda: len(UUIDS))
    api("nvmlDeviceGetHandleByIndex", lambda i: i)
    api("nvmlDeviceGetUUID", lambda h: UUIDS[h].encode())
    api("nvmlDeviceGetHandleByUUID", lambda u: UUIDS.index(u.decode()))
    api("nvmlDeviceGetName", lambda h: "NVIDIA H200")
    api("nvmlDeviceGetVbiosVersion", lambda h: "96.00")
    api("nvmlDeviceGetPciInfo", lambda h: types.SimpleNamespace(busId=f"0000:0{h}:00.0"))
    api("nvmlSystemGetDriverVersion", lambda: "580.159")
    api("nvmlDeviceGetEnforcedPowerLimit", lambda h: 700_000)
    api("nvmlDeviceGetMemoryInfo", lambda h: types.SimpleNamespace(total=141 * 2**30))
    api("nvmlDeviceGetTotalEnergyConsumption", lambda h: 123_456_789)

    # each field and buffer its own figures, so that one read for another is seen (a review)
    by_field = {m.NVML_FI_DEV_POWER_INSTANT: 350_250, m.NVML_FI_DEV_POWER_AVERAGE: 340_500}

    def fields(h, ids):
        return [
            types.SimpleNamespace(nvmlReturn=0, value=types.SimpleNamespace(uiVal=by_field[i])) for i in ids
        ]

    api("nvmlDeviceGetFieldValues", fields)
    now_us = int(time.time() * 1e6)

    def buffer(values):
        return [
            types.SimpleNamespace(
                timeStamp=now_us - 40_000 + 20_000 * i, sampleValue=types.SimpleNamespace(uiVal=v)
            )
            for i, v in enumerate(values)
        ]

    by_kind = {
        m.NVML_TOTAL_POWER_SAMPLES: buffer((120_000, 125_500, 130_000)),  # mW
        m.NVML_PROCESSOR_CLK_SAMPLES: buffer((345, 1_980, 1_980)),  # MHz
    }
    api("nvmlDeviceGetSamples", lambda h, kind, since: (1, by_kind[kind]))
    api("nvmlDeviceGetUtilizationRates", lambda h: types.SimpleNamespace(gpu=97, memory=40))
    api(
        "nvmlDeviceGetComputeRunningProcesses",
        lambda h: [types.SimpleNamespace(pid=4242), types.SimpleNamespace(pid=4343)],
    )
    return m


def test_units_are_converted_at_the_boundary(fake):
    fake()
    board = nvml.NvmlBoard(1)
    ident = board.identity()
    assert ident.uuid == UUIDS[1]
    assert ident.power_limit_w == 700.0
    assert ident.memory_total_mib == 141 * 1024
    assert board.energy_mj() == 123_456_789
    assert board.power_instant_w() == 350.25 and board.power_average_w() == 340.5
    assert board.compute_process_count() == 2
    assert board.compute_pids() == (4242, 4343)


def test_sample_timestamps_land_on_the_monotonic_clock(fake):
    fake()
    board = nvml.NvmlBoard(0)
    samples = board.power_samples()
    assert [s.power_w for s in samples] == [120.0, 125.5, 130.0]
    assert samples[-1].t_s == pytest.approx(board.clock.now(), abs=0.2)
    assert len(board.power_samples(since_s=samples[0].t_s)) == 2
    clocks = board.clock_samples()  # the SM clock's buffer, in MHz, on the same clock
    assert [c.sm_clock_mhz for c in clocks] == [345.0, 1_980.0, 1_980.0]
    assert [c.t_s for c in clocks] == [s.t_s for s in samples]


def test_a_sample_read_twice_maps_to_one_time(fake):
    # an offset taken afresh at each read gave each re-read sample a new time, 238 ns apart, and the
    # merge of a window's reads kept it once per read (a code review, 2026-12-06)
    from nvmeter.meter.series import merge_samples

    fake()
    board = nvml.NvmlBoard(0)
    reads = []
    for _ in range(5):
        reads.append(board.power_samples())
        time.sleep(0.002)
    assert len(merge_samples(*reads)) == 3


def test_a_wall_clock_step_moves_the_sample_mapping_with_it(fake, monkeypatch):
    # NVML stamps on the wall clock; a step during a long monitor must not shift
    # every later sample off the monotonic clock by the step.
    module = fake()
    board = nvml.NvmlBoard(0)
    assert board.power_samples()[-1].t_s == pytest.approx(board.clock.now(), abs=0.2)
    stamped = module.nvmlDeviceGetSamples(0, 0, 0)[1]
    step_s = 1800.0
    real_time = time.time
    monkeypatch.setattr(nvml.time, "time", lambda: real_time() + step_s)
    now_us = int(nvml.time.time() * 1e6)
    stepped = [
        types.SimpleNamespace(timeStamp=now_us - 20_000 * i, sampleValue=types.SimpleNamespace(uiVal=1))
        for i in range(3)
    ]
    before = board.power_samples()  # stamped before the step: they keep their times
    monkeypatch.setattr(module, "nvmlDeviceGetSamples", lambda h, kind, since: (1, [*stamped, *stepped]))
    after = board.power_samples()
    assert after[-1].t_s == pytest.approx(board.clock.now(), abs=0.2)
    assert set(before) <= set(after) and len(after) == 6


@pytest.mark.parametrize(
    ("visible", "index", "expected"),
    [
        (None, 2, UUIDS[2]),
        ("2,0", 0, UUIDS[2]),
        ("2,0", 1, UUIDS[0]),
        ("GPU-bbbb", 0, UUIDS[1]),
        ("bbbb", 0, UUIDS[1]),
        ("1,-1,2", 0, UUIDS[1]),
    ],
)
def test_cuda_index_maps_through_cuda_visible_devices(fake, monkeypatch, visible, index, expected):
    fake()
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert nvml.resolve_uuid(index) == expected


@pytest.mark.parametrize("device", [1.5, -1, True, "abc", b"GPU-1"])
def test_a_malformed_device_is_the_callers_to_fix_before_nvml_is_asked(monkeypatch, device):
    def unasked():
        raise AssertionError("NVML was asked")

    monkeypatch.setattr(nvml, "visible_uuids", unasked)
    with pytest.raises(errors.UsageError, match="must be a CUDA index"):
        nvml.resolve_uuid(device)


@pytest.mark.parametrize("device", [-1, "abc", " all "])
def test_nvml_the_simulated_host_and_the_cli_read_a_device_alike(monkeypatch, device):
    # three readings had drifted: the simulated host called -1 a missing board, "all" was read three ways
    from nvmeter.boards.factory import open_board, open_boards
    from nvmeter.boards.protocol import names_all
    from nvmeter.cli import options

    monkeypatch.setattr(nvml, "visible_uuids", lambda: ["GPU-1"])
    if names_all(device):
        with pytest.raises(errors.UsageError, match="--device all is for nvmeter probe"):
            options.parse_device(device)
        assert len(open_boards(device, simulate=True, sim_boards=2)) == 2
        return
    readers = (
        nvml.resolve_uuid,
        options.parse_device,
        lambda d: open_boards([d], simulate=True, sim_boards=2),
        lambda d: open_board(d, simulate=True),
    )
    for read in readers:
        with pytest.raises(errors.UsageError, match="must be a CUDA index"):
            read(device)
    # a GPU's index as text is the simulated board's too (a marker's device="0" under --energy-simulate)
    assert open_board(" 0 ", simulate=True).identity().uuid.startswith("GPU-5157")


@pytest.mark.parametrize(
    ("visible", "device", "error"),
    [
        ("0", 1, errors.DeviceNotFound),
        # every GPU hidden is no GPU for this process, not a device named wrong (a review, 2026-12-07)
        ("", 0, errors.NoGpu),
        ("-1", 0, errors.NoGpu),
        ("7", 0, errors.DeviceNotFound),
        (None, "GPU-ffff", errors.DeviceNotFound),
        (None, "MIG-1234", errors.NotSupported),
        ("MIG-1234", 0, errors.NotSupported),
        (None, "nonsense", errors.UsageError),
    ],
)
def test_bad_devices_are_clear_errors(fake, monkeypatch, visible, device, error):
    fake()
    if visible is not None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    with pytest.raises(error):
        nvml.resolve_uuid(device)


@pytest.mark.parametrize(
    ("code", "error", "words"),
    [
        (3, errors.NotSupported, "not supported"),
        (15, errors.GpuLost, "lost"),
        (4, errors.PermissionDenied, "permission"),
        (999, errors.TelemetryError, "NVML failed"),
    ],
)
def test_nvml_codes_map_to_nvmeter_errors(fake, code, error, words):
    fake({"nvmlDeviceGetTotalEnergyConsumption": code})
    with pytest.raises(error, match=words) as info:
        nvml.NvmlBoard(0).energy_mj()
    assert isinstance(info.value.__cause__, FakeNVMLError)


@pytest.mark.parametrize("code", [9, 12])
def test_no_driver_points_to_simulate(fake, code):
    fake({"nvmlInit": code})
    with pytest.raises(errors.NvmlUnavailable, match="--simulate"):
        nvml.NvmlBoard(0)


def test_no_gpu(fake, monkeypatch):
    module = fake()
    module.nvmlDeviceGetCount = lambda: 0
    with pytest.raises(errors.NoGpu, match="--simulate"):
        nvml.NvmlBoard(0)


def test_shadowing_pynvml_package_is_loud(capsys):
    impostor = types.SimpleNamespace(__file__="/somewhere/else/pynvml.py")
    with pytest.warns(RuntimeWarning, match="deprecated 'pynvml' package"):
        nvml._warn_if_shadowed(impostor)
    assert "pip uninstall pynvml" in capsys.readouterr().err


def test_real_pynvml_is_not_flagged(recwarn):
    import pynvml

    nvml._warn_if_shadowed(pynvml)
    assert not [w for w in recwarn if "pynvml" in str(w.message)]
