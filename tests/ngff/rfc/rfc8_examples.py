"""RFC-8 collection fixtures, written by us after the examples of the RFC-8 draft itself
(ome/ngff ``rfc/8/index.md``, "Examples" and "Coordinate transformations"): the JSON
documents below follow the shapes of those examples (their keys, nesting and reference
forms), with our own names, paths and values; the RFC's text is not copied. The image
groups the collections list are written by ngff-zarr 0.50 (:mod:`.ngffzarr`), as OME-Zarr
0.6.

The draft's examples declare ``"version": "0.x"`` (a placeholder); these declare
``0.9.dev3``, the development version that adds RFC-8 to the 0.9 line.

* :func:`write_tiles`: "Tiles" — a collection whose ``attributes.scene`` places two image
  members in its ``world`` system by translations, inputs referencing each member's
  coordinate system by ``{"id": ..., "path": {"type": "zarr", "path": "./tile_N.zarr"}}``;
* :func:`write_nested`: a collection with an image member by a relative path, an inline
  nested collection holding an image member by an absolute ``file://`` path (inside the
  collection's folder), a collection held in a ``json`` document and an inline multiscale
  (listed, not opened), and, with *outside*, a member in another folder.

Run it to write them into a folder::

    python -m tests.ngff.rfc.rfc8_examples /tmp/rfc8
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.ngff.rfc.ngffzarr import root_ome, write_ngff_zarr

VERSION = "0.9.dev3"
#: where the draft's tiles example puts its two tiles in "world" (z, y, x)
TILE_TRANSLATIONS = {"tile_0.zarr": [0.0, 0.0, 100.0], "tile_1.zarr": [100.0, 0.0, 0.0]}


def _group(path: Path, ome: dict[str, Any]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    doc = {"zarr_format": 3, "node_type": "group", "attributes": {"ome": ome}}
    (path / "zarr.json").write_text(json.dumps(doc, indent=2))
    return path


def _system_of(image: Path) -> tuple[str, list[dict[str, Any]]]:
    """The name and axes of the (first) coordinate system ngff-zarr wrote for *image*."""
    cs = root_ome(image)["multiscales"][0]["coordinateSystems"][0]
    return cs["name"], cs["axes"]


def write_tiles(root: Path) -> Path:
    """The tiles collection (two ngff-zarr images placed by the collection's scene)."""
    for name in TILE_TRANSLATIONS:
        write_ngff_zarr(root / name, "0.6")
    system, axes = _system_of(root / "tile_0.zarr")
    transformations = [
        {
            "type": "translation",
            "translation": t,
            "input": {"path": {"type": "zarr", "path": f"./{name}"}, "id": system},
            "output": {"id": "world"},
        }
        for name, t in TILE_TRANSLATIONS.items()
    ]
    nodes = [
        {
            "type": "multiscale",
            "id": name.split(".")[0],
            "name": f"Tile {i}",
            "path": {"type": "zarr", "path": f"./{name}"},
        }
        for i, name in enumerate(TILE_TRANSLATIONS)
    ]
    return _group(
        root,
        {
            "version": VERSION,
            "type": "collection",
            "name": "Tiles",
            "id": "tiles",
            "attributes": {
                "scene": {
                    "coordinateSystems": [{"id": "world", "axes": axes}],
                    "coordinateTransformations": transformations,
                }
            },
            "nodes": nodes,
        },
    )


def write_nested(root: Path, outside: Path | None = None) -> Path:
    """The nested collection; *outside*: a folder beside it for one more member."""
    write_ngff_zarr(root / "raw", "0.6")
    write_ngff_zarr(root / "more" / "seg", "0.6")
    inner: list[dict[str, Any]] = [
        {
            "name": "seg",
            "type": "multiscale",
            "path": {"type": "zarr", "path": (root / "more" / "seg").resolve().as_uri()},
            "attributes": {"example-viewer:settings": {"isDisabled": True}},
        }
    ]
    if outside is not None:
        write_ngff_zarr(outside / "far.zarr", "0.6")
        inner.append(
            {
                "name": "far",
                "type": "multiscale",
                "path": {"type": "zarr", "path": str((outside / "far.zarr").resolve())},
            }
        )
    return _group(
        root,
        {
            "version": VERSION,
            "type": "collection",
            "name": "nested-example",
            "nodes": [
                {
                    "name": "raw",
                    "type": "multiscale",
                    "path": {"type": "zarr", "path": "./raw"},
                    "attributes": {"example-viewer:settings": {"isDisabled": False}},
                },
                {"name": "inner", "type": "collection", "nodes": inner},
                {
                    "name": "elsewhere",
                    "type": "collection",
                    "path": {"type": "json", "path": "./nested_collection.json"},
                },
                {
                    "name": "inline",
                    "id": "inline",
                    "type": "multiscale",
                    "nodes": [
                        {
                            "id": "inline_0",
                            "name": "inline_0",
                            "type": "singlescale",
                            "path": {"type": "zarr", "path": "./raw/scale0/image"},
                        }
                    ],
                },
            ],
        },
    )


if __name__ == "__main__":
    out = Path(sys.argv[1])
    write_tiles(out / "tiles.zarr")
    write_nested(out / "nested.zarr", out / "outside")
