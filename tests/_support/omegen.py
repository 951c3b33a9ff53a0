"""Hand-rolled OME-Zarr writer for tests: plain zarr + JSON, independent of our writer.

It writes exactly the metadata it is given, so tests can build valid files in any
version and deliberately broken ones.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

AXES = {
    "c": {"name": "c", "type": "channel"},
    "t": {"name": "t", "type": "time", "unit": "second"},
    "z": {"name": "z", "type": "space", "unit": "micrometer"},
    "y": {"name": "y", "type": "space", "unit": "micrometer"},
    "x": {"name": "x", "type": "space", "unit": "micrometer"},
}


def pyramid(data: np.ndarray, levels: int, axes: str) -> list[np.ndarray]:
    out = [data]
    for _ in range(1, levels):
        idx = tuple(slice(None, None, 2) if a in "yx" else slice(None) for a in axes)
        out.append(out[-1][idx])
    return out


def write_image(
    path: Path,
    data: np.ndarray,
    axes: str = "czyx",
    version: str = "0.5",
    levels: int = 2,
    scale: list[float] | None = None,
    translation: list[float] | None = None,
    omero: dict[str, Any] | None = None,
    labels: dict[str, np.ndarray] | None = None,
    label_colors: dict[int, list[int]] | None = None,
    sharded: bool = True,
    chunks: tuple[int, ...] | None = None,
    array_extra: dict[str, Any] | None = None,
    group_path: str = "",
) -> list[np.ndarray]:
    """Write an image (and labels) into the directory *path*; return the levels."""
    fmt = 3 if version == "0.5" else 2
    root = zarr.open_group(path, mode="a", zarr_format=fmt)
    grp = root.require_group(group_path) if group_path else root
    scale = scale or [1.0] * len(axes)
    lv = pyramid(data, levels, axes)
    datasets = []
    for i, arr in enumerate(lv):
        ch = chunks or tuple(1 if a in "tcz" else min(32, s) for a, s in zip(axes, arr.shape))
        kw: dict[str, Any] = {"chunks": ch, "compressors": ZstdCodec(level=1) if fmt == 3 else None}
        if fmt == 3:
            kw["dimension_names"] = list(axes)
            if sharded:
                kw["shards"] = tuple(s if a in "yx" else c for a, s, c in zip(axes, arr.shape, ch))
                kw["shards"] = tuple(-(-s // c) * c for s, c in zip(kw["shards"], ch))
        else:
            kw.pop("compressors")
            kw["chunk_key_encoding"] = {"name": "v2", "separator": "/"}
        a = grp.create_array(str(i), shape=arr.shape, dtype=arr.dtype, **kw)
        a[...] = arr
        s = [v * (2**i if ax in "yx" else 1) for v, ax in zip(scale, axes)]
        ct = [{"type": "scale", "scale": s}]
        if translation is not None:
            ct.append({"type": "translation", "translation": translation})
        datasets.append({"path": str(i), "coordinateTransformations": ct})
    ms: dict[str, Any] = {"axes": [AXES[a] for a in axes], "datasets": datasets, "name": "test"}
    ome: dict[str, Any] = {"multiscales": [ms]}
    if omero:
        ome["omero"] = omero
    _set_ome(grp, ome, version)
    if array_extra and fmt == 3:
        for i in range(levels):
            p = Path(path, group_path, str(i), "zarr.json")
            doc = json.loads(p.read_text())
            doc.update(array_extra)
            p.write_text(json.dumps(doc))
    for name, lab in (labels or {}).items():
        laxes = axes.replace("c", "")
        write_image(
            path,
            lab,
            laxes,
            version,
            levels,
            [v for v, a in zip(scale, axes) if a != "c"],
            None if translation is None else [v for v, a in zip(translation, axes) if a != "c"],
            sharded=sharded,
            group_path=f"{group_path}/labels/{name}".strip("/"),
        )
        lgrp = zarr.open_group(
            path, mode="a", zarr_format=fmt, path=f"{group_path}/labels/{name}".strip("/")
        )
        ome_l = _get_ome(lgrp, version)
        il: dict[str, Any] = {"version": version, "source": {"image": "../../"}}
        if label_colors:
            il["colors"] = [{"label-value": k, "rgba": v} for k, v in label_colors.items()]
            il["properties"] = [{"label-value": k, "name": f"cell {k}"} for k in label_colors]
        ome_l["image-label"] = il
        _set_ome(lgrp, ome_l, version)
        lroot = zarr.open_group(
            path, mode="a", zarr_format=fmt, path=f"{group_path}/labels".strip("/")
        )
        names = _get_ome(lroot, version).get("labels", [])
        _set_ome(lroot, {"labels": [*names, name]}, version)
    return lv


def _set_ome(grp: zarr.Group, ome: dict[str, Any], version: str) -> None:
    if version == "0.5":
        grp.attrs["ome"] = {"version": version, **{k: v for k, v in ome.items() if k != "version"}}
    else:
        if "multiscales" in ome:
            for m in ome["multiscales"]:
                m["version"] = version
        grp.attrs.update(ome)


def _get_ome(grp: zarr.Group, version: str) -> dict[str, Any]:
    if version == "0.5":
        return dict(grp.attrs.get("ome", {}))
    return dict(grp.attrs)


def zip_dir(src: Path, dst: Path, deflate: bool = False) -> Path:
    """Zip a directory as a conformant-enough .ozx (zarr.json first, BFS) with zipfile."""
    import zipfile

    files = [p for p in src.rglob("*") if p.is_file()]
    rel = [p.relative_to(src).as_posix() for p in files]
    order = sorted(
        rel,
        key=lambda n: (
            not n.endswith("zarr.json"),
            n.count("/") if n.endswith("zarr.json") else 0,
            n,
        ),
    )
    method = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
    with zipfile.ZipFile(dst, "w", method) as zf:
        for n in order:
            zf.write(src / n, n)
        zf.comment = b'{"ome":{"version":"0.5"}}'
    return dst
