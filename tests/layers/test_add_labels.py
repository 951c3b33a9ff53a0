"""Saving a new labels layer into an opened image adds it under ``labels/``."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from napari_ozx.errors import OzxError
from napari_ozx.layers.add_labels import add_labels_to_image
from napari_ozx.layers.editable import EditableLabels
from napari_ozx.layers.provenance import LayerSource
from napari_ozx.layers.saveback import SaveBackError, save_labels_back
from tests._support import thirdparty as tp
from tests._support.paths import ROOT
from tests._support.viewermodel import open_in_viewer_model
from tests.layers.test_edit_labels import _mtimes, _ours

pytest.importorskip("napari")


def _painted(shape: tuple[int, ...], dtype: Any = np.uint16) -> np.ndarray:
    lab = np.zeros(shape, dtype)
    lab[..., 5:20, 7:30] = 3
    lab[..., 30:, 41:] = 9
    lab[..., 1::7, 3::5] = 4  # single pixels: a wrong pyramid stride shows
    return lab


def _image_layer(vm: Any) -> Any:
    from napari.layers import Image

    return next(lyr for lyr in vm.layers if isinstance(lyr, Image))


def _read_label_levels(path: Path, name: str) -> tuple[Any, list[np.ndarray]]:
    """A fresh reader's label image *name* of the root image and its levels."""
    from napari_ozx.ngff.read.open import open_ome_zarr

    with open_ome_zarr(str(path)) as oz:
        (img,) = oz.images()
        (lab,) = [lab for lab in img.labels if lab.name == name]
        return lab, [np.asarray(lvl) for lvl in lab.levels]


def _validate_cli(path: Path) -> int:
    from napari_ozx.__main__ import main

    return main(["validate", str(path)])


def _label_doc_names(zf: int) -> set[str]:
    return {"labels/zarr.json"} if zf == 3 else {"labels/.zattrs"}


DIRS = {
    "omezarr_py_v04": tp.make_omezarr_py_v04_image_labels,
    "omezarr_py_v05": tp.make_omezarr_py_v05_image_labels,
}


@pytest.mark.parametrize("maker", list(DIRS))
def test_new_labels_go_into_a_third_party_directory(maker, tmp_path):
    fx = DIRS[maker](tmp_path)
    vm = open_in_viewer_model(fx.path)
    image = _image_layer(vm)
    before = _mtimes(fx.path)
    time.sleep(0.02)
    truth = _painted(fx.labels[tp.LABEL_NAME][0].shape)
    lab = vm.add_labels(truth.copy(), name="my nuclei")
    assert add_labels_to_image(lab, image) == fx.path

    # nothing existing rewritten but the labels group's document
    after = _mtimes(fx.path)
    changed = {k for k in before if after.get(k) != before[k]}
    assert changed == _label_doc_names(fx.zarr_format)
    new = sorted(k for k in after if k not in before)
    assert new and all(k.startswith("labels/my_nuclei/") for k in new), new
    assert not [p for p in fx.path.rglob("*") if "partial" in p.name]

    # a fresh reader sees it: listed, same pixels, pyramid = every 2nd pixel of the one above
    label, levels = _read_label_levels(fx.path, "my_nuclei")
    np.testing.assert_array_equal(levels[0], truth)
    assert len(levels) == len(fx.levels)
    for lvl, up in zip(levels[1:], levels, strict=False):
        np.testing.assert_array_equal(lvl, up[:, ::2, ::2])
    assert [a.shape for a in label.arrays] == [s[1:] for s in fx.shapes]
    assert [a.chunks for a in label.arrays] == [c[1:] for c in fx.chunks]
    assert label.root.zarr_format == fx.zarr_format
    assert label.multiscale.version == fx.version
    assert label.meta.image_label.source_image == "../../"
    # the image's transforms per level (channel axis dropped): it overlays every level
    assert [list(d.scale) for d in label.multiscale.datasets] == [s[1:] for s in fx.scales]
    assert [list(d.translation) for d in label.multiscale.datasets] == [
        t[1:] for t in fx.translations
    ]
    assert [a.name for a in label.multiscale.axes] == ["z", "y", "x"]
    from napari_ozx.ngff.read.open import open_ome_zarr

    with open_ome_zarr(str(fx.path)) as oz:
        assert oz.group("labels").meta.labels == (tp.LABEL_NAME, "my_nuclei")
    assert _validate_cli(fx.path) == 0
    # and in a fresh process, through the npe2 reader napari uses
    code = (
        "import sys, numpy as np\n"
        "from napari_ozx._reader import read_layer_data\n"
        "layers = {kw['name']: d for d, kw, k in read_layer_data(sys.argv[1]) if k == 'labels'}\n"
        "np.save(sys.argv[2], np.asarray(layers['my_nuclei']))\n"
    )
    out = tmp_path / "fresh.npy"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    subprocess.run([sys.executable, "-c", code, str(fx.path), str(out)], check=True, env=env)
    np.testing.assert_array_equal(np.load(out), truth)

    # the layer now reads the file and later edits save back into it
    assert isinstance(lab.data, EditableLabels)
    src = LayerSource.of(lab)
    assert src is not None and (src.kind, src.node) == ("labels", "labels/my_nuclei")
    lab.data_setitem((np.array([1]), np.array([2]), np.array([4])), 6)
    truth[1, 2, 4] = 6
    save_labels_back(lab)
    _, levels = _read_label_levels(fx.path, "my_nuclei")
    np.testing.assert_array_equal(levels[0], truth)
    np.testing.assert_array_equal(levels[1], truth[:, ::2, ::2])


def test_colours_and_a_new_labels_group(tmp_path):
    """An image without labels: the group is created; the layer's colours are kept."""
    from napari.utils.colormaps import DirectLabelColormap

    from napari_ozx.layers.writing import layer_axes
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr

    path = tmp_path / "plain.ome.zarr"
    img = np.arange(3 * 40 * 50, dtype=np.uint16).reshape(3, 40, 50)
    axes = layer_axes(["z", "y", "x"], None, 3, False)
    write_ome_zarr(path, ImageSpec(img, axes), options=WriteOptions(chunk_yx=16, shard_yx=32))
    before = _mtimes(path)
    vm = open_in_viewer_model(path)
    truth = _painted((3, 40, 50), np.uint8)
    cmap = DirectLabelColormap(color_dict={None: "black", 3: "red", 9: (0, 0, 1, 1), 4: "lime"})
    lab = vm.add_labels(truth.copy(), name="seg", colormap=cmap)
    add_labels_to_image(lab, _image_layer(vm), name="cells")
    after = _mtimes(path)
    assert all(after[k] == v for k, v in before.items())
    label, levels = _read_label_levels(path, "cells")
    np.testing.assert_array_equal(levels[0], truth)
    assert levels[0].dtype == np.uint8
    colors = {c.value: c.rgba for c in label.meta.image_label.colors}
    assert colors == {3: (255, 0, 0, 255), 4: (0, 255, 0, 255), 9: (0, 0, 255, 255)}
    image_arrays = label.root.image("").arrays
    assert [a.shards for a in label.arrays] == [a.shards for a in image_arrays]
    assert [a.chunks for a in label.arrays] == [a.chunks for a in image_arrays]
    assert _validate_cli(path) == 0


# ------------------------------------------------------------------------- ozx


def _members(path: Path) -> tuple[dict[str, bytes], list[str], bytes]:
    with zipfile.ZipFile(path) as z:
        return (
            {i.filename: z.read(i.filename) for i in z.infolist()},
            [i.filename for i in z.infolist()],
            z.comment,
        )


@pytest.mark.parametrize("labels_before", [True, False], ids=["labels-group", "no-labels"])
def test_new_labels_go_into_an_ozx(tmp_path, labels_before):
    from napari_ozx.ozx.validate import validate

    if labels_before:
        path = _ours(tmp_path, ".ozx")
    else:
        from napari_ozx.layers.writing import layer_axes
        from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr

        path = tmp_path / "plain.ozx"
        img = np.random.default_rng(3).integers(0, 900, (2, 8, 96, 128), dtype=np.uint16)
        axes = layer_axes(["z", "y", "x"], None, 3, True)
        opts = WriteOptions(chunk_yx=32, shard_yx=64, shard_z=2, pyramid_levels=3)
        write_ome_zarr(path, ImageSpec(img, axes), options=opts)
    old, old_order, old_comment = _members(path)
    vm = open_in_viewer_model(path)
    image = _image_layer(vm)
    image_px = np.asarray(image.data[0]).copy()
    existing = next((lyr for lyr in vm.layers if isinstance(lyr.data, EditableLabels)), None)
    truth = _painted((8, 96, 128), np.uint32)
    lab = vm.add_labels(truth.copy(), name="nuclei")
    inode = path.stat().st_ino
    add_labels_to_image(lab, image)
    assert path.stat().st_ino != inode
    assert [p.name for p in tmp_path.iterdir()] == [path.name]

    new, order, comment = _members(path)
    assert comment == old_comment
    changed = {k for k in old if new.get(k) != old[k]}
    assert changed == ({"labels/zarr.json"} if labels_before else set())
    added = [k for k in order if k not in old]
    assert added and all(k.startswith("labels/") for k in added)
    assert all(k.startswith("labels/nuclei/") for k in added if k != "labels/zarr.json")
    # old data members keep their order; metadata first, breadth-first
    assert [k for k in order if k in old and not k.endswith("zarr.json")] == [
        k for k in old_order if not k.endswith("zarr.json")
    ]
    report = validate(path, deep=True)
    assert report.ok, report
    assert _validate_cli(path) == 0

    label, levels = _read_label_levels(path, "nuclei")
    np.testing.assert_array_equal(levels[0], truth)
    assert len(levels) == 3
    for lvl, up in zip(levels[1:], levels, strict=False):
        np.testing.assert_array_equal(lvl, up[:, ::2, ::2])
    image_arrays = label.root.image("").arrays
    assert [a.shards for a in label.arrays] == [a.shards[1:] for a in image_arrays]

    # open layers keep working, on the new archive
    np.testing.assert_array_equal(np.asarray(image.data[0]), image_px)
    lab.data[0, 0, 0] = 2
    truth[0, 0, 0] = 2
    save_labels_back(lab)
    np.testing.assert_array_equal(_read_label_levels(path, "nuclei")[1][0], truth)
    if existing is not None:  # the label image that was there saves back too
        existing.data[1, 1, 1] = 5
        save_labels_back(existing)
        _, cells = _read_label_levels(path, "cells")
        assert cells[0][1, 1, 1] == 5
    np.testing.assert_array_equal(np.asarray(image.data[0]), image_px)
    # every open layer reads the current archive: no descriptor keeps a replaced one alive
    # (a save-back closes the replaced file on a thread: wait for it)
    import gc

    from napari_ozx.layers.saveback import released

    assert released(10)
    gc.collect()
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed meanwhile
            continue
    assert not [x for x in links if x.startswith(str(path)) and x.endswith("(deleted)")], links


def test_ngff_zarr_ozx(tmp_path):
    """An archive written by ngff-zarr (t, c, z, y, x; scale0/image paths)."""
    from napari_ozx.ozx.validate import validate

    fx = tp.make_ngffzarr_v05_ozx(tmp_path)
    old, _, _ = _members(fx.path)
    vm = open_in_viewer_model(fx.path)
    image = _image_layer(vm)
    shape = tuple(s for i, s in enumerate(fx.shapes[0]) if fx.axes[i] != "c")
    truth = _painted(shape, np.uint16)
    lab = vm.add_labels(truth.copy(), name="cells2")
    add_labels_to_image(lab, image)
    new, _, _ = _members(fx.path)
    assert all(new[k] == v for k, v in old.items() if k != "labels/zarr.json")
    assert validate(fx.path, deep=True).ok
    assert _validate_cli(fx.path) == 0
    label, levels = _read_label_levels(fx.path, "cells2")
    np.testing.assert_array_equal(levels[0], truth)
    assert [a.shape for a in label.arrays] == [
        tuple(s for i, s in enumerate(shp) if fx.axes[i] != "c") for shp in fx.shapes
    ]


# --------------------------------------------------------------------- refusals


def test_refusals_name_the_file_and_write_nothing(tmp_path, monkeypatch):
    from napari_ozx.layers import add_labels

    fx = tp.make_omezarr_py_v05_image_labels(tmp_path)
    vm = open_in_viewer_model(fx.path)
    image = _image_layer(vm)
    before = _mtimes(fx.path)
    shape = fx.labels[tp.LABEL_NAME][0].shape

    def refused(match: str, layer: Any, img: Any = image, **kw: Any) -> None:
        with pytest.raises(SaveBackError, match=match) as ei:
            add_labels_to_image(layer, img, **kw)
        assert str(fx.path) in str(ei.value) or "http" in str(ei.value)
        assert _mtimes(fx.path) == before
        assert sorted(p.name for p in tmp_path.iterdir()) == [fx.path.name]

    lab = vm.add_labels(np.zeros(shape, np.uint8), name="new")
    refused("already exist.*Save labels back", lab, name=tp.LABEL_NAME)
    (fx.path / "labels" / "stray").mkdir()  # on disk but not listed: not overwritten either
    before = _mtimes(fx.path)
    refused("already exist", lab, name="stray")
    refused("not a label name", lab, name="../x")
    refused(
        r"shape \(4, 48, 60\).*\(4, 48, 64\) \(z, y, x\)",
        vm.add_labels(np.zeros((4, 48, 60), np.uint8)),
    )
    refused(r"shape \(48, 64\)", vm.add_labels(np.zeros((48, 64), np.uint8)))

    class FloatLayer:
        name = "probabilities"
        data = np.zeros(shape, np.float32)
        metadata: ClassVar[dict[str, Any]] = {}

    refused("not integers", FloatLayer())
    remote = LayerSource("https://example.org/img.ome.zarr", "", "image")
    with pytest.raises(SaveBackError, match="remote"):
        add_labels_to_image(vm.add_labels(np.zeros(shape, np.uint8)), remote)
    refused(
        "is a label image",
        vm.add_labels(np.zeros(shape, np.uint8)),
        LayerSource(str(fx.path), f"labels/{tp.LABEL_NAME}", "well"),  # a plate field's labels
    )
    with pytest.raises(SaveBackError, match="not opened from an OME-Zarr"):
        add_labels_to_image(lab, object())
    real_access = os.access
    monkeypatch.setattr(
        add_labels.os,
        "access",
        lambda p, mode: False if Path(p).is_relative_to(fx.path) else real_access(p, mode),
    )
    refused("read-only", vm.add_labels(np.zeros(shape, np.uint8), name="x"))


@pytest.mark.parametrize("suffix", [".ome.zarr", ".ozx"])
def test_a_failed_write_leaves_the_file_as_it_was(tmp_path, monkeypatch, suffix):
    from napari_ozx.ngff.write import writer as write

    path = _ours(tmp_path, suffix)
    vm = open_in_viewer_model(path)
    before = _mtimes(path) if path.is_dir() else path.read_bytes()
    real = write._write_data
    calls = []

    def full(*a: Any, **k: Any) -> None:
        calls.append(1)
        real(*a, **k)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(write, "_write_data", full)
    lab = vm.add_labels(_painted((8, 96, 128)), name="n")
    with pytest.raises(SaveBackError, match="No space left") as ei:
        add_labels_to_image(lab, _image_layer(vm))
    assert calls and str(path) in str(ei.value)
    assert (_mtimes(path) if path.is_dir() else path.read_bytes()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    if path.is_dir():
        assert not (path / "labels" / "n").exists()
        assert not [p for p in path.rglob("*") if "partial" in p.name]
    assert LayerSource.of(lab) is None and isinstance(lab.data, np.ndarray)


def test_pyramid_of_another_tool_with_other_factors(tmp_path):
    """Levels 3x apart (and rounded down) are filled by nearest neighbour."""
    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import LabelLevel, LabelsSpec, WriteOptions, prepare_labels

    data = np.arange(2 * 31 * 40, dtype=np.uint32).reshape(2, 31, 40)
    axes = [Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]
    levels = [
        LabelLevel((2, 31, 40), (1, 8, 8), None, (1.0, 1.0, 1.0), (0.0, 0.0, 0.0)),
        LabelLevel((2, 10, 13), (1, 8, 8), None, (1.0, 3.0, 3.0), (0.0, 1.0, 1.0)),
    ]
    prepared = prepare_labels(LabelsSpec("n", data, axes), levels, WriteOptions(version="0.4"))
    import zarr
    from zarr.storage import LocalStore

    root = tmp_path / "n.zarr"
    for key, doc in prepared.documents.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(doc)
    prepared.write_data(LocalStore(root), "")
    g = zarr.open_group(str(root), mode="r", zarr_format=2)
    np.testing.assert_array_equal(np.asarray(g["0"]), data)
    np.testing.assert_array_equal(np.asarray(g["1"]), data[:, ::3, ::3][:, :10, :13])
    attrs = json.loads((root / ".zattrs").read_text())
    assert attrs["image-label"]["source"] == {"image": "../../"}
    assert attrs["multiscales"][0]["datasets"][1]["coordinateTransformations"][0]["scale"] == [
        1.0,
        3.0,
        3.0,
    ]


# --------------------------------------------------------------------- command


def test_menu_command_saves_the_selected_new_labels(tmp_path):
    from napari_ozx.layers import commands

    path = _ours(tmp_path, ".ozx")
    vm = open_in_viewer_model(path)
    if hasattr(vm, "_new_labels"):  # napari's Layers > New labels, as a user makes them
        vm._new_labels()
        lab = vm.layers[-1]
        lab.data[...] = _painted((8, 96, 128))
        lab.name = "Labels"
    else:  # pragma: no cover - older/newer napari
        lab = vm.add_labels(_painted((8, 96, 128)), name="Labels")
    vm.layers.selection = {lab}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        commands.add_labels(vm)
    assert LayerSource.of(lab).node == "labels/Labels"
    with pytest.raises(OzxError, match="select a new labels layer"):
        vm.layers.selection = {_image_layer(vm)}
        commands.add_labels(vm)
    np.testing.assert_array_equal(_read_label_levels(path, "Labels")[1][0], _painted((8, 96, 128)))


def test_new_labels_go_into_a_plate_field(tmp_path):
    """A well's field opened from a plate (kind 'well'): the labels go under that field."""
    from napari.components import ViewerModel

    from napari_ozx.layers.reading import well_layer_data
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ngff.read.plate import HcsPlate
    from tests._support.plategen import PlateSpec, write_plate

    spec = PlateSpec(2, 2, fields=2, size=(60, 40), levels=2, labels=False)
    path = write_plate(tmp_path / "plate.zarr", spec, "0.5")
    before = _mtimes(path)
    with open_ome_zarr(path) as oz:
        plate = HcsPlate(oz)
        layers, errors = well_layer_data(plate, plate.well("B/2"), fields=[1])
    assert errors == []
    vm = ViewerModel()
    for data, kw, kind in layers:
        getattr(vm, f"add_{kind}")(data, **kw)
    image = _image_layer(vm)
    assert LayerSource.of(image).kind == "well"
    truth = _painted((60, 40), np.uint16)
    lab = vm.add_labels(truth.copy(), name="spots")
    add_labels_to_image(lab, image)
    field = LayerSource.of(image).node
    assert LayerSource.of(lab).node == f"{field}/labels/spots"
    after = _mtimes(path)
    assert all(after[k] == v for k, v in before.items())
    assert all(k.startswith(f"{field}/labels/") for k in after if k not in before)
    with open_ome_zarr(path) as oz:
        (label,) = oz.image(field).labels
        np.testing.assert_array_equal(np.asarray(label.levels[0]), truth)
        np.testing.assert_array_equal(np.asarray(label.levels[1]), truth[::2, ::2])
    assert _validate_cli(path) == 0


def test_the_command_is_in_the_annotate_menu_next_to_save_back():
    from npe2 import PluginManifest

    import napari_ozx

    manifest = PluginManifest.from_file(Path(napari_ozx.__file__).parent / "napari.yaml")
    menu = [c.command for c in manifest.contributions.menus["napari/layers/annotate"]]
    i = menu.index("napari-ozx.save_labels_back")
    assert menu[i + 1] == "napari-ozx.add_labels"
    (cmd,) = [c for c in manifest.contributions.commands if c.id == "napari-ozx.add_labels"]
    assert cmd.python_name == "napari_ozx.layers.commands:add_labels"
