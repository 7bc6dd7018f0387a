"""docs/index.md lists every page under docs/, each page it links exists, bench/README.md every script."""

import ast
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_the_index_lists_every_page():
    linked = set(re.findall(r"\]\(([\w.-]+\.md)\)", (DOCS / "index.md").read_text()))
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert linked == pages


def test_the_docs_name_no_release_after_the_packages_own():
    import tomllib

    import nvmeter

    root = DOCS.parent
    version = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    assert nvmeter.__version__ == version
    ours = tuple(int(x) for x in version.split(".")[:2])
    for page in [*DOCS.glob("*.md"), root / "README.md"]:
        for minor in re.findall(r"nvmeter (\d+\.\d+)\b", page.read_text()):
            assert tuple(map(int, minor.split("."))) <= ours, f"{page.name} names nvmeter {minor}"


def test_every_results_path_the_docs_cite_exists():
    root = DOCS.parent
    cited, missing = 0, []
    for page in [*DOCS.glob("*.md"), root / "README.md"]:
        text = page.read_text().replace("\\*", "*")
        for path in re.findall(r"results/[\w.*?\[\]/-]*[\w*\]/]", text):  # glob patterns too: call2[89]-*
            cited += 1
            if not list(root.glob(path.rstrip("/"))):
                missing.append(f"{page.name}: {path}")
    assert cited > 50 and not missing


def test_the_bench_readme_lists_every_script_with_its_question():
    """bench/README.md: one row per bench/*.py, the first line of its docstring, so a question asked
    before is found before a script is written again."""
    bench = DOCS.parent / "bench"
    rows = dict(re.findall(r"^\| `([\w.]+\.py)` \| (.+) \|$", (bench / "README.md").read_text(), re.M))
    scripts = {p.name: ast.get_docstring(ast.parse(p.read_text())) for p in bench.glob("*.py")}
    assert set(rows) == set(scripts)
    for name, doc in scripts.items():
        assert doc and rows[name] == doc.splitlines()[0], name
