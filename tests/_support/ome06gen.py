"""Hand-rolled OME-Zarr 0.6 hierarchies for tests: plain zarr arrays + the JSON given.

Independent of napari-ozx's writer, so the reader is checked against metadata written
exactly as the spec (or another tool) spells it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from tests._support.omegen import AXES


def system(name: str, axes: str) -> dict[str, Any]:
    return {"name": name, "axes": [AXES[a] for a in axes]}


def write_group(path: Path, ome: dict[str, Any], version: str = "0.6") -> None:
    path.mkdir(parents=True, exist_ok=True)
    doc = {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {"ome": {"version": version, **ome}},
    }
    (path / "zarr.json").write_text(json.dumps(doc, indent=1))


def write_image06(
    path: Path,
    data: np.ndarray,
    axes: str = "yx",
    scale: list[float] | None = None,
    translation: list[float] | None = None,
    levels: int = 2,
    intrinsic: str = "physical",
    systems: list[dict[str, Any]] | None = None,
    transformations: list[dict[str, Any]] | None = None,
    version: str = "0.6",
    io_as_strings: bool = False,
    extra_ome: dict[str, Any] | None = None,
) -> list[np.ndarray]:
    """A 0.6 multiscale image at *path*: levels halved in y/x (strided), each with the
    spec's dataset transformation (``scale`` or ``sequence[scale, translation]``, input
    the array path, output the intrinsic system). *systems* are listed as given (the
    intrinsic one is added last when missing); *transformations* go to the multiscale
    level. ``io_as_strings``: ``input`` / ``output`` as bare strings (RFC-5 suites)."""
    scale = scale or [1.0] * len(axes)
    translation = translation or [0.0] * len(axes)
    lv = [data]
    for _ in range(1, levels):
        idx = tuple(slice(None, None, 2) if a in "yx" else slice(None) for a in axes)
        lv.append(lv[-1][idx])
    root = zarr.open_group(path, mode="a", zarr_format=3)
    datasets = []
    for i, arr in enumerate(lv):
        a = root.create_array(
            f"s{i}",
            shape=arr.shape,
            dtype=arr.dtype,
            chunks=tuple(min(16, s) for s in arr.shape),
            dimension_names=list(axes),
            overwrite=True,
        )
        a[...] = arr
        f = [2.0**i if ax in "yx" else 1.0 for ax in axes]
        sc = [s * k for s, k in zip(scale, f)]
        tr = [t + (k - 1) * s / 2 for t, s, k in zip(translation, scale, f)]
        inp: Any = f"s{i}" if io_as_strings else {"path": f"s{i}"}
        out: Any = intrinsic if io_as_strings else {"name": intrinsic}
        if any(tr):
            t: dict[str, Any] = {
                "type": "sequence",
                "transformations": [
                    {"type": "scale", "scale": sc},
                    {"type": "translation", "translation": tr},
                ],
            }
        else:
            t = {"type": "scale", "scale": sc}
        datasets.append(
            {"path": f"s{i}", "coordinateTransformations": [{**t, "input": inp, "output": out}]}
        )
    systems = list(systems or [])
    if not any(s["name"] == intrinsic for s in systems):
        systems.append(system(intrinsic, axes))
    ms: dict[str, Any] = {"name": path.name, "coordinateSystems": systems, "datasets": datasets}
    if transformations:
        ms["coordinateTransformations"] = transformations
    write_group(path, {"multiscales": [ms], **(extra_ome or {})}, version)
    return lv


def rotation2(deg: float) -> list[list[float]]:
    a = np.deg2rad(deg)
    return [[float(np.cos(a)), float(-np.sin(a))], [float(np.sin(a)), float(np.cos(a))]]
