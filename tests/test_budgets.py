"""Budget records (kind pytest-energy): the plugin writes them; `nvmeter show` reads and verifies them."""

import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_hostile_files import nvmeter, one_line_error, reads_by_show, set_at

from nvmeter import errors, records
from nvmeter.budgets import Budget, BudgetRecord, judge, load_budgets
from nvmeter.meter.baseline import IdleBaseline

# Four windows in three tests on the simulated board: within its budget, over it, no calls
# declared (not reliable) and no budget (measured). The board is deterministic.
INNER = """
import pytest


def work(board, watts, seconds):
    board.set_load(watts)
    board.clock.sleep(seconds)
    board.set_load(0.0)


@pytest.mark.energy(max_mj_per_call=40000)
def test_within(energy, energy_board):
    with energy(calls=10):
        work(energy_board, 300.0, 1.0)


@pytest.mark.energy(max_mj_per_call=20000, calls=10)
def test_over(energy_board):
    work(energy_board, 300.0, 1.0)


def test_measured(energy, energy_board):
    with energy():  # no calls declared
        work(energy_board, 100.0, 0.5)
    with energy(calls=5):
        work(energy_board, 100.0, 0.5)
"""
HEAD = "4 windows of 3 tests: 1 pass, 1 fail, 1 unreliable, 1 measured (no budget); 3 of 4 reliable"


@pytest.fixture(scope="module")
def budget_run(tmp_path_factory):
    """A record the plugin wrote (``--energy-json``), and pytest's own output of that run."""
    folder = tmp_path_factory.mktemp("budgets")
    (folder / "test_inner.py").write_text(INNER)
    out = folder / "energy.json"
    argv = ["-p", "no:cacheprovider", "--energy-simulate", f"--energy-json={out}"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *argv], cwd=folder, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 1, result.stdout  # test_over fails its budget
    return out, result.stdout


def _summary(stdout: str) -> list[str]:
    """The window lines of pytest's ``nvmeter energy`` section (not the line naming the record)."""
    section = stdout.split(" nvmeter energy ", 1)[1].split("\n", 1)[1]
    lines = section.split("\n=", 1)[0].strip().splitlines()
    assert lines[-1].startswith("nvmeter: wrote ")
    return lines[:-1]


def test_show_counts_the_verdicts_then_gives_each_window_as_pytest_did(budget_run):
    path, stdout = budget_run
    shown = nvmeter("show", path)
    assert shown.returncode == 0 and not shown.stderr, shown.stderr
    lines = shown.stdout.strip().splitlines()
    assert lines[0] == HEAD
    assert lines[1:-1] == _summary(stdout)  # recomputed from the raw readings, the same lines
    # a test failed its budget: the session's status is said last
    assert lines[-1] == "pytest's session ended with status 1: not every test passed"
    assert "-> PASS: energy" in lines[1] and "within the budget of 40,000.0 mJ/call" in lines[1]
    assert "-> FAIL: energy" in lines[2] and "exceeds the budget of 20,000.0 mJ/call" in lines[2]
    assert "NOT RELIABLE: no calls were declared" in lines[3] and "-> UNRELIABLE" in lines[3]
    assert "-> MEASURED: energy" in lines[4]
    # no calls: the window's whole energy is said, not only nan a call (a new user's trial)
    assert re.search(r": [\d,.]+ ± [\d,.]+ J above idle in all, no calls declared \(0 calls", lines[3])


def test_load_budgets_rebuilds_each_window_its_budget_and_verdict(budget_run):
    record = load_budgets(budget_run[0])
    assert [e.verdict.outcome for e in record.entries] == ["pass", "fail", "unreliable", "measured"]
    assert [e.budget for e in record.entries] == [Budget(40000.0), Budget(20000.0, 10), None, None]
    assert [e.measurement.reliable for e in record.entries] == [True, True, False, True]
    assert record.entries[1].measurement.per_call_mj == pytest.approx(30_000, rel=0.05)


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("max_mj_per_call", True, "max_mj_per_call is True, not a finite number"),
        ("max_mj_per_call", float("inf"), "max_mj_per_call is inf, not a finite number"),
        ("max_mj_per_call", 0, "max_mj_per_call is 0, not a number > 0"),
        ("calls", 2.0, "calls is 2.0, not an integer from 1 to 1,000,000,000,000"),
        ("calls", 10**13, "calls is 10000000000000, not an integer from 1 to 1,000,000,000,000"),
        ("device", 1.5, "device is 1.5, not a CUDA index"),
        ("device", False, "device is False, not a CUDA index"),
    ],
)
def test_a_marker_and_a_record_refuse_a_budget_alike(field, value, why):
    # a marker the plugin took wrote a record that show refused (an infinite budget became null)
    given = {"max_mj_per_call": 5.0, "calls": 1, "device": None, field: value}
    with pytest.raises(errors.UsageError) as marker:
        Budget.from_mark(SimpleNamespace(args=(), kwargs=given))
    with pytest.raises(records.BadField) as record:
        Budget.from_dict(given, "entries[0].budget")
    assert str(marker.value).startswith(f"energy marker: {why}")
    assert str(record.value).startswith(f"entries[0].budget.{why}")


def test_the_plugin_loads_without_numpy():
    """pytest loads it in every session (pytest11): a test run that meters nothing pays nothing."""
    heavy = "('numpy', 'scipy', 'torch')"
    code = f"import sys, nvmeter.pytest_plugin; print([m for m in {heavy} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_marker_takes_numpy_numbers_as_python_s():
    """A review: np.float64(40000) was taken as a budget and np.int64(40000) refused."""
    import numpy as np

    for budget in (np.int64(40_000), np.float64(40_000.0), 40_000):
        made = Budget.from_mark(SimpleNamespace(args=(budget,), kwargs={"calls": np.int32(10)}))
        assert made == Budget(40_000.0, 10) and type(made.calls) is int
    with pytest.raises(errors.UsageError, match="calls"):
        Budget.from_mark(SimpleNamespace(args=(40_000,), kwargs={"calls": np.float64(2.5)}))


def test_a_marker_without_a_budget_says_it_is_required():
    """A bare @pytest.mark.energy() said 'max_mj_per_call is None, not a finite number' (a user's trial)."""
    with pytest.raises(errors.UsageError, match=r"the budget is required.*energy\(max_mj_per_call=1500\)"):
        Budget.from_mark(SimpleNamespace(args=(), kwargs={}))
    with pytest.raises(records.BadField, match="max_mj_per_call is None, not a finite number"):
        Budget.from_dict({"max_mj_per_call": None, "calls": 1, "device": None}, "entries[0].budget")


def test_a_record_reads_without_pytest(budget_run):
    # pytest is a test extra, not a dependency: a record copied to a machine without it still reads
    code = (
        "import sys; sys.modules['pytest'] = None; from nvmeter.budgets import load_budgets; "
        f"print(load_budgets({str(budget_run[0])!r}).lines()[0])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == HEAD


def test_a_record_without_windows_says_so(tmp_path):
    path = tmp_path / "none.json"
    records.write_json(path, BudgetRecord(()).to_dict())
    shown = nvmeter("show", path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().startswith("no window was metered (no test used the energy marker or fixture")


def _changed(tmp_path, path, change):
    data = json.loads(path.read_text())
    change(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    return bad


def test_a_window_copied_over_another_is_an_altered_record(tmp_path, budget_run):
    """An adversarial review copied a passing window over another: show counted two passes."""

    def copy(d):
        d["entries"][1] = d["entries"][0]

    path = _changed(tmp_path, budget_run[0], copy)
    line = one_line_error(nvmeter("show", path), 2)
    assert "entries[1]'s window repeats entries[0]'s board, times and edge reads: a window copied" in line


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (set_at("entries", {}), "entries is {}, not a list"),
        (set_at("entries", 0, "nodeid", 3), r"entries\[0\]\.nodeid is 3, not a string"),
        (
            set_at("entries", 0, "budget", "max_mj_per_call", -1),
            r"budget\.max_mj_per_call is -1, not a number > 0",
        ),
        (
            set_at("entries", 1, "budget", "calls", 0),
            r"entries\[1\]\.budget\.calls is 0, not an integer from 1 to 1,000,000,000,000",
        ),
        (set_at("entries", 0, "budget", "device", [0]), r"budget\.device is \[0\], not a CUDA index"),
        (lambda d: d["entries"][0].pop("budget"), "lacks 'budget'"),
        (
            set_at("entries", 0, "window", "device", "uuid", "GPU-1"),
            r"window\.device\.uuid is 'GPU-1', not an NVML",
        ),
        (
            set_at("entries", 0, "window", "end", "energy_mj", 0, -1),
            r"entries\[0\]\.window\.end\.energy_mj\[0\] is -1, not an energy counter read",
        ),
        (
            lambda d: d["entries"][0]["window"]["end"]["energy_mj"].reverse(),
            r"the energy counter goes backwards \(at entries\[0\]\.window",
        ),
        (
            set_at("entries", 0, "window", "tail_s", "x"),
            r"entries\[0\]\.window: a malformed Measurement: tail_s",
        ),
    ],
)
def test_a_damaged_record_is_one_line_and_exit_2(tmp_path, budget_run, change, why):
    path = _changed(tmp_path, budget_run[0], change)
    line = one_line_error(nvmeter("show", path), 2)
    assert re.search(f"{re.escape(str(path))}: damaged pytest-energy record: .*{why}", line), line
    with pytest.raises(errors.RecordError, match=f"damaged pytest-energy record: .*{why}"):
        load_budgets(path)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (
            set_at("entries", 1, "outcome", "pass"),
            r"entries\[1\]\.outcome .*\(stored 'pass', recomputed 'fail'\)",
        ),
        (
            set_at("entries", 0, "budget", "max_mj_per_call", 1e9),
            r"entries\[0\]\.text",
        ),  # its verdict's words
        (
            set_at("entries", 2, "window", "derived", "reliable", True),
            r"entries\[2\]\.window\.derived\.reliable",
        ),
        (
            set_at("entries", 3, "window", "derived", "per_call_mj", 1.0),
            r"entries\[3\]\.window\.derived\.per_call_mj .*\(stored 1\.0,",
        ),
    ],
)
def test_an_altered_figure_or_verdict_is_one_line_and_exit_2(tmp_path, budget_run, change, where):
    path = _changed(tmp_path, budget_run[0], change)
    line = one_line_error(nvmeter("show", path), 2)
    assert re.search(f"{re.escape(str(path))}: {where}", line), line
    assert "disagrees with its recomputation from the raw readings" in line


def test_another_version_is_refused_by_name(tmp_path, budget_run):
    path = _changed(tmp_path, budget_run[0], set_at("schema_version", 99))
    line = one_line_error(nvmeter("show", path), 2)
    assert f"{path}: pytest-energy schema_version 99 is not one this nvmeter reads" in line


def test_a_test_id_that_would_drive_the_terminal_is_shown_escaped_on_one_line(tmp_path, budget_run):
    # a test id is the record's own text, not a figure: it is shown, never obeyed (\r, an escape,
    # a file name that was not UTF-8), and the window's line stays one line
    odd = "test_demo.py::a\rFAKE\x1b[2J\n\ud800"
    path = _changed(tmp_path, budget_run[0], set_at("entries", 0, "nodeid", odd))
    shown = nvmeter("show", path)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert len(lines) == 1 + len(json.loads(path.read_text())["entries"]) + 1  # and the session's status
    assert lines[1].startswith(r"test_demo.py::a\rFAKE\x1b[2J\n\ud800: ")
    assert not set("\r\x1b") & set(shown.stdout)


def test_a_figure_below_zero_by_more_than_its_bound_passes_no_budget(budget_run):
    # error model 1 (the plugin's first records) did not look: a forged one read PASS
    passed = load_budgets(budget_run[0]).entries[0].measurement
    window = replace(passed, model_version=1, idle=IdleBaseline.given(1_000.0))  # above all it drew
    assert window.per_call_mj + window.per_call_mj_err < 0
    verdict = judge(window, Budget(max_mj_per_call=40_000.0))
    assert verdict.outcome == "unreliable" and "below minus its bound" in verdict.text
    within = SimpleNamespace(reliable=True, reason=None, per_call_mj=-400.0, per_call_mj_err=500.0)
    assert judge(within, Budget(max_mj_per_call=40_000.0)).outcome == "pass"  # zero inside its bound


def test_a_budget_past_a_billion_joules_is_said_in_three_digits_not_three_hundred():
    window = SimpleNamespace(reliable=True, reason=None, per_call_mj=400.0, per_call_mj_err=5.0)
    verdict = judge(window, Budget(max_mj_per_call=1e300))
    assert verdict.outcome == "pass" and "the budget of 1e+300 mJ/call" in verdict.text
    assert len(verdict.text) < 100
    assert "40,000.0 mJ/call" in judge(window, Budget(max_mj_per_call=40_000.0)).text


def test_a_figure_under_a_twentieth_of_a_millijoule_is_said_to_three_figures():
    # a 0.004 mJ/call window against a 0.002 budget read "0.0 ± 0.0 ... exceeds the budget of 0.0" (a review)
    window = SimpleNamespace(reliable=True, reason=None, per_call_mj=0.004, per_call_mj_err=0.001)
    verdict = judge(window, Budget(max_mj_per_call=0.002))
    assert verdict.outcome == "fail"
    assert verdict.text == "energy 0.004 ± 0.001 mJ/call exceeds the budget of 0.002 mJ/call"


def test_show_reads_the_record_once(budget_run, monkeypatch):
    assert reads_by_show(budget_run[0], monkeypatch) == 1


def test_loading_reports_each_window_as_it_is_rebuilt(budget_run):
    seen = []
    record = load_budgets(budget_run[0], on_entry=lambda done, total: seen.append((done, total)))
    n = len(record.entries)
    assert seen == [(i, n) for i in range(1, n + 1)]


def test_show_puts_a_transient_bar_on_a_terminal_while_many_windows_are_rebuilt(monkeypatch):
    import io

    from rich.console import Console

    from nvmeter.cli import console, show

    screen = io.StringIO()
    monkeypatch.setattr(console, "err", Console(file=screen, force_terminal=True, width=100))
    with show._RecordProgress() as progress:
        for done in range(1, 4):
            progress.on_entry(done, 3)  # too few for a bar
        assert screen.getvalue() == ""
        for done in range(1, 31):
            progress.on_entry(done, 30)
    assert "verifying window" in screen.getvalue()


def test_a_version_1_record_reads_with_its_session_status_unknown():
    record = load_budgets(Path(__file__).with_name("fixtures") / "pytest-energy-v1.json")
    assert record.session_status is None and not record.interrupted
    assert [e.verdict.outcome for e in record.entries] == ["pass"]
