"""The dataset cache: one private folder per dataset, gzipped IDX files written atomically.

Layout: ``<root>/<dataset>/train-images-idx3-ubyte.gz`` and ``…labels-idx1-ubyte.gz``;
folders 0700, files 0600. The root is ``$NVMETER_DATA_DIR`` when set, else the user
cache folder (:func:`nvmeter.files.user_cache_dir`: ``~/.cache/nvmeter/data`` on Linux). MNIST and
Fashion-MNIST together take ~36 MB, small enough to carry to an offline GPU machine.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import tempfile
from pathlib import Path

from nvmeter import errors, files

ENV_VAR = "NVMETER_DATA_DIR"
# the download routes need this extra (pooch, requests; pyproject.toml); nothing else needs it
INSTALL_EXTRA = (
    "pip install pooch platformdirs requests (in a checkout of nvmeter: pip install -e '.[workloads]')"
)
_DIR_MODE = 0o700
_FILE_MODE = 0o600
# gzip level 6: within 1% of level 9 on these files at a tenth of the time (1.4 s vs 14 s
# for Fashion-MNIST's 47 MB of images, measured on the dev machine).
_GZIP_LEVEL = 6


def root_dir() -> Path:
    """The cache root: ``$NVMETER_DATA_DIR`` or the platform's user cache folder + ``data``.

    Raises:
        UsageError: ``$NVMETER_DATA_DIR`` names something that is not a folder (a file, say).

    """
    env = os.environ.get(ENV_VAR)
    if env:
        root = Path(env).expanduser()
        # one not made yet is fine (fetch makes it); a file would fail only later, once printed as the cache
        if root.exists() and not root.is_dir():
            what = "a file" if root.is_file() else "not a folder"
            raise errors.UsageError(
                f"the data cache {root} is not a folder ({ENV_VAR}={env} is {what}); "
                f"set {ENV_VAR} to a folder"
            )
        return root
    return files.user_cache_dir("data")


def dataset_dir(name: str, root: Path | None = None) -> Path:
    """The folder holding dataset ``name`` under ``root`` (default :func:`root_dir`)."""
    return (Path(root) if root is not None else root_dir()) / name


def check_writable(folder: Path) -> None:
    """Fail at once, before any download, if ``folder`` cannot be made or written.

    Raises:
        UsageError: the nearest existing folder on the way is a file (``$NVMETER_DATA_DIR``
            naming a file, say) or is not writable.

    """
    folder = Path(folder)
    hint = f"; set {ENV_VAR} to a writable folder"
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    if existing is None:
        return
    if not existing.is_dir():
        where = f" ({ENV_VAR}={os.environ[ENV_VAR]})" if os.environ.get(ENV_VAR) else ""
        raise errors.UsageError(
            f"the data cache {folder} cannot be made: {existing} is not a folder{where}{hint}"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise errors.UsageError(
            f"the data cache {folder} cannot be written: {existing} is not writable{hint}"
        )


def _private_dir(path: Path) -> None:
    """Create ``path`` and any missing parents 0700; make ``path`` itself 0700 if it existed."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
        # mkdir's mode is masked by the umask, applies to the leaf only, and is ignored if it existed
        for p in {path, *missing}:
            os.chmod(p, _DIR_MODE)
    except OSError as exc:
        raise errors.UsageError(
            f"cannot create the data cache {path}: {exc.strerror}; set {ENV_VAR} to a writable folder"
        ) from exc


def compress(raw: bytes) -> bytes:
    """Gzip ``raw`` reproducibly (no timestamp in the header)."""
    return gzip.compress(raw, compresslevel=_GZIP_LEVEL, mtime=0)


def write_files(folder: Path, files: dict[str, bytes]) -> None:
    """Write ``{file name: bytes}`` into ``folder``, each file atomically and 0600.

    Every file goes to a temporary name first; renames happen only once all are written,
    so a failure leaves no partial file under a real name.

    Raises:
        UsageError: the folder cannot be created or written; temporary files are removed.

    """
    folder = Path(folder)
    _private_dir(folder)
    temps: list[tuple[str, Path]] = []
    try:
        for name, data in files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
            temps.append((name, Path(tmp)))
            os.fchmod(fd, _FILE_MODE)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        for name, tmp in temps:
            os.replace(tmp, folder / name)
    except OSError as exc:
        raise errors.UsageError(f"cannot write the data cache {folder}: {exc.strerror}") from exc
    finally:
        for _, tmp in temps:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
