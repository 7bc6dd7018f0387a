"""Tests that need a real NVIDIA GPU (run on the H200: pytest -m gpu)."""

import os
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from nvmeter import errors
from nvmeter.meter import errormodel

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def board():
    from nvmeter.boards.nvml import NvmlBoard

    return NvmlBoard(0)


def test_identity_is_complete(board):
    ident = board.identity()
    print("board:", ident)
    assert ident.uuid.startswith("GPU-")
    assert ident.name and ident.driver and ident.pci_bus_id
    assert 100 < ident.power_limit_w < 2000
    assert ident.memory_total_mib > 1000


def test_counter_steps_about_every_100_ms(board):
    from nvmeter.meter.series import poll_counter

    series = poll_counter(board, board.clock, 1.5)
    assert series.is_monotonic()
    gaps_ms = series.steps.gaps_s * 1e3
    assert len(gaps_ms) >= 8
    assert 50 < np.median(gaps_ms) < 200


def test_power_fields_are_plausible(board):
    limit = board.identity().power_limit_w
    for value in (board.power_instant_w(), board.power_average_w()):
        assert 10 < value < 1.1 * limit


def test_sample_buffer_is_on_our_clock(board):
    samples = board.power_samples()
    assert len(samples) > 10
    assert samples[-1].t_s == pytest.approx(board.clock.now(), abs=0.5)
    assert np.all(np.diff([s.t_s for s in samples]) > 0)


def test_cuda_index_and_uuid_name_the_same_board(board, monkeypatch):
    from nvmeter.boards.nvml import resolve_uuid

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", board.uuid)
    assert resolve_uuid(0) == board.uuid
    assert resolve_uuid(board.uuid[:12]) == board.uuid
    with pytest.raises(errors.DeviceNotFound):
        resolve_uuid(1)
    with pytest.raises(errors.DeviceNotFound):
        resolve_uuid("GPU-ffffffff-ffff")


def test_worker_context_is_on_the_board_and_freezes(board):
    from nvmeter.worker.rig import Rig

    with Rig.open(board.uuid) as rig:
        worker = rig.context()  # raises if CUDA's device is not this board
        assert rig.board.compute_process_count() >= 1
        run = worker.matmul(4096, "constant", seconds=0.3, check=True).result()
        assert run.max_abs_err == 0.0
        assert 5 < run.tflops < 500
        worker.freeze()
        assert psutil.Process(worker.pid).status() == psutil.STATUS_STOPPED
        worker.resume()
        pid = worker.pid
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_frozen_gpu_worker_dies_with_a_killed_parent(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(
        "import time\nfrom nvmeter.worker.rig import Rig\n"
        "rig = Rig.open(0)\nw = rig.context()\nw.freeze()\nprint(w.pid, flush=True)\ntime.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    end = time.monotonic() + 10
    while time.monotonic() < end and psutil.pid_exists(pid):
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.05)
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_quick_probe_cli_within_30_s(tmp_path):
    out = tmp_path / "quick.json"
    t0 = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "nvmeter.cli", "probe", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - t0
    print(result.stdout[-3000:])
    assert result.returncode == 0, result.stderr
    assert elapsed < 30.0, f"quick probe took {elapsed:.1f} s"


def test_the_cap_spread_probe_holds_the_board_at_its_cap_and_measures_its_spread(tmp_path):
    """bf16 products at the power cap, the counter's steps and the chunks' ends, on the real board.

    NVMETER_GPU_OUT keeps the record (the device scripts commit it).
    """
    from pathlib import Path

    from nvmeter.boards.profile import default_profile
    from nvmeter.probes.capspread import MIN_BLOCKS, profile_spread
    from nvmeter.probes.report import load_report

    out = Path(os.environ.get("NVMETER_GPU_OUT", tmp_path)) / "cap-spread-probe.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "nvmeter.cli",
            "probe",
            "--only",
            "cap_spread",
            "--no-cache",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    print(result.stdout[-3000:])
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    rec = report.probes["cap_spread"]
    assert len(rec.runs) == 3
    for run in rec.runs:  # each run after a pause, marked chunk by chunk
        marks = np.asarray(run.mark_t_s)
        assert len(marks) > 100 and np.all(np.diff(marks) > 0) and np.all(np.diff(run.mark_products) > 0)
        assert run.dtype == "bf16" and run.mark_products[-1] == run.matmuls
    d = rec.derived()
    print("cap spread:", d)
    half = next(w for w in d["windows"] if w["window_s"] == 0.5)
    assert half["blocks"] >= 24 and 0 <= half["rel_sd"] < 0.2
    if d["at_cap"]:  # the counter's power at the board's limit (polling adds a few W)
        assert abs(d["power_w"] / report.board.power_limit_w - 1) < 0.1
        assert sum(w["blocks"] >= MIN_BLOCKS for w in d["windows"]) >= 5
        assert (
            report.profile().cap_spread == profile_spread(d) != default_profile(report.board.name).cap_spread
        )
    else:  # not held at the cap: the family's defaults stay
        assert report.profile().cap_spread == default_profile(report.board.name).cap_spread


def test_the_run_level_probe_restarts_fp32_products_and_its_profile_keeps_the_figure(tmp_path):
    """Eight runs of FP32 products after a pause, on the real board (error model 13's figure).

    NVMETER_GPU_OUT keeps the record (the device scripts commit it).
    """
    from pathlib import Path

    from nvmeter.boards.profile import default_profile
    from nvmeter.probes.report import load_report

    out = Path(os.environ.get("NVMETER_GPU_OUT", tmp_path)) / "run-levels-probe.json"
    cmd = [
        sys.executable,
        "-m",
        "nvmeter.cli",
        "probe",
        "--only",
        "run_levels",
        "--no-cache",
        "--out",
        str(out),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    print(result.stdout[-3000:])
    assert result.returncode == 0, result.stderr
    report = load_report(out)
    rec = report.probes["run_levels"]
    assert len(rec.runs) == 8
    for run in rec.runs:
        assert run.dtype == "fp32" and run.mark_products[-1] == run.matmuls and len(run.mark_t_s) > 10
    d = rec.derived()
    print("run levels:", {k: v for k, v in d.items() if k != "run_mj"}, [round(v, 1) for v in d["run_mj"]])
    assert all(np.isfinite(d["run_mj"])) and 0 <= d["range_rel"] < 0.2
    family = default_profile(report.board.name).run_level_rel
    assert report.profile().run_level_rel == max(family, d["run_level_rel"] or 0.0)  # it only widens


def test_unknown_device_is_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "nvmeter.cli", "probe", "--device", "17", "--out", str(tmp_path / "p.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 3
    assert len(result.stderr.strip().splitlines()) == 1
    assert "no GPU with CUDA index 17" in result.stderr


def test_check_runs_the_reference_and_judges_by_the_family_band():
    from nvmeter import open_board
    from nvmeter.probes.bands import band_for

    name = open_board(0).identity().name
    result = subprocess.run(
        [sys.executable, "-m", "nvmeter.cli", "check", "--allow-no-band"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    print(result.stdout, result.stderr)
    assert result.returncode == 0, result.stderr
    # PASS inside a known band (H200, A100); an H100 has none of ours (the run on GPU-546291fd
    # exited 1 without --allow-no-band, as designed)
    assert ("PASS" if band_for(name) else "NO BAND KNOWN") in result.stdout


def test_energy_window_on_the_gpu_agrees_with_its_samples_and_a_longer_window(board):
    import torch

    from nvmeter.meter.window import EnergyWindow

    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(4096, 4096, device="cuda")
    out = torch.empty_like(a)

    def block(seconds):
        with EnergyWindow(board, idle=121.0) as w:
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                for _ in range(15):
                    torch.matmul(a, a, out=out)
                torch.cuda.synchronize()
                w.call()
        return w.result

    block(0.5)  # warm up clocks
    short, long = block(0.5), block(3.0)
    print(short, long)
    assert short.reliable and long.reliable, (short.reason, long.reason)
    # each window follows the one before's exit (a pause of its tail and end edge): both bounds
    # hold the difference, and it is small
    assert abs(short.per_call_mj - long.per_call_mj) <= short.per_call_mj_err + long.per_call_mj_err
    assert short.per_call_mj == pytest.approx(long.per_call_mj, rel=0.05)
    assert short.with_method("samples").per_call_mj == pytest.approx(short.per_call_mj, rel=0.03)


def test_windows_that_return_keep_the_board_busy_and_agree_with_a_long_one(board):
    import torch

    from nvmeter.meter.window import EnergyWindow

    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(4096, 4096, device="cuda")
    out = torch.empty_like(a)

    def calls(seconds):
        n, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(15):
                torch.matmul(a, a, out=out)
            torch.cuda.synchronize()
            n += 1
        return n

    calls(2.0)
    with EnergyWindow(board, idle=121.0, exit="return") as long:
        long.call(calls(3.0))
    opened, exits_s = [], []
    for _ in range(4):
        with EnergyWindow(board, idle=121.0, exit="return") as w:
            w.call(calls(0.5))
            t = time.perf_counter()
        exits_s.append(time.perf_counter() - t)
        while not w.end_found():  # the next calls carry the end edge (calls(0.0) made none: idle)
            calls(0.001)
        opened.append(w)
    calls(0.3)  # the last window's samples after its end
    # built once the run is over: building one between windows would idle the board there
    windows = [w.result for w in opened]
    ref = long.result
    print(ref, *windows, exits_s, sep="\n")
    assert ref.end_found_in_work and ref.reliable, ref.reason
    assert max(exits_s) < 0.010  # the exit synchronises and returns: no tail, no counter period
    for m in windows:
        assert m.end_found_in_work and m.reliable, m.reason
        assert not m.transient, repr(m)  # nothing idled the board between the windows
        assert abs(m.per_call_mj - ref.per_call_mj) <= m.per_call_mj_err + ref.per_call_mj_err
        assert m.per_call_mj == pytest.approx(ref.per_call_mj, rel=0.03)


def test_duty_cycled_windows_with_marked_calls_fold_their_cuts_and_agree_with_a_long_one(board):
    """Error model 7 on the board: 15 ms of matmuls, then 15 ms on the host, each call marked."""
    import torch

    from nvmeter.meter.window import EnergyWindow

    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(4096, 4096, device="cuda")
    out = torch.empty_like(a)
    start = time.perf_counter()
    torch.matmul(a, a, out=out)
    torch.cuda.synchronize()
    per_matmul_s = max(time.perf_counter() - start, 1e-4)
    n_matmuls = max(1, round(0.015 / per_matmul_s))

    def calls(seconds, w=None):
        n, end = 0, time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(n_matmuls):
                torch.matmul(a, a, out=out)
            torch.cuda.synchronize()
            time.sleep(0.015)
            n += 1
            if w is not None:
                w.call()
        return n

    calls(2.5)
    with EnergyWindow(board, idle=121.0, exit="return") as long:
        calls(10.0, long)
    opened = []
    for _ in range(6):
        with EnergyWindow(board, idle=121.0, exit="return") as w:
            calls(0.5, w)
        while not w.end_found():
            calls(0.001)
        opened.append(w)
    calls(0.3)
    windows, ref = [w.result for w in opened], long.result
    print(ref, *windows, sep="\n")
    assert ref.reliable, ref.reason
    folded = [m for m in windows if m.call_profile is not None]
    assert len(folded) >= len(windows) // 2, "the samples showed no profile in most windows"
    for m in windows:
        assert m.model_version == errormodel.CURRENT and len(m.call_ends_s) == m.calls
        assert m.reliable, m.reason
        assert abs(m.per_call_mj - ref.per_call_mj) <= m.per_call_mj_err + ref.per_call_mj_err


def test_energy_window_lets_an_exception_through_on_the_gpu(board):
    from nvmeter.meter.window import EnergyWindow

    window = EnergyWindow(board, idle=121.0)
    with pytest.raises(ZeroDivisionError), window:
        1 / 0  # noqa: B018
    assert window.result is None


def test_frozen_idle_is_measured_and_the_worker_resumed(board):
    from nvmeter.meter.baseline import measure_frozen
    from nvmeter.worker.rig import Rig

    with Rig.open(board.uuid) as rig:
        worker = rig.context()
        span = measure_frozen(rig.board, worker, duration_s=1.0, settle_s=1.0)
        assert psutil.Process(worker.pid).status() != psutil.STATUS_STOPPED
        assert 30 < span.power_w < 300
        assert worker.matmul(1024, "random", count=2).result().matmuls == 2


def test_measure_on_the_gpu_warms_up_and_reaches_its_target(board):
    import torch

    from nvmeter.meter.adaptive import measure

    a = torch.randn(4096, 4096, device="cuda")
    out = torch.empty_like(a)

    def call():
        for _ in range(5):
            torch.matmul(a, a, out=out)

    m = measure(call, device=board, control=True)  # the default 5%: an unprobed board's run level is 3%
    print(m, m.lead_w, m.cold)
    assert m.reliable, m.reason
    assert not m.cold
    assert m.control_mj != 0.0 and abs(m.control_mj) < 0.05 * m.per_call_mj


@pytest.mark.skipif(
    not __import__("torch").cuda.is_available() or __import__("torch").cuda.device_count() < 2,
    reason="needs two GPUs",
)
def test_two_boards_at_once_see_only_their_own_work():
    import torch

    from nvmeter.boards.nvml import NvmlBoard
    from nvmeter.meter.adaptive import measure_many

    boards = [NvmlBoard(0), NvmlBoard(1)]
    a = torch.randn(4096, 4096, device="cuda:0")
    out = torch.empty_like(a)
    torch.zeros(1, device="cuda:1")  # a context on both, so both idle alike

    def block():
        end = time.perf_counter() + 1.0
        calls = 0
        while time.perf_counter() < end:
            for _ in range(10):
                torch.matmul(a, a, out=out)
            torch.cuda.synchronize("cuda:0")
            calls += 1
        return calls

    busy, quiet = measure_many(boards, block, sync=lambda: torch.cuda.synchronize("cuda:0"))
    print(busy, quiet)
    assert busy.device.uuid != quiet.device.uuid
    assert busy.reliable, busy.reason
    assert busy.above_idle_j > 100  # J: ~0.5 kW for a second
    assert abs(quiet.above_idle_j) < 0.05 * busy.above_idle_j


def _window_in_forked_child(board, queue) -> None:
    """In a child forked after the parent initialised NVML: a new window, and one on the parent's board."""
    try:
        from nvmeter.meter.window import EnergyWindow

        results = []
        for device in (0, board):
            with EnergyWindow(device, idle=121.0, sync="none", calls=1) as w:
                time.sleep(0.5)
            results.append((w.result.window_s, w.result.per_call_mj))
        queue.put(("ok", results))
    except BaseException as exc:
        queue.put(("error", f"{type(exc).__name__}: {exc}"))


_FOREIGN_CONTEXT = """
import os, sys, time
if os.fork():
    os._exit(0)  # the grandchild is given to init: not the test's descendant
import torch
torch.zeros(1, device="cuda")
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(60)
"""


def test_another_process_s_context_makes_a_window_not_reliable_unless_said_idle(board, tmp_path):
    import torch

    from nvmeter.meter import contexts
    from nvmeter.meter.window import EnergyWindow

    a = torch.randn(4096, 4096, device="cuda")
    pid_file = tmp_path / "pid"
    subprocess.run([sys.executable, "-c", _FOREIGN_CONTEXT, str(pid_file)], check=True, timeout=30)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    pid = int(pid_file.read_text())
    try:
        t0 = time.perf_counter()
        reads = [contexts.read(board) for _ in range(20)]
        print(f"contexts.read: {(time.perf_counter() - t0) / 20 * 1e3:.2f} ms a read; {reads[-1]}")
        results = []
        for others_idle in (False, True):
            with EnergyWindow(board, idle=121.0, others_idle=others_idle) as w:
                for _ in range(30):
                    torch.matmul(a, a)
                    w.call()
                torch.cuda.synchronize()
            results.append(w.result)
        print(*results, sep="\n")
    finally:
        os.kill(pid, 9)
    shared, said_idle = results
    assert [r.other_n for r in shared.contexts] == [1, 1], shared.contexts
    assert not shared.reliable and "held a CUDA context on the board" in shared.reason
    assert "taken as idle" in repr(said_idle) and "held a CUDA context" not in (said_idle.reason or "")


def test_a_window_works_in_a_child_forked_after_nvml_was_initialised(board):
    """multiprocessing's fork start method; the child got 'NVML failed on the device count: Uninitialized'."""
    import math
    import multiprocessing

    assert board.energy_mj() > 0  # NVML initialised in this process
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_window_in_forked_child, args=(board, queue))
    child.start()
    status, results = queue.get(timeout=60)
    child.join(timeout=30)
    print("child:", status, results)
    assert status == "ok", results
    for window_s, per_call_mj in results:
        assert window_s > 0.45 and math.isfinite(per_call_mj)
    assert child.exitcode == 0
    assert board.energy_mj() > 0  # the parent's NVML still works


def test_a_measured_idle_reads_the_gpu_idle_and_one_with_kernels_running_is_not_reliable(board):
    import torch

    from nvmeter.meter.window import EnergyWindow

    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(8192, 8192, device="cuda")
    out = torch.empty_like(a)

    def work(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(4):
                torch.matmul(a, a, out=out)
            torch.cuda.synchronize()

    with EnergyWindow(board) as quiet:  # idle measured before and after, the caller synchronised
        work(0.5)
        quiet.call()
    m = quiet.result
    print(m, m.idle)
    assert 0.0 <= m.idle.busy_pct <= 50.0 and m.reliable, m.reason
    # ~4 s of products queued without a sync: the idle span before the window runs under them
    # an 8192^2 FP32 product is 1.1 TFLOP: ~21.6 ms at the H200's 51.1 TFLOP/s (results/probe-h200.json)
    for _ in range(int(4.0 / 0.0216)):
        torch.matmul(a, a, out=out)
    with EnergyWindow(board, sync="none") as busy:
        busy.call()
    torch.cuda.synchronize()
    b = busy.result
    print(b, b.idle)
    assert b.idle.busy and not b.reliable and "the GPU ran kernels" in b.reason


def test_the_sm_clock_sample_buffer_is_on_our_clock_and_follows_the_work(board):
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    end = time.perf_counter() + 1.0
    while time.perf_counter() < end:
        torch.matmul(a, a)
    torch.cuda.synchronize()
    try:
        samples = board.clock_samples()
    except errors.NotSupported:
        pytest.skip("this board keeps no SM-clock sample buffer")
    print(len(samples), samples[:2], samples[-2:])
    if not samples:  # H200, driver 580.159.04: the read succeeds, the buffer stays empty
        pytest.skip(f"{board.identity().driver}: the SM-clock sample buffer stayed empty through 1 s of work")
    assert len(samples) >= 5 and np.all(np.diff([s.t_s for s in samples]) > 0)
    assert samples[-1].t_s == pytest.approx(board.clock.now(), abs=1.0)
    recent = [s.sm_clock_mhz for s in samples if s.t_s > board.clock.now() - 1.0]
    assert recent and 500 < max(recent) < 3000  # busy clocks, MHz (H200: 1,980 boost)


def _quiescent_idle(board):
    """The board's quiescent idle with this process's context open and settled."""
    import torch

    from nvmeter.meter.baseline import IdleBaseline, measure_quiescent

    torch.cuda.synchronize()
    time.sleep(1.0)  # the context's idle settles
    return IdleBaseline.from_spans([measure_quiescent(board)], "quiescent")


def _window_after_a_pause(board, idle):
    """0.5 s of FP32 4096² products in a window given ``idle``, after a pause its samples hold whole."""
    import torch

    from nvmeter.meter.window import EnergyWindow

    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(4096, 4096, device="cuda")
    out = torch.empty_like(a)
    torch.cuda.synchronize()
    time.sleep(1.5)
    with EnergyWindow(board, idle=idle) as w:
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end:
            for _ in range(15):
                torch.matmul(a, a, out=out)
            torch.cuda.synchronize()
            w.call()
    return w.result


def test_a_given_idle_of_this_board_is_not_widened_by_the_level_before_a_window(board):
    """Error model 14 on hardware: the board's own quiescent idle, given to a window after a pause,
    is the level the samples read before it (within model 8's band), so the bound is not widened."""
    baseline = _quiescent_idle(board)
    m = _window_after_a_pause(board, baseline)
    print(m, m.lead_level, m.lead_level_gap_w)
    assert m.model_version >= 14 and m.lead_level is not None
    assert m.lead_level_gap_w == 0.0 and abs(m.lead_level[0] - baseline.samples_w) <= 5.0
    assert m.reliable, m.reason


def test_a_given_idle_off_the_board_s_is_held_by_the_bound_or_refused(board):
    """Error model 14 live: a window given an idle 30 W under the board's (the no-context idle given
    to a process holding a context, say) holds the figure its own quiescent idle gives, or is not
    reliable; one given an idle 30 W over it is not reliable (a board cannot idle under its idle)."""
    baseline = _quiescent_idle(board)
    own, low, high = (
        _window_after_a_pause(board, idle)
        for idle in (baseline, baseline.power_w - 30.0, baseline.power_w + 30.0)
    )
    for m in (own, low, high):
        print(m, m.lead_level, m.lead_level_offset_w, m.lead_level_gap_w, m.lead_level_under_w)
    assert own.reliable, own.reason
    assert low.lead_level_gap_w >= 20.0  # the 30 W, less the 1 W band and the board's idle noise
    if low.reliable:  # each window is other calls: both bounds hold their difference
        assert abs(low.per_call_mj - own.per_call_mj) <= low.per_call_mj_err + own.per_call_mj_err
    assert high.lead_level_under_w > 0.0 and not high.reliable
    assert "under the idle" in high.reason
