"""The README's examples import from the public API only, and its layout names paths that exist."""

import os
import re
import subprocess
import sys
from pathlib import Path

import nvmeter

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()


def test_python_examples_import_only_public_names_from_nvmeter():
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    imports = [m for block in blocks for m in re.findall(r"^from (\S+) import (.+)$", block, re.M)]
    assert imports, "no Python example found"
    for module, names in imports:
        assert module == "nvmeter", f"an example imports from {module}"
        for name in (n.strip() for n in names.split(",")):
            assert name in nvmeter.__all__ and getattr(nvmeter, name), name


def test_layout_table_paths_exist():
    section = README.split("## Layout", 1)[1].split("\n## ", 1)[0]
    cells = re.findall(r"^\| (.+?) \|", section, re.M)[2:]  # past the header and its rule
    paths = [p for cell in cells for p in re.findall(r"`([^`]+)`", cell) if "/" in p or p.endswith(".py")]
    assert len(paths) >= 10
    for path in paths:
        where = (
            REPO / path if "/" in path else REPO / "nvmeter" / path
        )  # `formats.py` beside nvmeter/records.py
        assert where.exists(), path


def test_the_simulated_board_example_runs_as_written_and_reads_its_40_ms_at_550_w():
    block = next(b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "SimulatedBoard()" in b)
    printed = []
    exec(block, {"print": lambda *args: printed.append(args)})  # the README's own example
    window, (line,) = printed[0][0], printed[1]
    figure, err = line.removesuffix(" mJ/call above idle").split(" ± ")  # the line the README prints
    per_call_mj, err_mj = float(figure.replace(",", "")), float(err.replace(",", ""))
    truth_mj = 550.0 * 0.04 * 1e3
    assert abs(window.per_call_mj - truth_mj) <= window.per_call_mj_err
    assert abs(per_call_mj - truth_mj) <= err_mj and err_mj / per_call_mj < 0.05  # measure()'s default target


def test_the_sample_output_is_what_show_prints_of_its_probe_file():
    block = README.split("## Sample output", 1)[1].split("```\n", 2)[1]  # the fenced table, as printed
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # rich's width for a pipe: 80
    shown = subprocess.run(
        [sys.executable, "-m", "nvmeter.cli", "show", "results/probe-h200.json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
        check=True,
    )
    assert block == shown.stdout
