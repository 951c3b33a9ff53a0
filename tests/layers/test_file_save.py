"""File > Save writes what its writer promises: colours, version, and no interference
with napari's dask callbacks."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from napari_ozx.errors import OzxError
from napari_ozx.ngff.write.options import WriteOptions
from tests._support.paths import ROOT

RNG = np.random.default_rng(3)


def _omero_colors(path: Path) -> list[str]:
    doc = json.loads((path / "zarr.json").read_text())
    return [c["color"] for c in doc["attributes"]["ome"]["omero"]["channels"]]


@pytest.mark.parametrize(
    ("cmap", "hex_"),
    [("green", "00FF00"), ("cyan", "00FFFF"), ("magenta", "FF00FF"), ("#ff8000", "FF8000")],
)
def test_named_colormap_is_written_as_its_colour(cmap, hex_, tmp_path, config_dir):
    """What our reader returns (a name) goes straight back out as that colour."""
    from napari_ozx._writer import write_layers

    img = RNG.integers(0, 255, (16, 16), dtype=np.uint8)
    out = tmp_path / "c.ome.zarr"
    write_layers(str(out), [(img, {"name": "a", "colormap": cmap}, "image")])
    assert _omero_colors(out) == [hex_]


def test_reader_colours_survive_a_save(tmp_path, config_dir):
    from napari_ozx._reader import read_layer_data
    from napari_ozx._writer import write_layers
    from napari_ozx.layers.writing import layer_axes
    from napari_ozx.ngff.model.metadata import Channel
    from napari_ozx.ngff.write.writer import ImageSpec, write_ome_zarr

    img = RNG.integers(0, 255, (2, 16, 16), dtype=np.uint8)

    src = tmp_path / "src.ome.zarr"
    spec = ImageSpec(
        img,
        layer_axes(["y", "x"], None, 2, True),
        channels=[Channel(label="a", color="00FF00"), Channel(label="b", color="00FFFF")],
    )
    write_ome_zarr(src, spec)
    ((data, kw, _),) = read_layer_data(str(src))
    assert kw["colormap"] == ["green", "cyan"]
    tuples = [
        (np.take(np.asarray(data), i, axis=0), {"name": n, "colormap": cm}, "image")
        for i, (n, cm) in enumerate(zip(kw["name"], kw["colormap"], strict=True))
    ]
    out = tmp_path / "out.ome.zarr"
    write_layers(str(out), tuples)
    assert _omero_colors(out) == ["00FF00", "00FFFF"]


def _version(path: Path) -> str:
    if (path / "zarr.json").exists():
        return json.loads((path / "zarr.json").read_text())["attributes"]["ome"]["version"]
    return json.loads((path / ".zattrs").read_text())["multiscales"][0]["version"]


def test_file_save_writes_the_version_its_name_promises(tmp_path, config_dir):
    from napari_ozx import _writer
    from napari_ozx.layers.export import save_options

    img = RNG.integers(0, 255, (16, 16), dtype=np.uint8)
    layer = [(img, {"name": "a"}, "image")]
    save_options(WriteOptions(format="directory", version="0.4", chunk_yx=8))  # export panel
    a = tmp_path / "a.zarr"
    _writer.write_layers_05(str(a), layer)
    assert _version(a) == "0.5"
    assert json.loads((a / "0" / "zarr.json").read_text())["codecs"], "remembered tuning kept"
    save_options(WriteOptions(format="directory", version="0.5"))
    b = tmp_path / "b.zarr"
    _writer.write_layers_04(str(b), layer)
    assert _version(b) == "0.4"
    c = tmp_path / "c.zarr"
    _writer.write_single_labels_04(str(c), img, {"name": "l"})
    assert _version(c) == "0.4"
    with pytest.raises(OzxError, match=r"0\.4.*\.ozx"):
        _writer.write_single_image_04(str(tmp_path / "d.ozx"), img, {"name": "a"})
    assert not (tmp_path / "d.ozx").exists()


def _saved_notes(before: int) -> list[str]:
    """The "Saved ..." notifications shown since napari's record *before*."""
    from napari.utils.notifications import notification_manager

    notes = [str(n.message) for n in notification_manager.records[before:]]
    return [n for n in notes if n.startswith("Saved ")]


def test_file_save_says_what_it_wrote(tmp_path, config_dir):
    """After File > Save (napari's writer path, the "auto" writer), one
    notification says where and as what: the version "auto" chose, the images (with
    their channels) and the labels; a rotated layer makes it 0.6."""
    import npe2
    from napari.layers import Image, Labels
    from napari.plugins.io import save_layers
    from napari.utils.notifications import notification_manager

    from napari_ozx import _writer
    from napari_ozx.ngff.read.open import open_ome_zarr

    npe2.PluginManager.instance().discover()  # napari's Viewer does this at start-up
    img = RNG.integers(0, 255, (32, 48), dtype=np.uint8)
    lab = (img > 128).astype(np.uint8)
    layers = [Image(img, name="Nuclei"), Image(img[::-1], name="Membrane"), Labels(lab, name="n")]
    before = len(notification_manager.records)
    target = tmp_path / "cells.ome.zarr"
    assert save_layers(str(target), layers, plugin="napari-ozx") == [str(target)]
    assert _saved_notes(before) == [
        f"Saved cells.ome.zarr: OME-Zarr 0.5, 1 image (2 channels), 1 labels\n{target}"
    ]
    assert _version(target) == "0.5"

    before = len(notification_manager.records)
    rotated = tmp_path / "rotated.ozx"
    assert save_layers(str(rotated), [Image(img, name="r", rotate=30)], plugin="napari-ozx")
    assert _saved_notes(before) == [f"Saved rotated.ozx: OME-Zarr 0.6, 1 image\n{rotated}"]
    with open_ome_zarr(rotated) as oz:
        assert oz.images()[0].multiscale.version == "0.6"

    # rotated labels with their rotated image: 0.6 as well; a versioned writer says its own
    before = len(notification_manager.records)
    both = [
        (img, {"name": "r", "rotate": 30}, "image"),
        (lab, {"name": "l", "rotate": 30}, "labels"),
    ]
    _writer.write_layers_auto(str(tmp_path / "both.zarr"), both)
    _writer.write_single_labels_04(str(tmp_path / "l04.zarr"), lab, {"name": "l"})
    assert [n.splitlines()[0] for n in _saved_notes(before)] == [
        "Saved both.zarr: OME-Zarr 0.6, 1 image, 1 labels",
        "Saved l04.zarr: OME-Zarr 0.4, 1 labels",
    ]
    assert _version(tmp_path / "both.zarr") == "0.6"


def test_manifest_writers_name_their_version():
    from npe2 import PluginManifest

    pm = PluginManifest.from_file(ROOT / "src" / "napari_ozx" / "napari.yaml")
    cmds = {c.id: c.python_name for c in pm.contributions.commands}
    by_name: dict[str, set[str]] = {}
    for w in pm.contributions.writers:
        by_name.setdefault(w.display_name, set()).add(cmds[w.command].rsplit(":", 1)[1])
    assert by_name["OME-Zarr auto - 0.5, or 0.6 when a layer needs it (.ozx or directory)"] == {
        "write_layers_auto",
        "write_single_image",
        "write_single_labels",
    }
    assert by_name["OME-Zarr 0.5 (.ozx or directory)"] == {"write_layers_05"}
    assert by_name["OME-Zarr 0.6 (.ozx or directory)"] == {"write_layers_06"}
    assert by_name["OME-Zarr 0.4 directory"] == {
        "write_layers_04",
        "write_single_image_04",
        "write_single_labels_04",
    }
    assert all(
        ".ozx" not in w.filename_extensions
        for w in pm.contributions.writers
        if "0.4" in w.display_name
    )


def test_export_leaves_naparis_dask_callbacks_alone(tmp_path):
    """A background export neither switches off the process-wide dask callbacks (napari's
    cache) while it runs, nor shows its tasks to them."""
    import dask.array as da
    from dask.callbacks import Callback

    from napari_ozx.layers.writing import layer_axes
    from napari_ozx.ngff.write.writer import ImageSpec, write_ome_zarr

    seen: list[object] = []

    class Spy(Callback):
        def _pretask(self, key: object, dsk: object, state: object) -> None:
            seen.append(key)

    active_during: list[int] = []

    def probe(b: np.ndarray) -> np.ndarray:
        active_during.append(len(Callback.active))
        return b

    src = da.from_array(RNG.integers(0, 255, (64, 64), dtype=np.uint8), chunks=16)
    data = src.map_blocks(probe, dtype=src.dtype, meta=np.empty((0, 0), np.uint8))
    spec = ImageSpec(data, layer_axes(["y", "x"], None, 2, False))
    spy = Spy()
    spy.register()
    try:
        err: list[BaseException] = []

        def run() -> None:
            try:
                write_ome_zarr(tmp_path / "bg.ozx", spec, options=WriteOptions(chunk_yx=16))
            except BaseException as e:  # pragma: no cover - reported below
                err.append(e)

        t = threading.Thread(target=run)
        t.start()
        t.join()
        assert not err, err
    finally:
        spy.unregister()
    assert active_during and min(active_during) >= 1, "global callbacks were swapped out"
    assert seen == [], "napari's callbacks saw the export's tasks"
