"""``nvmeter run`` on a whole process against a reference measured around that same process.

    python bench/run_reference.py [--trials 3] [--seconds 5] [--device 0] [--out FILE] [--keep DIR]

Each trial, on one board (this script never imports torch, so it holds no CUDA context):

1. idle: a 3 s aligned span before anything starts;
2. the reference's start edge: poll the energy counter until it steps;
3. ``python -m nvmeter run --device UUID --json RECORD -- python bench/matmul_loop.py --seconds S``:
   nvmeter starts, measures its own idle (1 s), opens its window, runs the ~5 s matmul loop as
   its child and closes its window after the child exits, all inside the reference's span;
4. the reference's end edge once nvmeter has exited; the sample buffer is read every 0.5 s
   in between;
5. idle again: a 3 s span (reported, not used).

The reference's energy above idle is the counter's energy between its edges less the idle
before times its duration. Both figures hold the process's start-up, its CUDA context, the
loop and the context's teardown; the reference also holds nvmeter's own start-up, idle span
and exit, where the board idles (their mean power is printed as ``outside_w`` to show it).
A trial passes when the two figures differ by no more than nvmeter's stated bound plus the
reference's own (its idle's bound times its duration, its edges, its polling). Exit 0 when
every trial passes, 1 otherwise. Writes every figure and both raw spans to ``--out``.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nvmeter import errors, records
from nvmeter.boards.factory import open_board
from nvmeter.meter.series import merge_samples
from nvmeter.meter.span import POLLING_ARTEFACT_W, AlignedSpan, aligned_edge, measure_span

HERE = Path(__file__).resolve().parent
IDLE_S = 3.0
READ_EVERY_S = 0.5
FIGURES = ("energy_j", "above_idle_j", "err_j", "idle_w", "window_s", "reliable")


def idle_err_w(span: AlignedSpan) -> float:
    """An idle span's bound, W: its edges' share and the polling's (as nvmeter's own idle)."""
    return span.power_w * span.edge_uncertainty_s / span.duration_s + span.polling_bias_w()


def sampled_w(samples, a_s: float, b_s: float) -> float | None:
    inside = [s.power_w for s in samples if a_s <= s.t_s < b_s]
    return sum(inside) / len(inside) if inside else None


def metered(board, argv: list[str]) -> tuple[AlignedSpan, subprocess.CompletedProcess]:
    """The reference span around ``argv``'s whole process."""
    clock = board.clock
    reads = [board.power_samples()]
    start = aligned_edge(board, clock)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last_read = clock.now()
    while proc.poll() is None:
        clock.sleep(0.05)
        if clock.now() - last_read >= READ_EVERY_S:
            reads.append(board.power_samples())
            last_read = clock.now()
    end = aligned_edge(board, clock)
    clock.sleep(0.05)
    reads.append(board.power_samples())
    stdout, stderr = proc.communicate()
    done = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    return AlignedSpan(start, end, merge_samples(*reads)), done


def trial(board, seconds: float, record: Path) -> dict:
    clock = board.clock
    try:
        others = list(board.compute_pids())
    except errors.TelemetryError:
        others = None
    idle_before = measure_span(board, clock, IDLE_S)
    argv = [sys.executable, "-m", "nvmeter", "run", "--device", board.identity().uuid, "--json", str(record)]
    argv += ["--", sys.executable, str(HERE / "matmul_loop.py"), "--seconds", str(seconds)]
    span, done = metered(board, argv)
    idle_after = measure_span(board, clock, IDLE_S)
    print(done.stdout.strip(), done.stderr.strip(), sep="\n", flush=True)
    if done.returncode != 0 or not record.exists():
        return {"nvmeter_exit": done.returncode, "stderr": done.stderr[-2000:], "passed": False}
    run = json.loads(record.read_text())
    fig = run["derived"]["boards"][0]
    window = run["boards"][0]["window"]
    ref_idle_w = idle_before.power_w
    ref_above_j = span.energy_j - ref_idle_w * span.duration_s
    ref_err_j = (
        idle_err_w(idle_before) * span.duration_s
        + ref_idle_w * span.edge_uncertainty_s
        + POLLING_ARTEFACT_W * span.polled_s
    )
    diff_j = fig["above_idle_j"] - ref_above_j
    t_exit = window["work_t1_s"]  # the child reaped, on the same monotonic clock as ours
    outside_s = span.duration_s - fig["window_s"]
    result = {
        "nvmeter_exit": done.returncode,
        "loop": json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else None,
        "other_pids_before": others,
        "nvmeter": {k: fig[k] for k in FIGURES} | {"wall_s": run["wall_s"], "exit_status": done.returncode},
        "reference": {
            "energy_j": span.energy_j,
            "duration_s": span.duration_s,
            "aligned": span.aligned,
            "idle_before_w": ref_idle_w,
            "idle_before_err_w": idle_err_w(idle_before),
            "idle_after_w": idle_after.power_w,
            "above_idle_j": ref_above_j,
            "err_j": ref_err_j,
        },
        "diff_j": diff_j,
        "diff_rel": diff_j / ref_above_j if ref_above_j else None,
        "within_stated_bound": abs(diff_j) <= fig["err_j"],
        "passed": abs(diff_j) <= fig["err_j"] + ref_err_j and fig["reliable"] and done.returncode == 0,
        # the reference's time outside nvmeter's window: nvmeter's start-up, idle span and exit
        "outside_s": outside_s,
        "outside_w": (span.energy_j - fig["energy_j"]) / outside_s if outside_s > 0 else None,
        # how the board's power falls once the child has exited (sample buffer means, W)
        "after_exit_w": {
            "0-100ms": sampled_w(span.samples, t_exit, t_exit + 0.1),
            "100-500ms": sampled_w(span.samples, t_exit + 0.1, t_exit + 0.5),
            "500ms-end": sampled_w(span.samples, t_exit + 0.5, span.t_b_s),
        },
        "raw": {
            "span": span.to_dict(),
            "idle_before": idle_before.to_dict(),
            "idle_after": idle_after.to_dict(),
        },
    }
    return result


def summary(t: dict) -> str:
    if "nvmeter" not in t:
        return f"nvmeter exited {t['nvmeter_exit']}: {t['stderr'][-300:]}"
    n, r = t["nvmeter"], t["reference"]
    return (
        f"nvmeter {n['above_idle_j']:,.1f} ± {n['err_j']:,.1f} J above idle ({n['window_s']:.2f} s window); "
        f"reference {r['above_idle_j']:,.1f} ± {r['err_j']:,.1f} J ({r['duration_s']:.2f} s, idle "
        f"{r['idle_before_w']:.1f} W before, {r['idle_after_w']:.1f} W after); diff {t['diff_j']:+,.1f} J "
        f"({t['diff_rel']:+.2%}); within the stated bound: {t['within_stated_bound']}; "
        f"outside the window {t['outside_s']:.2f} s at {t['outside_w']:.1f} W; "
        f"after exit {t['after_exit_w']}; {'PASS' if t['passed'] else 'FAIL'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--device", default="0")
    parser.add_argument("--out", type=Path, default=Path("run-reference.json"))
    parser.add_argument("--keep", type=Path, default=None, help="Folder for nvmeter's run records.")
    args = parser.parse_args()
    keep = args.keep or Path(tempfile.mkdtemp(prefix="nvmeter-run-"))
    board = open_board(int(args.device) if args.device.isdigit() else args.device)
    trials = []
    for i in range(1, args.trials + 1):
        t0 = time.monotonic()
        trials.append(trial(board, args.seconds, keep / f"run-{i}.json"))
        print(f"trial {i} ({time.monotonic() - t0:.0f} s): {summary(trials[-1])}", flush=True)
    records.write_json(
        args.out,
        {"kind": "bench-run-reference", "board": board.identity().to_dict(), "seconds": args.seconds,
         "trials": trials},
    )  # fmt: skip
    passed = sum(t["passed"] for t in trials)
    print(f"{passed} of {len(trials)} trials within nvmeter's bound plus the reference's; wrote {args.out}")
    return 0 if passed == len(trials) else 1


if __name__ == "__main__":
    sys.exit(main())
