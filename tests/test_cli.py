"""The CLI through a subprocess, as a user runs it."""

import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nvmeter import interrupts, records


def nvmeter(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "nvmeter.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


@pytest.fixture(scope="module")
def probe_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("probe") / "probe.json"
    result = nvmeter("probe", "--simulate", "--quick", "--out", str(path))
    assert result.returncode == 0, result.stderr
    return path


def test_probe_writes_a_versioned_record_and_a_table(probe_file):
    data = json.loads(probe_file.read_text())
    assert data["kind"] == "probe"
    assert data["schema_version"] == records.CURRENT["probe"]
    assert data["board"]["simulated"] is True
    assert {"raw", "derived"} <= set(data["probes"]["cadence"])


def test_check_reads_the_reference_from_a_probe_file(probe_file):
    # the simulated board models our H200, so the H200 band applies
    result = nvmeter("check", "--probe", str(probe_file))
    assert result.returncode == 0, result.stderr
    assert "PASS" in result.stdout


def test_check_on_a_board_without_a_band_reports_and_is_not_a_pass(probe_file, tmp_path):
    data = json.loads(probe_file.read_text())
    data["board"]["name"] = "NVIDIA T4"
    data["profile"] = None  # the profile's defaults follow the family: this one's would be a T4's
    t4 = tmp_path / "t4.json"
    t4.write_text(json.dumps(data))
    result = nvmeter("check", "--probe", str(t4))
    # a gate must not pass a board it cannot judge: one line says what to do
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert "no band known for NVIDIA T4" in result.stderr and "--allow-no-band" in result.stderr
    assert "NO BAND KNOWN" in result.stdout and "J/TFLOP" in result.stdout
    accepted = nvmeter("check", "--probe", str(t4), "--allow-no-band")
    assert accepted.returncode == 0 and not accepted.stderr, accepted.stderr
    assert "NO BAND KNOWN" in accepted.stdout


def test_check_fails_outside_a_forced_band(probe_file):
    result = nvmeter("check", "--probe", str(probe_file), "--band", "A100")
    assert result.returncode == 1
    data = json.loads(probe_file.read_text())["probes"]["reference"]["derived"]["constant"]
    assert (  # which figure, and where (a new user's FAIL had named neither)
        f"outside the band A100: 6-11 J/TFLOP, 15-23 TFLOP/s: {data['j_per_tflop']:.4g} J/TFLOP is below it, "
        f"{data['tflops']:.4g} TFLOP/s is above it"
    ) in result.stderr


def one_line_error(result, code):
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize("spec", ["abc", "-1", "GPU-", "1.5", "٠", "+0"])
def test_malformed_device_is_one_line(spec, tmp_path):
    out = tmp_path / "p.json"
    line = one_line_error(nvmeter("probe", "--simulate", "--device", spec, "--out", str(out)), 2)
    assert "--device" in line
    assert not out.exists()


def test_unwritable_out_fails_before_measuring(tmp_path):
    line = one_line_error(nvmeter("probe", "--simulate", "--out", str(tmp_path / "no" / "p.json")), 2)
    assert "does not exist" in line
    line = one_line_error(nvmeter("probe", "--simulate", "--out", str(tmp_path)), 2)
    assert "is a folder" in line


def test_probe_file_of_another_kind_or_version(tmp_path, probe_file):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"kind": "score", "schema_version": 1}))
    assert "not an nvmeter probe record" in one_line_error(nvmeter("check", "--probe", str(other)), 2)
    future = tmp_path / "future.json"
    data = json.loads(probe_file.read_text())
    data["schema_version"] = 99
    future.write_text(json.dumps(data))
    assert "schema_version 99" in one_line_error(nvmeter("check", "--probe", str(future)), 2)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    assert "not JSON" in one_line_error(nvmeter("check", "--probe", str(garbage)), 2)
    assert "no such file" in one_line_error(nvmeter("check", "--probe", str(tmp_path / "none.json")), 2)


def test_unknown_band_is_refused(probe_file):
    assert "unknown band" in one_line_error(nvmeter("check", "--probe", str(probe_file), "--band", "X9"), 2)


def _has_nvidia_gpu() -> bool:
    try:
        from nvmeter.boards.nvml import visible_uuids

        return bool(visible_uuids())
    except Exception:
        return False


@pytest.mark.skipif(_has_nvidia_gpu(), reason="this machine has an NVIDIA GPU")
def test_no_gpu_says_so_and_points_to_simulate(tmp_path):
    out = tmp_path / "p.json"
    line = one_line_error(nvmeter("probe", "--out", str(out)), 3)
    assert "--simulate" in line
    assert not out.exists()
    assert "--simulate" in one_line_error(nvmeter("check"), 3)


def test_out_must_be_a_regular_file(tmp_path):
    line = one_line_error(nvmeter("probe", "--simulate", "--quick", "--out", "/dev/null"), 2)
    assert "not a regular file" in line
    assert not Path("/dev/null").is_file()


@pytest.mark.parametrize("spec", ["999999", "GPU-ffffffff-0000"])
def test_simulated_board_refuses_other_devices(spec, tmp_path):
    line = one_line_error(
        nvmeter("probe", "--simulate", "--device", spec, "--out", str(tmp_path / "p.json")), 3
    )
    assert "simulated board" in line


def test_unknown_probe_is_refused_before_measuring(tmp_path):
    result = nvmeter("probe", "--simulate", "--only", "nosuch", "--out", str(tmp_path / "p.json"))
    assert "unknown probe" in one_line_error(result, 2)


def test_damaged_series_are_one_line_errors(probe_file, tmp_path):
    data = json.loads(probe_file.read_text())
    series = data["probes"]["cadence"]["raw"]["phases"]["load"]
    series["t1_s"] = series["t1_s"][: len(series["t1_s"]) // 2]
    bad = tmp_path / "cut.json"
    bad.write_text(json.dumps(data))
    line = one_line_error(nvmeter("show", str(bad)), 2)
    assert "a counter series with missing, unequal or non-finite values (at cadence.phases.load)" in line
    data = json.loads(probe_file.read_text())
    data["probes"] = None
    bad.write_text(json.dumps(data))
    assert "not a mapping" in one_line_error(nvmeter("check", "--probe", str(bad)), 2)
    data = json.loads(probe_file.read_text())
    data["probes"]["reference"]["raw"]["trials"]["constant"]["load"]["start"] = {
        "t0_s": [],
        "t1_s": [],
        "energy_mj": [],
    }
    bad.write_text(json.dumps(data))
    line = one_line_error(nvmeter("check", "--probe", str(bad)), 2)
    assert "a counter series without reads (at reference.trials.constant.load.start)" in line


def test_python_m_nvmeter_cli_has_its_handler_before_typer_loads():
    # a Ctrl-C in the ~0.1 s `import typer` takes was a traceback under `python -m nvmeter.cli`
    code = "import sys, nvmeter.cli; print('typer' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"
    main = (Path(__file__).parent.parent / "nvmeter" / "cli" / "__main__.py").read_text()
    assert "from nvmeter._entry import main" in main


def test_ctrl_c_anywhere_in_the_console_script_is_one_line(monkeypatch, capsys):
    from nvmeter import _entry, cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "main", interrupted)
    # _entry installs its os._exit handlers for the process: left here, they ended every later
    # test that signals itself, and the test run on a Ctrl-C, silently with 130
    assert _entry.ENDING == interrupts.ENDING  # the entry's copy of the signals nvmeter ends on
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *_entry.ENDING)}
    try:
        with pytest.raises(SystemExit) as exit_info:
            _entry.main()
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert exit_info.value.code == 130
    assert capsys.readouterr().err == "nvmeter: interrupted; nothing written\n"


def test_the_window_api_is_at_the_top_level():
    import nvmeter
    from nvmeter.meter import adaptive, window

    assert nvmeter.measure is adaptive.measure and nvmeter.EnergyWindow is window.EnergyWindow


def test_the_job_api_is_at_the_top_level():
    import nvmeter
    from nvmeter.boards import factory
    from nvmeter.meter import distributed, job, jobmeasurement

    assert nvmeter.JobWindow is job.JobWindow and nvmeter.DistributedWindow is distributed.DistributedWindow
    assert nvmeter.JobMeasurement is jobmeasurement.JobMeasurement
    assert nvmeter.simulated_host is factory.simulated_host and nvmeter.open_boards is factory.open_boards


def test_probe_all_writes_one_file_per_board(tmp_path):
    out = tmp_path / "probe.json"
    result = nvmeter(
        "probe",
        "--simulate",
        "--sim-boards",
        "2",
        "--device",
        "all",
        "--quick",
        "--only",
        "idle",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    files = sorted(tmp_path.glob("probe-GPU-*.json"))
    assert [f.name for f in files] == [
        "probe-GPU-5157a7ed-0000-4000-8000-000000000000.json",
        "probe-GPU-5157a7ed-0000-4000-8000-000000000001.json",
    ]
    assert not out.exists()
    for f in files:
        data = json.loads(f.read_text())
        assert f.name == f"probe-{data['board']['uuid']}.json"
        assert set(data["probes"]) == {"idle"}
    # each file is an ordinary probe record: show and idle= read it as they read any
    assert nvmeter("show", str(files[1])).returncode == 0


def test_all_is_for_probe_only_and_every_file_is_checked_first(tmp_path):
    result = nvmeter("check", "--simulate", "--device", "all")
    one_line_error(result, 2)
    assert "--device all is for nvmeter probe" in result.stderr
    result = nvmeter("probe", "--simulate", "--device", "all", "--out", str(tmp_path / "no" / "p.json"))
    one_line_error(result, 2)
    assert not (tmp_path / "no").exists()


def test_show_verifies_the_stored_figures(probe_file, tmp_path):
    shown = nvmeter("show", "results/probe-h200.json", cwd=Path(__file__).parents[1])
    assert shown.returncode == 0, shown.stderr
    assert "idle, no context" in shown.stdout
    # a new user's trial: "[-138%, +62%]" read as an interval, and "(295 above idle)" had no unit
    assert "edges median -133% (range -138%..+62%)" in shown.stdout
    assert "417 W (295 W" in shown.stdout  # "above idle" wraps to the next line
    data = json.loads(probe_file.read_text())
    data["probes"]["idle"]["derived"]["context"]["power_w"] += 0.5
    bad = tmp_path / "altered.json"
    bad.write_text(json.dumps(data))
    line = one_line_error(nvmeter("show", str(bad)), 2)
    assert "probes.idle.derived.context.power_w disagrees with its recomputation" in line
    # the same file is refused wherever a probe file is read
    assert "disagrees" in one_line_error(nvmeter("check", "--probe", str(bad)), 2)


def test_show_points_score_and_workloads_records_to_their_readers():
    root = Path(__file__).parents[1]
    line = one_line_error(nvmeter("show", "results/score-h200/graph_mlp/run-001.json", cwd=root), 2)
    assert "is a score record: read it with `nvmeter summarize" in line
    line = one_line_error(nvmeter("show", "results/workloads-h200.json", cwd=root), 2)
    assert "evaluate --table results/workloads-h200.json" in line
    line = one_line_error(nvmeter("show", "results/window-accuracy-v2/run1-a.json.gz", cwd=root), 2)
    assert "read it with `python bench/window_accuracy.py analyze results/window-accuracy-v2/" in line
    # bench records, with their kind and from before they named one (a new user's trial)
    line = one_line_error(nvmeter("show", "results/everyday/run-reference-h200.json", cwd=root), 2)
    assert "is a bench record (bench-run-reference): the bench script that wrote it reads it" in line
    line = one_line_error(nvmeter("show", "results/distributed/ddp-x2-h200.json", cwd=root), 2)
    assert "no `kind` field; if a bench script wrote it, that script reads it (bench/README.md" in line


def test_show_prints_a_job_record_verified(tmp_path):
    """A new user saved w.result as docs/window.md shows; show had refused it with exit 2 (two trials)."""
    from nvmeter import JobWindow, SimulatedBoard, records

    board = SimulatedBoard()
    with JobWindow(devices=[board], sync="none") as w:
        board.set_load(200.0)
        board.clock.sleep(0.5)
        board.set_load(0.0)
        w.call()
    path = tmp_path / "job.json"
    w.result.save(path)
    shown = nvmeter("show", str(path))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == w.result.table().splitlines()
    data = records.read_json(path, "job")
    data["boards"][0]["measurement"]["derived"]["per_call_mj"] *= 0.5  # a board's stored figure altered
    records.write_json(path, data)
    line = one_line_error(nvmeter("show", str(path)), 2)
    assert "boards[0].measurement.derived.per_call_mj" in line


def test_show_names_the_kind_of_a_record_it_does_not_read(tmp_path):
    other = tmp_path / "band.json"
    other.write_text('{"kind": "h200-band-check", "schema_version": 1}')
    line = one_line_error(nvmeter("show", str(other)), 2)
    assert "a record of kind 'h200-band-check'" in line and "probe records" in line


@pytest.mark.parametrize(
    "idle, words",
    [
        ("abc", "--idle takes a probe file or watts"),
        ("1e300", "watts >= 0, under the board's power limit; not 1e+300"),
        ("nan", "watts >= 0, under the board's power limit; not nan"),
        ("-5", "watts >= 0, under the board's power limit; not -5.0"),
    ],
)
def test_run_refuses_a_bad_idle_before_the_command_starts(idle, words, tmp_path):
    marker = tmp_path / "ran"
    result = nvmeter("run", "--simulate", "--idle", idle, "--", "touch", str(marker))
    assert words in one_line_error(result, 2)
    assert not marker.exists()


def test_a_reader_that_goes_away_ends_show_quietly(probe_file):
    # `nvmeter show probe.json | true`: the pipe closes before the table is written
    result = subprocess.run(
        f"{sys.executable} -m nvmeter.cli show {probe_file} | true; echo ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.stdout.strip() in ("0", "141")  # 0 when the table fitted in the pipe before it closed
    assert "Traceback" not in result.stderr and "Error" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("probe", "--bogus"),
            "No such option: --bogus (Possible options: --out) (see 'nvmeter probe --help')",
        ),
        (("score", "--runs", "1e3", "x"), "Invalid value for '--runs'"),
        (("score",), "Missing argument 'METHOD' (see 'nvmeter score --help')"),
    ],
)
def test_an_argument_the_parser_refuses_is_one_line_and_exit_2(args, says):
    assert says in one_line_error(nvmeter(*args), 2)


@pytest.mark.parametrize(
    "args", [("check", "--probe", "PROBE"), ("data", "path"), ("--version",), ("--help",), ("show", "PROBE")]
)
def test_a_full_standard_output_is_one_line_not_a_failed_check(probe_file, args):
    args = [str(probe_file) if a == "PROBE" else a for a in args]
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "nvmeter.cli", *args],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=300,
        )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == "nvmeter: cannot write standard output: No space left on device"


def test_a_full_standard_error_keeps_the_commands_status():
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "nvmeter.cli", "run", "--simulate", "--", "sh", "-c", "exit 5"],
            stdout=subprocess.PIPE, stderr=full, text=True, timeout=300,
        )  # fmt: skip
    assert result.returncode == 5


def test_an_integer_of_thousands_of_digits_is_a_damaged_record(tmp_path):
    path = tmp_path / "huge.json"
    path.write_text('{"kind": "probe", "schema_version": ' + "9" * 5000 + "}")
    line = one_line_error(nvmeter("show", str(path)), 2)
    assert str(path) in line and "not an nvmeter" in line


def test_check_from_a_file_takes_no_board(probe_file):
    line = one_line_error(nvmeter("check", "--probe", str(probe_file), "--simulate"), 2)
    assert "--probe reads the reference from its file" in line


def test_an_idle_that_is_a_folder_is_named_so(tmp_path):
    line = one_line_error(nvmeter("run", "--simulate", "--idle", str(tmp_path), "--", "true"), 2)
    assert "not a regular file" in line


def test_the_probe_names_the_help_lists_are_the_probes():
    from nvmeter import probes
    from nvmeter.cli import options

    assert tuple(probes.BY_NAME) == options.PROBE_NAMES


@pytest.mark.parametrize("command", [[], ["probe"], ["run"], ["score"], ["data"], ["data", "fetch"]])
def test_help_shows_no_value_for_a_flag(command, capsys):
    """A new user's reading: `-h <bool>` looked as if --help took a value."""
    from nvmeter import cli

    with pytest.raises(SystemExit):
        cli.app([*command, "--help"], standalone_mode=True, prog_name="nvmeter")
    text = capsys.readouterr().out
    assert "--help" in text and "<bool>" not in text


def test_run_s_idle_help_names_the_idle_without_a_context(capsys):
    """A new user's trial: the help's example was the H200's idle with a context (121.3 W), not run's."""
    from nvmeter import cli

    with pytest.raises(SystemExit):
        cli.app(["run", "--help"], standalone_mode=True, prog_name="nvmeter")
    text = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "idle without a CUDA context" in text and "121.3" not in text


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["probe", "--simulate", "--out", ""], "'--out' / '-o'"),
        (["score", "mlp", "--simulate", "--json", ""], "'--json'"),
        (["show", ""], "'RECORD'"),
        (["summarize", ""], "'PATH'"),
        (["run", "--simulate", "--json", "", "--", "true"], "'--json'"),
    ],
)
def test_an_empty_path_is_refused_not_read_as_the_current_folder(args, option):
    line = one_line_error(nvmeter(*args), 2)
    assert f"Invalid value for {option}: is empty; give a path" in line


@pytest.mark.parametrize(
    ("args", "option", "value"),
    [
        (["run", "--simulate", "--json", "--", "true"], "'--json'", "--"),
        (["probe", "--simulate", "--quick", "-o", "-x.json"], "'--out' / '-o'", "-x.json"),
    ],
)
def test_a_path_that_starts_as_an_option_is_refused_and_nothing_written(tmp_path, args, option, value):
    # `run --json -- CMD`, the FILE forgotten, wrote a record named `--` (an adversarial review)
    line = one_line_error(nvmeter(*args, cwd=tmp_path), 2)
    assert f"Invalid value for {option}: takes a file name, not '{value}' (for a file so named" in line
    assert list(tmp_path.iterdir()) == []


def test_probe_checks_its_output_before_it_looks_for_a_board():
    # with the output claimed after the board was opened, a machine without a GPU said "no NVIDIA
    # driver" (exit 3) for a path that could never be written (a code review, 2026-12-06)
    line = one_line_error(nvmeter("probe", "--quick", "--out", "/nonexistent-folder/x.json"), 2)
    assert "folder /nonexistent-folder does not exist" in line


def test_an_output_in_a_folder_that_takes_no_files_says_so():
    line = one_line_error(nvmeter("probe", "--simulate", "--quick", "--out", "/proc/version"), 2)
    assert "cannot write /proc/version: folder /proc" in line  # not "No such file"
    assert "takes no new files" in line or "is not writable" in line  # root, or not


def test_run_refuses_a_given_idle_above_the_boards_power_limit_before_the_command(tmp_path):
    ran = tmp_path / "ran"
    result = nvmeter("run", "--simulate", "--idle", "1000", "--", "touch", str(ran), cwd=tmp_path)
    line = one_line_error(result, 2)
    assert "idle 1,000.0 W is above" in line and "power limit (700 W)" in line
    assert not ran.exists()  # refused before the command started


@pytest.mark.parametrize(
    ("out", "words"),
    [
        (".", "is a folder; give a file name inside it"),
        ("/", "as a folder's name does"),
        ("..", "is a folder; give a file name inside it"),
    ],
)
def test_probing_every_board_refuses_a_folder_as_out(out, words, capsys):
    from nvmeter import cli

    with pytest.raises(SystemExit) as exc:
        cli.app(["probe", "--simulate", "--device", "all", "--quick", "--out", out], standalone_mode=True)
    assert exc.value.code == 2
    assert words in " ".join(capsys.readouterr().err.split()).replace("│ ", "").replace(" │", "")


@pytest.mark.parametrize("kind", ["[]", '{"a": 1}', "3"])
def test_show_names_a_record_whose_kind_is_not_text(tmp_path, kind, capsys):
    from nvmeter import cli

    path = tmp_path / "odd.json"
    path.write_text(f'{{"kind": {kind}}}')
    with pytest.raises(SystemExit) as exc:
        cli.app(["show", str(path)], standalone_mode=True)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert "not an nvmeter probe, run, pytest-energy, window or job record" in err


def test_a_signal_after_a_record_was_written_says_it_was(tmp_path, capsys, monkeypatch):
    import typer

    from nvmeter import records
    from nvmeter.cli import guard

    monkeypatch.setattr(records, "_WRITTEN", [])  # one command a process, as from the shell
    out = tmp_path / "r.json"

    def probe():
        records.write_json(out, {"kind": "x"})
        raise KeyboardInterrupt  # Ctrl-C between the write and the exit

    with pytest.raises(typer.Exit) as caught:
        guard.run_guarded(probe)
    assert caught.value.exit_code == 130 and out.is_file()
    assert f"interrupted; {out} written before it" in capsys.readouterr().err


def test_a_probe_with_stdout_closed_writes_its_file(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "p.json"
    proc = subprocess.run(
        [sys.executable, "-m", "nvmeter", "probe", "--simulate", "--quick", "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
        preexec_fn=lambda: __import__("os").close(1),
    )
    assert proc.returncode == 0 and out.is_file(), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", ["--help", "--version", "run --help"])
def test_help_and_version_whose_reader_went_away_exit_as_sigpipe_not_as_a_failed_check(args):
    # click and rich answered `nvmeter --help | true` with exit 1, "a check failed" (a new user's trial)
    result = subprocess.run(
        f"{sys.executable} -m nvmeter {args} | true; echo ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.stdout.strip() in ("0", "141") and "Traceback" not in result.stderr, result.stderr


def test_every_board_of_a_probe_with_a_full_stdout_is_written(tmp_path):
    # `--device all > /dev/full` stopped after the first board's table (a review)
    out = tmp_path / "p.json"
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "nvmeter", "probe", "--simulate", "--quick", "--device", "all",
             "--sim-boards", "3", "--out", str(out)],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=300,
        )  # fmt: skip
    assert proc.returncode == 2 and "cannot write standard output" in proc.stderr.splitlines()[-1]
    assert len(list(tmp_path.glob("p-GPU-*.json"))) == 3 and "Traceback" not in proc.stderr


@pytest.mark.parametrize("boards", [1, 3])
def test_a_probe_whose_reader_went_away_still_writes_its_files(tmp_path, boards):
    # `nvmeter probe … | head -1`: the table met a closed pipe and ended the command before the write;
    # with --device all, before the other boards were probed (a review)
    out = tmp_path / "p.json"
    every = f"--device all --sim-boards {boards}" if boards > 1 else ""
    result = subprocess.run(
        f"{sys.executable} -m nvmeter probe --simulate --quick {every} --out {out} | true; "
        "echo ${PIPESTATUS[0]}",
        shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.stdout.strip() in ("0", "141")  # 0 when the table fitted in the pipe before it closed
    written = [out] if boards == 1 else sorted(tmp_path.glob("p-GPU-*.json"))
    assert len(written) == boards and all(p.is_file() for p in written), result.stderr
    assert "Traceback" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["run", "--simulate", "--json", "x.json/", "--", "true"], "--json"),
        (["probe", "--simulate", "--quick", "--out", "x.json/"], "--out"),
    ],
)
def test_an_output_path_that_ends_in_a_slash_is_refused(tmp_path, args, option):
    """A breaker's trial: `--json x.json/` wrote x.json without a word."""
    line = one_line_error(nvmeter(*args, cwd=tmp_path), 2)
    assert f"'{option}'" in line and "'x.json/' ends in /, as a folder's name does; give a file name" in line
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--simulate", "--json", "{long}.json", "--", "true"],
        ["probe", "--simulate", "--quick", "--out", "{long}.json"],
        ["summarize", "{long}.json"],
        ["run", "--simulate", "--idle", "{long}.json", "--", "true"],
    ],
)
def test_a_file_name_too_long_is_one_line(tmp_path, args):
    """A breaker's trial: Python 3.11's Path.is_symlink() raised ENAMETOOLONG in a traceback."""
    long = str(tmp_path / ("a" * 260))
    line = one_line_error(nvmeter(*(a.format(long=long) for a in args)), 2)
    assert line.endswith("...: a file name too long for the file system; give a shorter path")


def test_with_stderr_closed_nvmeter_s_lines_stay_out_of_the_command_s_output(tmp_path):
    """A breaker's trial: `nvmeter run ... > o.txt 2>&-` put nvmeter's lines after the command's in o.txt."""
    proc = subprocess.run(
        [sys.executable, "-m", "nvmeter", "run", "--simulate", "--", "sh", "-c", "echo OUT"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        timeout=300,
        preexec_fn=lambda: __import__("os").close(2),
    )
    assert proc.returncode == 0 and proc.stdout == "OUT\n"


def test_a_gone_stderr_reader_does_not_end_the_work(monkeypatch):
    import io

    from nvmeter.cli import console

    class Gone(io.StringIO):
        def write(self, text):
            raise BrokenPipeError

    monkeypatch.setattr("sys.stderr", Gone())
    assert console._Stream("stderr", lost=None).write("progress") is None
    monkeypatch.setattr("sys.stdout", Gone())
    with pytest.raises(BrokenPipeError):  # stdout's reader gone: SIGPIPE's status, as before
        console._Stream("stdout").write("table")


@pytest.mark.parametrize("name", ["read_cost", "idle", "bursts", "reference", "cadence"])
def test_each_quick_probe_runs_alone(tmp_path, name):
    # bursts alone once waited "since the last load" before any load had run, and crashed
    out = tmp_path / "p.json"
    result = nvmeter("probe", "--simulate", "--quick", "--only", name, "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert set(json.loads(out.read_text())["probes"]) == {name}


def test_the_default_out_writes_probe_json_in_the_current_folder(tmp_path):
    # typer passes the default through the path parser as a Path: plain `nvmeter probe` once
    # failed on it with a traceback, and every other test here names --out (a new user's trial)
    result = nvmeter("probe", "--simulate", "--quick", "--only", "read_cost", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert set(json.loads((tmp_path / "probe.json").read_text())["probes"]) == {"read_cost"}


def test_only_takes_a_comma_separated_list_too(tmp_path):
    out = tmp_path / "p.json"
    result = nvmeter("probe", "--simulate", "--quick", "--only", "idle,bursts", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert set(json.loads(out.read_text())["probes"]) == {"idle", "bursts"}
    bad = nvmeter("probe", "--simulate", "--only", "idle,nosuch", "--out", str(tmp_path / "q.json"))
    assert bad.returncode == 2 and "nosuch" in bad.stderr and not (tmp_path / "q.json").exists()


def test_a_signal_whose_exception_was_swallowed_is_raised_at_the_next_look():
    import signal as sig

    from nvmeter.cli import guard

    guard._SIGNALLED.clear()
    with contextlib.suppress(KeyboardInterrupt):  # as numpy.random's first import did
        guard._interrupted(sig.SIGTERM, None)
    with pytest.raises(guard._Terminated) as caught:
        guard.raise_if_signalled()
    assert caught.value.signum == sig.SIGTERM and not guard._SIGNALLED
    guard.raise_if_signalled()  # nothing pending: nothing raised


def test_a_name_with_control_characters_stays_one_escaped_line():
    result = subprocess.run(
        [sys.executable, "-m", "nvmeter.cli", "run", "--simulate", "--", "no\nsuch\x1b[31m"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 127
    assert result.stderr.splitlines() == ["nvmeter: command not found: no\\nsuch\\x1b[31m (not on PATH)"]


@pytest.mark.parametrize("only", ["", " , "])
def test_an_empty_only_is_refused_not_the_full_probe(only, tmp_path):
    line = one_line_error(nvmeter("probe", "--simulate", "--only", only, "--out", tmp_path / "p.json"), 2)
    assert "--only takes probe names" in line and not (tmp_path / "p.json").exists()


@pytest.mark.parametrize(
    ("spec", "index"), [(2, 2), ("2", 2), (" 2 ", 2), ("٢", None), ("+2", None), (True, None)]
)
def test_one_reading_of_a_cuda_index_for_every_device_spec(spec, index):
    """A review: the CLI took ASCII digits only, while NVML's and the simulated host's reading took '٠'."""
    from nvmeter.boards.protocol import cuda_index

    assert cuda_index(spec) == index
