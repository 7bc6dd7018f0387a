"""CI runs exactly the README's test command, and that command runs the pinned linters."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_test_command() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("Set up and run the tests", 1)[1]
    return re.search(r"```bash\n(.+?)\n```", section, re.S).group(1).strip()


def test_ci_runs_the_readme_test_command():
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    assert [line for line in script if line.startswith("python3 -m")] == [readme_test_command()]


def test_the_test_command_lints_before_it_tests():
    steps = readme_test_command().split(" && ")
    assert steps[-3:] == [
        ".venv-test/bin/ruff check .",
        ".venv-test/bin/ruff format --check .",
        ".venv-test/bin/python -m pytest",
    ]


def test_ruff_is_pinned_in_the_test_extra():
    import tomllib

    test_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][
        "test"
    ]
    ruff = [r for r in test_extra if r.startswith("ruff")]
    assert len(ruff) == 1 and re.fullmatch(r"ruff==[\d.]+", ruff[0])
