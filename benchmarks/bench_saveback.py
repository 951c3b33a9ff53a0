"""Label save-back: ``.ozx`` save-back time vs a plain file copy, and memory for painting.

Usage::

    PYTHONPATH=src python benchmarks/bench_saveback.py [--repeats 5]

Data: a 2x32x1024x1024 uint16 image (c, z, y, x; smooth structure + noise) with a
32x1024x1024 uint32 labels image, written by napari-ozx as one ``.ozx`` (3 levels,
chunks 1x256x256, shards 16x1024x1024, zstd 3).

Timed in one run, interleaved, median of ``--repeats``:

* ``copy``: ``shutil.copyfile`` of the archive (the floor every save-back must pay:
  it rebuilds the archive); ``copy + fsync``: the same made durable, as the save-back
  is before its rename;
* ``save-back``: a few brush strokes painted into the labels (an
  :class:`~napari_ozx.layers.editable.EditableLabels`), then
  :func:`~napari_ozx.layers.saveback.save_labels_back` (new archive, unchanged members
  copied, changed label shards and their pyramid regions re-encoded, atomic rename).
  Unchanged members are copied with ``os.copy_file_range`` and their recorded CRC-32;
  the replaced file is closed on a thread after the save returns (waited for, untimed,
  before the next measurement: the durable copy unlinks its old file inside its rename);
* ``save-back, no fsync``: the same with ``os.fsync`` made a no-op (benchmark only: it
  shows what the save costs beside the durability it owes a replaced file).

* ``durable copy``: copy + fsync + rename over an existing file, the floor issue 25
  sets the save-back against (bar <= 1.5x);
* ``copy + replace``: a plain copy renamed over an existing file, without fsync: on ext4
  (``auto_da_alloc``, the default) that rename itself starts writing the new file's data,
  so any atomic replace pays part of the disk write there.

``bench_saveback_napari.py`` times the same save-back inside a napari window, through
the menu command, as a user meets it.

The save-back keeps its fsync (it replaces the user's file: the new bytes must be on
disk before the rename), so the fair floor is ``copy + fsync``; the ratio to a plain
copy is printed too, as the issue asks.

Also: RSS growth (``ru_maxrss`` delta and current RSS) while opening the labels
editable and painting the strokes — the editable array copies touched chunks only.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def make(path: Path) -> None:
    from napari_ozx.layers.writing import layer_axes
    from napari_ozx.ngff.write.writer import ImageSpec, LabelsSpec, WriteOptions, write_ome_zarr

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:1024, 0:1024]
    plane = ((np.sin(yy / 40) + np.cos(xx / 55)) * 1000 + 2500).astype(np.uint16)
    img = np.empty((2, 32, 1024, 1024), np.uint16)
    for c in range(2):
        for z in range(32):
            img[c, z] = plane + rng.integers(0, 200, plane.shape, dtype=np.uint16)
    lab = np.zeros((32, 1024, 1024), np.uint32)
    for i in range(40):
        y, x = rng.integers(50, 970, 2)
        lab[:, y - 30 : y + 30, x - 30 : x + 30] = i + 1
    spec = ImageSpec(img, layer_axes(["z", "y", "x"], None, 3, True))
    labels = LabelsSpec("cells", lab, layer_axes(["z", "y", "x"], None, 3, False))
    write_ome_zarr(path, spec, [labels], WriteOptions(pyramid_levels=3))


def paint(data, seed: int) -> None:
    """Three brush strokes (radius 10) across one plane, like napari's data_setitem."""
    rng = np.random.default_rng(seed)
    for _ in range(3):
        z = int(rng.integers(0, data.shape[0]))
        y0, x0 = rng.integers(100, 900, 2)
        for t in range(40):
            yy, xx = np.mgrid[-10:11, -10:11]
            m = yy**2 + xx**2 <= 100
            ys = (yy[m] + y0 + t * 3).clip(0, data.shape[1] - 1)
            xs = (xx[m] + x0 + t * 2).clip(0, data.shape[2] - 1)
            data[(np.full(ys.shape, z), ys, xs)] = 77


def open_labels(path: Path):
    from napari_ozx._reader import read_layer_data

    ((data, kw, _),) = [t for t in read_layer_data(str(path)) if t[2] == "labels"]

    class L:  # what save_labels_back needs of a napari layer
        pass

    layer = L()
    layer.data, layer.metadata, layer.name = data, kw["metadata"], kw["name"]
    return layer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    from napari_ozx.layers.editable import EditableLabels
    from napari_ozx.layers.saveback import released, save_labels_back

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as d:
        src = Path(d) / "cells.ozx"
        make(src)
        size = src.stat().st_size
        print(f"archive: {size / 2**20:.1f} MiB")

        rss0, peak0 = _rss_mib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        layer = open_labels(src)
        assert isinstance(layer.data, EditableLabels), type(layer.data)
        paint(layer.data, 0)
        rss1, peak1 = _rss_mib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"painting 3 strokes: RSS +{rss1 - rss0:.1f} MiB (peak +{max(0, peak1 - peak0):.1f}"
            f" MiB), dirty chunks {len(layer.data.dirty_chunks)}"
            f" = {layer.data.dirty_nbytes / 2**20:.1f} MiB"
        )
        copies, synced, replaced, durable, saves, nosync = [], [], [], [], [], []
        old = Path(d) / "old.ozx"
        for r in range(args.repeats):
            dst = Path(d) / "copy.ozx"
            t = time.perf_counter()
            shutil.copyfile(src, dst)
            copies.append(time.perf_counter() - t)
            dst.unlink()
            t = time.perf_counter()
            shutil.copyfile(src, dst)
            with open(dst, "rb+") as fh:
                os.fsync(fh.fileno())  # the save-back fsyncs before its rename
            synced.append(time.perf_counter() - t)
            dst.unlink()
            shutil.copyfile(src, old)
            t = time.perf_counter()
            shutil.copyfile(src, dst)
            os.replace(dst, old)  # what any atomic save pays: ext4 flushes at this rename
            replaced.append(time.perf_counter() - t)
            old.unlink()
            # the floor issue 25 names: a durable copy (copy + fsync + rename over an
            # existing file), exactly what a save-back must at least do
            shutil.copyfile(src, old)
            t = time.perf_counter()
            shutil.copyfile(src, dst)
            with open(dst, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(dst, old)
            durable.append(time.perf_counter() - t)
            old.unlink()
            if r:
                paint(layer.data, r)
            t = time.perf_counter()
            save_labels_back(layer)
            saves.append(time.perf_counter() - t)
            released(10)  # untimed: the replaced file is closed on a thread after the save
            paint(layer.data, 100 + r)
            real_fsync = os.fsync
            os.fsync = lambda fd: None  # benchmark only
            try:
                t = time.perf_counter()
                save_labels_back(layer)
                nosync.append(time.perf_counter() - t)
                released(10)
            finally:
                os.fsync = real_fsync
        c, s = statistics.median(copies), statistics.median(saves)
        cs = statistics.median(synced)
        ns = statistics.median(nosync)
        cr = statistics.median(replaced)
        print(f"file copy   : {c * 1000:8.1f} ms (median of {args.repeats})")
        print(f"copy + fsync: {cs * 1000:8.1f} ms (median of {args.repeats})")
        print(f"copy + replace an existing file (no fsync): {cr * 1000:8.1f} ms")
        print(f"save-back   : {s * 1000:8.1f} ms (median of {args.repeats})")
        print(f"save-back, no fsync (bench only): {ns * 1000:8.1f} ms")
        print(f"ratio save-back / copy: {s / c:.2f}x  (target <= 3x)")
        print(f"ratio save-back without fsync / copy: {ns / c:.2f}x")
        print(f"ratio save-back / (copy + fsync): {s / cs:.2f}x")
        print(f"ratio save-back without fsync / (copy + replace): {ns / cr:.2f}x")
        cd = statistics.median(durable)
        print(f"durable copy (copy + fsync + replace an existing file): {cd * 1000:8.1f} ms")
        print(f"ratio save-back / durable copy: {s / cd:.2f}x  (bar <= 1.5x)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
