"""Dependencies: each declared package has a user; the workloads' data routes are an extra nothing else needs.

The H200 installs nvmeter with ``--no-deps`` and has neither pooch nor platformdirs: the
probe, the windows and the scorer (with a data cache named by NVMETER_DATA_DIR) must run
without them, and whatever does need them says which extra to install.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from score_helpers import FAST_CLI, METHODS, cli

from nvmeter import errors

REPO = Path(__file__).resolve().parents[1]
# distribution -> the module its users import (or run with -m)
MODULES = {
    "nvidia-ml-py": "pynvml",
    "import-linter": "importlinter",
}
# declared for a user that is on its way: nothing to find yet
PENDING: dict[str, str] = {}
WORKLOADS_ONLY = ("pooch", "platformdirs", "requests")


def _requirements() -> dict[str, list[str]]:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {"": project["dependencies"], **project["optional-dependencies"]}
    return {
        group: [re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in reqs if not r.startswith("nvmeter")]
        for group, reqs in groups.items()
    }


def _sources() -> str:
    folders = ("nvmeter", "probes", "workloads", "tests", "bench")
    return "\n".join(p.read_text() for f in folders for p in sorted((REPO / f).rglob("*.py")))


def test_every_declared_package_has_a_user():
    text = _sources()
    for group, dists in _requirements().items():
        for dist in dists:
            if dist in PENDING:
                continue
            module = MODULES.get(dist, dist.replace("-", "_"))
            used = (
                re.search(rf"(^\s*|[\"';] *)(import|from) {module}\b", text, re.M)
                or f'"-m", "{module}"' in text
            )
            assert used, f"{dist} ({group or 'dependencies'}) has no user"


def test_the_data_routes_are_the_workloads_extra_and_the_tests_pull_it():
    reqs = _requirements()
    assert not set(WORKLOADS_ONLY) & set(reqs[""])
    assert set(WORKLOADS_ONLY) <= set(reqs["workloads"])
    tomllib = pytest.importorskip("tomllib")
    test_extra = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"][
        "test"
    ]
    assert any(r.startswith("nvmeter[") and "workloads" in r for r in test_extra)


# -- without the extra ------------------------------------------------------------------------
@pytest.fixture
def no_extra(tmp_path, monkeypatch):
    """PYTHONPATH whose pooch, platformdirs and requests fail to import, in this process's children."""
    folder = tmp_path / "missing"
    folder.mkdir()
    for name in WORKLOADS_ONLY:
        (folder / f"{name}.py").write_text(f"raise ImportError('{name} is not installed (test)')\n")
    monkeypatch.setenv("PYTHONPATH", str(folder))
    return folder


def _python(code: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, **kw)


def test_the_stand_ins_really_block(no_extra):
    proc = _python("import pooch")
    assert proc.returncode == 1 and "pooch is not installed (test)" in proc.stderr


def test_probe_and_window_run_without_the_extra(no_extra, tmp_path):
    code = (
        "import sys\n"
        "from nvmeter import EnergyWindow, Rig, open_board, run_probes\n"
        "with Rig.open(simulate=True) as rig:\n"
        "    run_probes(rig, quick=True, only=('idle',))\n"
        "board = open_board(simulate=True)\n"
        "board.set_context(True)\n"
        "board.clock.sleep(1.0)\n"
        "with EnergyWindow(board, sync='none', idle=121.0) as w:\n"
        "    board.set_load(500.0)\n"
        "    board.clock.sleep(1.0)\n"
        "    board.set_load(0.0)\n"
        "    w.call(10)\n"
        "assert w.result.per_call_mj > 0\n"
        "print(sorted(m for m in ('pooch', 'platformdirs', 'requests') if m in sys.modules))\n"
    )
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "nvmeter",
            "probe",
            "--simulate",
            "--quick",
            "--only",
            "idle",
            "--out",
            tmp_path / "p.json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr


def test_score_runs_from_a_named_cache_without_the_extra(no_extra, score_data, tmp_path):
    _, code, _, stderr = cli(
        "score", f"{METHODS}:tiny", "-n", "1", "--runs", "1", "--simulate", "--json", tmp_path / "r",
        *FAST_CLI, data_root=score_data,
    )  # fmt: skip
    assert code == 0, stderr
    assert (tmp_path / "r" / "run-001.json").is_file()


def test_the_default_cache_folder_without_platformdirs_is_the_xdg_one(monkeypatch, tmp_path):
    from nvmeter.boards import profile
    from nvmeter.workloads import cache

    monkeypatch.delenv(cache.ENV_VAR, raising=False)
    monkeypatch.delenv("NVMETER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setitem(sys.modules, "platformdirs", None)
    assert cache.root_dir() == tmp_path / "nvmeter" / "data"
    assert profile.cache_dir() == tmp_path / "nvmeter" / "profiles"  # the same root for both


def test_the_mirror_route_without_pooch_says_which_extra(monkeypatch, tmp_path):
    from nvmeter.workloads import fetch

    monkeypatch.setitem(sys.modules, "pooch", None)
    with pytest.raises(errors.MissingPackage) as caught:  # exit 5: the package is what is missing
        fetch.fetch("kmnist", root=tmp_path, mirrors=("http://127.0.0.1:9/",), registries=False)
    assert "mirror: the mirrors need pooch: pip install pooch platformdirs requests" in str(caught.value)
    assert "(in a checkout of nvmeter: pip install -e '.[workloads]')" in str(caught.value)


def test_data_path_needs_no_extra(no_extra, tmp_path):
    env_code = (
        "import os, sys; os.environ.pop('NVMETER_DATA_DIR', None); sys.argv = ['nvmeter', 'data', 'path']; "
        "import runpy; runpy.run_module('nvmeter', run_name='__main__')"
    )
    proc = _python(env_code, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert str(tmp_path / "nvmeter" / "data") in proc.stdout
