"""Hostile or damaged files: every file nvmeter reads is a regular file within its size limit,
and a raw series that cannot be real is a damaged record (exit 2), never a figure."""

import gzip
import json
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from nvmeter import errors, files, records
from nvmeter.boards.simulated import Fault, SimConfig, SimulatedBoard
from nvmeter.meter import sanity
from nvmeter.meter.baseline import IdleBaseline
from nvmeter.probes.report import check_readings, load_report, run_probes
from nvmeter.worker.rig import Rig
from nvmeter.worker.simulated import SimWorker

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.mark.parametrize("kind", ["probe", "run", "pytest-energy"])
def test_a_record_nested_past_any_real_one_is_one_line(tmp_path, kind):
    # 600 levels: the parser takes them, the upgrade's copy did not (a traceback of ~3,000 lines)
    path = tmp_path / "deep.json"
    path.write_text(f'{{"kind": "{kind}", "schema_version": 1, "x": {"[" * 600}{"]" * 600}}}')
    line = one_line_error(nvmeter("show", path), 2)
    assert line.endswith(f"not an nvmeter {kind} record (nested too deeply)")


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
        f.truncate(files.WINDOW_RECORD_LIMIT_BYTES + 1)
    line = one_line_error(nvmeter("show", big), 2)  # any kind: a run record of ~100 h is read
    assert "is over 1024 MiB" in line
    assert "the limit for an nvmeter probe, run, pytest-energy, window or job record" in line
    with open(big, "wb") as f:
        f.truncate(files.RECORD_LIMIT_BYTES + 1)
    line = one_line_error(nvmeter("check", "--probe", big), 2)  # a probe record is at most ~1 MB
    assert "is over 64 MiB" in line
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
    board = SimulatedBoard()
    data["board"]["uuid"] = board.identity().uuid
    end = data["probes"]["idle"]["raw"]["spans"]["context"]["end"]
    end["energy_mj"] = [0 for _ in end["energy_mj"]]
    with pytest.raises(errors.RecordError, match="goes backwards"):
        IdleBaseline.from_probe(write(tmp_path, data), board)


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


# -- damaged fields: one line and exit 2 from every reader, never a traceback --------------------------
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def run_data():
    """A simulated run record (as JSON)."""
    from nvmeter.command import SimulatedLife, run_command

    board = SimulatedBoard(SimConfig(seed=5))
    return json.loads(
        json.dumps(records._clean(run_command(["true"], [board], life=SimulatedLife(board)).to_dict()))
    )


@pytest.fixture(scope="module")
def score_data():
    """A score record (as JSON) that nvmeter summarize reads."""
    return json.loads((FIXTURES / "score-v2.json").read_text())


def damaged(tmp_path, data, change, name="r.json"):
    data = json.loads(json.dumps(data))
    change(data)
    return write(tmp_path, data, name)


def set_at(*keys_and_value):
    """A change that sets data[k1][k2]…[kn] = value."""
    *keys, value = keys_and_value

    def change(data):
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] = value

    return change


@pytest.mark.parametrize(
    ("record", "command", "version"),
    [("probe", "show", 5.0), ("run", "show", 1.0), ("score", "summarize", 2.0), ("probe", "show", True)],
)
def test_a_schema_version_that_is_not_an_int_is_refused(
    tmp_path, probe_data, run_data, score_data, record, command, version
):
    data = {"probe": probe_data, "run": run_data, "score": score_data}[record]
    path = damaged(tmp_path, data, set_at("schema_version", version))
    line = one_line_error(nvmeter(command, path), 2)
    assert f"{path}: {record} schema_version {version!r} is not one this nvmeter reads" in line
    with pytest.raises(errors.RecordError, match="schema_version"):
        records.read_json(path, record)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (set_at("wall_s", "1.5"), "wall_s is '1.5', not a finite number >= 0"),
        (set_at("wall_s", -1.0), "wall_s is -1.0, not a finite number >= 0"),
        (set_at("idle", {}), "idle.kind is None"),
        (set_at("idle", None), "idle is None, not a mapping"),
        (set_at("boards", 0, "window", "device", "name", None), r"boards\[0\].window.device.name is None"),
        (set_at("command", ["true", 1]), r"command\[1\] is 1, not a string"),
        (set_at("command", "true"), "command is 'true', not a list"),
        (set_at("pid", "12"), "pid is '12', not an integer"),
        (set_at("signals", [2]), r"signals\[0\] is 2, not a string"),
        (set_at("boards", 0, "other_pids", "1"), r"boards\[0\].other_pids is '1', not a list"),
        (
            set_at("boards", 0, "window", "end", "energy_mj", -1, 1e308),
            "1e\\+308, not an energy counter read",
        ),
        (set_at("boards", 0, "window", "samples", "power_w", 0, -5.0), "a negative power sample"),
        (set_at("boards", 0, "window", "samples", "power_w", 0, "5"), "power samples with .*non-finite"),
        (set_at("boards", 0, "window", "calls", "1"), "malformed Measurement"),
        # records that cannot be true (an adversarial review: each showed as measured)
        (set_at("simulated", "load_w", 1e9), r"simulated\.load_w is 1e\+09 W, above the board's power limit"),
        (set_at("simulated", "t1_s", 1e300), r"simulated ran .*1e\+300 s, not inside boards\[0\]'s window"),
        (
            set_at("boards", 0, "window", "device", "simulated", False),
            r"boards\[0\] is not a simulated board",
        ),
        (set_at("simulated", None), "a simulated board's run record without its `simulated` block"),
        (set_at("left_running", [0]), r"left_running\[0\] is 0, not an integer >= 1"),
        (
            set_at("left_running", [10**9]),
            r"left_running\[0\] is 1000000000, above Linux's largest process id",
        ),
        (set_at("left_running", [4242, 4242]), "left_running names a process twice"),
        (lambda d: d.__setitem__("left_running", [d["pid"]]), "left_running names the command itself"),
        (
            set_at("boards", 0, "window", "states", 0, "t_s", -5.0),
            r"boards\[0\]\.window\.states ran -5-.* s, not inside the window's reads",
        ),
        (
            set_at("boards", 0, "window", "states", 0, "temperature_c", "hot"),
            r"a board state's temperature_c is 'hot', not a number \(at .*states\[0\]\)",
        ),
        (
            lambda d: d["boards"][0]["window"]["states"].reverse(),
            r"boards\[0\]\.window\.states are out of time order",
        ),
        (
            set_at("boards", 0, "window", "device", "uuid", "GPU-forged"),
            r"boards\[0\]\.window\.device\.uuid is 'GPU-forged', not an NVML UUID",
        ),
    ],
)
def test_a_damaged_run_record_is_one_line_and_exit_2(tmp_path, run_data, change, why):
    from nvmeter.command import load_run

    path = damaged(tmp_path, run_data, change)
    line = one_line_error(nvmeter("show", path), 2)
    assert re.search(f"{re.escape(str(path))}: damaged run record: .*{why}", line), line
    with pytest.raises(errors.RecordError, match=f"damaged run record: .*{why}"):
        load_run(path)


def test_an_undamaged_run_record_shows(tmp_path, run_data):
    result = nvmeter("show", write(tmp_path, run_data))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("true exited 0")


def reads_by_show(path: Path, monkeypatch) -> int:
    """How many times ``nvmeter show path``, run in this process, read the file."""
    from nvmeter.cli import show

    read, seen = files.read_bytes, []

    def counted(where, *args, **kwargs):
        seen.append(Path(where))
        return read(where, *args, **kwargs)

    monkeypatch.setattr(files, "read_bytes", counted)
    show.show(path)
    return seen.count(path)


@pytest.mark.parametrize("kind", ["run", "probe"])
def test_show_reads_a_record_once(tmp_path, run_data, probe_data, monkeypatch, kind):
    # it parsed a record to learn its kind, then its loader parsed it again (~6% of a large one's time)
    path = write(tmp_path, run_data if kind == "run" else probe_data)
    assert reads_by_show(path, monkeypatch) == 1


def _jump_reference(d: dict) -> None:
    """The reference's load span ends 10^9 mJ later: a counter that jumped, not a hotter board."""
    end = d["probes"]["reference"]["raw"]["trials"]["constant"]["load"]["end"]
    end["energy_mj"] = [e + 10**9 for e in end["energy_mj"]]


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            lambda d: d["probes"]["reference"]["raw"]["trials"]["constant"]["load"]["end"][
                "energy_mj"
            ].__setitem__(-1, 1e308),
            r"probes\.reference\..*energy_mj\[\d+\] is 1e\+308, not an energy counter read",
        ),
        (set_at("board", "name", None), "board.name is None, not a string"),
        (set_at("board", "uuid", "GPU-5157a7ed"), "board.uuid is 'GPU-5157a7ed', not an NVML UUID"),
        (set_at("started_utc", 5), "started_utc is 5, not a string"),
        (_jump_reference, "the energy counter jumps"),
        # named at the series, not by the probe's builder in Python's words (a review, 2026-12-06)
        (
            lambda d: d["probes"]["idle"]["raw"]["spans"]["no_context"]["start"].__setitem__("t0_s", "x"),
            r"a counter series with .* \(at idle\.spans\.no_context\.start\)",
        ),
        (
            lambda d: d["probes"]["bursts"]["raw"]["bursts"]["20ms"][0]["pre"].__setitem__(1, 1e308),
            r"counter reads out of time order \(at bursts\.bursts\.20ms\[0\]\)",
        ),
        (set_at("quick", {"no": 1}), r"quick is \{'no': 1\}, not true or false"),
    ],
)
def test_a_damaged_probe_record_is_one_line_and_exit_2(tmp_path, probe_data, change, why):
    path = damaged(tmp_path, probe_data, change)
    for args in (("show", path), ("check", "--probe", path)):
        line = one_line_error(nvmeter(*args), 2)
        assert re.search(f"{re.escape(str(path))}: damaged probe record: {why}", line), line


def test_a_probe_files_profile_block_is_checked_against_its_raw_series(tmp_path, probe_data):
    path = damaged(tmp_path, probe_data, set_at("profile", "counter_period_s", 1.5))
    line = one_line_error(nvmeter("show", path), 2)
    assert str(path) in line and "profile" in line and "1.5" in line, line


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (set_at("target", "name", None), "target.name is None, not a string"),
        (set_at("board", "name", None), "board.name is None, not a string"),
        (set_at("created_utc", 0), "created_utc is 0, not a string"),
        (
            set_at("energy", "method", "window", "end", "energy_mj", -1, 1e308),
            "1e\\+308, not an energy counter",
        ),
        (set_at("energy", "method", "window", "calls", "1"), "malformed Measurement"),
        (set_at("config", "window_s", 0), r"window_s \(--window-s\) must be"),  # its setting's own check
        (set_at("energy", "method", "block", "ms", 0, -5.0), r"energy\.method\.block\.ms\[0\] is -5\.0"),
        (set_at("energy", "method", "window", "schema_version", True), "schema_version True"),
        # times that cannot be the record's own, and a board no NVML names
        (
            set_at("energy", "warmup", "t1_s", 1e300),
            r"energy\.warmup ran .*1e\+300 s, not inside the gap between the windows",
        ),
        (set_at("energy", "warmup", "ms", 0, -1.0), r"energy\.warmup\.ms\[0\] is -1\.0"),
        (
            set_at("energy", "control", "block", "t0_s", 0.0),
            r"energy\.control\.block ran 0-.* not inside its window",
        ),
        (set_at("board", "uuid", "GPU-1"), "board.uuid is 'GPU-1', not an NVML UUID"),
        # figures a consistent rewrite would make: 883 W above idle on a 700 W board, 100.05% right
        (
            set_at("energy", "method", "window", "calls", 1),
            r"method window counts 1 call\(s\), its block \d+",
        ),
        (set_at("energy", "method", "block", "correct", 0, 10**6), "judged right on more rows than its draw"),
        (set_at("energy", "method", "block", "correct", 0, 0.5), "right labels is not a whole number"),
    ],
)
def test_a_damaged_score_record_is_one_line_and_exit_2(tmp_path, score_data, change, why):
    path = damaged(tmp_path, score_data, change, "run-001.json")
    line = one_line_error(nvmeter("summarize", path), 2)
    assert re.search(f"{re.escape(str(path))}: damaged score record.*{why}", line), line
    line = one_line_error(nvmeter("summarize", tmp_path), 2)  # the folder: the same record, the same line
    assert re.search(f"{re.escape(str(path))}: damaged score record.*{why}", line), line


def test_the_read_boundary_names_the_file_and_hides_no_programming_error(tmp_path):
    path = tmp_path / "r.json"
    for exc, shown in [
        (OverflowError("int too large"), "OverflowError: int too large"),
        (KeyError("board"), "lacks 'board'"),
        (records.BadField("wall_s is -1"), "wall_s is -1"),
        (errors.RecordError("a malformed Measurement (x)"), "a malformed Measurement (x)"),
        (ValueError("a\nb"), r"ValueError: a\nb"),  # one line, whatever the file held
    ]:
        with pytest.raises(errors.RecordError) as got, records.building(path, "run"):
            raise exc
        assert str(got.value) == f"{path}: damaged run record: {shown}"
    named = errors.RecordError(f"{path}: holds no probe results")
    with pytest.raises(errors.RecordError) as got, records.building(path, "probe"):
        raise named
    assert got.value is named  # already names the file: unchanged
    with pytest.raises(NameError), records.building(path, "run"):  # a bug, not a damaged record
        raise NameError("undefined")


def test_a_run_copied_into_two_folders_is_counted_once(tmp_path, score_data):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        write(tmp_path / folder, score_data, "run-001.json")
    result = nvmeter("summarize", tmp_path / "a", tmp_path / "b", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert "copies of a run, each counted once" in result.stderr and result.stderr.count("\n") == 1
    assert len(json.loads(result.stdout)["runs"]) == 1


def test_a_negative_power_field_reading_is_damage(tmp_path):
    full = json.loads((Path(__file__).resolve().parents[1] / "results" / "probe-h200.json").read_text())
    path = damaged(tmp_path, full, lambda d: d["probes"]["step"]["raw"]["instant_w"].__setitem__(0, -3.0))
    line = one_line_error(nvmeter("show", path), 2)
    assert "damaged probe record: a negative power reading (at step)" in line, line


def test_a_read_of_negative_cost_is_damage(tmp_path):
    full = json.loads((Path(__file__).resolve().parents[1] / "results" / "probe-h200.json").read_text())
    negate = lambda d: d["probes"]["read_cost"]["raw"]["reads_s"]["energy"].__setitem__(0, -0.003)  # noqa: E731
    line = one_line_error(nvmeter("show", damaged(tmp_path, full, negate)), 2)
    assert "damaged probe record: a read that took negative time (at read_cost)" in line, line


@pytest.mark.parametrize(
    ("wait", "why"),
    [(-5.0, "a settle wait of negative time"), ("2 s", "settle waits with missing or non-finite")],
)
def test_a_settle_wait_that_cannot_be_is_damage(tmp_path, probe_data, wait, why):
    change = lambda d: d["probes"]["idle"]["raw"]["settle_s"].__setitem__("context", wait)  # noqa: E731
    line = one_line_error(nvmeter("show", damaged(tmp_path, probe_data, change)), 2)
    assert f"damaged probe record: {why}" in line, line


def test_the_window_s_idle_from_a_probe_with_a_count_past_int64_is_refused(tmp_path, probe_data):
    data = json.loads(json.dumps(probe_data))
    board = SimulatedBoard()
    data["board"]["uuid"] = board.identity().uuid
    data["probes"]["idle"]["raw"]["spans"]["no_context"]["end"]["energy_mj"][0] = 10**30
    with pytest.raises(errors.RecordError, match="not an energy counter read"):
        IdleBaseline.from_probe(write(tmp_path, data), board, "no_context")


# -- outputs: a link is written through, never replaced --------------------------------------------


def test_an_output_link_is_written_through_and_stays_a_link(tmp_path):
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text(json.dumps({"kind": "x", "n": 0}))
    link.symlink_to(target.name)
    records.write_json(link, {"kind": "x", "n": 1})
    assert link.is_symlink() and json.loads(target.read_text()) == {"kind": "x", "n": 1}


def test_an_output_link_to_a_device_is_refused_in_one_line(tmp_path):
    link = tmp_path / "null.json"
    link.symlink_to("/dev/null")
    line = one_line_error(nvmeter("probe", "--simulate", "--quick", "--out", link), 2)
    assert "is a link to /dev/null, not to a file" in line
    assert link.is_symlink() and Path("/dev/null").is_char_device()


@pytest.fixture(scope="module")
def run_record(tmp_path_factory):
    path = tmp_path_factory.mktemp("run") / "run.json"
    made = nvmeter("run", "--simulate", "--json", path, "--", "true")
    assert made.returncode == 0, made.stderr
    return json.loads(path.read_text())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("tail_s",), "x"),
        (("tail_s",), []),
        (("tail_s",), -0.06),
        (("idle", "samples_power_w"), 1e308),
        (("idle", "power_w"), 4000.0 * 2),
        (("max_rel_err",), 1e300),
    ],
)
def test_a_run_record_with_an_impossible_figure_is_damaged(run_record, tmp_path, field, value):
    data = json.loads(json.dumps(run_record))
    place = data["boards"][0]["window"]
    for key in field[:-1]:
        place = place[key]
    place[field[-1]] = value
    line = one_line_error(nvmeter("show", write(tmp_path, data)), 2)
    assert f"a malformed Measurement: {'.'.join(field)} must be a finite number" in line


# -- an adversarial review of 2026-12-05 (helper-22) ----------------------------------------------
def _scaled_samples(factor):
    def change(data):
        samples = data["boards"][0]["window"]["samples"]
        samples["power_w"] = [p * factor for p in samples["power_w"]]

    return change


@pytest.mark.parametrize(
    ("factor", "why"),
    [
        (1000.0, "a power sample above what any board draws"),
        (1e4, "a power sample above what any board draws"),
    ],
)
def test_samples_no_board_draws_are_a_damaged_record(tmp_path, run_data, factor, why):
    """Samples x1000 (379 kW on a 700 W board) showed as a reliable figure."""
    line = one_line_error(nvmeter("show", damaged(tmp_path, run_data, _scaled_samples(factor))), 2)
    assert why in line


def test_samples_that_disagree_with_the_counter_make_the_figure_not_reliable():
    """Samples x3, under any board's maximum, are still no reading of the sensor the counter reads."""
    from nvmeter.meter.measurement import Measurement
    from nvmeter.meter.window import EnergyWindow

    board = SimulatedBoard(SimConfig(seed=5))
    idle = IdleBaseline.given(board.config.idle_no_context_w)
    with EnergyWindow(board, idle=idle, sync="none", calls=1) as w:
        board.set_load(300.0)
        board.clock.sleep(1.0)
        board.set_load(0.0)
    window = json.loads(json.dumps(records._clean(w.result.to_dict())))
    genuine = Measurement.from_dict(window)
    assert genuine.reliable and 0.9 < genuine.samples_to_counter < 1.1
    window["samples"]["power_w"] = [p * 3 for p in window["samples"]["power_w"]]
    forged = Measurement.from_dict(window)
    assert not forged.reliable and "times what the counter does" in forged.reason


def test_summarize_refuses_a_score_record_with_impossible_samples(tmp_path, score_data):
    """summarize read negative, null and inf samples, and samples x1000, as a PASS."""
    folder = tmp_path / "runs"
    folder.mkdir()
    damaged(
        folder,
        score_data,
        set_at("energy", "idle", 0, "span", "samples", "power_w", 1, -500.0),
        "run-001.json",
    )
    line = one_line_error(nvmeter("summarize", folder), 2)
    assert "damaged score record: a negative power sample (at energy.idle[0].span.samples)" in line


def test_a_loop_of_links_as_the_output_is_refused_and_left_as_it_was(tmp_path):
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop.name)
    line = one_line_error(nvmeter("run", "--simulate", "--json", loop, "--", "true"), 2)
    assert "is a link that leads to no file" in line
    assert loop.is_symlink() and os.readlink(loop) == loop.name


def test_a_damaged_probe_file_is_said_without_a_numpy_warning_first(tmp_path):
    """A sample time of 1e308 printed numpy's overflow warning and its source line before the error."""
    made = tmp_path / "made.json"
    assert nvmeter("probe", "--simulate", "--only", "samples", "--out", made).returncode == 0
    data = json.loads(made.read_text())
    path = damaged(tmp_path, data, set_at("probes", "samples", "raw", "buffer", "t_s", -1, 1e308))
    line = one_line_error(nvmeter("show", path), 2)  # one line: no RuntimeWarning
    assert str(path) in line


def test_a_run_record_whose_wall_time_is_shorter_than_its_window_is_refused(tmp_path):
    """wall_s of 0 in a 1.5 s window showed as "exited 0 after -0 ms" (an upper bound alone was checked)."""
    from nvmeter.command import SimulatedLife, load_run, run_command

    board = SimulatedBoard(SimConfig(seed=5))
    data = json.loads(
        json.dumps(records._clean(run_command(["sleep", "1"], [board], life=SimulatedLife(board)).to_dict()))
    )
    assert load_run(write(tmp_path, data, "ok.json")).wall_s > 0.9
    path = damaged(tmp_path, data, set_at("wall_s", 0.0))
    line = one_line_error(nvmeter("show", path), 2)
    assert "wall_s is 0 s, shorter than the window that held the command" in line


@pytest.mark.parametrize(
    ("record", "change", "why"),
    [
        (
            "pytest-energy",
            set_at("session_status", 2**64),
            "session_status is 18446744073709551616, not an integer",
        ),
        ("score", set_at("run", 2**64), "run is 18446744073709551616, not an integer from 1 to 1,000,000"),
    ],
)
def test_integers_past_any_real_one_are_refused(tmp_path, score_data, record, change, why):
    data = score_data if record == "score" else json.loads((FIXTURES / "pytest-energy-v2.json").read_text())
    folder = tmp_path / "runs"
    folder.mkdir()
    path = damaged(folder, data, change, "run-001.json")
    line = one_line_error(nvmeter("summarize" if record == "score" else "show", path), 2)
    assert why in line


# -- records kept packed (results/ holds its larger records as .json.gz) -----------------------------
def test_a_packed_record_reads_as_the_plain_one(tmp_path):
    plain = ROOT / "results" / "probe-h200.json"
    packed = tmp_path / "probe-h200.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert records.read_json(packed, "probe") == records.read_json(plain, "probe")
    assert load_report(packed).profile() == load_report(plain).profile()


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"not gzip at all", "not gzip"),
        (gzip.compress(b'{"kind": "probe"}')[:-12], "cut short"),
        (gzip.compress(b" " * (2**20 + 1)), "unpacks to over 1 MiB"),
        (gzip.compress(b'{"kind": "probe"}') + b"trailing", "bytes after its end"),
        (gzip.compress(b'{"kind": ') + gzip.compress(b'"probe"}'), "bytes after its end"),
    ],
    ids=["not-gzip", "cut-short", "bomb", "trailing-bytes", "two-members"],
)
def test_a_bad_packed_record_is_one_line(tmp_path, monkeypatch, content, says):
    monkeypatch.setattr(files, "RECORD_LIMIT_BYTES", 2**20)
    path = tmp_path / "r.json.gz"
    path.write_bytes(content)
    with pytest.raises(errors.RecordError, match=says) as caught:
        records.read_json(path, "probe")
    assert "\n" not in str(caught.value)


def test_a_record_written_under_a_gz_name_is_packed_and_reads_back(tmp_path):
    out = tmp_path / "p.json.gz"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nvmeter.cli",
            "probe",
            "--simulate",
            "--no-cache",
            "--only",
            "idle",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:2] == b"\x1f\x8b"  # gzip's magic
    assert load_report(out).probes["idle"]


def test_a_packed_record_is_replaced_by_the_next_and_a_damaged_cache_file_too(tmp_path, monkeypatch):
    """A code review: the check that an output is a JSON record read .gz bytes as text, so a
    record could not replace its own packed predecessor."""
    packed = tmp_path / "a.json.gz"
    records.write_json(packed, {"kind": "x", "n": 1})
    records.write_json(packed, {"kind": "x", "n": 2})
    assert records.parse_json(packed, "a test record") == {"kind": "x", "n": 2}
    mine = tmp_path / "cache.json"
    mine.write_text("damaged")
    records.write_json(mine, {"kind": "x"}, own=True)  # the user cache's own file
    script = tmp_path / "script.py"
    script.write_text("print(1)\n")
    with pytest.raises(errors.UsageError, match="not a JSON record"):
        records.write_json(script, {"kind": "x"})
    assert script.read_text() == "print(1)\n"


PACKAGE = {"name": "my-package", "version": "1.0.0"}


@pytest.mark.parametrize(
    "args",
    [
        ("run", "--simulate", "--json", "OUT", "--", "true"),
        ("probe", "--simulate", "--quick", "--only", "idle", "--out", "OUT"),
    ],
)
def test_a_json_file_of_no_nvmeter_kind_is_not_replaced(tmp_path, args):
    """A breaker: --json package.json replaced the package's manifest, a JSON object of no nvmeter kind."""
    package = tmp_path / "package.json"
    package.write_text(json.dumps(PACKAGE))
    line = one_line_error(nvmeter(*(package if a == "OUT" else a for a in args)), 2)
    assert line.endswith(
        f"package.json holds a JSON object that is no nvmeter {args[0]} record (it has no `kind` field): "
        "give a new path (or remove the file first)"
    )
    assert json.loads(package.read_text()) == PACKAGE


def test_a_record_is_replaced_only_by_its_own_kind_or_when_empty(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("")
    records.write_json(path, {"kind": "x", "n": 1})  # an empty file: any record may take it
    records.write_json(path, {"kind": "x", "n": 2})  # the same kind: a new one replaces the old
    assert json.loads(path.read_text())["n"] == 2
    for theirs in ({"kind": "Deployment"}, {"kind": 3}, {"name": "notes"}):
        path.write_text(json.dumps(theirs))
        with pytest.raises(errors.UsageError, match=r"holds a JSON object that is no nvmeter x record"):
            records.write_json(path, {"kind": "x"})
        assert json.loads(path.read_text()) == theirs
    # a format first written without a kind is still its kind's: an unlabelled ladder-h200 record
    path.write_text(json.dumps({"schema_version": 1, "parts": {}}))
    records.write_json(path, {**records.header("ladder-h200"), "parts": {}})
    with pytest.raises(
        errors.UsageError, match=r"holds an nvmeter ladder-h200 record, and this would replace"
    ):
        records.write_json(path, {"kind": "x"})


def test_a_claimed_path_replaces_only_the_file_found_at_the_claim(tmp_path):
    path = tmp_path / "r.json"
    records.write_json(path, {"kind": "x", "n": 0})
    records.write_claimed(
        records.claim(path, kind="x"), {"kind": "x", "n": 1}
    )  # the user's own earlier record
    assert json.loads(path.read_text())["n"] == 1
    for before in ("there", "free"):
        if before == "free":
            path.unlink()
        claimed = records.claim(path, kind="x")
        records.write_json(path, {"kind": "x", "n": 2})  # another process, meanwhile
        with pytest.raises(
            errors.UsageError, match=r"was written by another process while this command ran"
        ) as caught:
            records.write_claimed(claimed, {"kind": "x", "n": 3})
        assert json.loads(path.read_text())["n"] == 2
        kept = Path(str(caught.value).rpartition("kept as ")[2])
        assert json.loads(kept.read_text())["n"] == 3
        kept.unlink()


@pytest.mark.parametrize("appears", ["not json", "link", "folder"])
@pytest.mark.parametrize("before", ["there", "free"])
def test_whatever_appears_at_a_claimed_path_keeps_the_record_beside_it(tmp_path, appears, before):
    # a non-record, a link or a folder made at --json's path during a run lost the record: the
    # second check refused the path after the measurement (an adversarial review, 2026-12-06)
    path = tmp_path / "r.json.gz"
    if before == "there":
        records.write_json(path, {"kind": "x", "n": 0})
    claimed = records.claim(path, kind="x")
    path.unlink(missing_ok=True)
    if appears == "not json":
        path.write_text("notes\n")
    elif appears == "link":
        path.symlink_to("/dev/null")
    else:
        path.mkdir()
    with pytest.raises(
        errors.UsageError, match=r"written by another process while this command ran; this record is kept as "
    ) as caught:
        records.write_claimed(claimed, {"kind": "x", "n": 1})
    kept = Path(str(caught.value).rpartition("kept as ")[2])
    assert records.parse_json(kept, "a record") == {"kind": "x", "n": 1}  # gzip read by its content


def test_two_conflicts_of_one_process_keep_both_records(tmp_path):
    # the second took PATH.PID.conflict over the first (a code review, 2026-12-06)
    path = tmp_path / "r.json"
    kept = []
    for n in (1, 2):
        claimed = records.claim(path, kind="x")
        records.write_json(path, {"kind": "x", "other": n})
        with pytest.raises(errors.RecordKept) as caught:
            records.write_claimed(claimed, {"kind": "x", "mine": n})
        kept.append(caught.value.kept)
    assert kept[0] != kept[1]
    assert [json.loads(Path(k).read_text())["mine"] for k in kept] == [1, 2]


def test_a_record_of_another_kind_is_not_replaced(tmp_path):
    """An adversarial review: run --json probe.json, probe --out run.json silently replaced the other."""
    probe, run = tmp_path / "probe.json", tmp_path / "run.json"
    assert nvmeter("probe", "--simulate", "--quick", "--only", "idle", "--out", probe).returncode == 0
    assert nvmeter("run", "--simulate", "--json", run, "--", "true").returncode == 0
    kept = probe.read_bytes(), run.read_bytes()
    line = one_line_error(nvmeter("run", "--simulate", "--json", probe, "--", "true"), 2)
    assert "holds an nvmeter probe record, and this would replace it with a run record" in line
    line = one_line_error(nvmeter("probe", "--simulate", "--quick", "--only", "idle", "--out", run), 2)
    assert "holds an nvmeter run record" in line
    assert (probe.read_bytes(), run.read_bytes()) == kept
    # --device all writes run-GPU-….json beside it, never run.json itself (a review)
    every = nvmeter("probe", "--simulate", "--device", "all", "--quick", "--only", "idle", "--out", run)
    assert every.returncode == 0, every.stderr
    assert run.read_bytes() == kept[1] and list(tmp_path.glob("run-GPU-*.json"))
    assert nvmeter("run", "--simulate", "--json", run, "--", "true").returncode == 0  # a run over a run
    assert run.read_bytes() != kept[1]
