"""``napari_ozx.open_roi``: one ROI (or one object of a masking ROI table) of an image as
its own layers, cropped exactly as ngio 1.1 reads it (``Image.get_roi``,
``get_roi_masked``) at every level, from a directory, an .ozx, and a plate field in a
directory and in an .ozx; placed over the full image; lazy; one error for bad input.

The images are written by ngio itself (``tests/_support/tablegen.py``,
``tests/_support/roigen.py``); the tests skip when ngio is not importable.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import napari_ozx
from napari_ozx.errors import OzxError, TableError
from napari_ozx.layers.provenance import METADATA_KEY, ROI_KEY
from napari_ozx.layers.reading import read_layer_data
from tests._support import roigen
from tests._support.omegen import zip_dir

LEVELS = (0, 1, 2)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The ngio image (``roigen.write_roi_image``) as a directory, an .ozx, and
    field 0 of well B/03 of a plate, as a directory and as an .ozx."""
    pytest.importorskip("ngio", reason="ngio (pinned in the testing extra) is not installed")
    root = tmp_path_factory.mktemp("roi")
    img = root / "img.zarr"
    roigen.write_roi_image(img)
    plate = root / "plate.zarr"
    _group(
        plate,
        {
            "plate": {
                "version": "0.5",
                "name": "p",
                "rows": [{"name": "A"}, {"name": "B"}],
                "columns": [{"name": "01"}, {"name": "02"}, {"name": "03"}],
                "wells": [{"path": "B/03", "rowIndex": 1, "columnIndex": 2}],
            }
        },
    )
    _group(plate / "B", None)
    _group(plate / "B" / "03", {"well": {"version": "0.5", "images": [{"path": "0"}]}})
    shutil.copytree(img, plate / "B" / "03" / "0")
    return {
        "ref": img,
        "dir": str(img),
        "ozx": str(zip_dir(img, root / "img.ozx")),
        "plate": str(plate / "B" / "03" / "0"),
        "plate_ozx": str(zip_dir(plate, root / "plate.ozx") / "B" / "03" / "0"),
    }


def _group(path: Path, ome: dict[str, Any] | None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    attrs = {"ome": {"version": "0.5", **ome}} if ome else {}
    doc = {"zarr_format": 3, "node_type": "group", "attributes": attrs}
    (path / "zarr.json").write_text(json.dumps(doc))


def _by_kind(layers: list[Any]) -> tuple[Any, Any]:
    (image,) = [ld for ld in layers if ld[2] == "image"]
    (labels,) = [ld for ld in layers if ld[2] == "labels"]
    return image, labels


FLAVOURS = ["dir", "ozx", "plate", "plate_ozx"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_roi_crops_equal_ngio_reads_at_every_level(files, flavour):
    """A ROI on the pixel grid (FOV_1), one off it within and past ngio's 1 % rounding
    (rounded), one past the image border (outside): image and labels crops equal ngio's
    ``get_roi`` at each level."""
    rois = ("FOV_1", "rounded", "outside")
    ref = roigen.ngio_roi_reads(files["ref"], "fov_anndata", rois, LEVELS)
    for roi in rois:
        for level in LEVELS:
            image, labels = _by_kind(
                napari_ozx.open_roi(files[flavour], "fov_anndata", roi, level=level)
            )
            want = ref[(roi, level)]
            assert image[1]["channel_axis"] == 0
            np.testing.assert_array_equal(np.asarray(image[0]), want["image"], f"{roi} {level}")
            np.testing.assert_array_equal(np.asarray(labels[0]), want["nuclei"], f"{roi} {level}")
            assert image[1]["name"][0].startswith(f"{roi}: ")
            assert labels[1]["name"] == f"{roi}: nuclei"


@pytest.mark.parametrize("flavour", ["dir", "plate_ozx"])
@pytest.mark.parametrize("masked", [False, True])
def test_object_crops_equal_ngio_reads_masked_or_not(files, flavour, masked):
    """Objects of a masking ROI table by label id: the box crop (``get_roi``) or, masked,
    the pixels of that object only (``get_roi_masked`` of the image and of the labels)."""
    ids = (1, 2, 3)
    ref = roigen.ngio_roi_reads(files["ref"], "nuclei_roi_parquet", ids, LEVELS, masked)
    for i in ids:
        for level in LEVELS:
            got = napari_ozx.open_roi(
                files[flavour], "nuclei_roi_parquet", i, level=level, masked=masked
            )
            image, labels = _by_kind(got)
            want = ref[(str(i), level)]
            np.testing.assert_array_equal(np.asarray(image[0]), want["image"], f"{i} {level}")
            lab = np.asarray(labels[0])
            np.testing.assert_array_equal(lab, want["nuclei"], f"{i} {level}")
            if masked:
                assert set(np.unique(lab)) <= {0, i} and (lab == i).any()
            assert labels[1]["name"] == f"nuclei {i}: nuclei"


def test_crops_lie_over_the_full_image(files):
    """Level 0: every crop pixel sits, in world coordinates, on the full image's pixel of
    the same value (placement: scale and translate of the crop against the reader's)."""
    full = read_layer_data(files["dir"])
    (whole,) = [ld for ld in full if ld[2] == "image"]
    level0 = np.asarray(whole[0][0])
    s, t = np.asarray(whole[1]["scale"]), np.asarray(whole[1]["translate"])
    for roi in ("FOV_1", "rounded", "outside"):
        image, labels = _by_kind(napari_ozx.open_roi(files["dir"], "fov_anndata", roi))
        crop = np.asarray(image[0])
        assert np.allclose(image[1]["scale"], s)
        start = (np.asarray(image[1]["translate"]) - t) / s  # world -> full image's pixels
        assert np.allclose(start, np.round(start))
        z, y, x = np.round(start).astype(int)
        nz, ny, nx = crop.shape[1:]
        np.testing.assert_array_equal(crop, level0[:, z : z + nz, y : y + ny, x : x + nx])
        assert np.allclose(labels[1]["translate"], image[1]["translate"])
    # a coarser level keeps the pixel size of its level, over the same place
    image1, _ = _by_kind(napari_ozx.open_roi(files["dir"], "fov_anndata", "FOV_1", level=1))
    assert np.allclose(np.asarray(image1[1]["scale"])[1:], s[1:] * 2)
    image0, _ = _by_kind(napari_ozx.open_roi(files["dir"], "fov_anndata", "FOV_1", level=0))
    assert np.allclose(image1[1]["translate"], image0[1]["translate"])


def test_crops_carry_a_roi_record_and_no_source(files):
    """A crop is never taken for its image (saving back, editing): no LayerSource."""
    layers = napari_ozx.open_roi(files["ozx"], "nuclei_roi_json", "2", level=1, masked=True)
    for _data, kw, _kind in layers:
        metas = kw["metadata"] if isinstance(kw["metadata"], list) else [kw["metadata"]]
        for meta in metas:
            assert METADATA_KEY not in meta
            rec = meta[ROI_KEY]
            assert (rec["table"], rec["roi"], rec["level"], rec["masked"]) == (
                "nuclei_roi_json",
                "2",
                1,
                True,
            )
        assert kw["multiscale"] is False


def test_only_the_chunks_the_roi_touches_are_read(tmp_path, store_reads, monkeypatch):
    """Opening reads metadata and the table; showing the crop reads the 2 x 2 chunks of
    each channel the ROI covers at that level, and nothing of the other levels."""
    pytest.importorskip("ngio", reason="ngio (pinned in the testing extra) is not installed")
    from zarr.storage import LocalStore

    sync = LocalStore.get_sync  # the direct read path (ngff.read.fastread) reads with it

    def get_sync(self, key, *a, **k):  # type: ignore[no-untyped-def]
        store_reads.append(key)
        return sync(self, key, *a, **k)

    monkeypatch.setattr(LocalStore, "get_sync", get_sync)
    path = tmp_path / "chunked.zarr"
    data = roigen.write_chunked(path)
    store_reads.clear()
    ((crop, _kw, _),) = napari_ozx.open_roi(str(path), "fov", "FOV_1")
    assert not [k for k in store_reads if "/c/" in k]  # no chunk read yet
    store_reads.clear()
    y0, y1, x0, x1 = roigen.CHUNKED_ROI
    np.testing.assert_array_equal(np.asarray(crop), data[:, y0:y1, x0:x1])
    chunks = sorted({k for k in store_reads if "/c/" in k})
    assert chunks == [f"0/c/{c}/{y}/{x}" for c in (0, 1) for y in (1, 2) for x in (1, 2)]
    store_reads.clear()
    ((crop2, _kw, _),) = napari_ozx.open_roi(str(path), "fov", "FOV_1", level=2)
    assert crop2.shape == (2, 10, 10)
    np.asarray(crop2)
    assert sorted({k for k in store_reads if "/c/" in k}) == ["2/c/0/0/0", "2/c/1/0/0"]


def test_remote_roi_reads_only_its_chunks(tmp_path):
    """Over HTTP: the crop's pixels cost the requests of its chunks only."""
    pytest.importorskip("ngio", reason="ngio (pinned in the testing extra) is not installed")
    pytest.importorskip("fsspec")
    from tests._support.httpserver import Server

    data = roigen.write_chunked(tmp_path / "chunked.zarr")
    with Server(tmp_path) as srv:
        ((crop, _kw, _),) = napari_ozx.open_roi(f"{srv.url}/chunked.zarr", "fov", "FOV_1")
        srv.reset()
        y0, y1, x0, x1 = roigen.CHUNKED_ROI
        np.testing.assert_array_equal(np.asarray(crop), data[:, y0:y1, x0:x1])
        got = sorted({p for _m, p, _r in srv.requests if "/c/" in p})
    assert got == [f"/chunked.zarr/0/c/{c}/{y}/{x}" for c in (0, 1) for y in (1, 2) for x in (1, 2)]


@pytest.mark.parametrize(
    ("table", "roi", "said"),
    [
        ("fov_anndata", "FOV_9", "no ROI 'FOV_9'"),
        ("no_such_table", "FOV_1", "no such table"),
        ("nuclei_roi_json", 7, "no label id 7"),
        ("feat_anndata", "1", "has no ROIs"),
    ],
)
def test_bad_input_is_one_error_naming_the_roi_and_the_table(files, table, roi, said):
    with pytest.raises(TableError) as e:
        napari_ozx.open_roi(files["dir"], table, roi)
    text = str(e.value)
    assert said in text and repr(table) in text and str(roi) in text


def test_a_level_the_image_lacks_and_masking_a_roi_table_are_refused(files):
    with pytest.raises(OzxError, match="levels 0-2"):
        napari_ozx.open_roi(files["dir"], "fov_anndata", "FOV_1", level=3)
    with pytest.raises(TableError, match="masking ROI table"):
        napari_ozx.open_roi(files["dir"], "fov_anndata", "FOV_1", masked=True)


def test_crops_of_a_plate_field_lie_where_its_well_view_shows_it(files):
    """In a plate's well view a field is moved onto its well's tile of the plate
    overview, its ROI layer with it: given that ROI layer's placement (``view``), the
    crops lie over the moved field."""
    from napari_ozx.layers.reading import well_layer_data
    from napari_ozx.ngff.read.plate import open_hcs

    plate = open_hcs(str(Path(files["plate"]).parents[2]))
    layers, errors = well_layer_data(plate, "B/03", overview=plate.overview())
    assert not errors
    (field,) = [ld for ld in layers if ld[2] == "image"]
    (rois,) = [ld for ld in layers if ld[2] == "shapes" and ld[1]["name"].endswith("fov_anndata")]
    t, s = np.asarray(field[1]["translate"]), np.asarray(field[1]["scale"])
    assert not np.allclose(t[1:], tg_translation_yx())  # moved into the mosaic
    view = (rois[1]["scale"], rois[1]["translate"])
    image, labels = _by_kind(
        napari_ozx.open_roi(files["plate"], "fov_anndata", "rounded", view=view)
    )
    start = np.array([1, 8, 20])  # z, y, x pixels of "rounded" (1.5 / 1.5, 5.2003 / 0.65 ...)
    np.testing.assert_allclose(image[1]["translate"], t + start * s)
    np.testing.assert_allclose(image[1]["scale"], s)
    np.testing.assert_allclose(labels[1]["translate"], image[1]["translate"])


def tg_translation_yx() -> np.ndarray:
    from tests._support.tablegen import TRANSLATION

    return np.asarray(TRANSLATION[2:])
