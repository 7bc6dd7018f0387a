"""Where a record came from: one collector for every record nvmeter and its bench scripts write.

A :class:`Provenance` says which machine, Python, nvmeter (version and git commit) and
packages made a record, and with what command line. It is informative only: no figure
is derived from it. Package versions come from the installed distributions' metadata,
so collecting them imports none of the packages (the scorer process never loads torch).
"""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

# The distributions whose versions a record keeps: the GPU stack and the numerics.
PACKAGES = ("torch", "nvidia-ml-py", "numpy", "triton")


@dataclass(frozen=True)
class Provenance:
    """Which machine and software made a record.

    A field a record's format version did not keep is None (see docs/formats.md).

    Attributes:
        host: The machine's host name.
        platform: ``platform.platform()``, e.g. ``Linux-6.8-x86_64-with-glibc2.39``.
        python: The Python version, e.g. ``3.12.3``.
        argv: The command line (``sys.argv``).
        nvmeter: nvmeter's version.
        nvmeter_commit: The git commit nvmeter ran from, ``-dirty`` after it when tracked files
            differed from it (None outside a checkout of nvmeter).
        packages: Distribution name -> version (None where it is not installed), for
            :data:`PACKAGES`.
        board: The board's identity (``BoardIdentity.to_dict()``), for records that do
            not hold one of their own; None otherwise.

    """

    host: str | None
    platform: str | None
    python: str | None
    argv: tuple[str, ...] | None
    nvmeter: str | None
    nvmeter_commit: str | None
    packages: dict[str, str | None] = field(default_factory=dict)
    board: dict | None = None

    def to_dict(self) -> dict:
        """Plain dict for JSON."""
        return {
            "host": self.host,
            "platform": self.platform,
            "python": self.python,
            "argv": None if self.argv is None else list(self.argv),
            "nvmeter": self.nvmeter,
            "nvmeter_commit": self.nvmeter_commit,
            "packages": dict(self.packages),
            "board": self.board,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Provenance:
        """Inverse of :meth:`to_dict` (every key is required: older shapes are upgraded first)."""
        return cls(
            host=d["host"],
            platform=d["platform"],
            python=d["python"],
            argv=None if d["argv"] is None else tuple(d["argv"]),
            nvmeter=d["nvmeter"],
            nvmeter_commit=d["nvmeter_commit"],
            packages=dict(d["packages"]),
            board=d["board"],
        )

    @property
    def short_commit(self) -> str | None:
        """The commit's first 10 digits, ``-dirty`` kept (None outside a checkout)."""
        if not self.nvmeter_commit:
            return None
        head, dirty, _ = self.nvmeter_commit.partition("-dirty")
        return head[:10] + dirty

    def __repr__(self) -> str:
        who = f"nvmeter {self.nvmeter}" + (f" ({self.short_commit})" if self.nvmeter_commit else "")
        return f"Provenance({who} on {self.host}, Python {self.python})"


def collect(board=None, argv: list[str] | None = None) -> Provenance:
    """This process's provenance.

    Args:
        board: A :class:`~nvmeter.boards.protocol.BoardIdentity` to keep, for records that
            hold no board of their own (e.g. bench scripts); None otherwise.
        argv: The command line to keep (default ``sys.argv``).

    """
    from nvmeter import __version__

    return Provenance(
        host=socket.gethostname(),
        platform=platform.platform(),
        python=platform.python_version(),
        argv=tuple(sys.argv if argv is None else argv),
        nvmeter=__version__,
        nvmeter_commit=commit(),
        packages={name: package_version(name) for name in PACKAGES},
        board=board.to_dict() if board is not None else None,
    )


def package_version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, or None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def commit(source: Path = Path(__file__)) -> str | None:
    """The git commit nvmeter runs from, if it runs from a checkout of it (None otherwise).

    ``-dirty`` follows it when tracked files differ from that commit (as ``git describe
    --dirty`` says it): a record made from a modified tree must not name a commit whose code
    it did not run (a device's copy of a working tree shows its base commit). Installed into
    a virtualenv inside another repository, nvmeter is no file of it: None, not that
    repository's commit.

    Args:
        source: A file of nvmeter's that the checkout must track (this module).
    """
    where = source.parent
    if _git(where, "ls-files", "--error-unmatch", source.name) is None:
        return None
    head = _git(where, "rev-parse", "HEAD")
    if not head:
        return None
    changed = _git(where, "status", "--porcelain", "--untracked-files=no")
    # a status that failed says nothing of the tree: not clean
    return head if changed == "" else f"{head}-dirty"


def _git(where: Path, *args: str) -> str | None:
    """``git ARGS`` in ``where``: its stripped output ("" if none), or None (git failed or is absent)."""
    try:
        out = subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None
