"""Saving over the source that open layers are reading never loses data.

Files written by ome-zarr-py (dataset paths ``s0``, ``s1``...) and ngff-zarr
(``scale0/image``...) are opened into a headless viewer, saved onto the *same* path with
File > Save (``npe2.write``), twice: the open layers must keep showing the same pixels and
the file on disk must hold them.
"""

from __future__ import annotations

import gc
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests._support import thirdparty as tp

pytest.importorskip("napari")

MAKERS = {
    "omezarr_py_v05": tp.make_omezarr_py_v05_image_labels,
    "omezarr_py_v04": tp.make_omezarr_py_v04_image_labels,
    "ngffzarr_dir": tp.make_ngffzarr_v05_sharded_dir,
    "ngffzarr_ozx": tp.make_ngffzarr_v05_ozx,
}


def _level0(layer: Any) -> np.ndarray:
    return np.asarray(layer.data[0] if layer.multiscale else layer.data)


def _open(path: Path) -> Any:
    from napari.components import ViewerModel

    from napari_ozx._reader import read_layer_data

    vm = ViewerModel()
    for data, kw, kind in read_layer_data(str(path)):
        getattr(vm, f"add_{kind}")(data, **kw)
    return vm


def _save(path: Path, vm: Any) -> None:
    import npe2

    pm = npe2.PluginManager.instance()
    pm.discover()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        npe2.write(
            str(path), [lyr.as_layer_data_tuple() for lyr in vm.layers], plugin_name="napari-ozx"
        )


def _on_disk(path: Path) -> list[np.ndarray]:
    from napari_ozx._reader import read_layer_data

    out = []
    for data, kw, _ in read_layer_data(str(path)):
        lvl0 = np.asarray(data[0] if isinstance(data, list) else data)
        c = kw.get("channel_axis")
        if c is None:
            out.append(lvl0)
        else:
            out.extend(np.take(lvl0, i, axis=c) for i in range(lvl0.shape[c]))
    return out


def _lower_levels_not_zero(vm: Any) -> None:
    """Every lower level the open layers show is still readable and not zeros."""
    for lyr in vm.layers:
        if lyr.multiscale:
            assert all(np.asarray(lvl).any() for lvl in lyr.data), lyr.name


@pytest.mark.parametrize("name", list(MAKERS))
def test_save_twice_over_the_source_keeps_open_layers(name, tmp_path):
    fx = MAKERS[name](tmp_path / "src")
    vm = _open(fx.path)
    before = [_level0(lyr) for lyr in vm.layers]
    assert all(b.any() for b in before), "fixture must not be all zeros"
    for _ in range(2):
        _save(fx.path, vm)
        after = [_level0(lyr) for lyr in vm.layers]
        for b, a, lyr in zip(before, after, vm.layers, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"open layer {lyr.name} changed")
        disk = _on_disk(fx.path)
        assert len(disk) == len(before)
        for b, d in zip(before, disk, strict=True):
            np.testing.assert_array_equal(d, b)
    _lower_levels_not_zero(vm)
    # once the layers are gone, nothing is left beside the file
    del vm, lyr
    gc.collect()
    assert sorted(p.name for p in fx.path.parent.iterdir()) == [fx.path.name]


def test_layers_opened_below_the_replaced_tree_are_kept(tmp_path):
    """A label image opened on its own (``<image>/labels/cells``) while its parent image
    directory is overwritten still reads its pixels."""
    fx = tp.make_omezarr_py_v05_image_labels(tmp_path)
    label_dir = fx.path / "labels" / tp.LABEL_NAME
    vm_label = _open(label_dir)
    expected = _level0(vm_label.layers[0])
    vm = _open(fx.path)
    vm.layers.remove(vm.layers[-1])  # save the image only: the labels leave the file
    _save(fx.path, vm)
    assert not label_dir.exists()
    np.testing.assert_array_equal(_level0(vm_label.layers[0]), expected)


def test_no_hard_links_keeps_the_old_tree_for_readers(tmp_path, monkeypatch):
    """Where hard links fail, the previous tree itself is kept for the open layers."""
    from napari_ozx.ngff.read import live

    def no_link(*a: Any, **k: Any) -> None:
        raise OSError("hard links not supported")

    fx = tp.make_omezarr_py_v04_image_labels(tmp_path)
    vm = _open(fx.path)
    before = [_level0(lyr) for lyr in vm.layers]
    monkeypatch.setattr(live, "_link_tree", no_link)
    _save(fx.path, vm)
    assert len(live.retained_trees()) >= 1
    for b, lyr in zip(before, vm.layers, strict=True):
        np.testing.assert_array_equal(_level0(lyr), b)
    del vm, lyr
    gc.collect()
    assert sorted(p.name for p in fx.path.parent.iterdir()) == [fx.path.name]


def test_save_elsewhere_copies_nothing(tmp_path):
    """Saving to another path leaves the source and its readers alone (no clone)."""
    fx = tp.make_omezarr_py_v05_image_labels(tmp_path / "a")
    vm = _open(fx.path)
    out = tmp_path / "b" / "copy.ozx"
    out.parent.mkdir()
    _save(out, vm)
    assert sorted(p.name for p in fx.path.parent.iterdir()) == [fx.path.name]
    assert len(_on_disk(out)) == len(vm.layers)
