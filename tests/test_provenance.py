"""Which commit a record says nvmeter ran from (git in temporary repositories)."""

import shutil
import subprocess

import pytest

from nvmeter import provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(repo, *args) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    return subprocess.run(
        ["git", *env_args, *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("x = 1\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "one")
    return tmp_path


def test_a_clean_checkout_names_its_commit(repo):
    head = git(repo, "rev-parse", "HEAD").strip()
    assert provenance.commit(repo / "pkg" / "mod.py") == head


def test_a_changed_tracked_file_marks_the_commit_dirty(repo):
    head = git(repo, "rev-parse", "HEAD").strip()
    (repo / "pkg" / "mod.py").write_text("x = 2\n")
    assert provenance.commit(repo / "pkg" / "mod.py") == f"{head}-dirty"
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    (repo / "notes.txt").write_text("untracked files do not change the code that ran\n")
    assert provenance.commit(repo / "pkg" / "mod.py") == head


def test_an_install_inside_another_repository_names_no_commit(repo):
    venv_pkg = repo / ".venv" / "site-packages" / "nvmeter"
    venv_pkg.mkdir(parents=True)
    (venv_pkg / "provenance.py").write_text("")
    assert provenance.commit(venv_pkg / "provenance.py") is None  # the repository's commit is not nvmeter's


def test_outside_any_checkout_there_is_no_commit(tmp_path):
    (tmp_path / "mod.py").write_text("")
    assert provenance.commit(tmp_path / "mod.py") is None


def test_the_short_commit_keeps_dirty():
    p = provenance.collect(argv=["x"])
    for full, short in [("a" * 40, "a" * 10), ("b" * 40 + "-dirty", "b" * 10 + "-dirty"), (None, None)]:
        q = provenance.Provenance.from_dict({**p.to_dict(), "nvmeter_commit": full})
        assert q.short_commit == short
        assert (short or "") in repr(q)


def test_a_failed_status_is_not_taken_for_a_clean_tree(repo, monkeypatch):
    head = git(repo, "rev-parse", "HEAD").strip()
    real = provenance._git
    monkeypatch.setattr(provenance, "_git", lambda where, *a: None if a[0] == "status" else real(where, *a))
    assert provenance.commit(repo / "pkg" / "mod.py") == f"{head}-dirty"
