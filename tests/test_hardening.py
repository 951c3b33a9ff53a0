"""Hardening from a fault campaign: every finding has a test here that fails without its fix.

Findings (never a wrong pixel, never a runaway allocation, nothing left behind):
bounded sizes, checksummed chunks, pinned remote objects, paths under the root, fill
values only where the archive really has no member, stale partials, the directory swap,
OzxError-only failures on hostile metadata, bounded inflation, prompt cancellation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from napari_ozx.errors import OzxError
from napari_ozx.ngff.model.metadata import Axis
from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr
from tests._support.classic_dask import tokened
from tests._support.paths import ROOT

AXES = [Axis("y", "space"), Axis("x", "space")]


def _image() -> np.ndarray:
    rng = np.random.default_rng(7)
    # structured but not constant: compressors keep literals a flipped bit lands in
    return (np.arange(64 * 64).reshape(64, 64) % 251 + rng.integers(0, 4, (64, 64))).astype(
        np.uint16
    )


# ------------------------------------------------------------- 2: checksummed chunks


@pytest.mark.parametrize("codec", ["none", "blosc-lz4", "blosc-zstd", "zstd", "gzip"])
def test_every_written_chunk_carries_a_checksum(tmp_path: Path, codec: str) -> None:
    """A flipped bit inside any chunk our writer produced (0.5) is an error, never wrong
    pixels (a directory has no ZIP CRC: the codec pipeline is the only protection)."""
    version = "0.5"
    import zarr

    data = _image()
    target = tmp_path / "img.zarr"
    opts = WriteOptions(
        chunk_yx=32, shard_yx=64, codec=codec, version=version, pyramid_levels=1, workers=1
    )  # type: ignore[arg-type]
    write_ome_zarr(target, ImageSpec(data, AXES), options=opts)
    chunk = target / "0" / ("c/0/0" if version == "0.5" else "0/0")
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 3] ^= 0x10  # inside the first inner chunk's payload
    chunk.write_bytes(bytes(raw))
    arr = zarr.open_array(target / "0", mode="r")
    with pytest.raises(Exception) as info:  # zarr's codec errors vary
        got = arr[:]
        bad = int((got != data).sum())
        pytest.fail(f"{codec}/{version}: a flipped bit went unnoticed ({bad} wrong pixels)")
    assert not isinstance(info.value, pytest.fail.Exception), info.value


# ------------------------------------------------------------- 1: bounded sizes


class _CountingReader:
    """Wraps a RangeReader and remembers the largest single read."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.size = inner.size  # type: ignore[attr-defined]
        self.name = "counting"
        self.largest = 0

    def read(self, offset: int, length: int) -> bytes:
        self.largest = max(self.largest, length)
        if length > 64 << 20:  # fail the test instead of allocating gigabytes
            raise AssertionError(f"runaway read of {length} bytes")
        return self.inner.read(offset, length)  # type: ignore[attr-defined]


def _sparse_zip64(path: Path, *, cd_size: int, count: int, size: int) -> None:
    from napari_ozx.ozx.records import pack_eocd, pack_zip64_eocd, pack_zip64_locator

    z64 = pack_zip64_eocd(count, cd_size, 0)
    tail = (
        z64
        + pack_zip64_locator(size - len(z64) - 20 - 22)
        + pack_eocd(0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    )
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: 4 KiB on disk
        f.seek(size - len(tail))
        f.write(tail)


@pytest.mark.parametrize("count", [1, 1 << 20])
def test_lying_zip64_central_directory_size_is_refused_before_allocating(
    tmp_path: Path, count: int
) -> None:
    """A sparse 8 GiB file whose ZIP64 record declares an 8 GiB central directory: refused
    with ZipFormatError after reading at most one bounded piece (was: 8 GiB read)."""
    from napari_ozx.errors import ZipFormatError
    from napari_ozx.ozx._zip import FileRangeReader, read_zip_index

    p = tmp_path / "sparse.ozx"
    size = (8 << 30) + 4096
    _sparse_zip64(p, cd_size=8 << 30, count=count, size=size)
    with FileRangeReader(p) as inner:
        reader = _CountingReader(inner)
        with pytest.raises(ZipFormatError):
            read_zip_index(reader)  # type: ignore[arg-type]
    assert reader.largest <= 32 << 20, reader.largest


def test_get_reader_and_validator_refuse_lying_sparse_zip(tmp_path: Path) -> None:
    import tracemalloc

    from napari_ozx._reader import get_reader
    from napari_ozx.ozx.validate import validate

    p = tmp_path / "sparse.zip"
    _sparse_zip64(p, cd_size=8 << 30, count=1 << 20, size=(8 << 30) + 4096)
    from napari_ozx.errors import ZipFormatError

    tracemalloc.start()
    try:
        read = get_reader(str(p))
        if read is not None:
            with pytest.raises(OzxError):
                read(str(p))
        with pytest.raises(ZipFormatError):
            validate(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak


# ------------------------------------------------------------- 4: paths stay under the root


def _outside_and_root(tmp_path: Path) -> tuple[Path, Path]:
    """``tmp/outside.zarr`` (a valid image beside the root) and ``tmp/root/``."""
    write_ome_zarr(
        tmp_path / "outside.zarr",
        ImageSpec(_image(), AXES),
        options=WriteOptions(pyramid_levels=1, workers=1),
    )
    root = tmp_path / "root"
    root.mkdir()
    return tmp_path / "outside.zarr", root


def _group(path: Path, ome: dict[str, object]) -> None:
    import json

    path.mkdir(parents=True, exist_ok=True)
    doc = {"zarr_format": 3, "node_type": "group", "attributes": {"ome": ome}}
    (path / "zarr.json").write_text(json.dumps(doc))


def test_label_path_with_dotdot_is_not_read_outside_the_root(tmp_path: Path) -> None:
    from napari_ozx.ngff.read.open import open_ome_zarr

    _, _root = _outside_and_root(tmp_path)
    img = tmp_path / "img.zarr"
    write_ome_zarr(img, ImageSpec(_image(), AXES), options=WriteOptions(pyramid_levels=1))
    _group(img / "labels", {"version": "0.5", "labels": ["../../outside.zarr"]})
    with open_ome_zarr(img) as oz:
        assert oz.images()[0].labels == []  # skipped with a warning, never read


@pytest.mark.parametrize("series", ["../outside.zarr", "/outside.zarr", "a/../../outside.zarr"])
def test_series_path_escaping_the_root_is_a_metadata_error(tmp_path: Path, series: str) -> None:
    from napari_ozx.errors import MetadataError
    from napari_ozx.ngff.read.open import open_ome_zarr

    _, root = _outside_and_root(tmp_path)
    _group(root, {"version": "0.5", "bioformats2raw.layout": 3})
    _group(root / "OME", {"version": "0.5", "series": [series]})
    with open_ome_zarr(root) as oz, pytest.raises(MetadataError, match="series"):
        oz.images()


def test_inspector_never_reads_outside_the_root(tmp_path: Path) -> None:
    """The inspector on a labels group listing ``../out``: a clear error naming the key,
    and no node built from a group beside the root."""
    from napari_ozx.inspection import Inspection

    ms = {
        "name": "SECRET-OUTSIDE",
        "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
        "datasets": [
            {"path": "0", "coordinateTransformations": [{"type": "scale", "scale": [1, 1]}]}
        ],
    }
    _group(tmp_path / "out", {"version": "0.5", "multiscales": [ms]})
    _group(tmp_path / "root", {"version": "0.5", "labels": ["../out"]})
    with Inspection(str(tmp_path / "root")) as ins:
        kids = ins.children(ins.root)
        assert not any("SECRET" in (k.title + (k.info or "")) for k in kids), kids
        assert ins.root.error and "hierarchy root" in ins.root.error, ins.root.error
        assert "labels" in ins.root.error


# ------------------------------------------------------------- 3: remote objects pinned


@pytest.fixture
def www(tmp_path: Path):  # type: ignore[no-untyped-def]
    pytest.importorskip("aiohttp")
    from tests._support.httpserver import Server

    root = tmp_path / "www"
    root.mkdir()
    write_ome_zarr(
        root / "a.ozx", ImageSpec(_image(), AXES), options=WriteOptions(pyramid_levels=1)
    )
    with Server(root) as srv:
        yield srv, root


@pytest.mark.network
def test_remote_object_replaced_while_open_is_a_clear_error(www) -> None:  # type: ignore[no-untyped-def]
    import os

    from napari_ozx.ozx.remote.source import FsspecRangeReader, ObjectChangedError

    srv, root = www
    url = f"{srv.url}/a.ozx"
    reader = FsspecRangeReader(url)
    assert reader.validator
    first = reader.read(0, 64)
    st = os.stat(root / "a.ozx")
    os.utime(root / "a.ozx", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a new version
    with pytest.raises(ObjectChangedError, match=r"a\.ozx.*changed"):
        reader.read(0, 64)
    assert first[:2] == b"PK"


@pytest.mark.network
def test_remote_read_timeout_names_the_url(www) -> None:  # type: ignore[no-untyped-def]
    from napari_ozx.ozx.remote.source import FsspecRangeReader, RemoteError

    srv, _root = www
    url = f"{srv.url}/a.ozx"
    reader = FsspecRangeReader(url, timeout=0.3)
    srv.delay = 1.5
    with pytest.raises(RemoteError, match=r"a\.ozx.*timed out after 0\.3 s"):
        reader.read(0, 64)


# ------------------------------------------------------------- 6: stale partials removed

_SLOW_SAVE = """
import sys, time
import numpy as np
from napari_ozx.ngff.model.metadata import Axis
from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr

def progress(done, total):
    print("started", flush=True)
    time.sleep(120)

data = np.ones((8, 128, 128), np.uint16)
axes = [Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]
opts = WriteOptions(chunk_yx=64, shard_yx=64, shard_z=1, workers=1, pyramid_levels=1)
write_ome_zarr(sys.argv[1], ImageSpec(data, axes), options=opts, progress=progress)
"""


def _kill_mid_save(target: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_SAVE, str(target)], stdout=subprocess.PIPE, env=env
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"started"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def _partials(target: Path) -> list[Path]:
    return sorted(target.parent.glob(f".{target.name}.*"))


@pytest.mark.parametrize("name", ["img.ozx", "img.zarr"])
def test_partial_of_a_killed_save_is_removed_by_the_next_save(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    _kill_mid_save(target)
    assert _partials(target), "the killed save left no partial (test is not testing)"
    write_ome_zarr(target, ImageSpec(_image(), AXES), options=WriteOptions(pyramid_levels=1))
    assert _partials(target) == []
    assert target.exists()


def test_partial_of_a_live_save_is_left_alone(tmp_path: Path) -> None:
    from napari_ozx.ozx import atomic

    target = tmp_path / "img.zarr"
    live = atomic.partial_name(target)
    live.mkdir()
    fd = atomic.hold(live)
    try:
        write_ome_zarr(target, ImageSpec(_image(), AXES), options=WriteOptions(pyramid_levels=1))
        assert live.exists()
    finally:
        atomic.release(fd)


# ------------------------------------------------------------- 7: the directory swap


def test_directory_swap_never_leaves_the_target_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replacing an existing directory is one atomic exchange: no rename leaves the
    target name empty in between (was: two os.replace calls)."""
    import os

    from napari_ozx.ozx import atomic

    if atomic.exchange(tmp_path, tmp_path) is False:  # probes renameat2 support
        pytest.skip("renameat2(RENAME_EXCHANGE) unavailable here")
    target = tmp_path / "img.zarr"
    write_ome_zarr(target, ImageSpec(_image(), AXES), options=WriteOptions(pyramid_levels=1))

    real_replace, real_rename = os.replace, os.rename

    def guard(real):  # type: ignore[no-untyped-def]
        def call(src: object, dst: object, *a: object, **k: object) -> None:
            if Path(os.fspath(src)) == target or Path(os.fspath(dst)) == target:  # type: ignore[arg-type]
                raise AssertionError(f"a rename of the target leaves it missing: {src}")
            real(src, dst, *a, **k)

        return call

    monkeypatch.setattr(os, "replace", guard(real_replace))
    monkeypatch.setattr(os, "rename", guard(real_rename))
    data = _image()[::-1].copy()
    write_ome_zarr(target, ImageSpec(data, AXES), options=WriteOptions(pyramid_levels=1))
    monkeypatch.undo()
    import zarr

    np.testing.assert_array_equal(zarr.open_array(target / "0", mode="r")[:], data)
    assert _partials(target) == []


def test_interrupted_fallback_swap_is_recovered_at_the_next_save(tmp_path: Path) -> None:
    import os

    target = tmp_path / "img.zarr"
    write_ome_zarr(target, ImageSpec(_image(), AXES), options=WriteOptions(pyramid_levels=1))
    os.rename(target, tmp_path / ".img.zarr.0123456789ab.old")  # died between the renames
    from napari_ozx.ozx import atomic

    assert atomic.recover_directory(target) is not None
    assert (target / "zarr.json").exists() and _partials(target) == []


def test_concurrent_directory_saves_keep_one_complete_copy(tmp_path: Path) -> None:
    import threading

    import zarr

    target = tmp_path / "img.zarr"
    datas = [_image() + i for i in range(4)]
    errors: list[BaseException] = []

    def save(d: np.ndarray) -> None:
        try:
            write_ome_zarr(target, ImageSpec(d, AXES), options=WriteOptions(pyramid_levels=1))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=save, args=(d,)) for d in datas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    got = zarr.open_array(target / "0", mode="r")[:]
    assert any(np.array_equal(got, d) for d in datas)
    assert _partials(target) == []


def test_a_concurrent_sweep_between_swap_and_cleanup_is_harmless(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the exchange our partial's name holds the previous tree, unlocked; another
    save starting right then sweeps it as stale. Our cleanup must not then fail on the
    missing tree (it did, 1 in ~20 runs of the concurrent-saves test under load, with
    'No such file or directory')."""
    import zarr

    from napari_ozx.ozx import atomic

    target = tmp_path / "img.zarr"
    opts = WriteOptions(pyramid_levels=1)
    write_ome_zarr(target, ImageSpec(_image(), AXES), options=opts)
    real = atomic.exchange
    swept: list[Path] = []

    def exchange_then_sweep(a: Path, b: Path) -> bool:
        done = real(a, b)
        if done:
            swept.extend(atomic.remove_stale_partials(b))  # what a starting save does
        return done

    monkeypatch.setattr(atomic, "exchange", exchange_then_sweep)
    write_ome_zarr(target, ImageSpec(_image() + 1, AXES), options=opts)
    assert swept, "the sweep found the previous tree under the partial's name"
    np.testing.assert_array_equal(zarr.open_array(target / "0", mode="r")[:], _image() + 1)
    assert _partials(target) == []


# ------------------------------------------------------------- 10: errors name the target


@pytest.mark.parametrize("name", ["img.ozx", "img.zarr"])
def test_missing_parent_is_the_same_error_for_both_formats(tmp_path: Path, name: str) -> None:
    target = tmp_path / "no-such-folder" / name
    with pytest.raises(OzxError, match="does not exist") as info:
        write_ome_zarr(target, ImageSpec(_image(), AXES), options=WriteOptions(pyramid_levels=1))
    assert str(target) in str(info.value)
    assert not target.parent.exists()


# ------------------------------------------------------------- 8: only OzxError escapes

_HOSTILE = [3, "mean", None, [], {}, -1, 1e300, "x", [1, "a"], True, {"a": 1}, [[1]], "..", 0]


@pytest.fixture(scope="module")
def fuzz_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from napari_ozx.ngff.write.writer import LabelsSpec

    base = tmp_path_factory.mktemp("fuzz") / "base.zarr"
    d = np.arange(2 * 32 * 32, dtype=np.uint16).reshape(2, 32, 32)
    axes = [Axis("c", "channel"), Axis("y", "space"), Axis("x", "space")]
    labels = [LabelsSpec("cells", (d > 500).astype(np.uint8), axes)]
    opts = WriteOptions(chunk_yx=16, shard_yx=16, pyramid_levels=2, workers=1)
    write_ome_zarr(base, ImageSpec(d, axes, labels=labels), options=opts)
    return base


def _json_paths(v: object, pre: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    out = [pre] if pre else []
    if isinstance(v, dict):
        for k, x in v.items():
            out += _json_paths(x, (*pre, k))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += _json_paths(x, (*pre, i))
    return out


def _mutated(base: Path, work: Path, mutations: list[tuple[int, int, int, bool]]) -> None:
    import json
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base, work)
    docs = sorted(p.relative_to(base) for p in base.rglob("zarr.json"))
    for doc_i, path_i, value_i, delete in mutations:
        f = work / docs[doc_i % len(docs)]
        doc = json.loads(f.read_text())
        paths = _json_paths(doc)
        where = paths[path_i % len(paths)]
        cur = doc
        for k in where[:-1]:
            cur = cur[k]
        if delete and isinstance(cur, dict):
            del cur[where[-1]]
        else:
            cur[where[-1]] = _HOSTILE[value_i % len(_HOSTILE)]
        f.write_text(json.dumps(doc))


@pytest.mark.slow  # the longest of the suite's fuzzers
def test_hostile_metadata_raises_only_ozx_errors(
    fuzz_base: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Mutated zarr.json documents (a string in ``shape``, ``"chunk_grid": "mean"``,
    ``"dimension_names": 3`` ...): the reader and the inspector's facts raise OzxError
    subclasses or succeed, never a foreign exception."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from napari_ozx.inspection import Inspection
    from napari_ozx.layers.reading import read_layer_data

    work = tmp_path_factory.mktemp("fuzz-work") / "img.zarr"
    mutation = st.tuples(st.integers(0, 99), st.integers(0, 999), st.integers(0, 99), st.booleans())

    @settings(max_examples=80, deadline=None, database=None, derandomize=True)
    @given(st.lists(mutation, min_size=1, max_size=2))
    def check(mutations: list[tuple[int, int, int, bool]]) -> None:
        _mutated(fuzz_base, work, mutations)
        try:
            for layer in read_layer_data(str(work)):
                data = layer[0]
                np.asarray((data[0] if isinstance(data, list) else data)[(0,) * 2])
        except OzxError:
            pass
        try:
            with Inspection(str(work)) as ins:
                stack = [ins.root]
                while stack:
                    node = stack.pop()
                    ins.details(node)
                    stack.extend(ins.children(node))
        except OzxError:
            pass

    check()


@pytest.mark.parametrize(
    ("key", "value"),
    [("dimension_names", 3), ("chunk_grid", "mean"), ("shape", ["64", 64])],
)
def test_named_hostile_array_fields_are_metadata_errors(
    fuzz_base: Path, tmp_path: Path, key: str, value: object
) -> None:
    import json

    from napari_ozx.errors import MetadataError
    from napari_ozx.layers.reading import read_layer_data

    work = tmp_path / "img.zarr"
    _mutated(fuzz_base, work, [])
    f = work / "0" / "zarr.json"
    doc = json.loads(f.read_text())
    doc[key] = value
    f.write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match=key):
        read_layer_data(str(work))


# ------------------------------------------------------------- 5: no fill for a lost name


def test_corrupted_central_name_of_a_shard_is_an_error_not_zeros(tmp_path: Path) -> None:
    from napari_ozx.errors import ZipFormatError
    from napari_ozx.ngff.read.open import open_ome_zarr

    data = _image()
    src = tmp_path / "a.ozx"
    opts = WriteOptions(chunk_yx=16, shard_yx=32, pyramid_levels=1, workers=1)
    write_ome_zarr(src, ImageSpec(data, AXES), options=opts)
    raw = bytearray(src.read_bytes())
    name = b"0/c/1/1"
    pos = raw.rindex(name)  # the central-directory copy (after the local header's)
    raw[pos + len(name) - 1] = ord("p")
    bad = tmp_path / "bad.ozx"
    bad.write_bytes(bytes(raw))
    with open_ome_zarr(bad) as oz:
        level = oz.images()[0].levels[0]
        np.testing.assert_array_equal(np.asarray(level[:32, :32]), data[:32, :32])
        with pytest.raises(ZipFormatError, match="0/c/1/1"):
            np.asarray(level[32:, 32:])


# ------------------------------------------------------------- 9: inflation bounded per array


def test_deflated_chunk_declaring_more_than_its_array_allows_is_not_inflated(
    tmp_path: Path,
) -> None:
    import tracemalloc
    import zipfile

    from napari_ozx.ngff.read.open import open_ome_zarr

    data = _image()
    src = tmp_path / "a.ozx"
    opts = WriteOptions(chunk_yx=32, shard_yx=32, pyramid_levels=1, workers=1)
    write_ome_zarr(src, ImageSpec(data, AXES), options=opts)  # shards of 2 KiB decoded
    bomb = tmp_path / "bomb.ozx"
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(bomb, "w") as zout:
        for info in zin.infolist():
            if info.filename == "0/c/0/0":
                zout.writestr(info.filename, bytes(8 << 20), zipfile.ZIP_DEFLATED)  # ~8 KiB
            else:
                zout.writestr(info, zin.read(info), zipfile.ZIP_STORED)
        zout.comment = zin.comment

    def peak_of_read(path: Path) -> int:
        with open_ome_zarr(path) as oz:
            level = oz.images()[0].levels[0]
            np.asarray(level[32:, 32:])  # warm: imports, thread pools, caches
            tracemalloc.start()
            try:
                try:
                    np.asarray(level[:32, :32])
                except OzxError as e:
                    assert "allows" in str(e), e
                else:
                    assert path == src, "the bomb was read"
                return tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()

    baseline = peak_of_read(src)
    assert peak_of_read(bomb) < baseline + (4 << 20)


# ------------------------------------------------------------- 10: prompt cancel, named errors


@pytest.mark.parametrize("name", ["img.ozx", "img.zarr"])
def test_cancel_is_seen_between_planes_of_a_running_shard(tmp_path: Path, name: str) -> None:
    """A cancel during a shard stops before the shard's remaining planes are computed
    (was: every running shard completed first)."""
    import threading

    import dask.array as da

    from napari_ozx.ngff.write.writer import WriteCancelled

    cancel = threading.Event()
    computed: list[int] = []

    def plane(block: np.ndarray, block_info: dict | None = None) -> np.ndarray:  # type: ignore[type-arg]
        computed.append(1)
        cancel.set()  # the user presses Cancel while the first plane is computed
        return block

    src = da.ones((8, 64, 64), dtype=np.uint16, chunks=(1, 64, 64)).map_blocks(
        tokened(plane), meta=np.empty((0, 0, 0), np.uint16)
    )
    assert not computed and not cancel.is_set()
    axes = [Axis("z", "space"), *AXES]
    opts = WriteOptions(chunk_yx=64, shard_yx=64, shard_z=8, workers=1, pyramid_levels=1)
    target = tmp_path / name
    with pytest.raises(WriteCancelled):
        write_ome_zarr(target, ImageSpec(src, axes), options=opts, cancel=cancel)
    assert 1 <= len(computed) <= 2, f"{len(computed)} of 8 planes computed after the cancel"
    assert not target.exists() and _partials(target) == []


@pytest.mark.parametrize("name", ["img.ozx", "img.zarr"])
def test_file_system_errors_name_the_target_not_the_temporary(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from napari_ozx.ngff.write import writer as write_mod

    target = tmp_path / name

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / ".x.partial"))

    monkeypatch.setattr(write_mod, "_write_data", full)
    with pytest.raises(OzxError) as info:
        write_ome_zarr(target, ImageSpec(_image(), AXES), options=WriteOptions(pyramid_levels=1))
    msg = str(info.value)
    assert str(target) in msg and "No space left" in msg and ".partial" not in msg, msg
    assert isinstance(info.value, OSError) and info.value.errno == errno.ENOSPC
    assert _partials(target) == []


# ------------------------------------------- bounded metadata in a local directory


def test_oversized_zarr_json_in_a_directory_is_refused_unread(tmp_path: Path) -> None:
    """A directory has no table of sizes, but a local file's size is known before it is
    read: a 17 MiB (sparse) label group document is refused as that node's problem, and
    the image still opens; the documents' reader reads the rest directly."""
    from napari_ozx.ngff.read.documents import MAX_METADATA_BYTES, read_documents
    from napari_ozx.ngff.read.open import open_ome_zarr, open_store

    img = tmp_path / "img.zarr"
    write_ome_zarr(img, ImageSpec(_image(), AXES), options=WriteOptions(pyramid_levels=1))
    _group(img / "labels", {"version": "0.5", "labels": ["big"]})
    big = img / "labels" / "big"
    big.mkdir()
    with open(big / "zarr.json", "wb") as fh:
        fh.truncate(MAX_METADATA_BYTES + 1)  # sparse: costs no disk
    store = open_store(img)
    docs = dict(
        zip(["", "labels/big", "nowhere"], read_documents(store, ["", "labels/big", "nowhere"], 3))
    )
    assert docs["nowhere"] is None
    assert docs[""] is not None and docs[""].error is None
    err = docs["labels/big"].error
    assert err is not None and "too large" in str(err) and "labels/big/zarr.json" in str(err)
    with open_ome_zarr(img) as oz:
        assert oz.images()[0].labels == []  # skipped with a warning, never read
