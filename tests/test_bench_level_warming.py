"""bench/level_warming.py: the run-level probe's readings on warming simulated boards."""

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "level_warming.py"


def test_a_cell_counts_the_probes_each_reading_put_under_the_level():
    cmd = [sys.executable, str(SCRIPT), "--seeds", "3", "--levels", "0.04", "--warming", "0.03"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    row = done.stdout.splitlines()[-1].strip("|").split("|")
    level, c_per_w, span, took, *under, no_figure = (cell.strip() for cell in row)
    assert (level, c_per_w) == ("4%", "0.03") and float(span) > 2  # it warmed past WARMING_C
    assert 0 < int(took) <= 3 and all(0 <= int(n) <= int(took) for n in under) and len(under) == 4
    assert no_figure == "0"


def test_a_level_the_limiter_hides_is_counted_apart():
    """A breaker: a 5% level took the simulated load past its 700 W cap, and the count raised TypeError."""
    cmd = [sys.executable, str(SCRIPT), "--seeds", "2", "--levels", "0.2", "--warming", "0.03"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.splitlines()[-1].strip("| ").rsplit("|", 1)[-1]) >= 1  # limited: no figure


@pytest.mark.parametrize(
    "args",
    [["--levels", "x"], ["--levels", "nan"], ["--levels", "inf"], ["--warming", "nan"], ["--seeds", "0"]],
)
def test_bad_input_is_one_line(args):
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
