"""JSON records: atomic writes, versioned reads.

Every record nvmeter writes carries a ``kind`` and its ``schema_version``
(:func:`header`); :func:`read_json` reads any version of a kind this nvmeter knows and
hands back the current shape. The kinds, their versions and the upgrades from each
earlier one live in :mod:`nvmeter.formats`; their history in words in docs/formats.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import gzip
import importlib
import itertools
import json
import math
import os
import re
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from nvmeter import errors, files, formats

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


def _output_path(path: Path) -> Path:
    """Where a record given as ``path`` is written: the file a link names, so the link stays.

    An atomic write renames a new file onto its path, which would replace a symbolic link
    with a file (as root, ``--json /dev/stdout`` replaced the machine's /dev/stdout).

    Raises:
        UsageError: a link to something that is not a regular file or a free name in a
            folder (a terminal, a pipe, /proc or /dev), or a loop of links.

    """
    path = Path(path)
    if not path.is_symlink():
        return path
    try:
        real = Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:  # a link to a free name: the record is written there
        real = Path(os.path.realpath(path))
    except OSError as exc:  # a loop: not strict, realpath stops inside it and the write replaced the link
        why = f"{path} is a link that leads to no file ({exc.strerror}); give a file path"
        raise errors.UsageError(why) from None
    special = not real.is_absolute() or real.parts[1:2] in (("proc",), ("dev",))
    if special or (real.exists() and not real.is_file()) or not real.parent.is_dir():
        raise errors.UsageError(f"{path} is a link to {real}, not to a file; give a file path")
    return real


def check_writable(path: Path, inputs: tuple = (), record: bool = True, kind: str | None = None) -> Path:
    """Fail early, before any measurement, if ``path`` cannot be written; the path written to.

    That is ``path``, or the file it links to (:func:`_output_path`).

    Args:
        path: Where a record will be written.
        inputs: Files the same command reads (``--option``, path) pairs: writing one would
            destroy it.
        record: ``path`` takes a JSON record, so a file already there must be empty or a record of
            ``kind`` (:func:`_check_replaceable`); False for a plot or a table.
        kind: The record's kind: only a record of this kind there is replaced (None: no file but
            an empty one).

    Raises:
        UsageError: the folder is missing or not writable, the path is a folder, an input, or
            (``record``) an existing file that is not an nvmeter record of ``kind``.

    """
    if isinstance(path, str) and path == "":  # Path("") would be the current folder: a name was meant
        raise errors.UsageError("the output path is empty; give a file name")
    if isinstance(path, str) and (why := folder_name(path)):  # Path() drops the slash: a file's name then
        raise errors.UsageError(why)
    try:
        return _checked_writable(_output_path(path), inputs, record, kind)
    except OSError as exc:  # Python 3.11's Path.is_symlink() and is_dir() raise for a name over 255 bytes
        if exc.errno == errno.ENAMETOOLONG:
            raise errors.UsageError(name_too_long(path)) from None
        raise errors.UsageError(f"cannot write {path}: {exc.strerror}; give another path") from None


def folder_name(text: str) -> str | None:
    """Why ``text``, given as a file to write, names a folder (it ends in a slash), or None."""
    if text.endswith(os.sep):
        return f"{text!r} ends in {os.sep}, as a folder's name does; give a file name"
    return None


def name_too_long(path) -> str:
    """The one line for a path whose name the file system refuses as too long (the path cut short)."""
    said = "a file name too long for the file system; give a shorter path"
    return f"{shown(str(path))}: {said}" if path else said


def _checked_writable(path: Path, inputs: tuple, record: bool, kind: str | None) -> Path:
    for option, given in inputs:
        if given is not None and Path(given).exists() and Path(given).resolve() == path.resolve():
            raise errors.UsageError(f"{path} is the {option} file this command reads; write to another path")
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise errors.UsageError(f"{path} is a folder; give a file name inside it")
    if folder.exists() and not folder.is_dir():
        raise errors.UsageError(f"cannot write {path}: {folder} is a file, not a folder")
    if not folder.is_dir():
        raise errors.UsageError(f"cannot write {path}: folder {folder} does not exist")
    if path.exists() and not path.is_file():
        raise errors.UsageError(f"{path} exists and is not a regular file; give a file name")
    if record and path.is_file():
        _check_replaceable(path, kind)
    if not os.access(folder, os.W_OK):
        raise errors.UsageError(f"cannot write {path}: folder {folder} is not writable")
    try:  # root passes os.access on read-only mounts: really try
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".check", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:  # /proc, /sys: the folder is there, but takes no new files
        why = f"cannot write {path}: folder {folder} takes no new files ({exc.strerror}); give another path"
        raise errors.UsageError(why) from exc
    return path


@dataclasses.dataclass(frozen=True)
class Claim:
    """An output path checked before a measurement, and what lay there then.

    :func:`write_claimed` replaces only the file that was there at the check: whatever another
    process put at the path meanwhile is kept, and the record goes beside it.

    Attributes:
        given: The path as the caller named it (for messages).
        path: The file written: ``given``, or the file a link there names.
        before: (inode, size, mtime_ns) of the file at ``path`` at the check; None where the name was free.
    """

    given: Path
    path: Path
    before: tuple[int, int, int] | None


def claim(path: Path, inputs: tuple = (), record: bool = True, kind: str | None = None) -> Claim:
    """Check ``path`` as :func:`check_writable` does and remember what lies there (:class:`Claim`).

    Raises:
        UsageError: as :func:`check_writable`.
    """
    real = check_writable(path, inputs, record, kind)
    return Claim(Path(path), real, _stamp(real))


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What identifies the file at ``path`` (inode, size, mtime_ns), itself if a link; None: no file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _check_replaceable(path: Path, kind: str | None) -> None:
    """Refuse to replace the file at ``path`` unless it is empty or a record of ``kind``, read once.

    A record of ``kind`` names it, or is of a format first written without one that nvmeter still
    recognises (:attr:`nvmeter.formats.Format.unlabelled`). Any other JSON object was once
    replaced as "a bench's record": a package.json given to --json was overwritten without a word
    (a breaker); the bench records that had no kind now name one.

    Raises:
        UsageError: anything else lies there, in one line that says what.
    """
    if path.stat().st_size == 0:
        return
    try:  # the records' own reader: size-limited, and through gzip where the name says so
        found = parse_json(path, "a record")
    except errors.RecordError:
        found = None
    again = "give a new path (or remove the file first)"
    if not isinstance(found, dict):
        # `pytest --energy-json test_model.py` (the FILE forgotten) replaced the test file, and
        # `nvmeter run --json train.py -- python3 train.py` the command's script (an adversarial review)
        raise errors.UsageError(f"{path} exists and is not a JSON record: {again}")
    theirs = _kind_of(found)
    if theirs is not None and theirs == kind:
        return
    if theirs in CURRENT:
        # `nvmeter run --json probe.json` replaced the probe record, without a word (an adversarial review)
        raise errors.UsageError(
            f"{path} holds an nvmeter {theirs} record, and this would replace it with "
            f"{f'a {kind} record' if kind else 'another file'}: {again}"
        )
    wanted = f"nvmeter {kind} record" if kind else "nvmeter record"
    said = formats.found_kind(found)  # "it has no `kind` field", "kind 'Deployment'"
    raise errors.UsageError(f"{path} holds a JSON object that is no {wanted} ({said}): {again}")


def _kind_of(data: dict) -> str | None:
    """The kind a record names, or the kind of an unlabelled old format it is; None: neither."""
    if "kind" in data:
        return data["kind"] if isinstance(data["kind"], str) else None
    return next((k for k, f in formats.FORMATS.items() if f.unlabelled and f.unlabelled(data)), None)


# Records this process has written, so that a command ended by a signal after writing says so.
_WRITTEN: list[Path] = []


def written() -> tuple[Path, ...]:
    """The records this process has written with :func:`write_json`, in order."""
    return tuple(_WRITTEN)


# why a record that took a name only if free is kept beside it (``write_json(replace=False)``)
_APPEARED = "appeared while this record was written (another writer in the folder)"


def write_json(path: Path, record: dict, *, replace: bool = True, own: bool = False) -> None:
    """Write ``record`` to ``path`` atomically (temp file in the same folder + rename).

    The file gets the mode a plain ``open()`` would give it (:func:`nvmeter.files.output_mode`).
    A path checked before a measurement is written with :func:`write_claimed` instead.

    Args:
        path: Where to write.
        record: The JSON-able record (nan and inf become null).
        replace: Whether an existing file at ``path`` may be replaced. With False the
            record takes the name only if it is free (a hard link, atomic), so a record
            is never overwritten (``nvmeter score``'s runs).
        own: ``path`` is nvmeter's own file (the user cache): whatever is there is replaced.

    Raises:
        UsageError: the path is not writable (nothing is left behind), an existing file
            there is not a JSON record (unless ``own``), or, with ``replace=False``, it
            exists (the record is then kept under a name beside it, which the message gives).

    """
    path = check_writable(path, record=not own, kind=record.get("kind"))
    if replace:
        _write(path, record, lambda tmp: os.replace(tmp, path))
    else:
        _write(path, record, lambda tmp: _link_if_free(tmp, path, _APPEARED))


def write_claimed(claimed: Claim, record: dict) -> None:
    """Write ``record`` atomically to a path claimed before the measurement (:func:`claim`).

    Only the file found at the claim is replaced. Whatever another process put at the path since
    (a record, any file, a link, a folder: two ``nvmeter run --json`` to one path) stays, and this
    record is kept beside it. Not checked again as :func:`write_json` checks a path: a refusal
    after the measurement would lose the record.

    Raises:
        UsageError: the folder takes no file now (nothing is left behind).
        RecordKept: another process wrote at the path since; this record is kept beside it, under
            a name the message and ``kept`` give.
    """
    folder = claimed.path.parent
    if not folder.is_dir():
        # the command removed the folder (or put a file there): `nvmeter run --json d/o.json --
        # sh -c 'rm -rf d'` lost its record in a traceback (a breaker's trial, 2026-12-07)
        stand_in = Path(tempfile.gettempdir()) / claimed.path.name
        why = f"could not be written: its folder {folder} is gone (removed while the command ran?)"
        _write(stand_in, record, lambda tmp: _keep_beside(tmp, stand_in, why, named=claimed.path))  # raises
    _write(claimed.path, record, lambda tmp: _replace_claimed(tmp, claimed))


def _write(path: Path, record: dict, place) -> None:
    """The record in a temp file beside ``path``, given its name by ``place(tmp)``; no temp file left."""
    text = json.dumps(_clean(record), indent=1, allow_nan=False) + "\n"
    data = text.encode()
    if path.name.endswith(".gz"):  # read back through gzip (parse_json): written so, one stream
        data = gzip.compress(data, mtime=0)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    except OSError as exc:  # the folder went since the path was checked
        raise errors.UsageError(f"cannot write {path}: {exc.strerror}") from exc
    try:
        os.chmod(tmp, files.output_mode())  # mkstemp makes it 0600; a plain open() would not
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        place(Path(tmp))
        _WRITTEN.append(path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise errors.UsageError(f"cannot write {path}: {exc.strerror}") from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _replace_claimed(tmp: Path, claimed: Claim) -> None:
    """Give ``tmp`` the claimed name if the file there is still the one claimed; else keep it beside."""
    why = "was written by another process while this command ran"
    now = _stamp(claimed.path)
    if claimed.before is None or now is None:  # free then, or since: taken only if still free
        _link_if_free(tmp, claimed.path, why)
    elif now == claimed.before:
        # the window to a writer between the look and the rename is microseconds
        os.replace(tmp, claimed.path)
    else:
        _keep_beside(tmp, claimed.path, why)


def _link_if_free(tmp: Path, path: Path, why: str) -> None:
    """Give ``tmp`` the name ``path`` only if no file has it; else keep it beside and raise (``why``)."""
    if not _took(tmp, path):
        _keep_beside(tmp, path, why)


def _took(tmp: Path, path: Path) -> bool:
    """True once ``tmp`` has the name ``path``, which it takes only if free; False if taken."""
    try:
        os.link(tmp, path)  # atomic, and fails if the name is taken: never replaces a record
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        # a file system without hard links: the folder's lock (nvmeter score) keeps other nvmeters out
        if path.exists() or path.is_symlink():
            return False
        os.replace(tmp, path)
        return True
    tmp.unlink()
    return True


def _keep_beside(tmp: Path, path: Path, why: str, named: Path | None = None) -> None:
    """Keep ``tmp`` as ``PATH.PID.conflict`` (or ``PATH.PID-N.conflict``: never over another) and raise.

    ``named``: the path the message names, where it is not ``path`` (a record kept elsewhere).

    Raises:
        RecordKept: always, naming the kept file and ``why`` (another process wrote at ``path``).
    """
    for n in itertools.count():  # a second conflict of one pid had replaced the first (a code review)
        kept = path.with_name(f"{path.name}.{os.getpid()}{f'-{n}' if n else ''}.conflict")
        if _took(tmp, kept):
            raise errors.RecordKept(f"{named or path} {why}; this record is kept as {kept}", kept)


def _not_json(constant: str):
    # Python's json reads NaN and Infinity, which are not JSON; nvmeter writes them as null
    raise json.JSONDecodeError(f"{constant} is not a JSON value", constant, 0)


def read_json(path: Path, kind: str, parsed=None) -> dict:
    """Read a record of ``kind``, of any version this nvmeter knows, in the current version.

    Older versions are upgraded step by step (:mod:`nvmeter.formats`); the file is not changed.

    Args:
        path: The file.
        kind: The kind it must be.
        parsed: The file's JSON value where the caller has parsed it already (:func:`parse_json`,
            to learn its kind): the file is not read again. None: it is read here.

    Raises:
        RecordError: missing, not a regular file, over its kind's limit
            (:func:`nvmeter.files.record_limit`), unreadable, not JSON, another kind, an unknown
            version, or a record that lacks a field of its version.

    """
    path = Path(path)
    data = parse_json(path, f"an nvmeter {kind} record", kind) if parsed is None else parsed
    if _deeper_than(data, MAX_DEPTH):  # the upgrade's deepcopy recurses further than the parser
        raise errors.RecordError(f"{path}: not an nvmeter {kind} record (nested too deeply)")
    return formats.upgrade(data, kind, str(path))


def parse_json(path: Path, what: str, kind: str | None = None):
    """The JSON value a record file holds, before its kind or version is known.

    Args:
        path: The file.
        what: What it should be, for the messages (``"an nvmeter probe record"``).
        kind: The kind expected, which sets the size limit (:func:`nvmeter.files.record_limit`;
            None: any kind's).

    A file whose name ends in ``.gz``, or that starts as gzip does (a record kept beside a packed
    one as ``.conflict``), is read through gzip (the committed records under results/ are kept so,
    to keep the repository small), its unpacked size held to the same limit.

    Raises:
        RecordError: missing, not a regular file, over its kind's limit (packed or unpacked),
            unreadable, not gzip where named so, not UTF-8, not JSON (NaN and Infinity are not),
            nested past the parser.
    """
    limit = files.record_limit(kind)
    raw = files.read_bytes(path, limit, what, errors.RecordError)
    if str(path).endswith(".gz") or raw[:2] == GZIP_MAGIC:  # by content too: a kept .conflict
        raw = _gunzip(Path(path), raw, limit)
    try:
        return json.loads(raw.decode("utf-8"), parse_constant=_not_json)
    except UnicodeDecodeError as exc:
        raise errors.RecordError(f"{path}: not JSON (not UTF-8 text: {exc.reason})") from exc
    except RecursionError as exc:
        raise errors.RecordError(f"{path}: not {what} (nested too deeply)") from exc
    except json.JSONDecodeError as exc:
        raise errors.RecordError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from exc
    except ValueError as exc:  # an integer of thousands of digits (Python's int limit), ...
        raise errors.RecordError(f"{path}: not {what} ({exc})") from exc


# gzip's first two bytes (RFC 1952); no JSON text starts so (0x1f is a control character).
GZIP_MAGIC = b"\x1f\x8b"


def _gunzip(path: Path, packed: bytes, limit: int) -> bytes:
    """``packed`` unpacked, at most ``limit`` bytes of it (no gzip bomb)."""
    unpacker = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip's header and trailer
    try:
        raw = unpacker.decompress(packed, limit + 1)
    except zlib.error as exc:
        raise errors.RecordError(f"{path}: not gzip ({exc})") from exc
    if len(raw) > limit or unpacker.unconsumed_tail:
        raise errors.RecordError(f"{path}: unpacks to over {limit // files.MIB} MiB; not an nvmeter record")
    if not unpacker.eof:
        raise errors.RecordError(f"{path}: not gzip (cut short)")
    if unpacker.unused_data:  # a second member or trailing bytes: nvmeter writes one stream
        extra = len(unpacker.unused_data)
        raise errors.RecordError(f"{path}: not one gzip stream ({extra} bytes after its end)")
    return raw


# The deepest committed record nests 10 levels (results/enclose/call26-7c23ffb-isoidle-enclose.json.gz);
# 100 leaves room, and is far under what copying or comparing one needs of Python's stack.
MAX_DEPTH = 100


def _deeper_than(data, limit: int) -> bool:
    """True when lists and objects nest more than ``limit`` deep (iterative: no stack of its own)."""
    level, depth = [data], 0
    while level:
        depth += 1
        if depth > limit:
            return True
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node if isinstance(node, list) else ())
            if isinstance(child, (dict, list))
        ]
    return False


def verify(path: Path, kind: str) -> None:
    """Have the owner of ``kind`` refuse the record at ``path`` if its figures are not its raw readings'.

    The owner's check is named in :mod:`nvmeter.formats` (``Format.verifier``) and imported
    by that name, so the meter can have a probe file checked as ``nvmeter show`` checks it
    without importing the probes wing. Each file (by path, size and modification time) is
    checked once a process. A kind with no verifier is not checked.

    Raises:
        RecordError: the owner refused the record.
    """
    if formats.FORMATS[kind].verifier is None:
        return
    stat = Path(path).stat()
    _verify_once(kind, str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


def load_verified(kind: str, path: Path, parsed: dict, **kwargs):
    """The owner of ``kind`` rebuilds ``parsed`` (the JSON of ``path``), refusing it as :func:`verify` does.

    For the meter, which may not import the owner (a probe record's :class:`ProbeReport`).

    Raises:
        RecordError: the owner refused the record.
    """
    module, function = formats.FORMATS[kind].verifier.split(":")
    return getattr(importlib.import_module(module), function)(Path(path), parsed=parsed, **kwargs)


@functools.lru_cache(maxsize=64)
def _verify_once(kind: str, path: str, size: int, mtime_ns: int) -> None:
    del size, mtime_ns  # the cache's key: a file changed since is checked again
    module, function = formats.FORMATS[kind].verifier.split(":")
    getattr(importlib.import_module(module), function)(Path(path))


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


# -- the read boundary: a record's dict becoming objects -------------------------------------------
class BadField(ValueError):
    """A field of a record that cannot be right; :func:`building` names the file.

    Raised by the checks below and by loaders; its message names the field (a dotted path).
    """


# what building objects from a damaged record raises (a missing key, a wrong type, a value out of range)
_DAMAGE = (KeyError, TypeError, ValueError, OverflowError, AttributeError, IndexError, ZeroDivisionError)


def _one_line(text: str, limit: int = 300) -> str:
    text = text.replace("\r", "\\r").replace("\n", "\\n")  # a file's text never breaks the one line
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _what(exc: BaseException) -> str:
    if isinstance(exc, BadField):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"lacks {exc}"
    return f"{type(exc).__name__}: {exc}"


@contextlib.contextmanager
def building(path: Path, kind: str) -> Iterator[None]:
    """Guard the conversion of a record read from ``path`` into objects (and their figures).

    Wrap only the dict -> object conversion of a record :func:`read_json` returned (and the
    recomputation of its figures): there a missing key, a wrong type or an impossible value
    is the file's fault, not nvmeter's. Use ``with records.building(path, "run"): ...``.

    Raises:
        RecordError: ``"<file>: damaged <kind> record: <what>"`` for the errors a damaged
            record raises (KeyError, TypeError, ValueError, OverflowError, AttributeError,
            IndexError, ZeroDivisionError), and for a stored setting its own check refuses
            (UsageError); a RecordError that does not name the file is given its name; one
            that does passes unchanged.

    numpy's floating-point warnings are silenced inside: a damaged series' overflow or NaN
    is said once, by the checks that follow, not first as a warning with a source line.
    """
    import numpy as np

    try:
        with np.errstate(all="ignore"):
            yield
    except errors.RecordError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise errors.RecordError(f"{path}: damaged {kind} record: {_one_line(str(exc))}") from exc
    except errors.UsageError as exc:  # a stored setting that the setting's own check refuses
        raise errors.RecordError(f"{path}: damaged {kind} record: {_one_line(str(exc))}") from exc
    except _DAMAGE as exc:
        raise errors.RecordError(f"{path}: damaged {kind} record: {_one_line(_what(exc))}") from exc


def shown(value) -> str:
    """A field's value as a one-line message shows it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _finite(value: float) -> bool:
    """``math.isfinite``, False for an integer past any float (a 400-digit one overflowed it)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def number(value, where: str, *, at_least: float | None = None, none: bool = False):
    """``value`` if it is a finite number (not a bool), at least ``at_least``; None too with ``none``.

    Raises:
        BadField: naming ``where``.

    """
    if value is None and none:
        return value
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not _finite(value)
        or (at_least is not None and value < at_least)
    ):
        need = "a finite number" + (f" >= {at_least:g}" if at_least is not None else "")
        raise BadField(f"{where} is {shown(value)}, not {need}")
    return value


def integer(
    value, where: str, *, at_least: int | None = None, at_most: int | None = None, none: bool = False
):
    """``value`` if it is an int (not a bool) from ``at_least`` to ``at_most``; None too with ``none``.

    Raises:
        BadField: naming ``where``.

    """
    if value is None and none:
        return value
    low = at_least is not None and isinstance(value, int) and value < at_least
    high = at_most is not None and isinstance(value, int) and value > at_most
    if isinstance(value, bool) or not isinstance(value, int) or low or high:
        if at_least is not None and at_most is not None:
            need = f"an integer from {at_least:,} to {at_most:,}"
        else:
            need = "an integer" + (f" >= {at_least}" if at_least is not None else "")
            need += f" <= {at_most}" if at_most is not None else ""
        raise BadField(f"{where} is {shown(value)}, not {need}")
    return value


def text(value, where: str, *, none: bool = False):
    """``value`` if it is a string; None too with ``none``.

    Raises:
        BadField: naming ``where``.

    """
    if value is None and none:
        return value
    if not isinstance(value, str):
        raise BadField(f"{where} is {shown(value)}, not a string")
    return value


def items(value, where: str, check, *, empty: bool = True) -> list:
    """``value`` if it is a list whose every item passes ``check(item, f"{where}[i]")``.

    Raises:
        BadField: not a list, empty where ``empty`` is False, or an item that fails.

    """
    if not isinstance(value, list):
        raise BadField(f"{where} is {shown(value)}, not a list")
    if not value and not empty:
        raise BadField(f"{where} is empty")
    for i, item in enumerate(value):
        check(item, f"{where}[{i}]")
    return value


def mapping(value, where: str, *, none: bool = False):
    """``value`` if it is a dict (a JSON object); None too with ``none``.

    Raises:
        BadField: naming ``where``.

    """
    if value is None and none:
        return value
    if not isinstance(value, dict):
        raise BadField(f"{where} is {shown(value)}, not a mapping")
    return value


def span_inside(where: str, t0_s: float, t1_s: float, span: tuple[float, float], name: str) -> None:
    """``t0_s`` to ``t1_s`` lies in order inside ``span`` (from, to; s), the span called ``name``.

    Raises:
        BadField: the times out of order or outside the span.
    """
    after_s, before_s = span
    if not after_s <= t0_s <= t1_s <= before_s:
        raise BadField(
            f"{where} ran {t0_s:.6g}-{t1_s:.6g} s, not inside {name} ({after_s:.6g}-{before_s:.6g} s)"
        )


# NVML's UUIDs (nvmlDeviceGetUUID): GPU- and 8-4-4-4-12 hexadecimal digits; a MIG instance's is MIG- and
# the same, or MIG-GPU-<uuid>/<instance>/<compute instance> from drivers before R470. The simulated
# board's have the first form.
_HEX_UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_BOARD_UUID = re.compile(f"(?:GPU|MIG)-{_HEX_UUID}|MIG-GPU-{_HEX_UUID}/[0-9]+/[0-9]+")


def board(value, where: str) -> dict:
    """``value`` if it is a board identity's dict (nvmeter.boards.protocol.BoardIdentity).

    Raises:
        BadField: not a mapping, a missing field, one of the wrong type, or a UUID not of NVML's form.

    """
    mapping(value, where)
    for key in ("name", "uuid", "pci_bus_id", "driver", "vbios"):
        text(value[key], f"{where}.{key}")
    if not _BOARD_UUID.fullmatch(value["uuid"]):
        raise BadField(
            f"{where}.uuid is {shown(value['uuid'])}, "
            "not an NVML UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"
        )
    for key in ("power_limit_w", "memory_total_mib"):  # null where NVML could not say
        number(value[key], f"{where}.{key}", none=True, at_least=0)
    # a limit past any board's is an edit (-701 W and 1e30 W were shown verified: a breaker's trial)
    if value["power_limit_w"] is not None and value["power_limit_w"] > MAX_BOARD_W:
        raise BadField(f"{where}.power_limit_w is {value['power_limit_w']:g} W, above any board's")
    if not isinstance(value.get("simulated", False), bool):
        raise BadField(f"{where}.simulated is {shown(value['simulated'])}, not true or false")
    return value


# No board NVML meters draws this much: NVIDIA's datasheets give 700 W for the H200 SXM,
# 1,000 W per B200 GPU and 2,700 W for a whole GB200 superchip (two GPUs and a CPU). A power
# above it is a typo or a unit slip (mW) in a figure given, or a counter that jumped. Here, in the
# base: a record's board and the meter's sanity checks both read it.
MAX_BOARD_W = 5_000.0
# an energy counter in mJ, as NVML gives it: an unsigned 64-bit count that numpy reads as int64
_COUNTER_MAX = 2**63 - 1


def counters(raw, where: str = "") -> None:
    """Every energy counter series (an ``energy_mj`` list) anywhere in ``raw`` holds counts.

    A count is an integer from 0 to 2**63 - 1 (a float such as 1e308 is no counter read).

    Raises:
        BadField: naming the first series (a dotted path) that holds anything else.

    """
    if isinstance(raw, dict):
        for key, value in raw.items():
            at = f"{where}.{key}" if where else str(key)
            if key == "energy_mj" and isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= _COUNTER_MAX:
                        raise BadField(
                            f"{at}[{i}] is {shown(v)}, not an energy counter read (mJ, 0 to 2**63-1)"
                        )
            else:
                counters(value, at)
    elif isinstance(raw, list):
        for i, value in enumerate(raw):
            counters(value, f"{where}[{i}]")
