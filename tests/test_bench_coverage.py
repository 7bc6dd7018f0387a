"""bench/counter_coverage.py's analysis tells an integrating counter from a part-time one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import counter_coverage


def test_integrating_counter_reads_every_burst_alike():
    d = counter_coverage.per_burst(counter_coverage.synthetic(part_time=False))
    share = d["counter_j"] / d["counter_j"].mean()
    assert share.std() < 0.1
    # 10 ms at 500 W above idle
    assert abs(d["counter_j"].mean() - 5.0) < 0.25
    assert counter_coverage.verdict(d).startswith("counter: continuous")
    # back to back, the same bursts read the same: 10 ms at 500 W, over whole periods
    assert abs(d["steady_j"] - 5.0) < 0.05


def test_part_time_counter_misses_bursts_outside_its_share():
    d = counter_coverage.per_burst(counter_coverage.synthetic(part_time=True))
    share = d["counter_j"] / d["counter_j"].mean()
    assert np.mean(share < 0.2) > 0.5  # most bursts fall outside the 25 ms share
    assert counter_coverage.verdict(d).startswith("counter: part-time")


def test_bursts_with_the_polls_paused_read_as_the_polled_ones():
    record = counter_coverage.synthetic(part_time=False, unpolled=True, burst_s=0.025)
    d = counter_coverage.per_burst(record)
    polled, unpolled = d["counter_j"][d["polled"]], d["counter_j"][~d["polled"]]
    assert len(unpolled) > 30
    # a step timed as its 25 ms pause's middle, taken as an edge, would be up to 12 ms off: 1.6 J
    assert abs(unpolled.mean() - polled.mean()) < 0.1
    assert np.abs(unpolled - np.median(polled)).max() < 0.5


def test_a_counter_that_weighs_its_period_is_read_bin_by_bin():
    amp = 0.3
    d = counter_coverage.per_burst(counter_coverage.synthetic(part_time=False, weight_amp=amp))
    share = d["counter_j"] / d["counter_j"].mean()
    for i in range(counter_coverage.BINS):
        lo = i / counter_coverage.BINS
        inside = (d["phase"] >= lo) & (d["phase"] < lo + 1 / counter_coverage.BINS)
        # a 10 ms burst starting at x reads the weight's mean over [x, x + 0.1 of the period]
        x = np.linspace(lo, lo + 0.1, 50) + 0.05
        expected = np.mean(1 + amp * np.sin(2 * np.pi * x))
        assert abs(share[inside].mean() - expected) < 0.08, (lo, share[inside].mean(), expected)
    rows = counter_coverage.table(d)
    assert len(rows) == 2 + counter_coverage.BINS + 2  # period, header, bins, back to back, verdict


def test_an_idle_that_drifts_is_followed_between_the_quiet_spans():
    record = counter_coverage.synthetic(part_time=False, idle_drift_w_per_s=0.2)
    d = counter_coverage.per_burst(record)
    # 0.2 W/s over the ~24 s of bursts: one quiet span's idle alone would be up to 2.4 W off over
    # a burst's ~0.3 s, 0.7 J of its 5 J
    assert abs(d["counter_j"].mean() - 5.0) < 0.1
    assert abs(d["samples_j"].mean() - 5.0) < 0.1
    assert abs(d["steady_j"] - 5.0) < 0.05


def _damaged(record: dict, edit) -> dict:
    edit(record)
    return record


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda r: r.update(polls=[[a, b, -e] for a, b, e in r["polls"]]), "goes backwards"),
        (lambda r: r.update(samples=[[t, w * 1e4] for t, w in r["samples"]]), "above what any board draws"),
        (lambda r: r.update(bursts=r["bursts"][:1]), "fewer than two bursts"),
        (lambda r: r.update(version=99), "version is 99"),
        (lambda r: r.pop("quiet"), "lacks 'quiet'"),
        (lambda r: r.pop("burst_ms"), "lacks 'burst_ms'"),
    ],
    ids=["counter-backwards", "samples-x1e4", "one-burst", "version", "no-quiet", "no-burst-ms"],
)
def test_a_damaged_record_is_one_line_and_exit_2_with_nothing_printed_before(tmp_path, edit, said):
    """An adversarial review: tracebacks, earlier files' tables printed first, or -5.67 J read as normal."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(counter_coverage.synthetic(part_time=False)))
    bad.write_text(json.dumps(_damaged(counter_coverage.synthetic(part_time=False), edit)))
    script = Path(counter_coverage.__file__)
    argv = [sys.executable, str(script), "analyze", str(good), str(bad)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    (line,) = done.stderr.splitlines()
    assert said in line and str(bad) in line
