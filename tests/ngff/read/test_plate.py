"""HCS plates and wells without a GUI: metadata, the lazy overview, reader layer data."""

from __future__ import annotations

import dataclasses
import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from napari_ozx.errors import MetadataError
from napari_ozx.layers.provenance import LayerSource
from napari_ozx.layers.reading import read_layer_data, well_layer_data
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.ngff.read.plate import HcsPlate, open_hcs, plate_by_id
from tests._support.plategen import PlateSpec, write_plate


def tile(ov, arr, r, c, shape):
    """The part of a computed overview plane (..., y, x) that holds well (r, c)."""
    y0 = r * ov.pitch[0] + ov.inset[0]
    x0 = c * ov.pitch[1] + ov.inset[1]
    return arr[..., y0 : y0 + shape[-2], x0 : x0 + shape[-1]]


def well_tile(ov, arr, r, c):
    return arr[
        ..., r * ov.pitch[0] : (r + 1) * ov.pitch[0], c * ov.pitch[1] : (c + 1) * ov.pitch[1]
    ]


# ------------------------------------------------------------------ metadata

CASES = [
    ("p96_v04_py", "dir", "0.4"),
    ("p384_v04_py", "dir", "0.4"),
    ("p96_v05", "dir", "0.5"),
    ("p96_v05", "ozx", "0.5"),
    ("p384_v05", "dir", "0.5"),
    ("p384_v05", "ozx", "0.5"),
]


@pytest.mark.parametrize(("name", "form", "version"), CASES)
def test_plate_metadata(plates, name, form, version):
    paths, spec = plates(name)
    with open_ome_zarr(paths[form]) as oz:
        plate = HcsPlate(oz)
        assert plate.kind == "plate"
        assert plate.plate.version == version
        assert plate.rows == tuple(spec.rows) and plate.columns == tuple(spec.cols)
        assert len(plate.wells) == spec.n_rows * spec.n_cols
        assert all(w.error is None and len(w.fields) == 2 for w in plate.wells)
        w = plate.well("B/3")
        assert (w.row, w.column, w.name) == (1, 2, "B3")
        assert [f.path for f in w.fields] == ["B/3/0", "B/3/1"]
        assert plate.by_position[(15, 23) if spec.n_rows == 16 else (7, 11)].name in ("P24", "H12")
        assert plate.max_fields() == 2
        assert "2 fields" in w.describe()


def test_open_reads_no_chunks(plates, store_reads):
    """Opening a plate (reader call to layer data) reads zarr.json / .zattrs ... only."""
    keys = store_reads
    for name, form in (
        ("p96_v04_py", "dir"),
        ("p96_v05", "dir"),
        ("p96_v05", "ozx"),
        ("sparse_v05", "ozx"),
    ):
        keys.clear()
        layers = read_layer_data(str(plates(name)[0][form]))
        assert [t for _, _, t in layers] == ["image", "points"]
        assert len(keys) > 96, (name, form)
        assert all(k.endswith(("zarr.json", ".zattrs", ".zgroup", ".zarray")) for k in keys), (
            name,
            form,
            keys[:20],
        )


# ------------------------------------------------------------------ overview


@pytest.mark.parametrize(
    ("name", "form"),
    [("p96_v04_py", "dir"), ("p96_v05", "ozx"), ("p384_v05", "dir"), ("p384_v04_py", "dir")],
)
def test_overview_pixels_match_fields(plates, name, form):
    paths, spec = plates(name)
    with open_ome_zarr(paths[form]) as oz:
        ov = HcsPlate(oz).overview()
        assert ov.level == 0  # 64 px fields: the full level is the nearest to the target
        assert ov.tile == (64, 64) and ov.data.shape == (
            2,
            spec.n_rows * ov.pitch[0],
            spec.n_cols * ov.pitch[1],
        )
        py = ov.pitch[0]
        for r, c in [(0, 0), (1, 2), (spec.n_rows - 1, spec.n_cols - 1), (spec.n_rows // 2, 5)]:
            rows = ov.data[
                :, r * py : (r + 1) * py
            ].compute()  # one plate row: one task per channel
            got = rows[:, ov.inset[0] : ov.inset[0] + 64, c * ov.pitch[1] + ov.inset[1] :][..., :64]
            np.testing.assert_array_equal(got, spec.field_data(r, c, 0))
        # the gaps between tiles are empty
        first = ov.data[:, :py].compute()
        assert not first[:, : ov.inset[0]].any() and not first[:, :, : ov.inset[1]].any()


def test_overview_ozx_equals_dir(plates):
    paths, _ = plates("p384_v05")
    with open_ome_zarr(paths["dir"]) as a, open_ome_zarr(paths["ozx"]) as b:
        da_, db = HcsPlate(a).overview().data, HcsPlate(b).overview().data
        np.testing.assert_array_equal(da_[1].compute(), db[1].compute())


def test_overview_chunks_are_well_tiles(plates, monkeypatch):
    paths, spec = plates("p384_v05")
    from zarr.storage import LocalStore

    with open_ome_zarr(paths["dir"]) as oz:
        ov = HcsPlate(oz).overview()
        d = ov.data
        assert d.chunks[0] == (1, 1)
        assert d.chunks[1] == (ov.pitch[0],) * 16 and d.chunks[2] == (ov.pitch[1],) * 24
        # one well tile of one channel is one chunk and reads only that well
        keys: list[str] = []
        orig = LocalStore.get

        async def spy(self, key, *a, **k):
            keys.append(key)
            return await orig(self, key, *a, **k)

        monkeypatch.setattr(LocalStore, "get", spy)
        py, px = ov.pitch
        part = d[0, 3 * py : 4 * py, 7 * px : 8 * px].compute()
        iy, ix = ov.inset
        np.testing.assert_array_equal(part[iy : iy + 64, ix : ix + 64], spec.field_data(3, 7, 0)[0])
        assert keys and all(k.startswith("D/8/0/") for k in keys), keys


@pytest.mark.parametrize("name", ["p96_v05", "p384_v04_py", "odd_v05"])
def test_whole_plate_is_multiscale_with_full_resolution_fields(plates, name):
    """Level 0 of the plate picture is every well's full-resolution field at its tile;
    level 1 is the fields' own level 1 at half the pitch."""
    paths, spec = plates(name)
    with open_ome_zarr(paths["dir"]) as oz:
        plate = HcsPlate(oz)
        ov = plate.overview()
        image = ov.as_image()
        assert len(image.levels) == 2 and len(image.multiscale.datasets) == 2
        lv0, lv1 = image.levels
        y, x = ov.yx
        assert lv1.shape[y] * 2 == lv0.shape[y] and lv1.shape[x] * 2 == lv0.shape[x]
        ds0, ds1 = image.multiscale.datasets
        assert ds1.scale[y] == 2 * ds0.scale[y] and ds1.scale[x] == 2 * ds0.scale[x]
        for r, c in [(0, 0), (1, 2), (spec.n_rows - 1, spec.n_cols - 1)]:
            for level, arr in enumerate((lv0, lv1)):
                want = spec.field_data(r, c, 0, level)
                py, px = ov.pitch[0] >> level, ov.pitch[1] >> level
                iy, ix = ov.inset[0] >> level, ov.inset[1] >> level
                h, w = want.shape[-2:]
                got = np.asarray(
                    arr[..., r * py + iy : r * py + iy + h, c * px + ix : c * px + ix + w]
                )
                np.testing.assert_array_equal(got, want)
                # nothing else in the tile
                t = np.asarray(arr[..., r * py : (r + 1) * py, c * px : (c + 1) * px])
                assert int((t != 0).sum()) == int((want != 0).sum())


def test_big_plate_gets_coarser_levels_than_its_fields(tmp_path):
    """A 1536-well plate of single-level fields: levels beyond the fields' pyramid keep
    the coarsest picture about OVERVIEW_EDGE px wide (every k-th pixel)."""
    spec = PlateSpec(
        32,
        48,
        fields=1,
        labels=False,
        size=(256, 256),
        levels=1,
        missing={(r, c) for r in range(32) for c in range(48)} - {(0, 0), (5, 7)},
    )
    p = write_plate(tmp_path / "p1536.zarr", spec)
    with open_ome_zarr(p) as oz:
        ov = HcsPlate(oz).overview()
        levels = ov.datas
        assert max(levels[-1].shape[-2:]) <= 4096 < max(levels[0].shape[-2:])
        for k, arr in enumerate(levels):
            f = 2**k
            assert arr.shape[-2:] == (32 * ov.pitch[0] // f, 48 * ov.pitch[1] // f)
            py, px, iy, ix = ov.pitch[0] // f, ov.pitch[1] // f, ov.inset[0] // f, ov.inset[1] // f
            want = spec.field_data(5, 7, 0)[..., ::f, ::f]
            h, w = want.shape[-2:]
            got = np.asarray(arr[:, 5 * py + iy : 5 * py + iy + h, 7 * px + ix : 7 * px + ix + w])
            np.testing.assert_array_equal(got, want)


def test_sparse_plate_absent_wells_are_zero(plates):
    paths, spec = plates("sparse_v05")
    for form in ("dir", "ozx"):
        with open_ome_zarr(paths[form]) as oz:
            plate = HcsPlate(oz)
            assert len(plate.wells) == 128
            broken = plate.well("A/4")
            assert broken.error == "well group is missing" and not broken.fields
            assert (0, 1) not in plate.by_position  # not listed by the plate at all
            ov = plate.overview()
            assert "A/4" in ov.skipped
            arr = ov.data.compute()
            np.testing.assert_array_equal(tile(ov, arr, 0, 0, (64, 64)), spec.field_data(0, 0, 0))
            assert not well_tile(ov, arr, 0, 1).any()  # absent
            assert not well_tile(ov, arr, 0, 3).any()  # listed, group missing
            np.testing.assert_array_equal(
                tile(ov, arr, 15, 21, (64, 64)), spec.field_data(15, 21, 0)
            )
            # field 1 of B1 is listed but its group is missing: the overview of field 1 skips it
            ov1 = plate.overview(1)
            assert "B/1" in ov1.skipped and "missing" in ov1.skipped["B/1"]
            arr1 = ov1.data.compute()
            assert not well_tile(ov1, arr1, 1, 0).any()
            np.testing.assert_array_equal(tile(ov1, arr1, 0, 0, (64, 64)), spec.field_data(0, 0, 1))


def test_sparse_plate_absent_rows_cost_no_io(tmp_path, monkeypatch):
    spec = PlateSpec(
        4, 6, fields=1, labels=False, missing={(r, c) for r in (1, 2) for c in range(6)}
    )
    p = write_plate(tmp_path / "rows.zarr", spec, "0.5")
    from zarr.storage import LocalStore

    with open_ome_zarr(p) as oz:
        ov = HcsPlate(oz).overview()
        keys: list[str] = []
        orig = LocalStore.get

        async def spy(self, key, *a, **k):
            keys.append(key)
            return await orig(self, key, *a, **k)

        monkeypatch.setattr(LocalStore, "get", spy)
        rows12 = ov.data[:, ov.pitch[0] : 3 * ov.pitch[0]].compute()
        assert not rows12.any() and keys == []


def test_odd_field_sizes_and_z_are_padded(plates):
    paths, spec = plates("odd_v05")
    with open_ome_zarr(paths["ozx"]) as oz:
        ov = HcsPlate(oz).overview()
        assert [a.name for a in ov.axes] == ["c", "z", "y", "x"]
        assert ov.tile == (48, 56)  # the largest field 0 of all wells
        arr = ov.data.compute()
        assert arr.shape == (2, 3, 2 * ov.pitch[0], 3 * ov.pitch[1])
        for r in range(2):
            for c in range(3):
                want = spec.field_data(r, c, 0)
                np.testing.assert_array_equal(tile(ov, arr, r, c, want.shape), want)
                # padded to the tile, nothing else
                t = well_tile(ov, arr, r, c)
                assert int((t != 0).sum()) == int((want != 0).sum())


def test_a_well_with_more_planes_than_the_representative_is_shown_whole(tmp_path):
    """The plate picture's t / z / c extent is the most any well has: the first well
    (the representative) has 2 z planes, B3 has 5; B3's planes 2-4 are its own pixels,
    the other wells are zeros beyond their planes (never cut, never invented)."""
    spec = PlateSpec(2, 3, z=2, labels=False, z_of=lambda r, c, f: 5 if (r, c) == (1, 2) else 2)
    path = write_plate(tmp_path / "zplanes.ome.zarr", spec, "0.5")
    with open_ome_zarr(path) as oz:
        ov = HcsPlate(oz).overview()
        image = ov.as_image()
        assert [a.name for a in ov.axes] == ["c", "z", "y", "x"]
        for level, arr in enumerate(image.levels):
            assert arr.shape[:2] == (2, 5), (level, arr.shape)
            full = np.asarray(arr)
            py, px = ov.pitch[0] >> level, ov.pitch[1] >> level
            iy, ix = ov.inset[0] >> level, ov.inset[1] >> level
            for r, c in spec.wells():
                want = spec.field_data(r, c, 0, level)
                h, w = want.shape[-2:]
                got = full[:, :, r * py + iy : r * py + iy + h, c * px + ix : c * px + ix + w]
                nz = want.shape[1]
                np.testing.assert_array_equal(got[:, :nz], want)
                assert not got[:, nz:].any()


def test_level_choice_and_placement(tmp_path):
    """Large fields: the plate picture's level 0 is the fields' full resolution, and a
    well's full-resolution layers land exactly on its tile."""
    spec = PlateSpec(2, 2, fields=2, size=(600, 400), levels=3, labels=True, chunk_yx=256)
    p = write_plate(tmp_path / "big.zarr", spec, "0.4")
    with open_ome_zarr(p) as oz:
        plate = HcsPlate(oz)
        ov = plate.overview()
        assert ov.level == 0 and ov.tile == (600, 400) and ov.yx_scale == (0.5, 0.5)
        assert len(ov.datas) == 3
        arr = ov.data.compute()
        np.testing.assert_array_equal(tile(ov, arr, 1, 1, (600, 400)), spec.field_data(1, 1, 0))
        w = plate.well("B/2")
        layers, errors = well_layer_data(plate, w, fields=[0], overview=ov)
        assert errors == []
        assert [k["name"] for _, k, _ in layers] == [["B2 f0 DAPI", "B2 f0 GFP"], "B2 f0 cells"]
        (data, kw, kind), (ldata, lkw, lkind) = layers
        assert kind == "image" and lkind == "labels" and kw["multiscale"]
        np.testing.assert_array_equal(np.asarray(data[0]), spec.field_data(1, 1, 0))
        lvl0 = ldata[0] if lkw["multiscale"] else ldata  # small labels open editable
        np.testing.assert_array_equal(np.asarray(lvl0), spec.label_data(1, 1, 0))
        # the field's full resolution lies pixel for pixel over its tile of level 0
        np.testing.assert_allclose(np.array(kw["translate"]), ov.tile_origin(1, 1))
        np.testing.assert_allclose(np.array(kw["scale"]), ov.yx_scale)
        # one record per channel layer (napari splits the list), all of the well's field
        srcs = [LayerSource.from_metadata(m) for m in kw["metadata"]]
        assert [s.channel for s in srcs] == [0, 1]
        src = srcs[0]
        assert (src.kind, src.well, src.field_path, src.field_index, src.node) == (
            "well",
            "B/2",
            "B/2/0",
            0,
            "B/2/0",
        )
        assert src.plate_id == plate.id and src.plate_kind == "plate" and src.is_plate
        lsrc = LayerSource.from_metadata(lkw["metadata"])
        assert lsrc.kind == "well" and lsrc.node == "B/2/0/labels/cells" and lsrc.channel is None
        assert lsrc.field_path == "B/2/0" and lsrc.levels == 3
        assert lkw["translate"] == kw["translate"]


def test_plate_sizes_up_to_1536_wells(tmp_path):
    for rows, cols in ((2, 3), (8, 12), (16, 24), (32, 48)):
        spec = PlateSpec(
            rows,
            cols,
            fields=1,
            labels=False,
            size=(8, 8),
            levels=1,
            missing={(r, c) for r in range(rows) for c in range(cols)} - {(0, 0)},
        )
        with open_ome_zarr(write_plate(tmp_path / f"{rows}.zarr", spec)) as oz:
            plate = HcsPlate(oz)
            if rows == 32:  # 1536 wells, rows A..Z, AA..AF
                assert plate.rows[-1] == "AF" and plate.columns[-1] == "48"
                ov = plate.overview()
                assert ov.data.shape[-2:] == (32 * ov.pitch[0], 48 * ov.pitch[1])


def test_well_at_and_annotations(plates):
    paths, _ = plates("p96_v05")
    with open_ome_zarr(paths["dir"]) as oz:
        ov = HcsPlate(oz).overview()
        y, x = ov.tile_origin(6, 10)
        assert ov.well_at(y + 3, x + 3).path == "G/11"
        assert ov.well_at(-5, -5) is None and ov.well_at(y, 1e9) is None
        ann = ov.annotations()
        assert [t for *_, t in ann] == list("ABCDEFGH") + [str(i) for i in range(1, 13)]
        assert all(a[1] < 0 for a in ann[:8]) and all(a[0] < 0 for a in ann[8:])


# ------------------------------------------------------------------ versions, acquisitions


def test_v03_plate_indices_from_paths(plates):
    paths, spec = plates("v03")
    with open_ome_zarr(paths["dir"]) as oz:
        plate = HcsPlate(oz)
        assert plate.plate.version == "0.3" and plate.well("C/5").row == 2
        ov = plate.overview()
        arr = ov.data.compute()
        np.testing.assert_array_equal(tile(ov, arr, 2, 4, (64, 64)), spec.field_data(2, 4, 0))


def test_acquisitions(plates):
    paths, spec = plates("acq_v04")
    with open_ome_zarr(paths["dir"]) as oz:
        plate = HcsPlate(oz)
        assert [a.id for a in plate.acquisitions] == [1, 2] and plate.acquisition_ids() == [1, 2]
        w = plate.well("A/2")
        assert [f.path for f in w.fields_in(2)] == ["A/2/1", "A/2/3"]
        assert plate.max_fields() == 4 and plate.max_fields(1) == 2
        ov = plate.overview(1, acquisition=2)  # second field of acquisition 2 = field "3"
        arr = ov.data.compute()
        np.testing.assert_array_equal(tile(ov, arr, 0, 1, (64, 64)), spec.field_data(0, 1, 3))
        imgs = plate.open_fields(w, acquisition=1)
        assert [i.path for i in imgs] == ["A/2/0", "A/2/2"]


def test_sharded_zarr_plate(plates):
    paths, spec = plates("sharded_v05")
    for form in ("dir", "ozx"):
        with open_ome_zarr(paths[form]) as oz:
            plate = HcsPlate(oz)
            assert len(plate.wells) == 5
            ov = plate.overview()
            arr = ov.data.compute()
            np.testing.assert_array_equal(tile(ov, arr, 1, 1, (64, 64)), spec.field_data(1, 1, 0))
            assert not well_tile(ov, arr, 1, 2).any()
            (img,) = plate.open_fields("A/3", [1])
            assert img.arrays[0].shards is not None
            np.testing.assert_array_equal(np.asarray(img.levels[0]), spec.field_data(0, 2, 1))
            np.testing.assert_array_equal(
                np.asarray(img.labels[0].levels[0]), spec.label_data(0, 2, 1)
            )


def test_plate_of_fields_written_by_our_writer(plates):
    paths, spec = plates("ours_v05")
    for form in ("dir", "ozx"):
        with open_ome_zarr(paths[form]) as oz:
            plate = HcsPlate(oz)
            ov = plate.overview()
            arr = ov.data.compute()
            np.testing.assert_array_equal(tile(ov, arr, 1, 2, (64, 64)), spec.field_data(1, 2, 0))
            assert not well_tile(ov, arr, 1, 1).any()
            layers, errors = well_layer_data(plate, plate.well("A/2"), grid=True, overview=ov)
            assert errors == [] and [t for *_, t in layers] == ["image", "labels"] * 2
            np.testing.assert_array_equal(np.asarray(layers[2][0][0]), spec.field_data(0, 1, 1))
            ldata, lkw = layers[3][0], layers[3][1]
            lvl0 = ldata[0] if lkw["multiscale"] else ldata  # small labels open editable
            np.testing.assert_array_equal(np.asarray(lvl0), spec.label_data(0, 1, 1))
            assert (
                layers[2][1]["translate"][-1] > layers[0][1]["translate"][-1]
            )  # second field to the right


# ------------------------------------------------------------------ reader


def test_reader_plate_layers(plates):
    paths, _spec = plates("p96_v05")
    (_img, kw, kind), (pts, pkw, pkind) = read_layer_data(str(paths["ozx"]))
    assert kind == "image" and pkind == "points"
    assert kw["channel_axis"] == 0 and kw["name"] == ["overview DAPI", "overview GFP"]
    assert kw["colormap"] == ["blue", "green"] and kw["contrast_limits"] == [[0, 4000], [0, 4000]]
    assert kw["multiscale"] is True and kw["axis_labels"] == ("y", "x")
    assert tuple(kw["scale"]) == (0.5, 0.5) and tuple(kw["units"]) == ("micrometer", "micrometer")
    srcs = [LayerSource.from_metadata(m) for m in kw["metadata"]]
    src = srcs[0]
    assert [s.channel for s in srcs] == [0, 1] and srcs[1] == dataclasses.replace(src, channel=1)
    assert (src.source, src.kind, src.plate_kind, src.node, src.plate_path) == (
        str(paths["ozx"]),
        "plate-overview",
        "plate",
        "",
        "",
    )
    assert src.overview_level == 0 and src.field_index == 0 and src.acquisition is None
    assert plate_by_id(src.plate_id) is not None
    assert pts.shape == (20, 2) and pkw["features"]["label"][:3] == ["A", "B", "C"]
    assert pkw["text"]["string"] == "{label}"
    assert LayerSource.from_metadata(pkw["metadata"]) == dataclasses.replace(src, channel=None)


def test_reader_single_well_shows_fields_as_grid(plates):
    paths, spec = plates("well_v05")
    for form in ("dir", "ozx"):
        layers = read_layer_data(str(paths[form]))
        names = [k["name"] for _, k, _ in layers]
        base = paths["dir"].name.removesuffix(".ome.zarr") if form == "dir" else "well"
        assert names == [
            [f"{base} f{f} DAPI", f"{base} f{f} GFP"] if i % 2 == 0 else f"{base} f{f} cells"
            for f in range(3)
            for i in range(2)
        ]
        xs = [k["translate"][-1] for _, k, t in layers if t == "image"]
        ys = [k["translate"][-2] for _, k, t in layers if t == "image"]
        assert xs[0] == 0 and xs[1] > 32 and xs[2] == 0 and ys[2] > 32  # 2 x 2 grid
        np.testing.assert_array_equal(np.asarray(layers[4][0][0]), spec.field_data(0, 0, 2))


def test_reader_well_inside_a_plate(plates):
    paths, spec = plates("p96_v05")
    layers = read_layer_data(str(paths["dir"] / "B" / "3"))
    assert [k["name"] for _, k, _ in layers][:2] == [["B3 f0 DAPI", "B3 f0 GFP"], "B3 f0 cells"]
    np.testing.assert_array_equal(np.asarray(layers[2][0][0]), spec.field_data(1, 2, 1))


def test_open_fields_errors_are_per_field(plates):
    paths, _spec = plates("sparse_v05")
    with open_ome_zarr(paths["dir"]) as oz:
        plate = HcsPlate(oz)
        good, bad = plate.open_fields("B/1")
        assert good.path == "B/1/0" and isinstance(bad, MetadataError)
        layers, errors = well_layer_data(plate, plate.well("B/1"), grid=True)
        assert (
            len(layers) == 1 and len(errors) == 1 and "B1" in errors[0] and "missing" in errors[0]
        )
        with pytest.raises(MetadataError, match="well group is missing"):
            plate.open_fields("A/4")


def test_broken_plate_is_an_error(tmp_path):
    spec = PlateSpec(1, 2, fields=1, labels=False, missing_groups={(0, 0), (0, 1)})
    p = write_plate(tmp_path / "empty.zarr", spec)
    with pytest.raises(MetadataError, match="no well"):
        read_layer_data(str(p))
    from napari_ozx._reader import read

    assert read(str(p)) == [(None,)]  # reported, never raised


def test_a_well_with_invalid_json_is_that_wells_error(tmp_path):
    # the wells are one batch of the shared document reader (ngff.documents): a broken
    # document is the problem of its node, the rest of the plate still opens
    p = write_plate(tmp_path / "p.zarr", PlateSpec(1, 2, fields=1, labels=False))
    (p / "A" / "1" / "zarr.json").write_text('{"zarr_format": 3,')
    with open_ome_zarr(p) as oz:
        plate = HcsPlate(oz)
        a1, a2 = plate.wells
        assert a1.error and "invalid JSON" in a1.error and "A/1/zarr.json" in a1.error
        assert a2.error is None and len(a2.fields) == 1


def test_open_hcs_from_path(plates):
    paths, _ = plates("p96_v05")
    plate = open_hcs(paths["ozx"])
    try:
        assert plate.kind == "plate" and len(plate.wells) == 96
    finally:
        plate.oz.close()


def test_npe2_read_is_headless(plates):
    """npe2.read returns the overview without importing Qt (fresh interpreter)."""
    paths, _ = plates("p96_v05")
    code = (
        "import sys, npe2\n"
        "npe2.PluginManager.instance().discover()\n"
        f"lds = npe2.read([{str(paths['ozx'])!r}], stack=False, plugin_name='napari-ozx')\n"
        "print([t for *_, t in lds], lds[0][0][0].shape)\n"
        "qt = ('qtpy', 'PyQt6', 'PyQt5', 'PySide6', 'napari._qt', 'superqt')\n"
        "bad = [m for m in qt if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "['image', 'points'] (2, 544, 816)" in out.stdout


def test_a_local_plate_opens_without_the_remote_or_the_categories_code(plates):
    """The first open of a local plate directory (fresh interpreter) imports neither the
    remote readers nor the categories' colouring, which only SpatialData layers use."""
    paths, _ = plates("p96_v05")
    code = (
        "import sys\n"
        "from napari_ozx._reader import get_reader\n"
        f"p = {str(paths['dir'])!r}\n"
        "assert len(get_reader(p)(p)) == 2\n"
        "mods = ('napari_ozx.ozx.remote.source', 'napari_ozx.ozx.remote.store', "
        "'napari_ozx.layers.categories.colouring')\n"
        "print([m for m in mods if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_no_leaked_files_or_threads(plates):
    paths, _ = plates("p96_v05")
    gc.collect()
    fds = len(os.listdir("/proc/self/fd"))
    read_layer_data(str(paths["ozx"]))  # warm zarr's event loop thread and executors
    gc.collect()
    threads = threading.active_count()
    for _ in range(3):
        layers = read_layer_data(str(paths["ozx"]))
        layers[0][0][0][:, :70, :70].compute()
        with open_ome_zarr(paths["ozx"]) as oz:
            HcsPlate(oz).overview().data[0, :70].compute()
        del layers
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == fds
    assert threading.active_count() <= threads


def test_hostile_plate_metadata(tmp_path):
    """Absurd plate sizes are refused; a position listed twice is read once."""
    import json

    import zarr

    p = tmp_path / "huge.zarr"
    g = zarr.open_group(p, mode="w", zarr_format=3)
    rows = [{"name": f"r{i}"} for i in range(1000)]
    cols = [{"name": f"c{i}"} for i in range(1000)]
    g.attrs["ome"] = {
        "version": "0.5",
        "plate": {
            "rows": rows,
            "columns": cols,
            "wells": [{"path": "r0/c0", "rowIndex": 0, "columnIndex": 0}],
        },
    }
    with pytest.raises(MetadataError, match="beyond"):
        read_layer_data(str(p))
    spec = PlateSpec(1, 2, fields=1, labels=False)
    d = write_plate(tmp_path / "dup.zarr", spec)
    doc = json.loads((d / "zarr.json").read_text())
    doc["attributes"]["ome"]["plate"]["wells"].append(
        {"path": "A/2", "rowIndex": 0, "columnIndex": 0}
    )
    (d / "zarr.json").write_text(json.dumps(doc))
    with open_ome_zarr(d) as oz:
        plate = HcsPlate(oz)
        assert [w.path for w in plate.wells] == ["A/1", "A/2"]
    # paths that leave the plate or the well are ignored
    doc["attributes"]["ome"]["plate"]["wells"].append(
        {"path": "../A/1", "rowIndex": 0, "columnIndex": 1}
    )
    (d / "zarr.json").write_text(json.dumps(doc))
    wdoc = json.loads((d / "A" / "1" / "zarr.json").read_text())
    wdoc["attributes"]["ome"]["well"]["images"].append({"path": "../../../secret"})
    (d / "A" / "1" / "zarr.json").write_text(json.dumps(wdoc))
    with open_ome_zarr(d) as oz:
        plate = HcsPlate(oz)
        assert [w.path for w in plate.wells] == ["A/1", "A/2"]
        assert [f.path for f in plate.well("A/1").fields] == ["A/1/0"]


def test_overview_views_read_directly_the_pixels_dask_computes(plates):
    """The overview levels are LazyArrays (LevelArrays under dask's query planning):
    napari's stepwise tiles read the plate box directly and give what dask's graph
    computes (wells, insets, empty wells)."""
    import random

    import dask

    from napari_ozx._compat import dask_query_planning
    from napari_ozx.ngff.read.lazy import LazyArray, LevelArray

    ours = LevelArray if dask_query_planning() else LazyArray

    paths, _ = plates("p96_v05")
    with open_ome_zarr(paths["ozx"]) as oz:
        ov = HcsPlate(oz).overview()
        rng = random.Random(3)
        for level in ov.datas:
            assert isinstance(level, ours)
            shape = level.shape
            for _ in range(6):
                y0, x0 = rng.randrange(shape[-2]), rng.randrange(shape[-1])
                y1, x1 = rng.randrange(y0, shape[-2] + 1), rng.randrange(x0, shape[-1] + 1)
                lead = tuple(rng.randrange(n) for n in shape[:-2])
                view = level[lead][..., y0:y1, x0:x1]
                assert isinstance(view, ours)
                graph = view.to_dask() if isinstance(view, LevelArray) else view
                want = dask.compute(graph, scheduler="sync")[0]
                np.testing.assert_array_equal(np.asarray(view), want)


def test_a_large_plate_overview_reads_fields_when_drawn(tmp_path, monkeypatch, store_reads):
    """From LAZY_FIELDS_FROM wells on, opening reads the plate, its wells and
    one field; every other field is read when its tile is drawn, with the same pixels as
    the overview that reads them all at open; a field that cannot be read is that well's
    problem (empty, with the reason)."""
    import numpy as np

    from napari_ozx.ngff.read import plate as plate_mod
    from napari_ozx.ngff.read.plate import open_hcs
    from tests._support.plategen import PlateSpec, write_plate

    spec = PlateSpec(n_rows=3, n_cols=4, fields=2, missing_fields={(2, 3, 0)})
    path = write_plate(tmp_path / "p.ome.zarr", spec, "0.4")
    eager = np.asarray(open_hcs(str(path)).overview().levels[0])
    monkeypatch.setattr(plate_mod, "LAZY_FIELDS_FROM", 1)
    store_reads.clear()
    pl = open_hcs(str(path))
    ov = pl.overview()
    fields_read = {k.rsplit("/", 1)[0] for k in store_reads if k.count("/") >= 3}
    # one field (its group and levels) at open, none of the other 11 wells' fields
    assert fields_read and all(k.startswith("A/1/0") for k in fields_read), fields_read
    # the wells themselves: only the first well's document (the plate lists the rest)
    wells_read = {k.rsplit("/", 1)[0] for k in store_reads if k.count("/") == 2}
    assert wells_read == {"A/1"}, wells_read
    assert sum(w.read for w in pl.wells) == 1 and not pl.wells_read
    assert pl.max_fields() == 2  # the wells read so far (the plate declares no field_count)
    # partly read: what a view says while the rest loads (one of 12 wells' fields read)
    assert ov.progress() == (1, 12) and ov.failed() == {}
    lazy = np.asarray(ov.levels[0])
    np.testing.assert_array_equal(lazy, eager)
    assert any("C/4" in k for k in ov.skipped), ov.skipped
    # drawn: every field read, the one that cannot be read is that well's failure
    assert ov.progress() == (12, 12) and pl.wells_read
    assert list(ov.failed()) == ["C/4"] and "missing" in ov.failed()["C/4"]
    # a well opened from the navigator before its tile is drawn reads its document then
    pl2 = open_hcs(str(path))
    (img, _) = pl2.open_fields("B/2")
    np.testing.assert_array_equal(
        np.asarray(img.levels[0]), np.asarray(open_hcs(str(path)).open_fields("B/2")[0].levels[0])
    )
    assert pl2.well("B/2").read and not pl2.well("B/3").read


def test_convert_a_plate_directory_to_ozx_and_back(tmp_path):
    """`napari-ozx convert` of a plate (0.4 directory -> RFC-9 .ozx as 0.5 ->
    directory): every well and field, their labels and pixels, atomically and valid."""
    import numpy as np

    from napari_ozx.__main__ import main, validate_path
    from napari_ozx.ngff.read.plate import open_hcs
    from tests._support.plategen import PlateSpec, write_plate

    src = write_plate(tmp_path / "p.ome.zarr", PlateSpec(n_rows=2, n_cols=3, fields=2), "0.4")
    ozx = tmp_path / "p.ozx"
    assert main(["convert", str(src), str(ozx)]) == 0
    code, rep = validate_path(str(ozx), deep=True)
    assert code == 0, rep["findings"]
    back = tmp_path / "back.ome.zarr"
    assert main(["convert", str(ozx), str(back)]) == 0
    a = open_hcs(str(src))
    for other in (open_hcs(str(ozx)), open_hcs(str(back))):
        assert [w.path for w in other.wells] == [w.path for w in a.wells]
        for w in a.wells:
            for fa, fb in zip(a.open_fields(w), other.open_fields(w.path), strict=True):
                np.testing.assert_array_equal(np.asarray(fa.levels[0]), np.asarray(fb.levels[0]))
                assert [lb.name for lb in fa.labels] == [lb.name for lb in fb.labels]
        assert other.oz.root.meta.version == "0.5"
        other.oz.close()
    a.oz.close()
    assert main(["convert", str(src), str(ozx)]) == 2  # exists: --overwrite to replace
