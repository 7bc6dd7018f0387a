"""JSON records: atomic writes, versioned reads.

Every record nvmeter writes carries a ``kind`` and its ``schema_version``
(:func:`header`); :func:`read_json` reads any version of a kind this nvmeter knows and
hands back the current shape. The kinds, their versions and the upgrades from each
earlier one live in :mod:`nvmeter.formats`; their history in words in docs/formats.md.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from nvmeter import errors, formats

# kind -> the schema_version this nvmeter writes
CURRENT = formats.CURRENT


def header(kind: str) -> dict:
    """``{"kind": kind, "schema_version": …}`` of a record of ``kind`` written now."""
    return formats.header(kind)


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
    """Read a record of ``kind``, of any version this nvmeter knows, in the current version.

    Older versions are upgraded step by step (:mod:`nvmeter.formats`); the file is not changed.

    Raises:
        RecordError: missing, unreadable, not JSON, another kind, an unknown version, or
            a record that lacks a field of its version.

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
    return formats.upgrade(data, kind, str(path))


def read_any(path: Path, kinds: tuple[str, ...]) -> dict:
    """Read a record of any of ``kinds`` (the first that matches), in its kind's current shape.

    Raises:
        RecordError: as :func:`read_json`, for the last kind tried.
    """
    for kind in kinds[:-1]:
        try:
            return read_json(path, kind)
        except errors.RecordError as exc:
            if "not an nvmeter" not in str(exc):
                raise
    return read_json(path, kinds[-1])
