"""The README's examples import from the public API only, and its layout names paths that exist."""

import re
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
