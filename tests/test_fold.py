"""Error model 7: cuts inside the work read from the calls' folded power profile (nvmeter.meter.fold)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nvmeter.boards.protocol import PowerSample
from nvmeter.boards.simulated import SimConfig, SimulatedBoard
from nvmeter.meter import fold
from nvmeter.meter.baseline import IdleBaseline
from nvmeter.meter.measurement import SCHEMA_VERSION, Measurement
from nvmeter.meter.window import EnergyWindow

LOAD_W = 550.0


def calls(board, seconds: float, w=None, on_s: float = 0.015, off_s: float = 0.015, mark=True) -> int:
    """Calls of ``on_s`` at LOAD_W above idle, then ``off_s`` idle; each marked on ``w`` if given."""
    n = 0
    end = board.clock.now() + seconds
    while board.clock.now() < end:
        board.set_load(LOAD_W)
        board.clock.sleep(on_s)
        board.set_load(0.0 if off_s else LOAD_W)
        board.clock.sleep(off_s)
        n += 1
        if w is not None and mark:
            w.call()
    return n


def windows(seeds, **kw):
    """(Measurement, true energy above idle J) of 0.5 s windows inside a run of calls, ended in later ones."""
    out = []
    for seed in seeds:
        board = SimulatedBoard(SimConfig(seed=seed))
        board.set_context(True)
        idle = IdleBaseline.given(board.config.idle_context_w)
        calls(board, 2.0, **kw)
        for _ in range(8):
            with EnergyWindow(board, idle=idle, sync="none", exit="return") as w:
                t0 = board.clock.now()
                n = calls(board, 0.5, w, **kw)
                if not kw.get("mark", True):
                    w.call(n)
                t1 = board.clock.now()
            while not w.end_found():
                calls(board, 0.03, **kw)
            truth_j = board.true_energy_j(t0, t1) - board.config.idle_context_w * (t1 - t0)
            out.append((w.result, truth_j))
    return out


def as_model(m: Measurement, version: int) -> Measurement:
    return Measurement.from_dict({**m.to_dict(), "model_version": version})


def test_model_7_reads_duty_cycled_windows_closer_and_its_bound_holds_model_6s():
    errs = {6: [], 7: []}
    for m, truth_j in windows(range(5, 11)):
        assert m.model_version >= 7 and len(m.call_ends_s) == m.calls and m.call_profile is not None
        for version in errs:
            read = as_model(m, version)
            errs[version].append(abs(read.above_idle_j / truth_j - 1))
            assert abs(read.above_idle_j - truth_j) <= read.err_j
        six = as_model(m, 6)
        # the bound around model 7's figure holds model 6's whole interval
        assert m.above_idle_j - m.err_j <= six.above_idle_j - six.err_j + 1e-9
        assert six.above_idle_j + six.err_j <= m.above_idle_j + m.err_j + 1e-9
    within = {v: sum(e <= 0.01 for e in errs[v]) for v in errs}
    assert within[7] >= within[6] + 8 and max(errs[7]) < max(errs[6]), (within, max(errs[6]), max(errs[7]))


def test_steady_calls_keep_the_pro_rata_cuts():
    for m, _ in windows(range(5, 8), off_s=0.0, on_s=0.03):
        assert m.call_profile is None  # the profile explains nothing that steady power does not
        seven, six = as_model(m, 7), as_model(m, 6)  # model 7 brought the fold
        assert seven.above_idle_j == six.above_idle_j and seven.err_j == six.err_j


def test_calls_declared_in_bulk_are_not_folded():
    for m, _ in windows([5], mark=False):
        assert m.call_ends_s == () and m.call_profile is None


def test_the_call_ends_survive_json_and_older_records_read_without_them():
    m, _ = windows([5])[0]
    d = m.to_dict()
    assert d["schema_version"] == SCHEMA_VERSION and len(d["call_ends_s"]) == m.calls
    again = Measurement.from_dict(d)
    assert again.call_ends_s == m.call_ends_s and again.above_idle_j == m.above_idle_j
    later = ("call_ends_s", "foreign_read_s", "contexts", "others_idle")
    old = {k: v for k, v in d.items() if k not in later} | {"schema_version": 4}
    assert Measurement.from_dict(old).call_ends_s == ()


def _samples(profile_w, period_s=0.03, spacing_s=0.02, n=60, jitter_s=0.003, seed=0):
    """Samples of a power that repeats ``profile_w`` (one value a phase bin) every ``period_s``."""
    rng = np.random.default_rng(seed)
    t = 0.2 + np.cumsum(spacing_s + rng.uniform(-jitter_s, jitter_s, n))
    ends = np.arange(1, int(t[-1] / period_s) + 2) * period_s
    profile = fold.CallProfile((0.0, *ends), period_s, tuple(profile_w))
    samples = [PowerSample(float(b), profile.energy_j(a, b) / (b - a)) for a, b in itertools.pairwise(t)]
    return samples, ends


def test_fit_recovers_a_profile_and_integrates_it_by_phase():
    truth = (700.0, 700.0, 700.0, 120.0, 120.0, 120.0)
    samples, ends = _samples(truth)
    p = fold.fit(samples, ends, 0.0, lag_s=0.0, min_period_s=0.01)
    # 20 ms samples of a 30 ms call blur the phases, and the ridge pulls toward flat: the
    # profile need not match bin by bin, only place the call's energy closer than flat power
    assert p is not None and min(p.bin_w[:3]) > max(p.bin_w[3:])
    mean_w = np.mean(truth)
    assert p.energy_j(0.3, 0.39) == pytest.approx(0.09 * mean_w, rel=0.01)  # whole periods
    assert abs(p.energy_j(0.3, 0.315) - 0.015 * 700.0) < 0.5 * 0.015 * (700.0 - mean_w)  # an on phase
    # integrals by phase: whole periods hold the bins' mean, half a call from its start its first bins
    assert p.energy_j(0.3, 0.39) == pytest.approx(0.09 * np.mean(p.bin_w))
    assert p.energy_j(0.3, 0.315) == pytest.approx(0.015 * np.mean(p.bin_w[:3]))
    assert p.energy_j(0.315, 0.3) == -p.energy_j(0.3, 0.315)
    # calls before the first mark and after the last follow at the period
    assert p.energy_j(-0.03, 0.0) == pytest.approx(0.03 * np.mean(p.bin_w))
    assert p.energy_j(ends[-1], ends[-1] + 0.015) == pytest.approx(0.015 * np.mean(p.bin_w[:3]))


@pytest.mark.parametrize(
    ("why", "change"),
    [
        ("flat power", lambda s, e: (_samples((400.0,) * 6)[0], e)),
        ("calls unlike each other", lambda s, e: (s, e * np.r_[1.0, 1.3, np.ones(len(e) - 2)].cumprod())),
        ("too few samples", lambda s, e: (s[:8], e)),
        ("a call too short", lambda s, e: (s, e)),
        ("too many calls", lambda s, e: (s, np.arange(1, fold.MAX_MARKS + 2) * 0.03)),
    ],
)
def test_fit_refuses_what_it_cannot_trust(why, change):
    samples, ends = change(*_samples((700.0, 700.0, 700.0, 120.0, 120.0, 120.0)))
    min_period_s = 0.05 if why == "a call too short" else 0.01
    assert fold.fit(samples, ends, 0.0, lag_s=0.0, min_period_s=min_period_s) is None, why


def _overlap_s(a_s: float, b_s: float, bounds_s: np.ndarray) -> np.ndarray:
    """Each phase bin's overlap with [a_s, b_s], summed over the calls: the definition, bin by bin."""
    out = np.zeros(fold.BINS)
    for c0, c1 in itertools.pairwise(bounds_s):
        for j in range(fold.BINS):
            lo, hi = c0 + (c1 - c0) * j / fold.BINS, c0 + (c1 - c0) * (j + 1) / fold.BINS
            out[j] += max(0.0, min(hi, b_s) - max(lo, a_s))
    return out


def test_phase_times_in_one_pass_match_each_bin_s_overlap():
    rng = np.random.default_rng(3)
    bounds = 1.0 + np.concatenate([[0.0], np.cumsum(rng.uniform(0.005, 0.05, 40))])
    a = rng.uniform(0.9, bounds[-1] + 0.1, 200)  # some before the first call, some after the last
    b = a + rng.uniform(0.0, 0.1, 200)
    got = fold._phase_times_s(a, b, bounds)
    want = np.array([_overlap_s(x, y, bounds) for x, y in zip(a, b, strict=True)])
    assert got.shape == (200, fold.BINS)
    assert np.allclose(got, want, rtol=0, atol=1e-12)
