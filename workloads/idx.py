"""IDX files (LeCun's MNIST format): decompress, check the header and the hash, decode.

A file is accepted only when its header names the expected type and shape, its length
matches the header, and the sha256 of its decompressed bytes is the published one
(:mod:`nvmeter.workloads.sources`). Everything else is a one-line :class:`UsageError`.
"""

from __future__ import annotations

import hashlib
import zlib

import numpy as np

from nvmeter import errors
from nvmeter.workloads.sources import FileSpec

# IDX type code for unsigned bytes (the only type MNIST-style files use).
_UBYTE = 0x08
_GZIP_MAGIC = b"\x1f\x8b"


def sha256(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def is_gzip(data: bytes) -> bool:
    """Whether ``data`` starts with the gzip magic bytes."""
    return data[:2] == _GZIP_MAGIC


def gunzip(data: bytes, origin: str, limit_bytes: int | None) -> bytes:
    """Decompress gzip ``data`` (from ``origin``, named in errors), every member of it.

    Args:
        data: The gzip bytes.
        origin: Where they came from (a path or URL).
        limit_bytes: Most bytes the output may have (an IDX file's exact size), so a small
            file cannot decompress into gigabytes; None only for content whose hash was
            checked first.

    Raises:
        UsageError: the gzip stream is truncated or corrupt, or decompresses to more than
            ``limit_bytes``. The message says what is wrong, not what to do: callers know
            where the file came from and add that.

    """
    out, rest = bytearray(), data
    try:
        while rest:
            inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # gzip framing
            room = 0 if limit_bytes is None else limit_bytes + 1 - len(out)
            out += inflate.decompress(rest, room)
            if limit_bytes is not None and len(out) > limit_bytes:
                raise errors.UsageError(
                    f"{origin}: decompresses to more than the {limit_bytes:,} bytes expected"
                )
            if not inflate.eof:
                raise EOFError("the stream ends before its end marker")
            rest = inflate.unused_data
    except (EOFError, zlib.error) as exc:
        raise errors.UsageError(f"{origin}: corrupt or truncated gzip ({exc})") from exc
    return bytes(out)


def check(raw: bytes, spec: FileSpec, origin: str) -> np.ndarray:
    """Check decompressed IDX bytes against ``spec`` and decode them.

    Args:
        raw: The decompressed IDX file.
        spec: What the file must be.
        origin: Where the bytes came from (a path or URL), named in errors.

    Returns:
        uint8 array of ``spec.shape``: (60000, 28, 28) images or (60000,) labels. It is a
        read-only view of ``raw``.

    Raises:
        UsageError: wrong magic, type or shape in the header; a length that disagrees with
            the header (truncated or padded); or a sha256 other than the published one.

    """
    ndim = len(spec.shape)
    header_len = 4 + 4 * ndim
    if len(raw) < header_len:
        raise errors.UsageError(f"{origin}: truncated IDX file ({len(raw)} bytes, not even a header)")
    if raw[0:2] != b"\0\0" or raw[2] != _UBYTE or raw[3] != ndim:
        raise errors.UsageError(
            f"{origin}: not an IDX {spec.role} file (header {raw[:4].hex()}, expected {spec.magic:08x})"
        )
    dims = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    if dims != spec.shape:
        raise errors.UsageError(f"{origin}: IDX header says shape {dims}, expected {spec.shape}")
    if len(raw) != spec.size_bytes:
        what = "truncated" if len(raw) < spec.size_bytes else "longer than its header says"
        raise errors.UsageError(f"{origin}: {what} IDX file ({len(raw)} bytes, expected {spec.size_bytes})")
    if spec.idx_sha256 is not None and (got := sha256(raw)) != spec.idx_sha256:
        raise errors.UsageError(
            f"{origin}: sha256 {got[:16]}… of the IDX bytes is not the published {spec.idx_sha256[:16]}…; "
            "the file is damaged or not this dataset"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header_len).reshape(spec.shape)


def encode(array: np.ndarray) -> bytes:
    """IDX bytes of a uint8 array (big-endian header, then the values in C order).

    Raises:
        ValueError: the array is not uint8 (a programming error, not user input).

    """
    if array.dtype != np.uint8:
        raise ValueError(f"IDX encode wants uint8, got {array.dtype}")
    header = bytes([0, 0, _UBYTE, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    return header + np.ascontiguousarray(array).tobytes()
