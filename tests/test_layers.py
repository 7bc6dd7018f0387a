"""The wings import each other only along docs/design.md's arrows (import-linter contracts, pyproject.toml).

import-linter reads a package's modules from its folder, and probes/ and workloads/ live
beside nvmeter/ (they ship as nvmeter.probes and nvmeter.workloads): the test lays the
sources out as they install, from pyproject.toml's package-dir, and lints that copy.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONTRACTS = ("boards", "meter", "worker", "workloads", "workloads-boards", "probes", "score", "base")
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def _installed_layout(root: Path) -> Path:
    tomllib = pytest.importorskip("tomllib")
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    # parents first, so nvmeter/ is laid before nvmeter/probes goes into it
    for package, folder in sorted(package_dir.items(), key=lambda pf: pf[0].count(".")):
        shutil.copytree(
            REPO / folder,
            root.joinpath(*package.split(".")),
            ignore=shutil.ignore_patterns("__pycache__"),
            dirs_exist_ok=True,
        )
    return root


def _lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache", str(REPO / "pyproject.toml")],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def layout(tmp_path):
    return _installed_layout(tmp_path / "site")


def test_the_layers_keep_their_contracts(layout):
    assert (layout / "nvmeter" / "probes" / "report.py").is_file()
    assert (layout / "nvmeter" / "workloads" / "evaluate.py").is_file()
    proc = _lint(layout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [line for line in proc.stdout.splitlines() if " KEPT" in line]  # "KEPT (1 ignored import)" too
    assert len(names) == len(CONTRACTS), proc.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("boards/protocol.py", "import nvmeter.meter.series", "boards import no other wing"),
        ("worker/rig.py", "from nvmeter.score import config", "the worker imports boards only"),
        ("workloads/evaluate.py", "from nvmeter.boards import simulated", "workloads make boards through"),
        # a record's board limit once came from the boards wing (a review)
        ("records.py", "from nvmeter.boards.protocol import Board", "the base imports no wing"),
    ],
)
def test_a_wrong_way_import_breaks_its_contract(layout, module, line, contract):
    path = layout / "nvmeter" / module
    path.write_text(path.read_text() + f"\n{line}\n")
    proc = _lint(layout)
    assert proc.returncode == 1
    assert f"{contract}" in proc.stdout and "BROKEN" in proc.stdout
