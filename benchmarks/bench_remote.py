"""Remote .ozx: requests and bytes to show the first full-resolution plane of a 1 GiB file.

Usage::

    python benchmarks/bench_remote.py [--regenerate]

Writes once (benchmarks/_data/, gitignored; ~30 s) a 2x256x1024x1024 uint16 OME-Zarr 0.5
``.ozx`` (1 GiB of pixels; inner chunks 1x1x256x256, shards 1x16x1024x1024, zstd), serves
it from a local range-capable HTTP server on 127.0.0.1, opens it with the napari reader
over HTTP and computes one full-resolution plane of both channels, as napari does for
the first view. Prints requests and bytes for open and for the plane, and the ratio of
bytes transferred to the plane's stored size (from the shard indexes) plus metadata.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT / "benchmarks" / "_data"
SHAPE = (2, 256, 1024, 1024)
CHUNK, SHARD_Z = 256, 16


def generate(force: bool) -> Path:
    import dask.array as da

    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr

    out = DATA / "remote_1gib.ozx"
    if out.exists() and not force:
        return out
    DATA.mkdir(exist_ok=True)
    rng = da.random.default_rng(0)
    data = (rng.poisson(300, SHAPE, chunks=(1, SHARD_Z, 1024, 1024))).astype(np.uint16)
    axes = [Axis("c", "channel"), Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]
    t = time.perf_counter()
    write_ome_zarr(out, ImageSpec(data, axes), options=WriteOptions(pyramid_levels=3))
    print(
        f"generated {out.name} ({out.stat().st_size / 2**30:.2f} GiB) in {time.perf_counter() - t:.0f} s"
    )
    return out


def plane_stored_bytes(path: Path, z: int) -> int:
    """Stored bytes of the inner chunks of plane z (both channels), from the shard indexes."""
    from napari_ozx.ozx.store import OzxStore

    per_side = 1024 // CHUNK
    n_inner = SHARD_Z * per_side * per_side
    total = 0
    with OzxStore(path) as st:
        for c in range(SHAPE[0]):
            key = f"0/c/{c}/{z // SHARD_Z}/0/0"
            shard = st.get_sync(key)
            raw = shard.to_bytes() if hasattr(shard, "to_bytes") else bytes(shard)
            index = raw[-(n_inner * 16 + 4) : -4]
            for j in range(per_side):
                for i in range(per_side):
                    k = ((z % SHARD_Z) * per_side + j) * per_side + i
                    _off, nbytes = struct.unpack_from("<QQ", index, k * 16)
                    total += nbytes
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--z", type=int, default=100)
    args = ap.parse_args()
    path = generate(args.regenerate)
    from tests._support.httpserver import Server

    from napari_ozx.layers.reading import read_layer_data

    with Server(path.parent) as srv:
        url = f"{srv.url}/{path.name}"
        t = time.perf_counter()
        layers = read_layer_data(url)
        t_open = time.perf_counter() - t
        open_req, open_bytes = len(srv.requests), srv.body_bytes
        srv.reset()
        t = time.perf_counter()
        planes = [np.asarray(data[0][:, args.z]) for data, _, kind in layers if kind == "image"]
        t_plane = time.perf_counter() - t
        plane_req, plane_bytes = len(srv.requests), srv.body_bytes
    stored = plane_stored_bytes(path, args.z)
    size = path.stat().st_size
    print(
        f"file {size / 2**30:.2f} GiB; plane z={args.z}: 2 channels x 1024x1024, stored {stored / 2**20:.2f} MiB"
    )
    print(f"open:  {open_req} requests, {open_bytes / 1024:.1f} KiB, {t_open * 1e3:.0f} ms")
    print(
        f"plane: {plane_req} requests, {plane_bytes / 2**20:.2f} MiB, {t_plane * 1e3:.0f} ms; shapes {[p.shape for p in planes]}"
    )
    ratio = (open_bytes + plane_bytes) / (stored + open_bytes)
    print(
        f"bytes transferred / (plane stored + metadata) = {ratio:.3f}x; plane bytes / plane stored = {plane_bytes / stored:.3f}x"
    )


if __name__ == "__main__":
    main()
