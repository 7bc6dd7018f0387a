"""The step response's delay fit around a slow read (probe record v5, step derivation 2).

A read that straddles the counter's first step after the load starts blurs that step. Derivation
1 (every record before v5) drops both intervals it bounds, so the load's edge sits in a gap that
every delay fits alike and the grid's first is reported; derivation 2 measures across the
blurred step. On the H200 this gave -23 ms and +179 ms where the board's other runs read 7-11 ms
(results/probe-speed/).
"""

import dataclasses

import numpy as np
import pytest

from nvmeter import formats
from nvmeter.meter.series import CounterSeries
from nvmeter.probes import step
from nvmeter.worker.protocol import MatmulRun

IDLE_W, LOAD_W, DELAY_S = 120.0, 670.0, 0.010
T0, T1 = 1.0, 2.0


def power_w(t: float) -> float:
    return LOAD_W if T0 + DELAY_S <= t < T1 + DELAY_S else IDLE_W


def counter_at(t: float) -> int:
    """The counter as read at t: the energy up to its last 100 ms update (phase 50 ms), mJ."""
    last = np.floor((t - 0.05) / 0.1) * 0.1 + 0.05
    grid = np.arange(0.0, last, 1e-4)
    return int(sum(power_w(x) for x in grid) * 1e-4 * 1e3)


def series(slow_read_at_s: float | None) -> step.Step:
    t0s, t1s, energy = [], [], []
    t = 0.0
    while t < 3.0:
        # one slow read (40 ms) straddling the counter's update that follows the load's start
        cost = 0.040 if slow_read_at_s is not None and abs(t - slow_read_at_s) < 0.0015 else 0.003
        t0s.append(t)
        energy.append(counter_at(t + cost / 2))
        t1s.append(t + cost)
        t += cost
    load = MatmulRun(T0, T1, 100, 4096, 100 * 2 * 4096**3)
    return step.Step(CounterSeries(tuple(t0s), tuple(t1s), tuple(energy)), (IDLE_W,) * len(t0s), load)


@pytest.mark.parametrize("derivation", [1, 2])
def test_without_a_slow_read_both_derivations_find_the_delay(derivation):
    rec = dataclasses.replace(series(None), derivation=derivation)
    assert rec.derived()["counter"]["rise_delay_ms"] == pytest.approx(DELAY_S * 1e3, abs=2)


def test_a_slow_read_at_the_edge_leaves_derivation_1_a_gap_and_derivation_2_the_delay():
    blurred = series(slow_read_at_s=1.03)  # reads 1.03-1.07 s, across the update at 1.05 s
    old = dataclasses.replace(blurred, derivation=1)
    lo, hi = old.delay_spans_ms()["counter"]["rise_delay_ms"]
    assert hi - lo > 50, (lo, hi)  # every delay in the gap fits alike ...
    assert old.derived()["counter"]["rise_delay_ms"] == pytest.approx(
        lo, abs=1.5
    )  # ... the grid's first is told
    new = dataclasses.replace(blurred, derivation=2)
    assert new.derived()["counter"]["rise_delay_ms"] == pytest.approx(DELAY_S * 1e3, abs=5)
    lo, hi = new.delay_spans_ms()["counter"]["rise_delay_ms"]
    assert hi - lo <= 2


def test_records_before_v5_keep_derivation_1_and_new_ones_write_3():
    raw = series(None).to_dict()
    assert raw["derivation"] == step.DERIVATION == 3
    for bad in (0, 4, True, "2"):
        with pytest.raises(ValueError, match="derivation"):
            step.Step.from_dict({**raw, "derivation": bad})
    del raw["derivation"]
    with pytest.raises(KeyError):  # one place says what an old record's derivation is: its upgrade
        step.Step.from_dict(raw)
    v4 = {"kind": "probe", "schema_version": 4, "probes": {"step": {"raw": raw}}}
    upgraded = formats.PROBE.upgrade(v4, "test")
    assert upgraded["probes"]["step"]["raw"]["derivation"] == 1
    assert step.Step.from_dict(upgraded["probes"]["step"]["raw"]).derivation == 1
