"""What checking a STORED shard's ZIP CRC-32 on first read costs a tile read.

Usage::

    python benchmarks/bench_integrity.py [--repeats 15]

Writes (in a temporary folder) a sharded uint16 image 4x16x1024x1024 as ``.ozx`` with
napari-ozx's writer (shards 1x16x1024x1024 = 32 MiB decoded, inner chunks 256x256,
zstd). Page cache warm. In one run, interleaved, median of ``--repeats``:

* first tile of a shard, on a fresh store: ``verify_members=True`` (the default for local
  files: reads the whole shard member once for its CRC) vs ``False``;
* a later tile of an already verified shard (the check is cached: should cost nothing).

Prints milliseconds and ratios.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr

from napari_ozx.ngff.model.metadata import Axis
from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr
from napari_ozx.ozx.store import OzxStore


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "img.ozx"
        data = (rng.normal(1000, 30, (4, 16, 1024, 1024))).astype(np.uint16)
        axes = [Axis("c", "channel"), Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]
        opts = WriteOptions(pyramid_levels=1, chunk_yx=256, shard_yx=1024, shard_z=16)
        write_ome_zarr(path, ImageSpec(data, axes), options=opts)
        path.read_bytes()  # page cache warm
        shard_bytes = OzxStore(path).index.get("0/c/0/0/0/0").compressed_size  # type: ignore[union-attr]
        times: dict[str, list[float]] = {"first, verify": [], "first, no verify": [],
                                         "later, verify": [], "later, no verify": []}  # fmt: skip
        for i in range(args.repeats):
            c = i % 4
            for verify in (True, False) if i % 2 else (False, True):
                store = OzxStore(path, verify_members=verify)
                arr = zarr.open_array(store, path="0", mode="r")
                tag = "verify" if verify else "no verify"
                t = time.perf_counter()
                arr[c, 3, 256:512, 256:512]
                times[f"first, {tag}"].append(time.perf_counter() - t)
                t = time.perf_counter()
                arr[c, 9, 512:768, 0:256]
                times[f"later, {tag}"].append(time.perf_counter() - t)
                store.close()
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        print(f"shard member: {shard_bytes / 2**20:.1f} MiB stored")
        for k, v in med.items():
            print(f"{k:18s} {v:8.2f} ms")
        print(f"first tile of a shard: {med['first, verify'] / med['first, no verify']:.1f}x")
        print(f"later tiles:           {med['later, verify'] / med['later, no verify']:.2f}x")


if __name__ == "__main__":
    main()
