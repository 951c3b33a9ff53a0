"""Reads, opens and writes against the compiled readers (zarrista = zarrs in Rust, tensorstore).

Usage::

    pip install -e .[bench]          # zarrista, tensorstore (benchmark-only)
    python benchmarks/bench_compiled.py [--repeats 21] [--regenerate] [--entries 1000000]
                                        [--unsharded]

Generates once (under benchmarks/_data/, gitignored) a sharded OME-Zarr 0.5 image
2x32x1024x1024 uint16 (inner chunks 1x1x256x256, shards 1x32x1024x1024, zstd 3) with our
writer as ``.ozx`` and as a directory, and a ``.ozx``-like archive with ``--entries``
members. Then, page cache warm, in one run (readers interleaved in random order per
repeat, medians):

* one 256x256 tile and one 2-channel 1024x1024 plane through the dask arrays our reader
  hands to napari (``.ozx`` and directory; "napari" rows slice them in napari's steps
  with task fusion off, as napari's slicer does), against zarrista (ZipStore on the ``.ozx``,
  FilesystemStore on the directory), tensorstore (directory) and zarr-python
  (LocalStore, OzxStore); with zarr >= 3.4 also zarr's own synchronous codec path
  (``FusedCodecPipeline.read_sync`` called directly, and ``zarr.Array`` configured with
  it), against the same direct reads without dask (``fastread``); ``--unsharded`` adds
  a copy without shards (plain Zarr v3 chunks 1x1x256x256, directory and zipped), read
  by fastread, zarr-python and zarr's synchronous path;
* opening the many-entry archive in a fresh process: time and RSS growth of
  ``OzxStore`` against ``zarr.storage.ZipStore`` (which parses with ``zipfile``);
* writing an OME-Zarr 0.4 directory with small (64x64) chunks against zarr-python
  writing the same array with the same codec.

Prints times, the ratios and the bars of the issue.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
OZX = DATA / "compiled.ozx"
DIR = DATA / "compiled.ome.zarr"
SHAPE = (2, 32, 1024, 1024)


def _write_options(**kw: object) -> object:
    try:
        from napari_ozx.ngff.write.options import WriteOptions  # type: ignore[import-not-found]
    except ImportError:
        from napari_ozx.ngff.write.writer import WriteOptions
    return WriteOptions(**kw)  # type: ignore[arg-type]


def _read_layer_data() -> Callable[[str], list]:
    try:
        from napari_ozx.layers.reading import read_layer_data  # type: ignore[import-not-found]
    except ImportError:
        from napari_ozx._reader import read_layer_data
    return read_layer_data


def _data(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2000, (1, 1, *shape[-2:]), dtype=np.uint16)
    data = np.broadcast_to(base, shape).copy()
    data += rng.integers(0, 64, shape, dtype=np.uint16)
    return data


def _spec(data: np.ndarray) -> object:
    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import ImageSpec

    axes = [Axis("c", "channel"), Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]
    return ImageSpec(data, axes, name="bench")


def generate(force: bool) -> None:
    from napari_ozx.ngff.write.writer import write_ome_zarr

    if OZX.exists() and DIR.exists() and not force:
        return
    DATA.mkdir(exist_ok=True)
    spec = _spec(_data(SHAPE))
    for target, fmt in ((OZX, "ozx"), (DIR, "directory")):
        t = time.perf_counter()
        opts = _write_options(format=fmt, shard_z=32, pyramid_levels=1)
        write_ome_zarr(target, spec, options=opts)  # type: ignore[arg-type]
        print(f"generated {target.name} in {time.perf_counter() - t:.1f} s")


def generate_many(n: int) -> Path:
    """An archive of ``n`` tiny STORED members (central directory written directly)."""
    import zipfile

    path = DATA / f"many_{n}.ozx"
    if path.exists():
        return path
    DATA.mkdir(exist_ok=True)
    t = time.perf_counter()
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr("zarr.json", json.dumps({"zarr_format": 3, "node_type": "group"}))
        for i in range(n - 1):
            zf.writestr(f"0/c/{i // 1000}/{i % 1000}", b"x")
    tmp.rename(path)
    print(f"generated {path.name} in {time.perf_counter() - t:.1f} s")
    return path


# ----------------------------------------------------------------------------- reads


def _readers() -> dict[str, tuple[Callable[[int, int, int, int], object], Callable[[int], object]]]:
    """name -> (tile(c, z, y, x), plane(z)) returning numpy arrays."""
    import zarr

    from napari_ozx.ozx.store import OzxStore

    out: dict[str, tuple[Callable[..., object], Callable[..., object]]] = {}
    read_layer_data = _read_layer_data()
    for name, p in (("layers ozx", OZX), ("layers dir", DIR)):
        images = [ld for ld in read_layer_data(str(p)) if ld[2] == "image"]
        # level 0 of each layer (napari splits channel_axis layers with data[c])
        layers = [d[0][0] if isinstance(d[0], list) else d[0] for d in images]
        if len(layers) == 1:  # channel axis kept
            lv = layers[0]
            out[name] = (
                lambda c, z, y, x, lv=lv: np.asarray(lv[c, z, y : y + 256, x : x + 256]),
                lambda z, lv=lv: np.asarray(lv[:, z]),
            )
        else:
            out[name] = (
                lambda c, z, y, x, ls=layers: np.asarray(ls[c][z, y : y + 256, x : x + 256]),
                lambda z, ls=layers: np.stack([np.asarray(lv[z]) for lv in ls]),
            )
        # as napari's slicer does it: the channel split (data[c]), then the point along z,
        # then the tile, in steps, inside napari's configure_dask (task fusion off)
        first = layers[0]
        out[name.replace("layers", "napari")] = (
            lambda c, z, y, x, lv=first, ls=layers: _napari_style(
                lambda: (lv[c] if len(ls) == 1 else ls[c])[z][y : y + 256, x : x + 256]
            ),
            lambda z, lv=first, ls=layers: np.stack(
                [
                    _napari_style(lambda i=i: (lv[i] if len(ls) == 1 else ls[i])[z])
                    for i in range(SHAPE[0])
                ]
            ),
        )
    # the same read path without dask: what dask's own per-compute cost adds
    from napari_ozx.ngff.read.open import _ChunkReader, open_ome_zarr

    for name, p in (("fastread ozx (no dask)", OZX), ("fastread dir (no dask)", DIR)):
        arr = open_ome_zarr(p).images()[0].arrays[0].array
        r = _ChunkReader(arr, str(p))
        out[name] = (
            lambda c, z, y, x, r=r: r[(c, z, slice(y, y + 256), slice(x, x + 256))],
            lambda z, r=r: r[(slice(None), z, slice(None), slice(None))],
        )
    for name, store in (
        ("zarr LocalStore dir", zarr.storage.LocalStore(DIR, read_only=True)),
        ("zarr OzxStore ozx", OzxStore(OZX)),
    ):
        a = zarr.open_array(store, path="0", mode="r")
        out[name] = (
            lambda c, z, y, x, a=a: a[c, z, y : y + 256, x : x + 256],
            lambda z, a=a: a[:, z],
        )
    out.update(_zarr_sync_readers())
    try:
        from zarrista import Array
        from zarrista.store import FilesystemStore, ZipStore

        zs = Array.open(ZipStore(FilesystemStore(str(OZX.parent)), OZX.name), "/0")
        zd = Array.open(FilesystemStore(str(DIR)), "/0")
        for name, za in (("zarrista ozx", zs), ("zarrista dir", zd)):
            out[name] = (
                lambda c, z, y, x, za=za: np.asarray(
                    za.retrieve_array_subset((c, z, slice(y, y + 256), slice(x, x + 256)))
                ),
                lambda z, za=za: np.asarray(za.retrieve_array_subset((slice(None), z))),
            )
    except ImportError:
        print("zarrista not installed (pip install zarrista): skipped")
    try:
        import tensorstore as ts

        t = ts.open(
            {
                "driver": "zarr3",
                "kvstore": {"driver": "file", "path": str(DIR / "0")},
                "context": {"cache_pool": {"total_bytes_limit": 0}},
            },
            read=True,
        ).result()
        out["tensorstore dir"] = (
            lambda c, z, y, x, t=t: t[c, z, y : y + 256, x : x + 256].read().result(),
            lambda z, t=t: t[:, z].read().result(),
        )
    except ImportError:
        print("tensorstore not installed (pip install tensorstore): skipped")
    return out


class _ZarrReadSync:
    """``array[sel]`` through zarr-python's own synchronous codec path (zarr >= 3.4's
    ``FusedCodecPipeline.read_sync``), called directly as ``_get_selection`` calls it,
    without its event-loop and thread hops: what napari-ozx could use instead of
    ``ngff.read.fastread``."""

    def __init__(self, array: object) -> None:
        from zarr.core.array_spec import ArraySpec
        from zarr.core.buffer import default_buffer_prototype
        from zarr.core.codec_pipeline import _resolve_max_workers

        aa = array.async_array  # type: ignore[attr-defined]
        self.aa, self.md, self.proto = aa, aa.metadata, default_buffer_prototype()
        self.spec = ArraySpec(
            shape=aa._chunk_grid.chunk_shape,
            dtype=self.md.dtype,
            fill_value=self.md.fill_value,
            config=aa.config,
            prototype=self.proto,
        )
        self.workers = _resolve_max_workers()

    def __getitem__(self, sel: tuple) -> np.ndarray:
        from zarr.core.indexing import BasicIndexer

        aa, md = self.aa, self.md
        indexer = BasicIndexer(sel, shape=md.shape, chunk_grid=aa._chunk_grid)
        out = self.proto.nd_buffer.empty(
            shape=indexer.shape, dtype=md.dtype.to_native_dtype(), order=aa.config.order
        )
        batch = [
            (aa.store_path / md.encode_chunk_key(cc), self.spec, csel, osel, whole)
            for cc, csel, osel, whole in indexer
        ]
        aa.codec_pipeline.read_sync(batch, out, indexer.drop_axes, max_workers=self.workers)
        return out.as_ndarray_like()


def _zarr_sync_readers(
    d: Path = DIR, z: Path = OZX, path: str = "0", tag: str = ""
) -> dict[str, tuple[Callable[..., object], Callable[..., object]]]:
    """zarr-python's synchronous path (zarr >= 3.4), directly (``read_sync``) and through
    ``zarr.Array`` with the ``FusedCodecPipeline`` configured."""
    import zarr

    from napari_ozx.ozx.store import OzxStore

    try:
        from zarr.core.codec_pipeline import FusedCodecPipeline
    except ImportError:
        print(f"zarr {zarr.__version__}: no synchronous codec pipeline (zarr >= 3.4): skipped")
        return {}
    out: dict[str, tuple[Callable[..., object], Callable[..., object]]] = {}
    pipeline = f"{FusedCodecPipeline.__module__}.{FusedCodecPipeline.__name__}"
    for where, store in (
        ("dir", zarr.storage.LocalStore(d, read_only=True)),
        ("ozx", OzxStore(z)),
    ):
        with zarr.config.set({"codec_pipeline.path": pipeline}):
            a = zarr.open_array(store, path=path, mode="r")
        r = _ZarrReadSync(a)
        for name, src in (
            (f"zarr read_sync {tag}{where}", r),
            (f"zarr fused Array {tag}{where}", a),
        ):
            out[name] = (
                lambda c, z, y, x, s=src: np.asarray(s[c, z, y : y + 256, x : x + 256]),
                lambda z, s=src: np.asarray(s[:, z, :, :]),  # full, as fastread is given
            )
    return out


def _napari_style(view: Callable[[], object]) -> np.ndarray:
    import dask

    with dask.config.set({"optimization.fuse.active": False}):  # napari's configure_dask
        return np.asarray(view())


UNSHARDED_DIR = DATA / "unsharded.zarr"
UNSHARDED_OZX = DATA / "unsharded.ozx"


def generate_unsharded(force: bool) -> None:
    """The same pixels as plain Zarr v3 without shards (chunks 1x1x256x256, zstd 3), as
    a directory and zipped (STORED, ``zarr.json`` first) as an ``.ozx``-like archive."""
    import shutil
    import zipfile

    import zarr

    if UNSHARDED_DIR.exists() and UNSHARDED_OZX.exists() and not force:
        return
    shutil.rmtree(UNSHARDED_DIR, ignore_errors=True)
    DATA.mkdir(exist_ok=True)
    a = zarr.create_array(
        zarr.storage.LocalStore(UNSHARDED_DIR),
        shape=SHAPE,
        chunks=(1, 1, 256, 256),
        dtype="uint16",
        compressors=zarr.codecs.ZstdCodec(level=3),
    )
    a[...] = _data(SHAPE)
    tmp = UNSHARDED_OZX.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as zf:
        zf.write(UNSHARDED_DIR / "zarr.json", "zarr.json")
        for p in sorted(UNSHARDED_DIR.rglob("*")):
            if p.is_file() and p.name != "zarr.json":
                zf.write(p, p.relative_to(UNSHARDED_DIR).as_posix())
    tmp.rename(UNSHARDED_OZX)


def _unsharded_readers() -> dict[str, tuple[Callable[..., object], Callable[..., object]]]:
    """fastread (no dask), zarr-python and zarr's synchronous path on the unsharded copy."""
    import zarr

    from napari_ozx.ngff.read.fastread import fast_reader
    from napari_ozx.ozx.store import OzxStore

    out: dict[str, tuple[Callable[..., object], Callable[..., object]]] = {}
    for where, store in (
        ("dir", zarr.storage.LocalStore(UNSHARDED_DIR, read_only=True)),
        ("ozx", OzxStore(UNSHARDED_OZX)),
    ):
        a = zarr.open_array(store, mode="r")
        for name, src in (
            (f"fastread unsharded {where}", fast_reader(a)),
            (f"zarr unsharded {where}", a),
        ):
            out[name] = (
                lambda c, z, y, x, s=src: np.asarray(s[c, z, y : y + 256, x : x + 256]),
                lambda z, s=src: np.asarray(s[:, z, :, :]),  # full, as fastread is given
            )
    out.update(_zarr_sync_readers(UNSHARDED_DIR, UNSHARDED_OZX, "", "unsharded "))
    return out


def bench_reads(repeats: int, unsharded: bool = False) -> dict[str, dict[str, float]]:
    readers = _readers()
    if unsharded:
        readers.update(_unsharded_readers())
    ref = readers["zarr LocalStore dir"]
    # same pixels everywhere, checked once
    for name, (tile, plane) in readers.items():
        got = np.asarray(tile(1, 3, 256, 512)).reshape(256, 256)
        if not np.array_equal(got, ref[0](1, 3, 256, 512)):
            raise SystemExit(f"{name}: tile differs from zarr-python's")
        if not np.array_equal(np.asarray(plane(5)).reshape(2, 1024, 1024), ref[1](5)):
            raise SystemExit(f"{name}: plane differs from zarr-python's")
    rng = random.Random(1)
    res: dict[str, dict[str, list[float]]] = {n: {"tile": [], "plane": []} for n in readers}
    names = list(readers)
    for _ in range(repeats):
        c, z = rng.randrange(2), rng.randrange(SHAPE[1])
        y, x = rng.randrange(0, 1024, 256), rng.randrange(0, 1024, 256)
        rng.shuffle(names)
        for n in names:
            tile, plane = readers[n]
            t = time.perf_counter()
            tile(c, z, y, x)
            res[n]["tile"].append(time.perf_counter() - t)
            t = time.perf_counter()
            plane(z)
            res[n]["plane"].append(time.perf_counter() - t)
    med = {n: {k: statistics.median(v) for k, v in r.items()} for n, r in res.items()}
    print(f"{'reader':22s} {'tile 256x256':>14s} {'2-ch plane':>12s}")
    for n in sorted(med):
        print(f"{n:22s} {med[n]['tile'] * 1e3:11.2f} ms {med[n]['plane'] * 1e3:9.2f} ms")
    return med


# ----------------------------------------------------------------------------- open

_OPEN = r"""
import gc, json, resource, sys, time
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
kind, path = sys.argv[1], sys.argv[2]
import zarr, zipfile
from napari_ozx.ozx.store import OzxStore
gc.collect()
r0 = rss(); t = time.perf_counter()
if kind == "ours":
    s = OzxStore(path)
    s.member_size("zarr.json")
else:
    s = zarr.storage.ZipStore(path, mode="r")
    s._sync_open()
dt = time.perf_counter() - t
gc.collect()
print(json.dumps({"time": dt, "rss": rss() - r0}))
"""


def bench_open(path: Path, repeats: int) -> dict[str, float]:
    res: dict[str, dict[str, list[float]]] = {k: {"time": [], "rss": []} for k in ("ours", "zip")}
    for _ in range(repeats):
        for kind in ("ours", "zip"):
            out = subprocess.run(
                [sys.executable, "-c", _OPEN, kind, str(path)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            d = json.loads(out.strip().splitlines()[-1])
            res[kind]["time"].append(d["time"])
            res[kind]["rss"].append(d["rss"])
    med = {f"{k} {m}": statistics.median(v) for k, r in res.items() for m, v in r.items()}
    print(
        f"open {path.name}: OzxStore {med['ours time'] * 1e3:.0f} ms "
        f"+{med['ours rss'] / 2**20:.0f} MiB"
        f"   zarr ZipStore {med['zip time'] * 1e3:.0f} ms +{med['zip rss'] / 2**20:.0f} MiB"
    )
    return med


# ----------------------------------------------------------------------------- write


def bench_write(repeats: int) -> tuple[float, float]:
    import numcodecs
    import zarr

    from napari_ozx.ngff.write.writer import write_ome_zarr

    shape = (2, 4, 1024, 1024)
    data = _data(shape, 2)
    spec = _spec(data)
    ours: list[float] = []
    ref: list[float] = []
    with tempfile.TemporaryDirectory(dir=DATA) as tmp:
        for i in range(repeats):
            for kind in ("ours", "zarr") if i % 2 == 0 else ("zarr", "ours"):
                target = Path(tmp) / f"{kind}{i}.zarr"
                t = time.perf_counter()
                if kind == "ours":
                    opts = _write_options(version="0.4", chunk_yx=64, pyramid_levels=1)
                    write_ome_zarr(target, spec, options=opts)  # type: ignore[arg-type]
                    ours.append(time.perf_counter() - t)
                else:
                    a = zarr.create_array(
                        zarr.storage.LocalStore(target),
                        shape=shape,
                        chunks=(1, 1, 64, 64),
                        dtype=data.dtype,
                        zarr_format=2,
                        compressors=numcodecs.Zstd(level=3),
                    )
                    a[:] = data
                    ref.append(time.perf_counter() - t)
    o, r = statistics.median(ours), statistics.median(ref)
    n = int(np.prod([s // c for s, c in zip(shape, (1, 1, 64, 64), strict=True)]))
    print(f"0.4 directory write, {n} chunks of 64x64: ours {o:.2f} s, zarr-python {r:.2f} s")
    return o, r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=21)
    ap.add_argument("--open-repeats", type=int, default=3)
    ap.add_argument("--write-repeats", type=int, default=3)
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument(
        "--unsharded", action="store_true", help="also read an unsharded copy (zarr v3, no shards)"
    )
    ap.add_argument("--skip", nargs="*", default=(), choices=("reads", "open", "write"))
    args = ap.parse_args()
    bars: list[tuple[str, float, float]] = []
    if "reads" not in args.skip:
        generate(args.regenerate)
        if args.unsharded:
            generate_unsharded(args.regenerate)
        m = bench_reads(args.repeats, args.unsharded)
        if "zarrista ozx" in m:
            for k in ("tile", "plane"):
                bars.append(
                    (
                        f"{k} layers ozx / zarrista ozx",
                        m["layers ozx"][k] / m["zarrista ozx"][k],
                        1.5,
                    )
                )
        if "tensorstore dir" in m:
            for k in ("tile", "plane"):
                bars.append(
                    (
                        f"{k} layers dir / tensorstore dir",
                        m["layers dir"][k] / m["tensorstore dir"][k],
                        2.0,
                    )
                )
        if "zarrista ozx" in m:
            for k in ("tile", "plane"):  # informative: the bars use the lines above
                r = m["napari ozx"][k] / m["zarrista ozx"][k]
                print(f"{k} napari-style ozx / zarrista ozx: {r:.2f}")
        for k in ("tile", "plane"):
            bars.append(
                (f"{k} layers ozx / layers dir", m["layers ozx"][k] / m["layers dir"][k], 1.2)
            )
        # informative: zarr's own synchronous path against ours, same run
        for tag, where in itertools.product(("", "unsharded "), ("dir", "ozx")):
            if f"zarr read_sync {tag}{where}" not in m:
                continue
            fast = f"fastread {tag}{where}" if tag else f"fastread {where} (no dask)"
            for k in ("tile", "plane"):
                ours = m[fast][k]
                sync_ = m[f"zarr read_sync {tag}{where}"][k]
                fused = m[f"zarr fused Array {tag}{where}"][k]
                print(
                    f"{k} {tag or 'sharded '}{where}: zarr read_sync / fastread "
                    f"{sync_ / ours:.2f}, zarr fused Array / fastread {fused / ours:.2f}"
                )
    if "open" not in args.skip:
        o = bench_open(generate_many(args.entries), args.open_repeats)
        bars.append(("open many: OzxStore / ZipStore time", o["ours time"] / o["zip time"], 0.2))
        bars.append(("open many: OzxStore RSS growth (MiB)", o["ours rss"] / 2**20, 150))
    if "write" not in args.skip:
        ow, rw = bench_write(args.write_repeats)
        bars.append(("0.4 dir write small chunks / zarr-python", ow / rw, 1.5))
    print()
    for what, value, bar in bars:
        print(f"{what:42s} {value:7.2f}  (bar <= {bar:g})  {'ok' if value <= bar else 'MISSED'}")


if __name__ == "__main__":
    main()
