"""Load a dataset's verified training split from the cache."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nvmeter import errors, files
from nvmeter.workloads import cache, idx, sources


@dataclass(frozen=True, eq=False)
class Images:
    """A dataset's 60,000-row training split, as the IDX files hold it.

    Attributes:
        name: ``mnist``, ``fashion`` or ``kmnist``.
        pixels: (60000, 28, 28) uint8, read-only.
        labels: (60000,) uint8 in 0..9, read-only.

    """

    name: str
    pixels: np.ndarray
    labels: np.ndarray


def load(name: str, root: Path | None = None) -> Images:
    """The cached training split of dataset ``name``, verified again on every load.

    Loads are memoised per (name, cache folder) within a process (~0.5 s each otherwise).

    Raises:
        UsageError: unknown dataset, not in the cache (the message gives the fetch
            command), or a cached file that fails verification.

    """
    ds = sources.dataset(name)
    return _load(ds.name, cache.dataset_dir(ds.name, root).resolve())


@functools.lru_cache(maxsize=4)
def _load(name: str, folder: Path) -> Images:
    ds = sources.dataset(name)
    # one piece of advice, said once: fetch checks the cached files and replaces damaged ones
    again = f"run `nvmeter data fetch {name}` to replace it"
    arrays = {}
    if folder.parent.exists() and not folder.parent.is_dir():
        raise errors.UsageError(f"the data cache {folder.parent} is not a folder; set {cache.ENV_VAR} to one")
    for spec in ds.files:
        path = folder / spec.gz_name
        if not path.exists():
            raise errors.UsageError(
                f"{ds.title} is not in the data cache {folder.parent}; run `nvmeter data fetch {name}` "
                f"(or set {cache.ENV_VAR} to a folder that holds it)"
            )
        try:
            gz = files.read_bytes(path, files.DATA_LIMIT_BYTES, f"the cached {ds.title} {spec.role} file")
        except errors.UsageError as exc:
            raise errors.UsageError(f"{exc}; {again}") from exc
        if spec.idx_sha256 is None and idx.sha256(gz) != spec.gz_sha256:
            raise errors.UsageError(f"{path}: not the official gzip (sha256 mismatch); {again}")
        try:
            arrays[spec.role] = idx.check(idx.gunzip(gz, str(path), spec.size_bytes), spec, str(path))
        except errors.UsageError as exc:
            raise errors.UsageError(f"{exc}; {again}") from exc
    if arrays["labels"].max() > 9:
        raise errors.UsageError(f"{folder}: labels outside 0..9; {again}")
    return Images(name, arrays["images"], arrays["labels"])
