"""Images written by ngff-zarr 0.50 (a test dependency), the real tool behind RFC-4
orientation and the ``0.9.dev1`` development version: ``to_multiscales(...,
orientation=...)`` then ``to_ngff_zarr(..., version=...)``.

``write_ngff_zarr`` writes one small 3-D ``z y x`` image (uint8, 4 x 6 x 8, values
0..191, scale 2 / 0.5 / 0.5 micrometer). Run this module to write the three kinds
this package's tests use into a folder and look at them::

    python -m tests.ngff.rfc.ngffzarr /tmp/rfc-fixtures
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tests._support.classic_dask import in_child_without_query_planning

SHAPE = (4, 6, 8)
SCALE = {"z": 2.0, "y": 0.5, "x": 0.5}


def pixels() -> np.ndarray:
    return np.arange(np.prod(SHAPE), dtype=np.uint8).reshape(SHAPE)


@in_child_without_query_planning  # ngff-zarr writes through dask's classic array
def write_ngff_zarr(
    path: Path,
    version: str = "0.9.dev1",
    orientation: str | Mapping[str, str] | None = None,
) -> Path:
    """*path* written by ngff-zarr as OME-Zarr *version*; *orientation* is a preset name
    ngff-zarr knows ("LPS", "RAS") or ``{dim: RFC-4 value}``."""
    import ngff_zarr as nz

    img = nz.to_ngff_image(
        pixels(),
        dims=("z", "y", "x"),
        scale=dict(SCALE),
        axes_units=dict.fromkeys(SCALE, "micrometer"),
    )
    orient: Any = orientation
    if isinstance(orientation, Mapping):
        orient = {
            d: nz.AnatomicalOrientation(value=nz.AnatomicalOrientationValues(v))
            for d, v in orientation.items()
        }
    ms = nz.to_multiscales(img, scale_factors=[2], orientation=orient)
    nz.to_ngff_zarr(str(path), ms, version=version, overwrite=True)
    return path


def set_version(path: Path, version: str) -> None:
    """Rewrite the declared ``ome.version`` of the root (e.g. bioformats2raw's
    ``1.0-DEV`` for the same development line) and keep everything else."""
    doc_path = path / "zarr.json"
    doc = json.loads(doc_path.read_text())
    doc["attributes"]["ome"]["version"] = version
    doc.pop("consolidated_metadata", None)  # ngff-zarr's copy would still say the old one
    doc_path.write_text(json.dumps(doc, indent=2))


def root_ome(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((path / "zarr.json").read_text())["attributes"]["ome"]
    return out


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    write_ngff_zarr(out / "dev1.ome.zarr")
    write_ngff_zarr(out / "lps-0.6.ome.zarr", "0.6", "LPS")
    write_ngff_zarr(out / "lps-0.9.dev1.ome.zarr", "0.9.dev1", "LPS")
