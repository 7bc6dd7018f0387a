"""bench/counter_only.py: a warm window read from the counter's span alone, calls counted by time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import counter_only  # noqa: E402

CALL_S, IDLE_W, ABOVE_W = 0.03, 120.0, 400.0


def window(t_a: float, t_b: float, calls: int = 10, t0: float = 1.0) -> SimpleNamespace:
    """Calls of CALL_S from ``t0`` at a steady ABOVE_W above idle; the counter read at ``t_a`` and ``t_b``."""
    energy_mj = lambda t: 1e3 * (IDLE_W * t + ABOVE_W * max(0.0, t - t0))  # noqa: E731
    return SimpleNamespace(
        _edges=(t_a, t_b, energy_mj(t_a), energy_mj(t_b), 0.0, 0.0),
        call_ends_s=tuple(t0 + CALL_S * (i + 1) for i in range(calls)),
        calls=calls,
        work_t0_s=t0,
        idle=SimpleNamespace(power_w=IDLE_W),
    )


@pytest.mark.parametrize("t_a, t_b", [(1.05, 1.35), (1.011, 1.297), (1.02, 1.5)])
def test_a_steady_call_reads_its_energy_wherever_the_steps_fall(t_a, t_b):
    """Shares of calls cut by a step count by time; calls past the exit follow at the median period."""
    assert counter_only.counter_only_per_call_j(window(t_a, t_b)) == pytest.approx(ABOVE_W * CALL_S, rel=1e-9)


def test_no_reading_without_marked_calls_or_with_a_step_before_the_work():
    assert counter_only.counter_only_per_call_j(window(0.99, 1.3)) is None
    unmarked = window(1.05, 1.35)
    unmarked.call_ends_s = ()
    assert counter_only.counter_only_per_call_j(unmarked) is None


def test_it_reads_a_committed_record():
    """Call 42's duty-cycled calls: its 20 warm 0.5 s windows, both readings, and their correlation."""
    record = ROOT / "results" / "enclose" / "call42-3c85924-h100i-enclose.json.gz"
    command = [sys.executable, str(ROOT / "bench" / "counter_only.py"), "--kind", "duty", str(record)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    (line,) = [s for s in out.splitlines() if s.startswith("duty warm 0.5 s")]
    assert "20 windows" in line and "counter-only RMS" in line and " r +" in line
