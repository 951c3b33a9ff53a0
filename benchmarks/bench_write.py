"""Write speed and file size: our .ozx vs our directory vs the zarr-python floor vs peers.

Usage::

    python benchmarks/bench_write.py [--repeats 3] [--peers] [--lazy-gib 1.2]

Data: one 64x1024x1024 uint16 volume (128 MiB, smooth structure + noise), a 3-level
pyramid, inner chunks 1x256x256, shards 16x1024x1024, zstd level 3. Timed in one run
(median of ``--repeats``, interleaved):

* ``zarr floor``: zarr-python writing level 0 alone straight to a directory, whole shards
  at a time (no pyramid: the pyramid levels add about a third more data);
* ``ours dir`` and ``ours ozx``: :func:`napari_ozx.ngff.write.writer.write_ome_zarr`, 3 levels;
* ``--peers``: ngff-zarr writing the same to ``.ozx`` (slow: about a minute).

Also reports the ``.ozx`` size against the sum of its entries (no dead or duplicate
entries) and, with ``--lazy-gib``, peak RSS growth while saving a lazy dask source of
that size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import numpy as np

SHAPE = (64, 1024, 1024)


def make_data() -> np.ndarray:
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:1024, 0:1024].astype(np.float32)
    base = (np.sin(yy / 37) * np.cos(xx / 23) * 800 + 1200).astype(np.uint16)
    out = np.empty(SHAPE, np.uint16)
    for z in range(SHAPE[0]):
        out[z] = base + rng.poisson(base.astype(np.float32) / 40).astype(np.uint16)
    return out


def zarr_floor(data: np.ndarray, target: Path) -> None:
    import zarr
    from zarr.codecs import ZstdCodec

    arr = zarr.create_array(
        target,
        shape=data.shape,
        dtype=data.dtype,
        chunks=(1, 256, 256),
        shards=(16, 1024, 1024),
        compressors=ZstdCodec(level=3),
        overwrite=True,
    )
    arr[...] = data


def ours(data: np.ndarray, target: Path, fmt: str) -> None:
    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr

    axes = [
        Axis("z", "space", "micrometer"),
        Axis("y", "space", "micrometer"),
        Axis("x", "space", "micrometer"),
    ]
    write_ome_zarr(
        target,
        ImageSpec(data, axes, [1, 0.5, 0.5]),
        options=WriteOptions(format=fmt, pyramid_levels=3),
    )


def ngff_zarr_ozx(data: np.ndarray, target: Path, method: str | None = "DASK_BIN_SHRINK") -> None:
    import ngff_zarr as nz

    img = nz.to_ngff_image(data, dims=["z", "y", "x"], scale={"z": 1, "y": 0.5, "x": 0.5})
    ms = nz.to_multiscales(
        img,
        scale_factors=[{"z": 1, "y": 2, "x": 2}, {"z": 1, "y": 4, "x": 4}],
        chunks=(1, 256, 256),
        method=nz.Methods[method] if method else None,
    )
    nz.to_ngff_zarr(str(target), ms, version="0.5", chunks_per_shard={"z": 16, "y": 4, "x": 4})


def timed(fn, *args) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def lazy_peak(gib: float, tmp: Path) -> None:
    import dask.array as da

    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr

    z = max(16, int(gib * 2**30 / (2 * 1024 * 1024)) // 16 * 16)
    src = da.random.default_rng(1).integers(
        0, 4000, (z, 1024, 1024), dtype=np.uint16, chunks=(16, 1024, 1024)
    )
    axes = [Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]
    base, peak, stop = rss(), [rss()], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.02)

    th = threading.Thread(target=sample)
    th.start()
    t = timed(
        write_ome_zarr, tmp / "lazy.ozx", ImageSpec(src, axes), None, WriteOptions(pyramid_levels=3)
    )
    stop.set()
    th.join()
    nbytes = src.nbytes
    shard = 16 * 1024 * 1024 * 2
    growth = peak[0] - base
    print(
        f"lazy {nbytes / 2**30:.2f} GiB source -> .ozx in {t:.1f} s; peak RSS growth {growth / 2**20:.0f} MiB "
        f"= {growth / shard:.1f} shards of 32 MiB ({os.cpu_count()} workers) = {growth / nbytes:.1%} of the data"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peers", action="store_true")
    ap.add_argument(
        "--peer-method",
        default="DASK_BIN_SHRINK",
        help="ngff-zarr downsampling method ('' = its default)",
    )
    ap.add_argument("--lazy-gib", type=float, default=0.0)
    args = ap.parse_args()
    data = make_data()
    tmp = Path(tempfile.mkdtemp(prefix="bench_write_", dir=Path(__file__).parent))
    try:
        res: dict[str, list[float]] = {
            "zarr floor (level 0 only)": [],
            "ours dir": [],
            "ours ozx": [],
        }
        for _ in range(args.repeats):
            res["zarr floor (level 0 only)"].append(timed(zarr_floor, data, tmp / "floor.zarr"))
            res["ours dir"].append(timed(ours, data, tmp / "ours.ome.zarr", "directory"))
            res["ours ozx"].append(timed(ours, data, tmp / "ours.ozx", "ozx"))
            shutil.rmtree(tmp / "floor.zarr")
        if args.peers:
            res["ngff-zarr ozx"] = [
                timed(ngff_zarr_ozx, data, tmp / "peer.ozx", args.peer_method or None)
            ]
        med = {k: statistics.median(v) for k, v in res.items()}
        for k, v in med.items():
            print(f"{k:28s} {v:6.2f} s")
        print(f"ours ozx / ours dir     {med['ours ozx'] / med['ours dir']:.2f}x")
        print(f"ours ozx / zarr floor   {med['ours ozx'] / med['zarr floor (level 0 only)']:.2f}x")
        if "ngff-zarr ozx" in med:
            print(f"ngff-zarr ozx / ours ozx {med['ngff-zarr ozx'] / med['ours ozx']:.1f}x faster")
        with zipfile.ZipFile(tmp / "ours.ozx") as zf:
            payload = sum(i.file_size for i in zf.infolist())
            names = [i.filename for i in zf.infolist()]
        size = (tmp / "ours.ozx").stat().st_size
        print(
            f"ours.ozx {size:,} bytes, {len(names)} entries ({len(set(names))} unique), entry data {payload:,} bytes, "
            f"overhead {size - payload:,} bytes; source {data.nbytes:,} bytes"
        )
        if args.lazy_gib:
            lazy_peak(args.lazy_gib, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
