"""Saving a new labels layer into an opened image: the cost beside a copy and beside
writing the labels alone.

Usage::

    PYTHONPATH=src python benchmarks/bench_add_labels.py [--repeats 3]

Data: a 2x32x1024x1024 uint16 image (c, z, y, x; smooth structure + noise) written by
napari-ozx without labels, as an ``.ozx`` and as a 0.5 directory (3 levels, chunks
1x256x256, shards 16x1024x1024, zstd 3), and a 32x1024x1024 uint32 labels array (40
blobs) in memory, as a painted napari layer holds it.

Timed in one run, interleaved, median of ``--repeats`` (every add starts from a fresh
copy of the image, made and synced to disk untimed):

* ``copy + fsync``: ``shutil.copyfile`` of the archive made durable, the floor of any
  atomic rebuild of the ``.ozx``;
* ``labels alone``: the same labels written as their own ``.ozx`` / directory
  (``write_ome_zarr``): what encoding the new pyramid costs wherever it goes;
* ``add (.ozx)`` / ``add (dir)``:
  :func:`~napari_ozx.layers.add_labels.add_labels_to_image` — for ``.ozx`` every image
  member copied byte for byte plus the new label members, for a directory the new
  files only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def make(path: Path) -> np.ndarray:
    from napari_ozx.layers.writing import layer_axes
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:1024, 0:1024]
    plane = ((np.sin(yy / 40) + np.cos(xx / 55)) * 1000 + 2500).astype(np.uint16)
    img = np.empty((2, 32, 1024, 1024), np.uint16)
    for c in range(2):
        for z in range(32):
            img[c, z] = plane + rng.integers(0, 200, plane.shape, dtype=np.uint16)
    spec = ImageSpec(img, layer_axes(["z", "y", "x"], None, 3, True))
    write_ome_zarr(path, spec, options=WriteOptions(pyramid_levels=3))
    lab = np.zeros((32, 1024, 1024), np.uint32)
    for i in range(40):
        y, x = rng.integers(50, 970, 2)
        lab[:, y - 30 : y + 30, x - 30 : x + 30] = i + 1
    return lab


class Layer:
    """What add_labels_to_image needs of a napari labels layer."""

    def __init__(self, data: np.ndarray) -> None:
        self.data: Any = data
        self.name = "cells"
        self.metadata: dict[str, Any] = {}


def fresh(src: Path, dst: Path) -> None:
    if dst.is_dir():
        shutil.rmtree(dst)
    elif dst.exists():
        dst.unlink()
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
    os.sync()  # untimed: the copy's dirty pages must not be flushed inside the timing


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from napari_ozx.layers.add_labels import add_labels_to_image
    from napari_ozx.layers.writing import layer_axes
    from napari_ozx.ngff.write.writer import LabelsSpec, WriteOptions, write_ome_zarr

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as d:
        src_ozx = Path(d) / "img.ozx"
        lab = make(src_ozx)
        src_dir = Path(d) / "img.ome.zarr"
        make(src_dir)
        print(f"archive: {src_ozx.stat().st_size / 2**20:.1f} MiB")
        axes = layer_axes(["z", "y", "x"], None, 3, False)
        t_copy, t_alone_ozx, t_add_ozx, t_alone_dir, t_add_dir = [], [], [], [], []
        work_ozx, work_dir = Path(d) / "work.ozx", Path(d) / "work.ome.zarr"
        for _ in range(args.repeats):
            dst = Path(d) / "copy.ozx"
            t = time.perf_counter()
            shutil.copyfile(src_ozx, dst)
            with open(dst, "rb+") as fh:
                os.fsync(fh.fileno())
            t_copy.append(time.perf_counter() - t)
            dst.unlink()

            for suffix, times in ((".ozx", t_alone_ozx), (".ome.zarr", t_alone_dir)):
                alone = Path(d) / f"alone{suffix}"
                t = time.perf_counter()
                write_ome_zarr(
                    alone, labels=[LabelsSpec("cells", lab, axes)], options=WriteOptions()
                )
                times.append(time.perf_counter() - t)
                shutil.rmtree(alone) if alone.is_dir() else alone.unlink()

            for src, work, times in (
                (src_ozx, work_ozx, t_add_ozx),
                (src_dir, work_dir, t_add_dir),
            ):
                fresh(src, work)
                t = time.perf_counter()
                add_labels_to_image(Layer(lab), work)
                times.append(time.perf_counter() - t)

        med = {
            "copy + fsync": statistics.median(t_copy),
            "labels alone (.ozx)": statistics.median(t_alone_ozx),
            "add (.ozx)": statistics.median(t_add_ozx),
            "labels alone (dir)": statistics.median(t_alone_dir),
            "add (dir)": statistics.median(t_add_dir),
        }
        for k, v in med.items():
            print(f"{k:22s}: {v * 1000:8.1f} ms (median of {args.repeats})")
        c = med["copy + fsync"]
        a = med["labels alone (.ozx)"]
        print(
            f"ratio add (.ozx) / (copy + fsync + labels alone): {med['add (.ozx)'] / (c + a):.2f}x"
        )
        print(f"ratio add (.ozx) / (copy + fsync): {med['add (.ozx)'] / c:.2f}x")
        r = med["add (dir)"] / med["labels alone (dir)"]
        print(f"ratio add (dir) / labels alone (dir): {r:.2f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
