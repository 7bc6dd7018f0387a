"""Methods for the score tests: one that passes difficulty 1 on CPU in ~0.4 s, and broken ones.

The worker imports this file by path (``nvmeter score tests/score_methods.py:tiny``).
"""

import contextlib
import os
import signal
import sys
import time

import torch


def tiny(train_x, train_y, test_x):
    """A 60-128-10 MLP, 300 Adam steps of 512 rows with input noise: ~95% on MNIST draws."""
    torch.set_num_threads(1)  # steady call times on a small CI machine
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(60, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(300):
        idx = torch.randint(0, len(train_x), (512,), generator=g)
        xb = train_x[idx]
        loss = torch.nn.functional.cross_entropy(
            net(xb + 0.3 * torch.randn(xb.shape, generator=g)), train_y[idx]
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return net(test_x).argmax(1)


def chance(train_x, train_y, test_x):
    """Runs, returns valid labels, and fails the judge (all one class)."""
    print("chance: predicting class 0")  # must not reach the worker's protocol
    return torch.zeros(test_x.shape[0], dtype=torch.int64)


def raises(train_x, train_y, test_x):
    raise ValueError("boom")


def wrong_shape(train_x, train_y, test_x):
    return torch.zeros(5, dtype=torch.int64)


def wrong_dtype(train_x, train_y, test_x):
    return torch.zeros(test_x.shape[0], dtype=torch.float32)


def dies(train_x, train_y, test_x):
    os.kill(os.getpid(), signal.SIGKILL)


def hangs(train_x, train_y, test_x):
    time.sleep(600)


def garbage(train_x, train_y, test_x):
    """Write a line that is not JSON into the worker's reply channel, then return normally."""
    protocol = sys.modules["__main__"]._PROTOCOL  # the worker runs as python -m nvmeter.worker.child
    protocol.write("this is not json\n")
    protocol.flush()
    return torch.zeros(test_x.shape[0], dtype=torch.int64)


def spawns(train_x, train_y, test_x):
    """Start a grandchild in the worker's process group, then hang: the kill must reach both."""
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.environ["NVMETER_TEST_GRANDCHILD"], "w") as f:
        f.write(str(child.pid))
    time.sleep(600)


def spawns_a_session(train_x, train_y, test_x):
    """Start a grandchild in a session of its own, out of the worker's group, then end as told.

    NVMETER_TEST_SESSION: ``setsid`` (a child with start_new_session=True) or ``double-fork``
    (a shell's background setsid, the shell gone: not under the worker either). Its pid is added
    to NVMETER_TEST_GRANDCHILD, one a line. NVMETER_TEST_THEN: ``hang``, ``exit`` (os._exit(1))
    or ``return`` (chance's labels, which fail the judge).
    """
    import subprocess

    pids = os.environ["NVMETER_TEST_GRANDCHILD"]
    if os.environ["NVMETER_TEST_SESSION"] == "double-fork":
        script = f"setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! >> {pids}"
        subprocess.run(["sh", "-c", script], check=True)
    else:
        child = subprocess.Popen(["sleep", "600"], start_new_session=True)
        with open(pids, "a") as f:
            f.write(f"{child.pid}\n")
    then = os.environ["NVMETER_TEST_THEN"]
    if then == "hang":
        time.sleep(600)
    if then == "exit":
        os._exit(1)
    return chance(train_x, train_y, test_x)


def closes_its_stdin(train_x, train_y, test_x):
    """Close fd 0 (once the worker's request channel), then answer chance."""
    with contextlib.suppress(OSError):  # closed by an earlier call already
        os.close(0)
    return chance(train_x, train_y, test_x)


def reads_its_stdin(train_x, train_y, test_x):
    """Read stdin (end of file, not the worker's requests), then answer chance."""
    assert sys.stdin.readline() == "" and os.read(0, 10) == b""
    return chance(train_x, train_y, test_x)


NOT_A_FUNCTION = 3


_CALLS = []  # this worker's calls of the *_at methods (a fresh worker each run)


def _fails_now() -> bool:
    _CALLS.append(1)
    return len(_CALLS) == int(os.environ["NVMETER_TEST_FAIL_AT"])


def _until_then(train_x, train_y, test_x):
    # passing answers (tiny) only where the run must get past the judge to the failing call
    if os.environ.get("NVMETER_TEST_PASS"):
        return tiny(train_x, train_y, test_x)
    return chance(train_x, train_y, test_x)


def oom_at(train_x, train_y, test_x):
    """CUDA runs out of memory on call NVMETER_TEST_FAIL_AT (warm-ups count)."""
    if _fails_now():
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (test)")
    return _until_then(train_x, train_y, test_x)


def exits_at(train_x, train_y, test_x):
    """The process calls os._exit(1) on call NVMETER_TEST_FAIL_AT."""
    if _fails_now():
        os._exit(1)
    return _until_then(train_x, train_y, test_x)
