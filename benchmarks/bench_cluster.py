"""Convert on a dask cluster vs locally: where the CPU time goes, and the throughput.

Usage::

    python benchmarks/bench_cluster.py [--repeats 3] [--workers 2] [--mib 256]

Source: a 2x32x1024x2048 uint16 OME-Zarr 0.5 directory (256 MiB; smooth structure +
noise), sharded (shards 1x16x1024x1024, chunks 1x1x256x256, zstd 3), written once.
Converted with ``napari-ozx convert``'s default options (4 levels) to ``.ozx`` and to a
directory, interleaved, median of ``--repeats``:

* ``local``: :func:`napari_ozx.ngff.write.convert.convert` in this process (its thread pool);
* ``cluster``: the same with a ``distributed.LocalCluster`` of ``--workers`` worker
  processes (1 thread each) passed as ``client=``: the workers read, halve and encode;
  the client (this process, which also runs the LocalCluster's scheduler) appends the
  ``.ozx`` entries / writes the metadata and swaps the directory in.

Printed: wall time, this process's CPU time (``resource.getrusage``: every thread,
scheduler included), the workers' CPU time (``client.run`` asks each worker process for
its own ``getrusage``), the ratio workers/client (the bar: >= 3x), the throughput ratio
cluster/local, and for each output: ``validate`` passes and every stored key equals the
local conversion's, byte for byte (so the pixels at every level and the metadata do).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _worker_cpu(client: Any) -> float:
    return float(sum(client.run(_cpu).values()))


def make_source(path: Path, mib: int) -> None:
    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr

    planes = max(1, mib * 32 // 256)
    shape = (2, planes, 1024, 2048)
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:1024, 0:2048].astype(np.float32)
    base = (np.sin(yy / 37) * np.cos(xx / 23) * 800 + 1200).astype(np.uint16)
    data = np.empty(shape, np.uint16)
    for c in range(shape[0]):
        for z in range(shape[1]):
            data[c, z] = base + rng.poisson(base / 40 + c).astype(np.uint16)
    axes = [
        Axis("c", "channel"),
        Axis("z", "space", "micrometer"),
        Axis("y", "space", "micrometer"),
        Axis("x", "space", "micrometer"),
    ]
    write_ome_zarr(path, ImageSpec(data, axes, [1, 1, 0.5, 0.5]), options=WriteOptions())


def stored(path: Path) -> dict[str, bytes]:
    """Every key of a written OME-Zarr and its stored bytes."""
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    from napari_ozx.ngff.read.open import open_store

    store = open_store(path)

    async def read() -> dict[str, bytes]:
        out = {}
        async for key in store.list():
            buf = await store.get(key, default_buffer_prototype())
            assert buf is not None
            out[key] = buf.to_bytes()
        return out

    return sync(read())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mib", type=int, default=256)
    args = ap.parse_args()

    import distributed

    from napari_ozx.__main__ import validate_path
    from napari_ozx.ngff.write.convert import convert

    tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    try:
        src = tmp / "src.ome.zarr"
        make_source(src, args.mib)
        nbytes = args.mib << 20
        rows: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        with (
            distributed.LocalCluster(
                n_workers=args.workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            for rep in range(args.repeats):
                for suffix in (".ozx", ".ome.zarr"):
                    for how in ("local", "cluster"):
                        dst = tmp / f"{how}{suffix}"
                        w0, c0, k0 = time.perf_counter(), _cpu(), _worker_cpu(client)
                        convert(src, dst, client=client if how == "cluster" else None)
                        wall = time.perf_counter() - w0
                        cpu = _cpu() - c0
                        wcpu = _worker_cpu(client) - k0
                        rows.setdefault((suffix, how), []).append((wall, cpu, wcpu))
                        print(
                            f"  run {rep + 1} {how:7s} -> {suffix:9s} wall {wall:6.2f} s  "
                            f"client cpu {cpu:6.2f} s  workers cpu {wcpu:6.2f} s",
                            file=sys.stderr,
                        )
                    if rep == 0:  # outputs: valid, and the same as the local conversion
                        a, b = stored(tmp / f"local{suffix}"), stored(tmp / f"cluster{suffix}")
                        same = a.keys() == b.keys() and all(a[k] == b[k] for k in a)
                        ok = [
                            validate_path(str(tmp / f"{h}{suffix}"), deep=True)[0]
                            for h in ("local", "cluster")
                        ]
                        print(
                            f"{suffix}: {len(a)} keys, cluster == local byte for byte: {same}; "
                            f"validate exit codes {ok}"
                        )
                        if not same or any(ok):
                            return 1
                    for how in ("local", "cluster"):
                        p = tmp / f"{how}{suffix}"
                        shutil.rmtree(p) if p.is_dir() else p.unlink()

        print(f"\n{args.mib} MiB source, {args.workers} worker processes x 1 thread")
        print(
            f"{'target':10s} {'how':8s} {'wall s':>7s} {'MiB/s':>7s} {'client cpu':>10s} "
            f"{'workers cpu':>11s} {'workers/client':>14s}"
        )
        for suffix in (".ozx", ".ome.zarr"):
            med = {}
            for how in ("local", "cluster"):
                runs = rows[(suffix, how)]
                wall, cpu, wcpu = (statistics.median(r[i] for r in runs) for i in range(3))
                med[how] = wall
                ratio = wcpu / cpu if cpu else float("inf")
                print(
                    f"{suffix:10s} {how:8s} {wall:7.2f} {nbytes / wall / 2**20:7.1f} "
                    f"{cpu:10.2f} {wcpu:11.2f} {ratio:14.1f}"
                )
            print(f"{suffix:10s} throughput cluster/local: {med['local'] / med['cluster']:.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
