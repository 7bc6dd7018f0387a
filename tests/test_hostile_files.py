"""Hostile or damaged files: every file nvmeter reads is a regular file within its size limit,
and a raw series that cannot be real is a damaged record (exit 2), never a figure."""

import gzip
import json
import os
import subprocess
import sys
import time
import warnings

import pytest

from nvmeter import errors, files, records
from nvmeter.boards.simulated import Fault, SimConfig, SimulatedBoard
from nvmeter.meter import sanity
from nvmeter.meter.baseline import IdleBaseline
from nvmeter.probes.report import check_readings, load_report, run_probes
from nvmeter.worker.rig import Rig
from nvmeter.worker.simulated import SimWorker


def nvmeter(*args, env=None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "nvmeter.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def one_line_error(result, code):
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr and "Warning" not in result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def probe_data(tmp_path_factory):
    """A quick simulated probe record (as JSON)."""
    rig = Rig(SimulatedBoard(SimConfig(seed=3)), lambda: None)
    rig = Rig(rig.board, lambda: SimWorker(rig.board))
    return run_probes(rig, quick=True).to_dict()


def write(tmp_path, data, name="p.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


# -- only regular files, each kind within its limit ---------------------------------------------
def test_show_dev_zero_is_one_line_at_once():
    t0 = time.monotonic()
    line = one_line_error(nvmeter("show", "/dev/zero"), 2)
    assert "/dev/zero is a character device, not a regular file" in line
    assert time.monotonic() - t0 < 30


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "probe.json"
    os.mkfifo(fifo)
    line = one_line_error(nvmeter("check", "--probe", fifo, timeout=30), 2)
    assert "is a FIFO, not a regular file" in line
    line = one_line_error(nvmeter("summarize", fifo, timeout=30), 2)
    assert "is a FIFO" in line


def test_a_file_over_its_limit_is_refused_before_reading(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:  # sparse: costs no disk
        f.truncate(files.RECORD_LIMIT_BYTES + 1)
    line = one_line_error(nvmeter("show", big), 2)
    assert "is over 64 MiB" in line and "the limit for an nvmeter probe record" in line
    assert "is a folder" in one_line_error(nvmeter("show", tmp_path), 2)


def test_read_bytes_within_the_limit_and_refusals(tmp_path):
    ok = tmp_path / "ok"
    ok.write_bytes(b"x" * 100)
    assert files.read_bytes(ok, 100, "a test file") == b"x" * 100
    with pytest.raises(errors.UsageError, match="over 0 MiB"):
        files.read_bytes(ok, 99, "a test file")
    with pytest.raises(errors.RecordError, match="no such file"):
        files.read_bytes(tmp_path / "none", 100, "a test file", errors.RecordError)


def test_the_window_s_idle_file_and_a_method_file_are_checked_too(tmp_path):
    board = SimulatedBoard(SimConfig(seed=1))
    with pytest.raises(errors.RecordError, match="character device"):
        IdleBaseline.from_probe("/dev/zero", board)
    from nvmeter.score.target import Target

    big = tmp_path / "method.py"
    with open(big, "wb") as f:
        f.truncate(files.SOURCE_LIMIT_BYTES + 1)
    with pytest.raises(errors.UsageError, match=r"limit for a method's \.py file"):
        Target.parse(f"{big}:method")


def test_a_cached_dataset_file_that_is_a_fifo_does_not_hang(tmp_path):
    from nvmeter.workloads import data, sources

    folder = tmp_path / "mnist"
    folder.mkdir()
    for spec in sources.MNIST.files:
        os.mkfifo(folder / spec.gz_name)
    data._load.cache_clear()
    with pytest.raises(errors.UsageError, match=r"is a FIFO.*nvmeter data fetch mnist"):
        data.load("mnist", tmp_path)


def test_gunzip_is_bounded_by_the_expected_size():
    from nvmeter.workloads import idx

    bomb = gzip.compress(b"\0" * 10_000_000)
    with pytest.raises(errors.UsageError, match="more than the 1,000 bytes expected"):
        idx.gunzip(bomb, "bomb.gz", 1000)
    two_members = gzip.compress(b"ab") + gzip.compress(b"cd")
    assert idx.gunzip(two_members, "x.gz", 4) == b"abcd"
    with pytest.raises(errors.UsageError, match="corrupt or truncated gzip"):
        idx.gunzip(two_members[:-3], "x.gz", 4)


# -- raw series that cannot be real: a damaged record, never a figure --------------------------------
def test_a_counter_going_backwards_in_a_probe_file_is_a_damaged_record(tmp_path, probe_data):
    data = json.loads(json.dumps(probe_data))
    end = data["probes"]["reference"]["raw"]["trials"]["constant"]["load"]["end"]
    end["energy_mj"] = [v - 10_000_000 for v in end["energy_mj"]]  # the load edge goes backwards
    path = write(tmp_path, data)
    for args in (("show", path), ("check", "--probe", path)):
        line = one_line_error(nvmeter(*args), 2)
        assert "damaged probe record: the energy counter goes backwards" in line
        assert "reference" in line


def test_a_reference_without_flops_is_a_damaged_record_without_a_numpy_warning(tmp_path, probe_data):
    data = json.loads(json.dumps(probe_data))
    data["probes"]["reference"]["raw"]["trials"]["constant"]["run"]["flops"] = 0
    path = write(tmp_path, data)
    line = one_line_error(nvmeter("check", "--probe", path), 2)
    assert "did no products" in line
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning on the way
        with pytest.raises(errors.RecordError, match="did no products"):
            load_report(path)


@pytest.mark.parametrize(
    ("probe", "damage", "why"),
    [
        ("cadence", lambda raw: raw["phases"]["load"]["t0_s"].reverse(), "out of time order"),
        ("idle", lambda raw: raw["spans"]["context"]["samples"]["power_w"].__setitem__(0, -5.0), "negative"),
        ("bursts", lambda raw: raw["bursts"]["20ms"][0]["tail"].__setitem__(2, 0), "goes backwards"),
    ],
)
def test_each_kind_of_impossible_series_is_caught(tmp_path, probe_data, probe, damage, why):
    data = json.loads(json.dumps(probe_data))
    damage(data["probes"][probe]["raw"])
    with pytest.raises(errors.RecordError, match=f"damaged probe record: .*{why}"):
        load_report(write(tmp_path, data))


def test_the_window_s_idle_from_a_damaged_probe_file_is_refused(tmp_path, probe_data):
    data = json.loads(json.dumps(probe_data))
    data["board"]["uuid"] = SimulatedBoard().identity().uuid
    end = data["probes"]["idle"]["raw"]["spans"]["context"]["end"]
    end["energy_mj"] = [0 for _ in end["energy_mj"]]
    with pytest.raises(errors.RecordError, match="goes backwards"):
        IdleBaseline.from_probe(write(tmp_path, data), SimulatedBoard())


def test_an_undamaged_record_has_no_faults(probe_data):
    assert list(sanity.faults(probe_data)) == []


def test_a_counter_going_backwards_during_a_live_probe_is_a_counter_fault():
    board = SimulatedBoard(SimConfig(seed=5))
    board.inject(Fault.COUNTER_RESET, at_s=board.clock.now() + 0.5)  # a driver reload
    rig = Rig(board, lambda: SimWorker(board))
    with pytest.raises(errors.CounterFault, match="went backwards during the idle probe"):
        run_probes(rig, quick=True, only=("idle",))


def test_a_counter_going_backwards_during_the_live_reference_is_a_counter_fault():
    from nvmeter.probes.reference import run_trial

    board = SimulatedBoard(SimConfig(seed=5))
    board.inject(Fault.COUNTER_RESET, at_s=board.clock.now() + 2.0)  # inside the load span
    with Rig(board, lambda: SimWorker(board)) as rig:
        trial = run_trial(rig, "constant", quick=True)
    with pytest.raises(errors.CounterFault):
        check_readings("reference", trial)


# -- a probe that --quick skips -------------------------------------------------------------------
@pytest.mark.parametrize("only", [["polling"], ["polling", "idle"]])
def test_quick_with_a_probe_it_skips_is_refused_and_writes_nothing(tmp_path, only):
    out = tmp_path / "p.json"
    args = ["probe", "--simulate", "--quick", "--out", out]
    for name in only:
        args += ["--only", name]
    line = one_line_error(nvmeter(*args), 2)
    assert "--quick skips polling" in line
    assert not out.exists()


def test_a_probe_record_without_probes_is_refused(tmp_path, probe_data):
    data = {**probe_data, "probes": {}}
    with pytest.raises(errors.RecordError, match="holds no probe results"):
        load_report(write(tmp_path, data))


def test_records_are_written_with_the_umask_s_mode(tmp_path):
    old = os.umask(0o022)
    try:
        records.write_json(tmp_path / "r.json", {"kind": "probe"})
    finally:
        os.umask(old)
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644


def test_nan_and_infinity_are_not_json(tmp_path, probe_data):
    text = json.dumps(probe_data).replace('"settle_s": ', '"settle_s": NaN, "x": ', 1)
    path = tmp_path / "nan.json"
    path.write_text(text)
    with pytest.raises(errors.RecordError, match=r"not JSON.*NaN is not a JSON value"):
        records.read_json(path, "probe")
