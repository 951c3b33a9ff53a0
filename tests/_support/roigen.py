"""ngio 1.1's own reads of one ROI, the reference for ``napari_ozx.open_roi``
(``tests/layers/test_open_roi.py``): in a child process under dask's array query
planning (``classic_dask.py``), ngio imported only here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tests._support import tablegen as tg
from tests._support.classic_dask import in_child_without_query_planning
from tests._support.tablegen import _ngio_open, quiet


@in_child_without_query_planning
def ngio_roi_reads(
    path: Path,
    table: str,
    rois: tuple[Any, ...],
    levels: tuple[int, ...],
    masked: bool = False,
    label: str = "nuclei",
) -> dict[tuple[str, int], dict[str, np.ndarray]]:
    """Per (ROI, level): ``{"image": ..., label: ...}`` as ngio reads them: the image at
    that level (``get_image(path=)``), the label image at its level closest to that pixel
    size; ROI tables by ``get_roi``, masking tables by ``get_roi`` or, *masked*, by
    ``get_masked_image`` / ``get_masked_label`` and ``get_roi_masked``."""
    out: dict[tuple[str, int], dict[str, np.ndarray]] = {}
    with quiet():
        oz = _ngio_open(path)
        tab = oz.get_generic_roi_table(table)
        for lvl in levels:
            img = oz.get_image(path=str(lvl))
            lab = oz.get_label(label, pixel_size=img.pixel_size, strict=False)
            for r in rois:
                if isinstance(r, int):
                    roi = tab.get_label(r)
                    if masked:
                        mimg = oz.get_masked_image(label, path=str(lvl))
                        mlab = oz.get_masked_label(label, label, pixel_size=img.pixel_size)
                        out[(str(r), lvl)] = {
                            "image": np.asarray(mimg.get_roi_masked(r)),
                            label: np.asarray(mlab.get_roi_masked(r)),
                        }
                        continue
                else:
                    roi = tab.get(r)
                out[(str(r), lvl)] = {
                    "image": np.asarray(img.get_roi(roi)),
                    label: np.asarray(lab.get_roi(roi)),
                }
    return out


#: the chunked image of :func:`write_chunked`: c, y, x and its chunks
CHUNKED_SHAPE = (2, 256, 256)
CHUNK = 32
#: its one ROI, in level-0 pixels (y0, y1, x0, x1): 4 chunks of each channel at level 0
CHUNKED_ROI = (40, 80, 40, 80)


@in_child_without_query_planning
def write_chunked(path: Path) -> np.ndarray:
    """A 3-level c, y, x image in 32 x 32 chunks, written by ngio, with a ROI table
    ``fov`` of one ROI (``FOV_1``, :data:`CHUNKED_ROI`); returns the level-0 pixels."""
    from ngio import Roi, RoiTable, create_ome_zarr_from_array

    with quiet():
        data = np.random.default_rng(5).integers(0, 60000, CHUNKED_SHAPE, dtype=np.uint16)
        oz = create_ome_zarr_from_array(
            str(path),
            data,
            pixelsize=0.5,
            axes_names="cyx",
            levels=3,
            chunks=(1, CHUNK, CHUNK),
            ngff_version="0.5",
            overwrite=True,
        )
        y0, y1, x0, x1 = CHUNKED_ROI
        roi = Roi.from_values(
            name="FOV_1",
            slices={"x": (x0 * 0.5, (x1 - x0) * 0.5), "y": (y0 * 0.5, (y1 - y0) * 0.5)},
        )
        oz.add_table("fov", RoiTable(rois=[roi]), backend="json")
    return data


@in_child_without_query_planning
def write_roi_image(path: Path) -> None:
    """The image of ``tablegen.write_ngio_image`` (c, z, y, x, translated, labels
    ``nuclei``) with 3 levels and only the tables the ROI tests read: ROI table
    ``fov_anndata`` (``tablegen.rois``), masking ROI tables ``nuclei_roi_parquet`` and
    ``nuclei_roi_json``, feature table ``feat_anndata``."""
    import pandas as pd
    from ngio import FeatureTable, RoiTable, create_ome_zarr_from_array

    with quiet():
        image = np.random.default_rng(33).integers(0, 4000, tg.SHAPE, dtype=np.uint16)
        oz = create_ome_zarr_from_array(
            str(path),
            image,
            pixelsize=tg.PIXEL,
            z_spacing=tg.Z_SPACING,
            levels=3,
            translation=tg.TRANSLATION,
            axes_names="czyx",
            ngff_version="0.5",
            overwrite=True,
        )
        lab = oz.derive_label("nuclei")
        lab.set_array(tg.nuclei_labels())
        lab.consolidate(mode="auto")
        masking = oz.build_masking_roi_table("nuclei")
        oz.add_table("fov_anndata", RoiTable(rois=tg.rois()), backend="anndata")
        oz.add_table("nuclei_roi_parquet", masking, backend="parquet")
        oz.add_table("nuclei_roi_json", masking, backend="json")
        features = pd.DataFrame({"label": [1, 2, 3], "area": [200.0, 1800.0, 320.0]})
        oz.add_table(
            "feat_anndata", FeatureTable(features, reference_label="nuclei"), backend="anndata"
        )
