"""Read speed of OzxStore against a plain directory and zarr's ZipStore.

Usage::

    python benchmarks/bench_store.py [--repeats 40] [--regenerate]

Generates (once, under benchmarks/_data/, gitignored; ~10-20 s) a sharded zarr v3 uint16
image 2x64x1024x1024 (shards 1x16x1024x1024, inner chunks 1x1x256x256, zstd level 3) as
a directory and zips it into an RFC-9 style ``.ozx`` (STORED entries, zarr.json first).
Then, page cache warm, times in one run (median of ``--repeats`` random reads, stores
interleaved so drift hits all of them alike):

* one 256x256 tile, ``arr[c, z, y:y+256, x:x+256]``
* one full-resolution 2-channel plane, ``arr[:, z]``

via ``zarr.open_array`` on ``LocalStore(dir)``, ``OzxStore(.ozx)``, ``zarr.storage.ZipStore``
(mode="r") and ``OzxStore(threaded_io=True)``, which hands each read to
``asyncio.to_thread`` (to decide whether the async methods should read inline). Prints
times and ratios and checks the bars: ozx tile <= 1.2x directory, >= 10x faster than ZipStore.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

from napari_ozx.ozx.store import OzxStore

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
DIR = DATA / "bench_image.zarr"
OZX = DATA / "bench_image.ozx"

SHAPE = (2, 64, 1024, 1024)
SHARDS = (1, 16, 1024, 1024)
CHUNKS = (1, 1, 256, 256)
TILE = 256


def _synthetic_plane(rng: np.random.Generator, c: int, z: int) -> np.ndarray:
    """Smooth blobs + Poisson-ish noise: compresses like a fluorescence image."""
    yy, xx = np.mgrid[0:1024, 0:1024].astype(np.float32)
    img = np.zeros((1024, 1024), np.float32)
    for _ in range(12):
        cy, cx = rng.uniform(0, 1024, 2)
        sigma = rng.uniform(20, 90)
        img += rng.uniform(500, 3000) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * sigma**2))
    img += 100 + 50 * c + z
    noise = rng.normal(0, 12, img.shape).astype(np.float32)
    return np.clip(img + noise, 0, 65535).astype(np.uint16)


def generate(force: bool = False) -> None:
    if OZX.exists() and DIR.exists() and not force:
        return
    import shutil

    DATA.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(DIR, ignore_errors=True)
    t0 = time.perf_counter()
    root = zarr.open_group(zarr.storage.LocalStore(DIR), mode="w", zarr_format=3)
    root.attrs["ome"] = {
        "version": "0.5",
        "multiscales": [
            {
                "axes": [
                    {"name": "c", "type": "channel"},
                    {"name": "z", "type": "space", "unit": "micrometer"},
                    {"name": "y", "type": "space", "unit": "micrometer"},
                    {"name": "x", "type": "space", "unit": "micrometer"},
                ],
                "datasets": [
                    {
                        "path": "0",
                        "coordinateTransformations": [
                            {"type": "scale", "scale": [1.0, 1.0, 0.5, 0.5]}
                        ],
                    }
                ],
            }
        ],
    }
    arr = root.create_array(
        "0",
        shape=SHAPE,
        dtype="uint16",
        shards=SHARDS,
        chunks=CHUNKS,
        compressors=ZstdCodec(level=3),
        dimension_names=("c", "z", "y", "x"),
    )
    rng = np.random.default_rng(0)
    base = [_synthetic_plane(rng, c, 0) for c in range(SHAPE[0])]
    for c in range(SHAPE[0]):
        for z0 in range(0, SHAPE[1], SHARDS[1]):  # whole shards, written once each
            block = np.stack(
                [np.roll(base[c], (3 * z, 5 * z), axis=(0, 1)) + z for z in range(z0, z0 + 16)]
            )
            arr[c, z0 : z0 + SHARDS[1]] = block
    t1 = time.perf_counter()

    # zip it: zarr.json first (breadth-first), then the rest, all STORED
    files = sorted(p.relative_to(DIR).as_posix() for p in DIR.rglob("*") if p.is_file())
    meta = sorted((f for f in files if f.rsplit("/", 1)[-1] == "zarr.json"),
                  key=lambda f: (f.count("/"), f))  # fmt: skip
    rest = [f for f in files if f not in set(meta)]
    tmp = OZX.with_suffix(".ozx.partial")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name in meta + rest:
            zf.write(DIR / name, name)
        zf.comment = json.dumps({"ome": {"version": "0.5"}}).encode()
    tmp.replace(OZX)
    t2 = time.perf_counter()
    print(f"generated {DIR.name} in {t1 - t0:.1f} s, zipped to {OZX.name} in {t2 - t1:.1f} s "
          f"({OZX.stat().st_size / 2**20:.0f} MiB)")  # fmt: skip


def warm_page_cache() -> None:
    for p in [OZX, *DIR.rglob("*")]:
        if p.is_file():
            with open(p, "rb") as f:
                while f.read(1 << 24):
                    pass


def open_stores() -> dict[str, zarr.Array]:
    stores = {
        "dir": zarr.storage.LocalStore(DIR, read_only=True),
        "ozx": OzxStore(OZX),
        "ozx+to_thread": OzxStore(OZX, threaded_io=True),
        "zipstore": zarr.storage.ZipStore(OZX, mode="r"),
    }
    return {name: zarr.open_array(store=s, path="0", mode="r") for name, s in stores.items()}


def time_open(repeats: int = 10) -> dict[str, float]:
    out: dict[str, list[float]] = {"dir": [], "ozx": [], "zipstore": []}
    for _ in range(repeats):
        for name in out:
            t0 = time.perf_counter()
            if name == "dir":
                s = zarr.storage.LocalStore(DIR, read_only=True)
            elif name == "ozx":
                s = OzxStore(OZX)
            else:
                s = zarr.storage.ZipStore(OZX, mode="r")
            zarr.open_group(store=s, mode="r")["0"]
            out[name].append(time.perf_counter() - t0)
            s.close()
    return {k: statistics.median(v) for k, v in out.items()}


def bench(
    arrays: dict[str, zarr.Array], repeats: int, seed: int = 1
) -> dict[str, dict[str, float]]:
    rng = random.Random(seed)
    ny, nx = SHAPE[2] // TILE, SHAPE[3] // TILE
    tiles = [
        (rng.randrange(SHAPE[0]), rng.randrange(SHAPE[1]), rng.randrange(ny), rng.randrange(nx))
        for _ in range(repeats)
    ]
    planes = [rng.randrange(SHAPE[1]) for _ in range(max(10, repeats // 2))]
    ref = arrays["dir"]
    for name, arr in arrays.items():  # correctness + warm-up of each pipeline
        c, z, ty, tx = tiles[0]
        sel = (c, z, slice(ty * TILE, (ty + 1) * TILE), slice(tx * TILE, (tx + 1) * TILE))
        assert np.array_equal(arr[sel], ref[sel]), name
        arr[:, planes[0]]
    results: dict[str, dict[str, list[float]]] = {n: {"tile": [], "plane": []} for n in arrays}
    for c, z, ty, tx in tiles:
        sel = (c, z, slice(ty * TILE, (ty + 1) * TILE), slice(tx * TILE, (tx + 1) * TILE))
        for name, arr in arrays.items():
            t0 = time.perf_counter()
            arr[sel]
            results[name]["tile"].append(time.perf_counter() - t0)
    for z in planes:
        for name, arr in arrays.items():
            t0 = time.perf_counter()
            arr[:, z]
            results[name]["plane"].append(time.perf_counter() - t0)
    return {n: {k: statistics.median(v) for k, v in r.items()} for n, r in results.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--regenerate", action="store_true")
    args = ap.parse_args(argv)

    generate(force=args.regenerate)
    warm_page_cache()
    opens = time_open()
    arrays = open_stores()
    res = bench(arrays, args.repeats)

    ms = 1e3
    print(f"\nzarr {zarr.__version__}, median of {args.repeats} tiles / "
          f"{max(10, args.repeats // 2)} planes, page cache warm")  # fmt: skip
    print(f"{'store':<16}{'open (ms)':>12}{'tile (ms)':>12}{'plane (ms)':>12}")
    for name, r in res.items():
        o = opens.get(name)
        ostr = f"{o * ms:12.2f}" if o is not None else f"{'-':>12}"
        print(f"{name:<16}{ostr}{r['tile'] * ms:12.2f}{r['plane'] * ms:12.2f}")
    d, o, z, t = res["dir"], res["ozx"], res["zipstore"], res["ozx+to_thread"]
    print("\nratios")
    for label, num, den in [
        ("ozx / dir", o, d),
        ("zipstore / ozx", z, o),
        ("to_thread / inline", t, o),
    ]:
        print(f"  {label:<20} tile {num['tile'] / den['tile']:6.2f}x"
              f"   plane {num['plane'] / den['plane']:6.2f}x")  # fmt: skip
    ok_dir = o["tile"] <= 1.2 * d["tile"]
    ok_zip = z["tile"] >= 10 * o["tile"]
    print(f"\nbar: ozx tile <= 1.2x dir: {'PASS' if ok_dir else 'FAIL'}; "
          f"ozx tile >= 10x faster than ZipStore: {'PASS' if ok_zip else 'FAIL'}")  # fmt: skip
    return 0 if ok_dir and ok_zip else 1


if __name__ == "__main__":
    sys.exit(main())
