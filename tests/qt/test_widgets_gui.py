"""The inspector and export dock widgets in a real napari window (Xvfb via pytest-xvfb).

Screenshots of both widgets are saved in the test's tmp dir; set
``NAPARI_OZX_SCREENSHOTS=<dir>`` to also keep quantised copies there (this is how
``resources/inspector.png`` and ``resources/export.png`` are made).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from napari_ozx._sample_data import sample_path
from napari_ozx.layers.export import load_options
from napari_ozx.layers.provenance import LayerSource
from tests._support.classic_dask import QUERY_PLANNING, tokened
from tests._support.paths import open_fds_to

pytestmark = [pytest.mark.gui, pytest.mark.usefixtures("config_dir")]


@pytest.fixture
def no_leaks(qapp):
    """Requested before make_napari_viewer, so this runs after the viewer is closed:
    no worker, writer thread or file descriptor of ours may outlive a test."""
    yield
    from superqt.utils import WorkerBase

    WorkerBase.await_workers(20_000)  # every worker of the process: the test is over
    qapp.processEvents()
    assert not [t.name for t in threading.enumerate() if t.name.startswith("ozx-write")]
    import gc

    gc.collect()


def _child_titles(item) -> list[str]:
    return [item.child(i).text(0) for i in range(item.childCount())]


def _keep_screenshot(png: Path, name: str) -> None:
    out = os.environ.get("NAPARI_OZX_SCREENSHOTS")
    if not out:
        return
    from PIL import Image

    # fast octree keeps small pure colours (channel swatches) that median cut merges away
    Image.open(png).convert("RGB").quantize(128, method=Image.Quantize.FASTOCTREE).save(
        Path(out) / name, optimize=True
    )


# ------------------------------------------------------------------------ inspector


def test_inspector_follows_the_active_layer(no_leaks, make_napari_viewer, qtbot, tmp_path):
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1400, 900)
    viewer.open(str(sample_path()), plugin="napari-ozx")
    dock, w = viewer.window.add_plugin_dock_widget("napari-ozx", "Metadata inspector")
    # the active layer after opening is the labels layer: its node is selected
    qtbot.waitUntil(
        lambda: w.current_node() is not None and w.current_node().path == "labels/nuclei",
        timeout=10_000,
    )
    root = w.tree.topLevelItem(0)
    assert root.text(0) == "cells.ozx" and "2 levels" in root.text(1)
    assert _child_titles(root) == ["Level 0", "Level 1", "labels"]
    labels = root.child(2)
    assert _child_titles(labels) == ["nuclei"]
    nuclei = labels.child(0)
    assert nuclei.childCount() == 0  # loaded when expanded, in a worker
    nuclei.setExpanded(True)
    qtbot.waitUntil(lambda: nuclei.childCount() == 2, timeout=10_000)
    assert _child_titles(nuclei) == ["Level 0", "Level 1"]
    qtbot.waitUntil(lambda: "Label colours" in w.summary.toPlainText(), timeout=10_000)
    assert "volume_voxels" in w.summary.toPlainText()

    # selecting a level shows its array facts and its zarr.json
    with qtbot.waitSignal(w.details_shown, timeout=10_000) as sig:
        w.tree.setCurrentItem(root.child(0))
    assert sig.args == ["0"]
    facts = w.array_view.toPlainText()
    assert "Chunks per shard" in facts and "16" in facts and "Compression ratio" in facts
    assert w.tabs.isTabEnabled(1)
    assert '"sharding_indexed"' in w.json_view.toPlainText()
    w.find_edit.setText("crc32c")
    assert w.match_label.text() == "1 match"
    assert w.json_view.textCursor().selectedText() == "crc32c"
    w.find_edit.setText("configuration")
    n = int(w.match_label.text().split()[0])
    assert n > 3
    first = w.json_view.textCursor().position()
    assert w.find_next() and w.json_view.textCursor().position() > first
    w.copy_json()
    from qtpy.QtWidgets import QApplication

    assert QApplication.clipboard().text() == w.json_view.toPlainText()

    # archive facts and the validator's findings, with theme-coloured severity icons
    qtbot.waitUntil(lambda: w.findings.topLevelItemCount() > 0, timeout=15_000)
    assert "ZIP64" in w.archive_view.toPlainText() and "conformant" in w.archive_view.toPlainText()
    assert w.findings.topLevelItem(0).text(0) == "info"
    assert not w.findings.topLevelItem(0).icon(0).isNull()

    # another layer of the same source: the tree stays, the selection follows
    with qtbot.waitSignal(w.details_shown, timeout=10_000) as sig:
        viewer.layers.selection.active = viewer.layers["Nuclei"]
    assert sig.args == [""]
    assert w.tree.topLevelItem(0) is root
    qtbot.waitUntil(lambda: "Channels" in w.summary.toPlainText(), timeout=5_000)
    text = w.summary.toPlainText()
    assert "Nuclei" in text and "window 40–800" in text and "micrometer" in text

    w.tabs.setCurrentIndex(0)
    viewer.reset_view()
    qtbot.wait(50)  # let the dock paint once before the screenshot
    png = tmp_path / "inspector.png"
    viewer.screenshot(str(png), canvas_only=False)
    assert png.stat().st_size > 10_000
    _keep_screenshot(png, "inspector.png")

    # closing the dock closes the inspected file (the layers keep their own stores)
    insp = w.inspection
    assert insp is not None and not insp.closed

    def followed():
        return any(
            isinstance(cb, tuple) and cb[0]() is w
            for cb in viewer.layers.selection.events.active.callbacks
        )

    assert followed()
    viewer.window.remove_dock_widget(dock)
    qtbot.waitUntil(lambda: insp.closed, timeout=5_000)
    gen = w._generation
    viewer.layers.selection.active = viewer.layers["Membrane"]  # no longer followed
    assert w.inspection is None and w._generation == gen
    assert not followed()
    w.deleteLater()


def test_inspector_on_a_file_lazy_plate(no_leaks, qtbot, tmp_path):
    from napari_ozx._qt.inspector import InspectorWidget
    from tests.inspection.test_inspection import make_plate

    plate = make_plate(tmp_path / "plate.zarr", rows="ABC", cols=4, fields=2)
    w = InspectorWidget()
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.source_loaded, timeout=10_000):
        w.inspect(plate)
    root = w.tree.topLevelItem(0)
    assert root.isExpanded() and _child_titles(root) == ["Row A", "Row B", "Row C"]
    row_a = root.child(0)
    row_a.setExpanded(True)  # rows hold their wells already: no reading
    assert _child_titles(row_a) == ["A1", "A3"]
    well = row_a.child(0)
    assert well.childCount() == 0
    well.setExpanded(True)  # a well reads its zarr.json in a worker
    qtbot.waitUntil(lambda: well.childCount() == 2, timeout=10_000)
    assert _child_titles(well) == ["Field 0", "Field 1"]
    assert w.tree.currentItem() is root  # the root is selected on opening
    qtbot.waitUntil(lambda: "Layout" in w.summary.toPlainText(), timeout=10_000)
    assert "test plate" in w.summary.toPlainText()
    with qtbot.waitSignal(w.details_shown, timeout=10_000) as sig:
        w.tree.setCurrentItem(well.child(1))
    assert sig.args == ["A/1/1"] and "Axes" in w.summary.toPlainText()
    assert not w.tabs.isTabEnabled(w._archive_tab)  # a directory has no archive
    # a file that is not OME-Zarr: one clear status line, no exception
    (tmp_path / "empty").mkdir()
    w.inspect(tmp_path / "empty")
    qtbot.waitUntil(lambda: "Cannot inspect" in w.status.text(), timeout=10_000)
    # opening an .ozx then closing the widget closes the file
    ozx = tmp_path / "copy.ozx"
    ozx.write_bytes(sample_path().read_bytes())
    with qtbot.waitSignal(w.archive_shown, timeout=15_000):
        w.inspect(ozx)
    assert w.inspection is not None and open_fds_to(ozx)
    w.close()
    w.deleteLater()
    assert not w.workers  # closing waited for the widget's own workers
    qtbot.waitUntil(lambda: not open_fds_to(ozx), timeout=5_000)


def test_inspector_follows_plate_layers(no_leaks, make_napari_viewer, qtbot, tmp_path):
    from tests.inspection.test_inspection import make_plate

    plate = make_plate(tmp_path / "plate.zarr", rows="AB", cols=2, fields=2)
    viewer = make_napari_viewer()
    overview = LayerSource(
        str(plate), "", "plate-overview", plate_id="1", plate_path="", plate_kind="plate"
    )
    viewer.add_image(np.zeros((8, 8), np.uint8), name="overview", metadata=overview.to_metadata())
    _, w = viewer.window.add_plugin_dock_widget("napari-ozx", "Metadata inspector")
    qtbot.waitUntil(
        lambda: w.current_node() is not None and w.current_node().kind == "plate", timeout=10_000
    )
    field = dataclasses.replace(
        overview, kind="well", node="B/2/1", well="B/2", field_path="B/2/1", field_index=1
    )
    field_meta = field.to_metadata()
    # the plate root's own details may still arrive after its tree node: wait for the field's
    with qtbot.waitSignal(
        w.details_shown, timeout=10_000, check_params_cb=lambda path: path == "B/2/1"
    ) as sig:
        viewer.add_image(np.zeros((8, 8), np.uint8), name="B2 f1", metadata=field_meta)
    assert sig.args == ["B/2/1"]
    item = w.tree.currentItem()
    assert [item.text(0), item.parent().text(0), item.parent().parent().text(0)] == [
        "Field 1",
        "B2",
        "Row B",
    ]
    assert "Axes" in w.summary.toPlainText()


# --------------------------------------------------------------------------- export


def _export_widget(viewer):
    _, w = viewer.window.add_plugin_dock_widget("napari-ozx", "Export OME-Zarr")
    return w


def test_editing_options_updates_estimates_and_is_remembered(
    no_leaks, make_napari_viewer, qtbot, tmp_path
):
    import dask.array as da

    viewer = make_napari_viewer()
    chunks = (1, 2048, 2048)
    shown = not QUERY_PLANNING  # napari cannot show those dask arrays (classic_dask.py)
    viewer.add_image(
        da.zeros((32, 2048, 2048), dtype=np.uint16, chunks=chunks),
        name="big",
        contrast_limits=[0, 1],
        visible=shown,
    )
    viewer.add_labels(
        da.zeros((32, 2048, 2048), dtype=np.uint8, chunks=chunks), name="cells", visible=shown
    )
    w = _export_widget(viewer)
    assert [w.layer_list.item(i).text().split()[0] for i in range(w.layer_list.count())] == [
        "cells",
        "big",
    ]
    est = w.estimate
    assert est is not None and est.first.shard_shape == (16, 1024, 1024)
    assert w.estimate_labels["Shard size"].text().startswith("32.00 MiB per shard")
    assert w.estimate_labels["Chunks per shard"].text().startswith("256 ")
    entries = est.entries

    with qtbot.waitSignal(w.estimates_updated):
        w.shard_spin.setValue(512)
    assert w.estimate_labels["Shard size"].text().startswith("8.00 MiB")
    assert w.estimate_labels["Chunks per shard"].text().startswith("64 ")
    assert w.estimate.entries > entries
    w.shard_z_spin.setValue(4)
    assert w.estimate.first.shard_shape == (4, 512, 512)
    w.chunk_spin.setValue(128)
    assert w.estimate.chunks_per_shard == 4 * 4 * 4
    n_levels = w.estimate.levels
    w.levels_spin.setValue(2)
    assert w.estimate.levels == 2 != n_levels
    w.codec_combo.setCurrentIndex(w.codec_combo.findData("gzip"))
    assert w.level_spin.maximum() == 9
    w.codec_combo.setCurrentIndex(w.codec_combo.findData("none"))
    assert not w.level_spin.isEnabled()

    # 0.4 is for directories only
    v04 = w.version_combo.findData("0.4")
    assert not w.version_combo.model().item(v04).isEnabled()
    w.target_edit.setText(str(tmp_path / "out.ozx"))
    w.format_combo.setCurrentIndex(w.format_combo.findData("directory"))
    assert w.version_combo.model().item(v04).isEnabled()
    assert w.target_edit.text() == str(tmp_path / "out.ome.zarr")
    w.version_combo.setCurrentIndex(v04)
    assert not w.shard_spin.isEnabled() and w.estimate.first.shard_shape is None
    assert "no sharding" in w.estimate_labels["Shard size"].text()
    assert "files" in w.estimate_labels["Entries"].text()
    w.format_combo.setCurrentIndex(w.format_combo.findData("ozx"))
    assert w.version_combo.currentData() == "0.5" and w.shard_spin.isEnabled()

    # unchecking the labels layer changes what is estimated
    before = w.estimate.entries
    w.set_layer_checked("cells", False)
    assert [lyr.name for lyr in w.selected_layers()] == ["big"]
    assert w.estimate.entries < before

    # remembered between sessions, and what File > Save uses
    saved = load_options()
    assert (
        saved.format,
        saved.version,
        saved.chunk_yx,
        saved.shard_yx,
        saved.shard_z,
        saved.codec,
        saved.pyramid_levels,
    ) == ("ozx", "0.5", 128, 512, 4, "none", 2)
    from napari_ozx._qt.export import ExportWidget

    again = ExportWidget(viewer)  # a new panel (next session) starts from what was chosen
    qtbot.addWidget(again)
    assert again.options() == w.options()
    again.close()


def test_export_runs_to_ozx_and_reads_back(no_leaks, make_napari_viewer, qtbot, tmp_path):
    viewer = make_napari_viewer(show=True)
    viewer.window._qt_window.resize(1400, 1000)
    viewer.open(str(sample_path()), plugin="napari-ozx")
    w = _export_widget(viewer)
    assert [lyr.name for lyr in w.selected_layers()] == ["Nuclei", "Membrane", "nuclei"]
    w.chunk_spin.setValue(128)
    w.shard_spin.setValue(128)
    w.shard_z_spin.setValue(4)
    target = tmp_path / "exported.ozx"
    w.target_edit.setText(str(target))
    assert w.export_button.isEnabled()
    with qtbot.waitSignal(w.export_finished, timeout=60_000) as sig:
        w.export_button.click()
        assert w.cancel_button.isEnabled() and not w.export_button.isEnabled()
    assert sig.args == ["done"], w.status.text()
    assert w.progress.value() == w.progress.maximum() > 1
    assert "Exported to" in w.status.text()
    assert w.export_button.isEnabled() and not w.cancel_button.isEnabled()
    # one notification says where and as what (as File > Save's and `convert`'s line)
    from napari.utils.notifications import notification_manager

    saved = [str(n.message) for n in notification_manager.records]
    assert "Saved exported.ozx: OME-Zarr 0.5, 1 image (2 channels), 1 labels" in saved

    from napari_ozx.layers.reading import read_layer_data
    from napari_ozx.ngff.read.open import open_ome_zarr
    from napari_ozx.ozx.validate import validate

    layers = read_layer_data(str(target))
    assert [kw["name"] for _, kw, _ in layers] == [["Nuclei", "Membrane"], "nuclei"]
    (img_data, _img_kw, _), (lab_data, _, _) = layers
    np.testing.assert_array_equal(
        np.asarray(img_data[0][0]), np.asarray(viewer.layers["Nuclei"].data[0])
    )
    np.testing.assert_array_equal(
        np.asarray(lab_data[0]), np.asarray(viewer.layers["nuclei"].data[0])
    )
    with open_ome_zarr(target) as oz:
        a = oz.images()[0].arrays[0].array
        assert tuple(a.chunks)[-2:] == (128, 128) and tuple(a.shards)[-3:] == (4, 128, 128)
    assert validate(target).ok

    viewer.reset_view()
    qtbot.wait(50)
    png = tmp_path / "export.png"
    viewer.screenshot(str(png), canvas_only=False)
    assert png.stat().st_size > 10_000
    _keep_screenshot(png, "export.png")


def test_cancel_leaves_nothing_behind(no_leaks, make_napari_viewer, qtbot, tmp_path):
    import dask.array as da

    gate = threading.Event()
    computed = []

    def block(block_info=None):
        loc = block_info[None]["array-location"]
        shape = block_info[None]["chunk-shape"]
        if threading.current_thread().name.startswith("ozx-write"):
            computed.append(loc)
            if len(computed) > 2:  # the export stalls here until the test has pressed Cancel
                gate.wait(30)
        return np.full(shape, loc[0][0] % 200, dtype=np.uint16)

    big = da.map_blocks(
        tokened(block),
        chunks=((1,) * 64, (1024,) * 2, (1024,) * 2),
        dtype=np.uint16,
        meta=np.empty((0, 0, 0), np.uint16),  # query planning would not infer it
    )  # 64x2048x2048, 512 MiB
    viewer = make_napari_viewer()
    # hidden under query planning, where napari cannot show a dask array (classic_dask.py);
    # the export reads it the same way
    viewer.add_image(big, name="lazy", contrast_limits=[0, 200], visible=not QUERY_PLANNING)
    w = _export_widget(viewer)
    w.shard_z_spin.setValue(1)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "big.ozx"
    w.target_edit.setText(str(target))
    assert w.estimate.data_entries > 256
    try:
        with qtbot.waitSignal(w.export_finished, timeout=60_000) as sig:
            w.export_button.click()
            qtbot.waitUntil(lambda: w.progress.value() >= 1, timeout=30_000)
            assert w.progress.value() < w.progress.maximum()
            w.cancel_button.click()
            assert "Cancelling" in w.status.text()
            gate.set()
    finally:
        gate.set()
    assert sig.args == ["cancelled"]
    assert "nothing was written" in w.status.text()
    assert list(out.iterdir()) == []  # no target, no temporary file
    assert len(computed) < 64 * 4  # it stopped mid-way
    assert w.export_button.isEnabled()


def test_widgets_are_listed_in_the_plugins_menu(make_napari_viewer):
    from npe2 import PluginManager

    pm = PluginManager.instance()
    names = {c.display_name for c in pm.get_manifest("napari-ozx").contributions.widgets}
    assert {"Metadata inspector", "Export OME-Zarr"} <= names


def test_inspector_validates_directories_with_a_badge(no_leaks, qtbot, tmp_path):
    """The OME metadata rules run for a directory too: a pass/fail badge naming the
    spec version, and each broken rule listed with its node."""
    import json

    from napari_ozx._qt.inspector import InspectorWidget
    from napari_ozx.ngff.write.convert import convert

    good = tmp_path / "good.ome.zarr"
    convert(str(sample_path()), str(good))
    w = InspectorWidget()
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.metadata_shown, timeout=20_000) as sig:
        w.inspect(good)
    assert sig.args[0].startswith("PASS · OME-Zarr 0.5")
    assert "PASS" in w.validation_badge.text()
    # break a MUST: an omero colour that is not a string
    bad = tmp_path / "bad.ome.zarr"
    convert(str(sample_path()), str(bad))
    doc = json.loads((bad / "zarr.json").read_text())
    doc["attributes"]["ome"]["omero"]["channels"][0]["color"] = 255
    (bad / "zarr.json").write_text(json.dumps(doc))
    with qtbot.waitSignal(w.metadata_shown, timeout=20_000) as sig:
        w.inspect(bad)
    assert sig.args[0].startswith("FAIL · OME-Zarr 0.5")
    rows = [
        [w.metadata_findings.topLevelItem(i).text(c) for c in range(4)]
        for i in range(w.metadata_findings.topLevelItemCount())
    ]
    assert any(r[0] == "error" and "color" in (r[2] + r[3]).lower() for r in rows), rows
    assert "error" in w.tabs.tabText(w._metadata_tab)
    w.close()
    w.deleteLater()


@pytest.mark.slow  # a whole export while napari steps z
def test_export_while_stepping_z_every_100ms(no_leaks, make_napari_viewer, qtbot, tmp_path):
    """Three exports from the export panel of a lazily read multi-z image
    while a QTimer moves the z slider every 100 ms. Each export completes and validates,
    and nothing is raised on the GUI thread (napari's slicing shares the process-global
    dask cache callbacks with the export's tasks; a KeyError from dask/cache.py or an
    'Export failed: (ozx-..., ...)' status was the symptom)."""
    from napari.utils.notifications import notification_manager
    from qtpy.QtCore import QTimer

    from napari_ozx.__main__ import main as cli
    from napari_ozx.layers.writing import layer_axes
    from napari_ozx.ngff.write.writer import ImageSpec, LabelsSpec, WriteOptions, write_ome_zarr
    from napari_ozx.ozx.validate import validate

    nz, n = 10, 512
    rng = np.random.default_rng(5)
    img = rng.integers(0, 3000, (2, nz, n, n), dtype=np.uint16)
    lab = (np.arange(n)[None, :, None] // 64 + np.arange(n)[None, None, :] // 64) % 7
    lab = np.broadcast_to(lab, (nz, n, n)).astype(np.uint32)
    src = tmp_path / "multiz.ozx"
    axes = layer_axes(["z", "y", "x"], None, 3, True)
    write_ome_zarr(
        src,
        ImageSpec(img, axes),
        [LabelsSpec("cells", lab, layer_axes(["z", "y", "x"], None, 3, False))],
        WriteOptions(chunk_yx=128, shard_yx=256, shard_z=1, pyramid_levels=3, codec="none"),
    )
    viewer = make_napari_viewer(show=True)
    viewer.open(str(src), plugin="napari-ozx")
    assert len(viewer.layers) == 3
    z_axis = 0
    assert viewer.dims.nsteps[z_axis] == nz
    w = _export_widget(viewer)
    w.chunk_spin.setValue(128)
    w.shard_spin.setValue(256)
    w.shard_z_spin.setValue(1)
    errors_before = len(notification_manager.records)

    steps = []

    def step() -> None:
        z = (viewer.dims.current_step[z_axis] + 1) % nz
        viewer.dims.set_current_step(z_axis, z)
        steps.append(z)

    timer = QTimer()
    timer.setInterval(100)
    timer.timeout.connect(step)
    results = []
    with qtbot.capture_exceptions() as exceptions:
        timer.start()
        try:
            for i in range(3):
                target = tmp_path / f"export{i}.ozx"
                w.target_edit.setText(str(target))
                before = len(steps)
                with qtbot.waitSignal(w.export_finished, timeout=180_000) as sig:
                    w.export_button.click()
                results.append((sig.args, w.status.text(), len(steps) - before))
                qtbot.wait(250)  # the slider keeps moving between exports too
        finally:
            timer.stop()
    assert not exceptions, [str(e[1]) for e in exceptions]
    for args, status, _ in results:
        assert args == ["done"], status
    # the slider did move while the exports ran (counts, not times)
    assert sum(n for _, _, n in results) >= 3, results
    assert len(set(steps)) > 1
    errors = [
        str(n.message)
        for n in notification_manager.records[errors_before:]
        if str(getattr(n.severity, "value", n.severity)).lower() == "error"
    ]
    assert not errors, errors
    for i in range(3):
        target = tmp_path / f"export{i}.ozx"
        assert validate(target).ok
        assert cli(["validate", str(target)]) == 0
        from napari_ozx.ngff.read.open import open_ome_zarr

        with open_ome_zarr(target) as oz:
            (image,) = oz.images()
            np.testing.assert_array_equal(np.asarray(image.levels[0][:, 5]), img[:, 5])
            np.testing.assert_array_equal(np.asarray(image.labels[0].levels[0][5]), lab[5])
