"""What spatialdata itself reads from a store napari-ozx wrote: run by
``test_save_readback.py`` in the venvs ``scripts/spatialdata-venvs.sh`` builds (spatialdata
0.7.3 and 0.8.0), never in the project's environment.

``python readback_spatialdata.py STORE SYSTEM`` prints one JSON document: spatialdata's
version; per shapes element the exterior vertices of each polygon after
``spatialdata.transform(element, to_coordinate_system=SYSTEM)``; per points element the
points after the same (columns and values); per labels element its level-0 pixels, its
levels' shapes and its transformation matrix to SYSTEM (``get_transformation``, over
(y, x)); per table its ``obs`` columns and ``uns["spatialdata_attrs"]``.
"""

from __future__ import annotations

import json
import sys


def main(store: str, system: str) -> dict:
    import numpy as np
    import spatialdata as sd
    from spatialdata.transformations import get_transformation

    sdata = sd.read_zarr(store)
    out: dict = {"version": sd.__version__, "shapes": {}, "points": {}, "labels": {}, "tables": {}}
    for name, gdf in sdata.shapes.items():
        moved = sd.transform(gdf, to_coordinate_system=system)
        out["shapes"][name] = {
            "types": [g.geom_type for g in moved.geometry],
            "exteriors": [
                np.asarray(g.exterior.coords).tolist() if g.geom_type == "Polygon" else None
                for g in moved.geometry
            ],
            "index": [int(i) for i in moved.index],
        }
    for name, ddf in sdata.points.items():
        moved = sd.transform(ddf, to_coordinate_system=system).compute()
        out["points"][name] = {
            "columns": {c: moved[c].astype(str).tolist() for c in moved.columns},
            "attrs": dict(ddf.attrs.get("spatialdata_attrs", {})),
        }
    for name, lab in sdata.labels.items():
        if hasattr(lab, "keys") and "scale0" in lab:  # a multiscale DataTree
            levels = [lab[k]["image"] for k in lab]
            first = levels[0]
        else:
            levels = [lab]
            first = lab
        t = get_transformation(lab, to_coordinate_system=system)
        out["labels"][name] = {
            "pixels": np.asarray(first.data).tolist(),
            "shapes": [list(level.shape) for level in levels],
            "dims": list(first.dims),
            "matrix": t.to_affine_matrix(input_axes=("y", "x"), output_axes=("y", "x")).tolist(),
        }
    for name, table in sdata.tables.items():
        out["tables"][name] = {
            "obs": {c: table.obs[c].astype(str).tolist() for c in table.obs.columns},
            "attrs": dict(table.uns["spatialdata_attrs"]),
        }
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2]), default=str))
