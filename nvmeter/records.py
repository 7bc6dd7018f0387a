"""JSON records: atomic writes, versioned reads.

Every record nvmeter writes carries ``schema_version`` and a ``kind``. Loaders accept
only the versions listed here.

Schema history:
    probe 1: first version (probe report: board identity, every probe's raw series
        and derived figures).
    workloads 1: first version (nvmeter.workloads.evaluate: timed calls per method).
    score 1: first version (one run of ``nvmeter score``: target, board, config, draw
        plan, timed calls, the energy readings (reference trial, three frozen idle spans
        with utilisation and pids, control and method windows as Measurement dicts with
        the worker's call blocks), error, and the derived figures; nvmeter.score.record).
    run 1: first version (``nvmeter run``: command, exit, signals, a window per board; nvmeter.command).
    pytest-energy 1: first version (``--energy-json``: each test's windows; nvmeter.pytest_plugin).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from nvmeter import errors

SCHEMA_VERSIONS = {"probe": (1,), "workloads": (1,), "score": (1,), "run": (1,), "pytest-energy": (1,)}
CURRENT = {kind: versions[-1] for kind, versions in SCHEMA_VERSIONS.items()}


def _clean(obj):
    """JSON has no NaN/inf: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _clean(obj.item())
    return obj


def check_writable(path: Path) -> None:
    """Fail early, before any measurement, if ``path`` cannot be written.

    Raises:
        UsageError: the folder is missing or not writable, or the path is a folder.

    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise errors.UsageError(f"{path} is a folder; give a file name such as {path / 'probe.json'}")
    if not folder.is_dir():
        raise errors.UsageError(f"cannot write {path}: folder {folder} does not exist")
    if path.exists() and not path.is_file():
        raise errors.UsageError(f"{path} exists and is not a regular file; give a file name")
    if not os.access(folder, os.W_OK):
        raise errors.UsageError(f"cannot write {path}: folder {folder} is not writable")
    try:  # root passes os.access on read-only mounts: really try
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".check", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise errors.UsageError(f"cannot write {path}: {exc.strerror}") from exc


def write_json(path: Path, record: dict) -> None:
    """Write ``record`` to ``path`` atomically (temp file in the same folder + rename).

    Raises:
        UsageError: the path is not writable; nothing is left behind.

    """
    path = Path(path)
    check_writable(path)
    text = json.dumps(_clean(record), indent=1, allow_nan=False)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        # mkstemp makes the file 0600; give it the mode a plain open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise errors.UsageError(f"cannot write {path}: {exc.strerror}") from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path, kind: str) -> dict:
    """Read a record of ``kind``, checking its schema version.

    Raises:
        RecordError: missing, unreadable, not JSON, another kind, or an unknown version.

    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise errors.RecordError(f"{path}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.RecordError(f"{path}: cannot read it ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise errors.RecordError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from exc
    if not isinstance(data, dict) or data.get("kind") != kind:
        found = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise errors.RecordError(f"{path}: not an nvmeter {kind} record (kind {found!r})")
    version = data.get("schema_version")
    if version not in SCHEMA_VERSIONS[kind]:
        raise errors.RecordError(
            f"{path}: {kind} schema_version {version!r} is not one this nvmeter reads "
            f"({', '.join(map(str, SCHEMA_VERSIONS[kind]))})"
        )
    return data
