"""A method's version (nvmeter.workloads.versions): the same code hashes alike on every Python.

Scheme 1 hashed tokenize's type numbers, which Python 3.12 renumbered (and split f-strings into
FSTRING_* tokens), so a score folder written on the H200's 3.12 refused CI's 3.11. The golden
hashes below were computed with scheme 2 on Python 3.11.7, 3.12.1 and 3.13.0, all three alike;
on any of them (CI 3.11, the H200's 3.12) this file must pass unchanged.
"""

from __future__ import annotations

import ast
import copy
import json
import platform
from pathlib import Path

import pytest

from nvmeter import errors, formats
from nvmeter.score.record import check_record
from nvmeter.score.target import Target
from nvmeter.workloads import methods, versions

SNIPPETS = {
    "plain": "def f(x):\n    return x + 1\n",
    "fstring": "def f(x, w):\n    return f\"{x:>{w}.3f} and {x!r} {{braces}}\" + F'{w}'\n",
    "nested": 'v = f"a{f\'b{1 + 2}c\'}d" + rf"\\d{3}"\n',
    "multiline": 'msg = (\n    f"first {1}"\n    f"""second\n{2}\nthird"""\n)\n',
    "docstring": '"""Doc."""\n\ndef g():\n    """Doc."""\n    return f"{g.__name__=}"\n',
}
GOLDEN = {
    "plain": "0f071ad5b3075183923fb6f92de82999374fa511f472433f7e819037d7806fa0",
    "fstring": "abe096955fb1507b44333e1cd0afe817ca9344a4bb0dc6cea2bcd958e5841271",
    "nested": "2b378109e574bda5c8eaa8dec82db90719eb864de65341e84a58dcd43c39944a",
    "multiline": "680540460c4da2a3354119808a5861bd59d059be69cccae3c6346f9e0253cb5b",
    "docstring": "4ddcd49d42b8236de39df755e2e95fa17a9abd54c72a9eab476bb24d65a23b58",
}


def _h(src: str, scheme: int = versions.SCHEME) -> str:
    return versions.code_sha256(src.encode(), ast.parse(src), scheme)


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_scheme_2_hashes_the_same_on_every_python(name):
    assert _h(SNIPPETS[name], 2) == GOLDEN[name], (
        f"Python {platform.python_version()} tokenizes {name} otherwise"
    )


def test_an_fstring_is_its_source_text_and_its_fields_count():
    assert _h('x = f"{a}"\n') != _h('x = f"{b}"\n')
    assert _h('x = f"{a}"\n') != _h('x = f"{a!r}"\n')
    assert _h('x = f"{a}"  # why\n') == _h('x = f"{a}"\n')


def test_scheme_1_is_kept_to_compare_old_records_and_an_unknown_scheme_is_refused():
    assert _h(SNIPPETS["plain"], 1) != _h(SNIPPETS["plain"], 2)
    with pytest.raises(ValueError, match="unknown version scheme"):
        _h(SNIPPETS["plain"], 3)


def test_a_target_compares_with_a_record_in_the_records_scheme():
    now = Target.parse("graph_mlp")
    assert now.sources_scheme == versions.SCHEME == 2
    old = now.hashed_as(1)
    assert old.sources_scheme == 1 and old.sources != now.sources
    assert dict(old.sources) == methods.METHODS["graph_mlp"].sources(1)
    assert now.same_method(old) and now.same_method(now)  # same code, either scheme
    assert not now.same_method(
        Target.from_dict({**old.to_dict(), "sources": {m: "0" * 64 for m, _ in old.sources}})
    )


def test_a_file_target_is_hashed_again_from_its_file(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text('def method(a, b, c):\n    return f"{a}"\n')
    t = Target.parse(f"{f}:method")
    assert dict(t.hashed_as(1).sources) == {"mine.py": _h(f.read_text(), 1)}


def _score_v4(v5: dict) -> dict:
    d = copy.deepcopy(v5)
    d["schema_version"] = 4
    del d["target"]["sources_scheme"]
    return d


def test_score_records_before_v5_read_as_scheme_1(scored_record):
    d = formats.upgrade(_score_v4(scored_record), "score", "r.json")
    assert d["target"]["sources_scheme"] == 1
    none = _score_v4(scored_record)
    none["target"]["sources"] = None
    assert formats.upgrade(none, "score", "r.json")["target"]["sources_scheme"] is None


@pytest.mark.parametrize("scheme", [3, "2", None, True])
def test_a_score_record_with_another_scheme_is_damaged(scored_record, scheme):
    d = copy.deepcopy(scored_record)
    d["target"]["sources_scheme"] = scheme
    with pytest.raises(ValueError, match="sources_scheme"):
        check_record(d)


def test_workloads_records_before_v5_read_as_scheme_1():
    v4 = {
        "kind": "workloads",
        "schema_version": 4,
        "methods": {"a": {"sources": {"m": "x"}}, "b": {"sources": None}},
    }
    d = formats.WORKLOADS.upgrade(copy.deepcopy(v4), "w.json")
    assert d["methods"]["a"]["sources_scheme"] == 1 and d["methods"]["b"]["sources_scheme"] is None


@pytest.fixture
def scored_record():
    """A committed H200 score record, upgraded to the current version (what the readers see)."""
    path = Path(__file__).resolve().parents[1] / "results/score-h200/graph_mlp_flat/run-001.json"
    d = formats.upgrade(json.loads(path.read_text()), "score", str(path))
    assert d["schema_version"] == formats.CURRENT["score"] and d["target"]["sources"]
    return d


def test_code_that_does_not_parse_is_a_usage_error():
    with pytest.raises(errors.UsageError, match="not valid Python"):
        versions.source_closure("bad.py", b"def (:\n")
