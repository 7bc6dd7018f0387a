"""docs/index.md lists every page under docs/, and every page it links exists."""

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_the_index_lists_every_page():
    linked = set(re.findall(r"\]\(([\w.-]+\.md)\)", (DOCS / "index.md").read_text()))
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert linked == pages
