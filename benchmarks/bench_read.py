"""What a napari user waits for: opening, and reading planes and tiles through the layers.

Usage::

    python benchmarks/bench_read.py [--repeats 15] [--regenerate] [--peer-python PATH]

Generates once (under benchmarks/_data/, gitignored; ~15 s) a 2x64x1024x1024 uint16
OME-Zarr 0.5 image with our writer (inner chunks 1x1x256x256, shards 1x16x1024x1024,
zstd 3, 3-level pyramid) as a directory and as ``.ozx``. Then, in one run, page cache
warm, medians of interleaved repeats:

* a full-resolution plane of one channel layer (what napari computes for a 2D slice) and
  a 256x256 tile, through the dask arrays the reader hands to napari: ``.ozx`` vs dir;
* first open in a fresh process with napari already imported (reader call -> layer
  data), and a repeated open in the same process; napari-ome-zarr on the same directory
  for comparison when ``--peer-python`` points at an interpreter that has it (kept out of
  the project's environment so it never competes with our reader);
* bytes of chunk data read while opening (must be 0).

Prints times and ratios.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "_data"
SHAPE = (2, 64, 1024, 1024)


def generate(force: bool) -> tuple[Path, Path]:
    from napari_ozx.ngff.model.metadata import Axis, Channel, Window
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr

    d, z = DATA / "read.ome.zarr", DATA / "read.ozx"
    if d.exists() and z.exists() and not force:
        return d, z
    DATA.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    base = rng.integers(0, 2000, (1, 1, 1024, 1024), dtype=np.uint16)
    data = np.broadcast_to(base, SHAPE).copy()
    data += rng.integers(0, 64, SHAPE, dtype=np.uint16)  # noise so chunks differ
    axes = [
        Axis("c", "channel"),
        Axis("z", "space", "micrometer"),
        Axis("y", "space", "micrometer"),
        Axis("x", "space", "micrometer"),
    ]
    spec = ImageSpec(
        data,
        axes,
        [1, 2, 0.5, 0.5],
        None,
        [Channel("a", "FF0000", Window(0, 2000)), Channel("b", "00FF00", Window(0, 2000))],
        "bench",
    )
    opts = WriteOptions(pyramid_levels=3)
    for target, fmt in ((d, "directory"), (z, "ozx")):
        t = time.perf_counter()
        write_ome_zarr(target, spec, options=WriteOptions(**{**opts.__dict__, "format": fmt}))
        print(f"generated {target.name} in {time.perf_counter() - t:.1f} s")
    return d, z


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def bench_layers(d: Path, z: Path, repeats: int) -> None:
    from napari_ozx.layers.reading import read_layer_data

    levels = {}
    for name, p in (("dir", d), ("ozx", z)):
        ((data, kw, _),) = [ld for ld in read_layer_data(str(p)) if ld[2] == "image"]
        levels[name] = data[0]
    rng = random.Random(1)
    plane = {"dir": [], "ozx": []}
    tile = {"dir": [], "ozx": []}
    for _ in range(repeats):
        c, zz = rng.randrange(2), rng.randrange(SHAPE[1])
        y, x = rng.randrange(0, 1024, 256), rng.randrange(0, 1024, 256)
        for name in ("dir", "ozx") if rng.random() < 0.5 else ("ozx", "dir"):
            lv = levels[name]
            t = time.perf_counter()
            np.asarray(lv[c, zz])
            plane[name].append(time.perf_counter() - t)
            t = time.perf_counter()
            np.asarray(lv[c, zz, y : y + 256, x : x + 256])
            tile[name].append(time.perf_counter() - t)
    for what, res in (("channel plane 1024x1024 via dask", plane), ("tile 256x256 via dask", tile)):
        a, b = med(res["dir"]), med(res["ozx"])
        print(f"{what:34s} dir {a * 1e3:7.2f} ms   ozx {b * 1e3:7.2f} ms   ozx/dir {b / a:5.2f}x")


def bench_open(d: Path, z: Path, peer: str | None, repeats: int) -> None:
    from _open_timing import OURS, PEER, run_open

    runs = [("ours dir", sys.executable, OURS, d), ("ours ozx", sys.executable, OURS, z)]
    if peer:
        runs.append(("napari-ome-zarr dir", peer, PEER, d))
    res = {}
    for name, python, reader, path in runs:
        try:
            incl, again = run_open(python, reader, path, repeats, False)
            excl, _ = run_open(python, reader, path, repeats, True)
        except subprocess.CalledProcessError as e:
            print(f"{name}: failed: {e.stderr.strip().splitlines()[-1:]}")
            continue
        res[name] = (incl, excl, again)
        print(
            f"open {name:22s} first {incl * 1e3:7.1f} ms (excl. dask import {excl * 1e3:6.1f} ms)   repeated {again * 1e3:6.1f} ms"
        )
    if "napari-ome-zarr dir" in res:
        pi, pe, pa = res["napari-ome-zarr dir"]
        for k in ("ours dir", "ours ozx"):
            i, e, a = res[k]
            print(
                f"napari-ome-zarr / {k}: first open {pi / i:4.1f}x (excl. dask {pe / e:4.1f}x), repeated {pa / a:4.1f}x"
            )


def bench_open_io(z: Path) -> None:
    from napari_ozx.layers.reading import read_layer_data
    from napari_ozx.ozx.store import OzxStore

    seen: list[tuple[str, int]] = []
    orig = OzxStore.get

    async def spy(self, key, prototype=None, byte_range=None):  # type: ignore[no-untyped-def]
        buf = await orig(self, key, prototype, byte_range)
        seen.append((key, 0 if buf is None else len(buf)))
        return buf

    OzxStore.get = spy  # type: ignore[method-assign]
    try:
        read_layer_data(str(z))
    finally:
        OzxStore.get = orig  # type: ignore[method-assign]
    chunk_bytes = sum(n for k, n in seen if not k.endswith("zarr.json"))
    print(
        f"open reads {len(seen)} keys, {sum(n for _, n in seen)} bytes; chunk data read: {chunk_bytes} bytes"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--open-repeats", type=int, default=5)
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--peer-python", default=None, help="python with napari-ome-zarr installed")
    args = ap.parse_args()
    d, z = generate(args.regenerate)
    bench_layers(d, z, args.repeats)
    bench_open_io(z)
    bench_open(d, z, args.peer_python, args.open_repeats)


if __name__ == "__main__":
    main()
