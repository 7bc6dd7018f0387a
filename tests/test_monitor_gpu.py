"""EnergyMonitor on a real GPU (the H200): nested windows around torch matmuls."""

import time

import pytest

from nvmeter.meter.monitor import EnergyMonitor

pytestmark = pytest.mark.gpu


def test_nested_windows_agree_on_the_gpu():
    torch = pytest.importorskip("torch")
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()  # the monitor refuses an idle measured with kernels running
    meter = EnergyMonitor(0)  # idle measured now, with this process's context open

    def products(seconds):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            torch.mm(a, b)
            n += 1
            if n % 50 == 0:
                torch.cuda.synchronize()
        return n

    products(0.5)  # warm
    meter.begin("outer")
    steps = []
    for _ in range(3):
        meter.begin("step")
        meter.call("step", products(0.5))
        steps.append(meter.end("step"))
    outer = meter.end("outer")
    for m in [*steps, outer]:
        print(m)
        assert m.reliable, m.reason
    inner_j = sum(m.above_idle_j for m in steps)
    # the outer window also holds the steps' edges: idle time plus the polling's +2.8 W
    slack_j = sum(m.err_j for m in steps) + outer.err_j + 6 * 2.8 * 0.5
    assert abs(outer.above_idle_j - inner_j) <= slack_j, (outer.above_idle_j, inner_j, slack_j)
    # the steps' per-call figures agree with each other within their bounds (plus 2% for the
    # clocks after each step's edges)
    per_call = [m.per_call_mj for m in steps]
    assert max(per_call) - min(per_call) <= max(m.per_call_mj_err for m in steps) * 2 + 0.02 * min(per_call)
