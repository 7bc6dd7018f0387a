"""What the score tests share: the test methods' file, short-run settings, the CLI as a user runs it."""

import os
import subprocess
import sys
from pathlib import Path

METHODS = Path(__file__).with_name("score_methods.py")
# Short runs (2 MNIST + 1 hold-out timed calls, sub-second windows). On a small CPU the
# timed calls' ms wanders with the other processes, so the window-ms check is loose here.
FAST = {
    "window_s": 0.4,
    "window_warmup_s": 0.1,
    "min_calls": 2,
    "control_s": 0.2,
    "idle_s": 0.5,
    "idle_settle_s": 0.2,
    "mnist_draws": 2,
    "holdout_draws": 1,
    "warmup_calls": 1,
    "window_draws": 2,
    # the plumbing, not the check (test_score covers it): a tiny method's calls on a loaded 2-core
    # machine move by more than 50% between the timed calls and the window
    "window_ms_tolerance": 2.0,
}
FAST_CLI = [
    "--window-s", "0.4", "--window-warmup-s", "0.1", "--min-calls", "2", "--control-s", "0.2",
    "--idle-s", "0.5", "--settle-s", "0.2",
    "--mnist-draws", "2", "--holdout-draws", "1", "--warmups", "1", "--window-draws", "2",
    "--window-ms-tolerance", "2.0",
]  # fmt: skip


def cli(*args, data_root, wait=True):
    """``python -m nvmeter.cli ARGS`` with the data cache at ``data_root``.

    Returns:
        (pid, exit code, stdout, stderr), or the running Popen if not ``wait``.

    """
    env = {**os.environ, "NVMETER_DATA_DIR": str(data_root)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "nvmeter.cli", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    if not wait:
        return proc
    out, err = proc.communicate(timeout=300)
    return proc.pid, proc.returncode, out, err
