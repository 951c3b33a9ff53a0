"""Colour by a column, hide and show categories (napari_ozx.color_by / show_categories) on
the four kinds of layers napari-ozx colours, headless (napari's ViewerModel): the colours
each object gets, which objects are fully transparent, the palettes, the table's uns
colours, hover on the polygon Surface, and what opening a SpatialData store says."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import napari_ozx
from napari_ozx.errors import OzxError
from napari_ozx.layers.categories.colouring import CATEGORIES_KEY, current_legend
from napari_ozx.layers.categories.palettes import (
    DEFAULT_20,
    DEFAULT_28,
    DEFAULT_102,
    TAB10,
    default_palette,
    to_rgba,
)
from tests._support.sd_categories import (
    CELL_TYPE_COLORS,
    CELL_TYPES,
    cell_type_of,
    store_with_cell_types,
)

pytest.importorskip("pyarrow")
pytest.importorskip("shapely")

TYPED_RGBA = dict(zip(CELL_TYPES, to_rgba(CELL_TYPE_COLORS), strict=True))


@pytest.fixture(scope="module")
def typed_store(tmp_path_factory):
    return store_with_cell_types(tmp_path_factory.mktemp("typed"))


def _viewer(path, monkeypatch=None, surface=False):
    from napari.components import ViewerModel

    from napari_ozx.layers.reading import read_layer_data
    from napari_ozx.layers.spatial import elements

    if surface:
        assert monkeypatch is not None
        monkeypatch.setattr(elements, "SHAPES_LAYER_MAX", 0)  # the polygons as a Surface
    vm = ViewerModel()
    for data, kw, kind in read_layer_data(str(path)):
        getattr(vm, f"add_{kind}")(data, **kw)
    return vm


# ------------------------------------------------------------------------ palettes


def test_palettes_follow_spatialdata_plot_by_number_of_categories():
    """Up to 10 categories matplotlib's cycle, then scanpy's default_20 / 28 / 102;
    above 102 distinct colours (spatialdata-plot would draw them all grey)."""
    np.testing.assert_allclose(default_palette(4), to_rgba(TAB10[:4]))
    np.testing.assert_allclose(default_palette(11), to_rgba(DEFAULT_20[:11]))
    np.testing.assert_allclose(default_palette(25), to_rgba(DEFAULT_28[:25]))
    np.testing.assert_allclose(default_palette(102), to_rgba(DEFAULT_102))
    many = default_palette(300)
    assert len(np.unique(many.round(4), axis=0)) == 300
    assert len(DEFAULT_20) == 20 and len(DEFAULT_28) == 28 and len(DEFAULT_102) == 102
    np.testing.assert_allclose(to_rgba(["#ff000080"]), [[1.0, 0.0, 0.0, 128 / 255]])


# ------------------------------------------------------------------------ points


def test_points_hidden_categories_are_fully_transparent_and_come_back(typed_store):
    vm = _viewer(typed_store)
    pts = vm.layers["transcripts"]
    before = np.array(pts.face_color)
    genes = np.asarray(pts.features["gene"].astype(str))
    legend = current_legend(pts)  # the reader's colouring: by the gene, tab10
    assert legend is not None and legend.categories == ["ACTB", "GAPDH", "MKI67", "CD3E"]
    assert legend.counts == [int(np.sum(genes == g)) for g in legend.categories]
    for g, colour in zip(legend.categories, default_palette(4), strict=True):
        np.testing.assert_allclose(before[genes == g], np.tile(colour, (np.sum(genes == g), 1)))
    shown = napari_ozx.show_categories(pts, "gene", ["MKI67"])
    assert shown == int(np.sum(genes == "MKI67"))
    alpha = np.asarray(pts.face_color)[:, 3]
    assert np.all(alpha[genes != "MKI67"] == 0) and np.all(alpha[genes == "MKI67"] == 1)
    np.testing.assert_allclose(pts.face_color[genes == "MKI67"], before[genes == "MKI67"])
    assert pts.metadata[CATEGORIES_KEY]["shown"] == ["MKI67"]
    assert len(pts.data) == len(genes) and pts.shown.all()  # nothing else changes
    assert napari_ozx.show_categories(pts, "gene", None) == len(genes)
    np.testing.assert_allclose(pts.face_color, before)


def test_points_coloured_by_a_numeric_column_keep_hidden_categories(typed_store):
    from napari.utils.colormaps import ensure_colormap

    vm = _viewer(typed_store)
    pts = vm.layers["transcripts"]
    genes = np.asarray(pts.features["gene"].astype(str))
    napari_ozx.show_categories(pts, "gene", ["ACTB", "CD3E"])
    legend = napari_ozx.color_by(pts, "quality", colormap="magma", limits=(10.0, 30.0))
    assert legend.kind == "continuous" and legend.limits == (10.0, 30.0)
    q = np.asarray(pts.features["quality"], dtype=float)
    expect = ensure_colormap("magma").map(np.clip((q - 10) / 20, 0, 1))
    keep = np.isin(genes, ["ACTB", "CD3E"])
    np.testing.assert_allclose(pts.face_color[keep], expect[keep], atol=1e-5)
    assert np.all(np.asarray(pts.face_color)[~keep, 3] == 0)
    with pytest.raises(OzxError, match="no feature 'volume'"):
        napari_ozx.color_by(pts, "volume")


def test_a_numeric_column_of_many_rows_takes_the_colormap_from_a_fine_table():
    """Above LUT_SIZE rows the colormap is looked up in a table of LUT_SIZE steps:
    within half a step of napari's own map, far below one step of 8-bit colour."""
    from napari.components import ViewerModel
    from napari.utils.colormaps import ensure_colormap

    from napari_ozx.layers.categories.colouring import LUT_SIZE

    n = LUT_SIZE * 3
    values = np.linspace(-5.0, 5.0, n)
    values[7] = np.nan
    pts = ViewerModel().add_points(np.zeros((n, 2)), features={"v": values})
    napari_ozx.color_by(pts, "v", colormap="turbo")
    expect = ensure_colormap("turbo").map(np.clip((values + 5) / 10, 0, 1))
    ok = np.isfinite(values)
    np.testing.assert_allclose(pts.face_color[ok], expect[ok], atol=1 / 512)
    np.testing.assert_allclose(pts.face_color[7], [0.5, 0.5, 0.5, 1.0])


# ------------------------------------------------------------------------ labels


def test_labels_coloured_from_the_tables_uns_colours_and_hidden_by_alpha(typed_store):
    """The table's uns["cell_type_colors"] colour each category; a hidden category's
    label values get alpha 0 in the labels' colormap, the background stays transparent."""
    vm = _viewer(typed_store)
    nuclei = vm.layers["nuclei"]
    legend = napari_ozx.color_by(nuclei, "cell_type")
    assert legend.categories == list(CELL_TYPES)
    ids = np.arange(1, 7)
    rgba = nuclei.colormap.map(ids)
    for i, colour in zip(ids, rgba, strict=True):
        np.testing.assert_allclose(colour, TYPED_RGBA[cell_type_of(int(i))], atol=1e-6)
    napari_ozx.show_categories(nuclei, "cell_type", ["T"])
    rgba = nuclei.colormap.map(ids)
    for i, colour in zip(ids, rgba, strict=True):
        assert colour[3] == (1.0 if cell_type_of(int(i)) == "T" else 0.0)
    assert nuclei.colormap.map(np.array([0]))[0][3] == 0
    # color_labels_by is the same code (and returns the colours it set)
    colours = napari_ozx.color_labels_by(nuclei, "cell_type")
    np.testing.assert_allclose(colours[2], TYPED_RGBA["T"], atol=1e-6)
    assert colours[1][3] == 0  # still hidden


def test_an_element_opened_alone_finds_its_stores_table(typed_store):
    """labels/nuclei opened on its own gets the rows of the store's table (and the
    table's colours), as when the store's root is opened."""
    from napari_ozx.layers.reading import read_layer_data

    ((_data, kw, kind),) = read_layer_data(str(typed_store / "labels" / "nuclei"))
    assert kind == "labels"
    assert list(kw["features"]["area"]) == [65, 75, 85, 95, 105, 115]
    assert list(kw["features"]["cell_type"]) == [cell_type_of(i) for i in range(1, 7)]
    assert kw["metadata"][CATEGORIES_KEY]["uns_colors"]["cell_type"]["T"] == "#00ff00"


# ------------------------------------------------------------------------ shapes, surface


def test_shapes_coloured_keep_their_face_transparency_and_hide(typed_store):
    vm = _viewer(typed_store)
    poly = vm.layers["cells_poly"]
    face_alpha = np.array(poly.face_color)[:, 3]
    labels = np.asarray(poly.features["label"]).astype(str)
    legend = napari_ozx.color_by(poly, "label")
    palette = dict(zip(legend.categories, default_palette(len(legend.categories)), strict=True))
    for i, lab in enumerate(labels):
        np.testing.assert_allclose(poly.edge_color[i], palette[lab], atol=1e-6)
        np.testing.assert_allclose(poly.face_color[i][:3], palette[lab][:3], atol=1e-6)
    np.testing.assert_allclose(np.array(poly.face_color)[:, 3], face_alpha)
    napari_ozx.show_categories(poly, "label", [labels[0]])
    gone = labels != labels[0]
    assert np.all(np.asarray(poly.edge_color)[gone, 3] == 0)
    assert np.all(np.asarray(poly.face_color)[gone, 3] == 0)
    assert np.all(np.asarray(poly.edge_color)[~gone, 3] == 1)


def test_polygon_surface_rings_coloured_and_hidden_by_vertex_colours(typed_store, monkeypatch):
    """Each mesh vertex takes its ring's colour (a filled ring's centre transparent, as
    the reader draws it); every vertex of a hidden ring has alpha 0, so none of its
    triangles is drawn."""
    from napari_ozx.layers.spatial.polygons import mesh_vertex_rings

    vm = _viewer(typed_store, monkeypatch, surface=True)
    surf = vm.layers["cells_poly"]
    rec = surf.metadata["napari_ozx_spatialdata"]
    labels = np.asarray(rec["ring_features"]["label"]).astype(str)
    rings, centre = mesh_vertex_rings(rec["ring_offsets"], rec["filled"])
    assert len(rings) == len(surf.vertices)
    faces = np.asarray(surf.faces)
    assert np.all(rings[faces] == rings[faces[:, :1]])  # each triangle: one ring
    legend = napari_ozx.color_by(surf, "label")
    colours = np.asarray(surf.vertex_colors)
    palette = dict(zip(legend.categories, default_palette(len(legend.categories)), strict=True))
    for v in range(len(rings)):
        np.testing.assert_allclose(colours[v, :3], palette[labels[rings[v]]][:3], atol=1e-6)
    assert np.all(colours[centre, 3] == 0) and np.all(colours[~centre, 3] == 1)
    napari_ozx.show_categories(surf, "label", [labels[0]])
    colours = np.asarray(surf.vertex_colors)
    assert np.all(colours[labels[rings] != labels[0], 3] == 0)
    assert np.all(colours[(labels[rings] == labels[0]) & ~centre, 3] == 1)


def test_hover_on_the_polygon_surface_names_the_polygon(typed_store, monkeypatch):
    """get_status (what napari's status bar asks the active layer) gives the features
    of the polygon under the cursor; nothing outside the polygons or in a hole."""
    from napari_ozx.layers.categories.hover import install_hover, ring_at

    vm = _viewer(typed_store, monkeypatch, surface=True)
    surf = vm.layers["cells_poly"]
    assert install_hover(surf) and not install_hover(vm.layers["transcripts"])
    rec = surf.metadata["napari_ozx_spatialdata"]
    offsets, feats = rec["ring_offsets"], rec["ring_features"]
    holes = np.asarray(feats["hole"], dtype=bool)
    plain = next(r for r in range(len(holes)) if not holes[r] and not holes[(r + 1) % len(holes)])
    ring = np.asarray(surf.vertices[offsets[plain] : offsets[plain + 1]], dtype=float)
    inside = ring.mean(axis=0)
    assert ring_at(surf, inside) == plain
    status = surf.get_status(surf.data_to_world(inside), world=True)
    assert f"label: {feats['label'][plain]}" in status["coordinates"]
    assert f"instance_id: {feats['instance_id'][plain]}" in status["value"]
    far = surf.data_to_world(np.asarray(surf.vertices).max(axis=0) + 50)
    assert "label" not in surf.get_status(far, world=True)["coordinates"]
    if holes.any():
        h = int(np.flatnonzero(holes)[0])
        hole = np.asarray(surf.vertices[offsets[h] : offsets[h + 1]], dtype=float)
        assert ring_at(surf, hole.mean(axis=0)) is None


# ------------------------------------------------------------------------ opening


def test_opening_a_spatialdata_store_warns_about_nothing_spatialdata_always_writes(
    caplog, typed_store
):
    """spatialdata's omero channels (a label only) and its transformations are normal
    input: opening says nothing, validate still reports them."""
    from napari_ozx.layers.reading import read_layer_data

    with caplog.at_level(logging.WARNING):
        read_layer_data(str(typed_store))
        read_layer_data(str(typed_store / "images" / "raw"))
    assert not [r for r in caplog.records if "OME-Zarr rule" in r.getMessage()]
    codes = {f.code for f in napari_ozx.validate(str(typed_store)).findings}
    assert "omero-color" in codes


def test_a_problem_with_a_part_never_says_cannot_open():
    from napari_ozx._reader import toast_text

    err = OzxError("shapes element 'x' not shown: no parquet file")
    part = toast_text("/data/store.zarr", err, "(shapes 'x')", opened=True)
    assert "cannot open" not in part and part.endswith("napari-ozx opened /data/store.zarr")
    assert part.startswith("shapes element 'x' not shown")
    whole = toast_text("/data/store.zarr", err)
    assert whole.endswith("napari-ozx cannot open /data/store.zarr")
