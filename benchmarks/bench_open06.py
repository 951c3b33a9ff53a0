"""Opening an OME-Zarr 0.6 image against the same image as 0.5.

Usage::

    python benchmarks/bench_open06.py [--repeats 15]

Writes one image (2 channels, 3 levels, labels) with napari-ozx as 0.5, as 0.6 with a
rotation to a "world" system listed first (the reader then takes the coordinate-system
path: transformation graph, composition, napari ``affine``) and as plain 0.6 (scale and
translation only), as directories and as ``.ozx``. Then, interleaved, median of
repeats, in this process:

* ``open``: ``open_ome_zarr`` + ``images()`` (metadata only),
* ``layers``: the npe2 reader's layer data (``read_layer_data``: open, placement, labels).

Prints each median and the ratio 0.6 / 0.5 (the issue's bar: a 0.6 open costs no more
than a 0.5 one). A first open in a fresh interpreter is dominated by imports (see
bench_read.py) and the same for both.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from napari_ozx.layers.reading import read_layer_data
from napari_ozx.layers.writing import write_layer_data
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.ngff.write.options import WriteOptions


def _write(d: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 4000, (512, 512), dtype=np.uint16)
    lab = (img > 3000).astype(np.uint32)
    out = {}
    for name, version, rotate in (
        ("0.5", "0.5", 0.0),
        ("0.6", "0.6", 25.0),
        ("0.6plain", "0.6", 0.0),
    ):
        meta = {"name": "a", "scale": [0.5, 0.5], "rotate": rotate, "metadata": {}}
        layers = [
            (img, {**meta, "name": "c0"}, "image"),
            (img, {**meta, "name": "c1"}, "image"),
            (lab, {**meta, "name": "cells"}, "labels"),
        ]
        opts = WriteOptions(version=version, pyramid_levels=3)  # type: ignore[arg-type]
        for suffix in (".ome.zarr", ".ozx"):
            p = d / f"img{name}{suffix}"
            write_layer_data(p, layers, opts)
            out[f"{name}{suffix}"] = p
    return out


def _open(p: Path) -> None:
    with open_ome_zarr(p) as oz:
        for im in oz.images():
            _ = im.levels, im.labels


def _layers(p: Path) -> None:
    read_layer_data(str(p))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = _write(Path(tmp))
        for what, fn in (("open", _open), ("layers", _layers)):
            for suffix in (".ome.zarr", ".ozx"):
                times: dict[str, list[float]] = {"0.5": [], "0.6": [], "0.6plain": []}
                for v in times:  # warm both once (page cache, imports)
                    fn(files[v + suffix])
                for _ in range(args.repeats):
                    for v in times:  # interleaved
                        t = time.perf_counter()
                        fn(files[v + suffix])
                        times[v].append(time.perf_counter() - t)
                m5, m6, mp = (statistics.median(times[v]) * 1e3 for v in ("0.5", "0.6", "0.6plain"))
                print(
                    f"{what:6s} {suffix:9s} 0.5 {m5:6.2f} ms | 0.6 rotated {m6:6.2f} ms, "
                    f"ratio {m6 / m5:.2f} | 0.6 plain {mp:6.2f} ms, ratio {mp / m5:.2f}"
                )


if __name__ == "__main__":
    main()
