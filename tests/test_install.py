"""probes/ and workloads/ ship as nvmeter.probes and nvmeter.workloads, not as top-level names."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMPORTS = (
    "import nvmeter.probes, nvmeter.workloads, importlib.util as u; "
    "print(nvmeter.probes.__file__); print(u.find_spec('probes'), u.find_spec('workloads'))"
)


def test_this_environment_imports_them_from_the_checkout():
    import nvmeter.probes

    assert Path(nvmeter.probes.__file__).resolve().parent == REPO / "probes"


def test_plain_install_ships_them(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(
        REPO, src, ignore=shutil.ignore_patterns(".git", "*.egg-info", "build", "__pycache__", ".*")
    )
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    assert (target / "nvmeter" / "probes" / "cadence.py").is_file()
    assert not (target / "probes").exists()
    out = subprocess.run(
        [sys.executable, "-c", IMPORTS],
        cwd=tmp_path,
        env={"PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0].startswith(str(target))
    assert out[1] == "None None"  # no generic top-level names
