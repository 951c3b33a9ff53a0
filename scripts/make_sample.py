"""Generate resources/cells.ozx: a small synthetic 3D cell image, 2 channels + nucleus labels.

Deterministic (fixed seed), numpy only, written with napari-ozx's own writer:
    python scripts/make_sample.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from napari_ozx.ngff.model.metadata import Axis, Channel, LabelColor, Window
from napari_ozx.ngff.write.writer import ImageSpec, LabelsSpec, WriteOptions, write_ome_zarr

Z, Y, X = 16, 256, 320
N_CELLS = 22


def make(seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    zz, yy, xx = np.meshgrid(np.arange(Z), np.arange(Y), np.arange(X), indexing="ij")
    nuclei = np.zeros((Z, Y, X), np.float32)
    membrane = np.zeros((Z, Y, X), np.float32)
    labels = np.zeros((Z, Y, X), np.uint16)
    centres = rng.uniform([4, 30, 30], [Z - 4, Y - 30, X - 30], (N_CELLS, 3))
    for i, (cz, cy, cx) in enumerate(centres, start=1):
        r = rng.uniform(11, 18)
        # anisotropic voxels: z steps are 4x the xy pixel size
        d = np.sqrt(((zz - cz) * 4) ** 2 + (yy - cy) ** 2 + (xx - cx) ** 2)
        inside = d < r
        labels[inside & (labels == 0)] = i
        nuclei += np.exp(-((d / r) ** 4)) * rng.uniform(0.6, 1.0)
        shell = np.exp(-(((d - 1.9 * r) / 2.5) ** 2))
        membrane += shell * rng.uniform(0.4, 0.9)
    noise = rng.normal(0, 0.012, (2, Z, Y, X)).astype(np.float32)
    img = np.stack([nuclei, membrane]) + noise + 0.05
    img = np.clip(img / img.max() * 1000, 0, 65535).astype(np.uint16)
    return img, labels


def main(out: Path) -> Path:
    img, labels = make()
    axes = [
        Axis("c", "channel"),
        Axis("z", "space", "micrometer"),
        Axis("y", "space", "micrometer"),
        Axis("x", "space", "micrometer"),
    ]
    rng = np.random.default_rng(1)
    colors = [
        LabelColor(int(v), (*map(int, rng.integers(60, 256, 3)), 255))
        for v in np.unique(labels)
        if v
    ]
    props = [
        {"label-value": c.value, "volume_voxels": int((labels == c.value).sum())} for c in colors
    ]
    spec = ImageSpec(
        data=img,
        axes=axes,
        scale=[1.0, 1.0, 0.25, 0.25],
        translation=[0.0, 0.0, 0.0, 0.0],
        channels=[
            Channel("Nuclei", "00FFFF", Window(40, 800, 0, 65535)),
            Channel("Membrane", "FF00FF", Window(40, 650, 0, 65535)),
        ],
        name="cells",
        labels=[
            LabelsSpec(
                "nuclei", labels, axes[1:], [1.0, 0.25, 0.25], [0.0, 0.0, 0.0], colors, props
            )
        ],
    )
    return write_ome_zarr(out, spec, options=WriteOptions(format="ozx", shard_z=8, level=9))


if __name__ == "__main__":
    target = (
        Path(sys.argv[1])
        if len(sys.argv) > 1
        else Path(__file__).resolve().parents[1] / "resources" / "cells.ozx"
    )
    path = main(target)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.2f} MB)")
