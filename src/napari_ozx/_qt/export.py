"""Export panel dock widget: choose layers and options, see live estimates, export.

The options are a :class:`~napari_ozx.ngff.write.writer.WriteOptions`, the same object File >
Save uses: every change is remembered (:func:`napari_ozx.layers.export.save_options`),
so File > Save writes with what the panel shows. Estimates come from
:func:`napari_ozx.layers.export.estimate_export` (the writer's own layout rules). The
export runs :func:`napari_ozx.layers.export.export_layers_summary` in a worker thread,
with a progress bar fed by the writer's progress callback and a Cancel button that sets
the writer's cancel event (a cancelled export leaves nothing at the target); when done,
one notification says what was written where, as File > Save's does.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from typing import TYPE_CHECKING

from qtpy.QtCore import Qt, Signal
from qtpy.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)
from superqt.utils import WorkerBase, qdebounced, signals_blocked

from napari_ozx._qt._workers import ProgressRelay
from napari_ozx._qt.base import OzxDockWidget
from napari_ozx.errors import OzxError
from napari_ozx.layers.export import (
    CODECS,
    DOWNSAMPLE,
    OZX_VERSION,
    VERSIONS,
    ExportEstimate,
    constrain,
    estimate_export,
    export_layers_summary,
    level_range,
    load_options,
    plans_from_layer_data,
    retarget,
    save_options,
)
from napari_ozx.ngff.write.options import option_spec
from napari_ozx.ngff.write.writer import WriteCancelled, WriteOptions, WriteSummary

if TYPE_CHECKING:
    import napari
    from napari.layers import Layer

    from napari_ozx.layers.writing import FullLayerData

logger = logging.getLogger(__name__)

__all__ = ["ExportWidget"]

_FORMATS = (("ozx", ".ozx (single file)"), ("directory", "Directory (.ome.zarr)"))
_LAYER_ROLE = Qt.ItemDataRole.UserRole


class ExportWidget(OzxDockWidget):
    """Dock widget that writes the chosen image and labels layers as OME-Zarr."""

    #: emitted with "done", "cancelled" or "error" when an export ends
    export_finished = Signal(str)
    #: emitted after the estimates were recomputed
    estimates_updated = Signal()

    def __init__(
        self, napari_viewer: napari.viewer.Viewer | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(napari_viewer, parent)
        self.setObjectName("napari-ozx export")
        self._cancel: threading.Event | None = None
        self._worker: WorkerBase | None = None
        self._updating = False
        self.estimate: ExportEstimate | None = None
        self.estimate_error: str | None = None
        remembered = load_options()
        self._workers_option = remembered.workers

        layout = QVBoxLayout(self)
        layout.addWidget(self._build_layers_box(), 1)
        layout.addWidget(self._build_format_box())
        layout.addWidget(self._build_layout_box())
        layout.addWidget(self._build_estimate_box())
        self._build_target_and_actions(layout)
        layout.addStretch(0)

        self._option_widgets: list[QWidget] = [
            self.format_combo,
            self.version_combo,
            self.chunk_spin,
            self.shard_spin,
            self.shard_z_spin,
            self.codec_combo,
            self.level_spin,
            self.levels_spin,
            self.downsample_combo,
            self.rebuild_check,
            self.layer_list,
            self.target_edit,
            self.browse_button,
        ]
        self.set_options(remembered)
        self._connect_options()
        self._relay = ProgressRelay(self)
        self._relay.progress.connect(self._on_progress)
        self._follow_viewer(napari_viewer)
        self._refresh_layers()

    # ------------------------------------------------------------------ building
    def _build_layers_box(self) -> QGroupBox:
        """The image and labels layers to export (checkable)."""
        self.layer_list = QListWidget()
        self.layer_list.setToolTip(
            "Image layers become the channels of one image; labels go under its labels/"
        )
        self.layer_list.itemChanged.connect(self._on_changed)
        box = QGroupBox("Layers")
        QVBoxLayout(box).addWidget(self.layer_list)
        return box

    def _build_format_box(self) -> QGroupBox:
        """Container (.ozx or directory) and OME-Zarr version."""
        self.format_combo = QComboBox()
        for key, text in _FORMATS:
            self.format_combo.addItem(text, key)
        self.version_combo = QComboBox()
        for v in option_spec("version").choices or ():
            self.version_combo.addItem(f"OME-Zarr {v}", v)
        box = QGroupBox("Format")
        form = QFormLayout(box)
        form.addRow("Container", self.format_combo)
        form.addRow("Version", self.version_combo)
        return box

    def _build_layout_box(self) -> QGroupBox:
        """Chunks, shards, codec and pyramid: ranges, steps, units and help from
        WriteOptions (one source of truth)."""
        self.chunk_spin = _spin_for("chunk_yx")
        self.shard_spin = _spin_for("shard_yx")
        self.shard_z_spin = _spin_for("shard_z")
        self.codec_combo = QComboBox()
        for c in CODECS:
            self.codec_combo.addItem(c, c)
        self.level_spin = _spin_for("level")
        codec_row = QHBoxLayout()
        codec_row.addWidget(self.codec_combo, 1)
        codec_row.addWidget(QLabel("level"))
        codec_row.addWidget(self.level_spin)
        self.levels_spin = _spin_for("pyramid_levels")  # its minimum - 1 means "auto"
        self.levels_spin.setSpecialValueText("auto")
        self.downsample_combo = QComboBox()
        for m in DOWNSAMPLE:
            self.downsample_combo.addItem(m, m)
        self.downsample_combo.setToolTip(option_spec("downsample").help)
        # an opened multiscale layer's stored levels are copied unless this is ticked
        self.rebuild_check = QCheckBox("rebuild from level 0")
        self.rebuild_check.setToolTip(option_spec("rebuild_pyramid").help)
        box = QGroupBox("Chunks, shards and compression")
        form = QFormLayout(box)
        form.addRow("Chunk y/x", self.chunk_spin)
        form.addRow("Shard y/x", self.shard_spin)
        form.addRow("Shard z", self.shard_z_spin)
        form.addRow("Codec", codec_row)
        form.addRow("Pyramid levels", self.levels_spin)
        form.addRow("Downsampling", self.downsample_combo)
        form.addRow("Pyramid", self.rebuild_check)
        return box

    def _build_estimate_box(self) -> QGroupBox:
        """What the export would write, recomputed on every change."""
        self.estimate_labels: dict[str, QLabel] = {}
        self._estimate_form = QFormLayout()
        for key in ("Chunks per shard", "Shard size", "Entries", "Pyramid levels", "Data"):
            lab = QLabel("–")
            lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.estimate_labels[key] = lab
            self._estimate_form.addRow(key, lab)
        self.estimate_note = QLabel("")
        self.estimate_note.setWordWrap(True)
        box = QGroupBox("Estimate")
        lay = QVBoxLayout(box)
        lay.addLayout(self._estimate_form)
        lay.addWidget(self.estimate_note)
        return box

    def _build_target_and_actions(self, layout: QVBoxLayout) -> None:
        """Target path, Export / Cancel, the progress bar and the status line."""
        self.target_edit = QLineEdit()
        self.target_edit.setPlaceholderText("Choose where to write…")
        self.target_edit.textChanged.connect(self._update_buttons)
        self.browse_button = QPushButton("Browse…")
        self.browse_button.clicked.connect(self._browse)
        target_row = QHBoxLayout()
        target_row.addWidget(self.target_edit, 1)
        target_row.addWidget(self.browse_button)
        self.export_button = QPushButton("Export")
        self.export_button.clicked.connect(self.start_export)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel_export)
        buttons = QHBoxLayout()
        buttons.addWidget(self.export_button)
        buttons.addWidget(self.cancel_button)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("%v / %m shards")
        self.progress.setTextVisible(True)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(QLabel("Target"))
        layout.addLayout(target_row)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)

    def _connect_options(self) -> None:
        """Every option change is remembered and re-estimated (:meth:`_on_changed`)."""
        for w in (self.format_combo, self.version_combo, self.codec_combo, self.downsample_combo):
            w.currentIndexChanged.connect(self._on_changed)
        for s in (
            self.chunk_spin,
            self.shard_spin,
            self.shard_z_spin,
            self.level_spin,
            self.levels_spin,
        ):
            s.valueChanged.connect(self._on_changed)
        self.rebuild_check.toggled.connect(self._on_changed)

    def _follow_viewer(self, viewer: napari.viewer.Viewer | None) -> None:
        """Refresh the layer list (and estimates) once per burst of layer changes:
        opening a plate inserts hundreds of layers, each would recompute the estimates."""
        self._refresh_soon = qdebounced(self._refresh_layers, timeout=50)
        if viewer is None:
            return
        ev_layers = viewer.layers.events
        for name in ("inserted", "removed", "moved", "reordered"):
            emitter = getattr(ev_layers, name, None)
            if emitter is not None:
                self.connect_event(emitter, self._on_layers_changed)

    # ------------------------------------------------------------------ options
    def options(self) -> WriteOptions:
        """The options as shown (always a valid combination)."""
        return constrain(
            WriteOptions(
                format=self.format_combo.currentData(),
                version=self.version_combo.currentData(),
                chunk_yx=self.chunk_spin.value(),
                shard_yx=self.shard_spin.value(),
                shard_z=self.shard_z_spin.value(),
                codec=self.codec_combo.currentData(),
                level=self.level_spin.value(),
                pyramid_levels=self.levels_spin.value() or None,
                downsample=self.downsample_combo.currentData(),
                rebuild_pyramid=self.rebuild_check.isChecked(),
                workers=self._workers_option,
            )
        )

    def set_options(self, options: WriteOptions) -> None:
        """Show *options* (made valid first)."""
        fmt = options.format if options.format != "auto" else "ozx"
        options = constrain(dataclasses.replace(options, format=fmt))
        self._updating = True
        try:
            _select(self.format_combo, fmt)
            _select(self.version_combo, options.version)
            self.chunk_spin.setValue(options.chunk_yx)
            self.shard_spin.setValue(options.shard_yx)
            self.shard_z_spin.setValue(options.shard_z)
            _select(self.codec_combo, options.codec)
            self._apply_level_range(options.codec)
            self.level_spin.setValue(options.level)
            self.levels_spin.setValue(options.pyramid_levels or 0)
            _select(self.downsample_combo, options.downsample)
            self.rebuild_check.setChecked(options.rebuild_pyramid)
            self._workers_option = options.workers
            self._sync_enabled()
        finally:
            self._updating = False
        self.update_estimates()

    def _apply_level_range(self, codec: str) -> None:
        rng = level_range(codec)
        self.level_spin.setEnabled(rng is not None)
        if rng is not None:
            self.level_spin.setRange(*rng)

    def _sync_enabled(self) -> None:
        """Grey out what the current choice makes invalid or irrelevant."""
        fmt = self.format_combo.currentData()
        model = self.version_combo.model()
        for row in range(self.version_combo.count()):
            ok = self.version_combo.itemData(row) in VERSIONS[fmt]
            item = model.item(row) if hasattr(model, "item") else None
            if item is not None:
                item.setEnabled(ok)
                item.setToolTip(
                    "" if ok else "An .ozx holds OME-Zarr 0.5 only (RFC-9 builds on Zarr v3)"
                )
        if self.version_combo.currentData() not in VERSIONS[fmt]:
            _select(self.version_combo, OZX_VERSION)
        sharded = self.version_combo.currentData() != "0.4"
        self.shard_spin.setEnabled(sharded and not self.busy)
        self.shard_z_spin.setEnabled(sharded and not self.busy)
        self.level_spin.setEnabled(
            level_range(self.codec_combo.currentData()) is not None and not self.busy
        )

    def _on_changed(self, *_: object) -> None:
        if self._updating:
            return
        self._updating = True
        try:
            self._apply_level_range(self.codec_combo.currentData())
            self._sync_enabled()
            fmt = self.format_combo.currentData()
            t = self.target_edit.text()
            if t and retarget(t, fmt) != t:
                self.target_edit.setText(retarget(t, fmt))
        finally:
            self._updating = False
        opts = self.options()
        try:
            save_options(opts)
        except OSError as e:
            logger.warning("cannot remember the export options: %s", e)
        self.update_estimates()

    # ------------------------------------------------------------------ layers
    def _on_layers_changed(self, *_: object) -> None:
        # a method, so napari's emitter holds the widget weakly (the debouncer would not)
        self._refresh_soon()

    def _refresh_layers(self, *_: object) -> None:
        if self._viewer is None:
            return
        try:
            checked = {id(lyr) for lyr in self.selected_layers()}
            known = {
                self.layer_list.item(i).data(_LAYER_ROLE) for i in range(self.layer_list.count())
            }
        except RuntimeError:  # widget deleted
            return
        with signals_blocked(self.layer_list):
            self.layer_list.clear()
            for lyr in reversed(list(self._viewer.layers)):  # top layer first, like the layer list
                kind = type(lyr).__name__
                if kind not in ("Image", "Labels"):
                    continue
                if kind == "Image" and getattr(lyr, "rgb", False):
                    continue
                item = QListWidgetItem(f"{lyr.name}  ({kind.lower()}, {_shape_of(lyr)})")
                item.setData(_LAYER_ROLE, id(lyr))
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                new = id(lyr) not in known
                item.setCheckState(
                    Qt.CheckState.Checked
                    if (new or id(lyr) in checked)
                    else Qt.CheckState.Unchecked
                )
                self.layer_list.addItem(item)
        self.update_estimates()

    def selected_layers(self) -> list[Layer]:
        if self._viewer is None:
            return []
        by_id = {id(lyr): lyr for lyr in self._viewer.layers}
        out = []
        for i in range(self.layer_list.count()):
            item = self.layer_list.item(i)
            if item.checkState() == Qt.CheckState.Checked and item.data(_LAYER_ROLE) in by_id:
                out.append(by_id[item.data(_LAYER_ROLE)])
        return list(reversed(out))  # viewer order (bottom first), as File > Save passes them

    def set_layer_checked(self, name: str, checked: bool) -> None:
        for i in range(self.layer_list.count()):
            item = self.layer_list.item(i)
            lyr = self._layer_by_id(item.data(_LAYER_ROLE))
            if lyr is not None and lyr.name == name:
                item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)

    def _layer_by_id(self, key: int) -> Layer | None:
        if self._viewer is None:
            return None
        return next((lyr for lyr in self._viewer.layers if id(lyr) == key), None)

    def _layer_data(self) -> list[FullLayerData]:
        return [lyr.as_layer_data_tuple() for lyr in self.selected_layers()]

    # ------------------------------------------------------------------ estimates
    def update_estimates(self) -> None:
        self.estimate, self.estimate_error = None, None
        try:
            layers = self._layer_data()
            if not layers:
                raise OzxError("choose at least one image or labels layer")
            plans = plans_from_layer_data(layers)
            self.estimate = estimate_export(self.options(), plans, self.target_edit.text() or None)
        except (OzxError, ValueError, TypeError) as e:
            self.estimate_error = str(e)
        est = self.estimate
        if est is None:
            for lab in self.estimate_labels.values():
                lab.setText("–")
            self.estimate_note.setText(self.estimate_error or "")
        else:
            first = est.first
            assert first is not None
            what = "entries" if est.format == "ozx" else "files"
            unit = "shard" if first.shard_shape else "chunk (no sharding)"
            self.estimate_labels["Chunks per shard"].setText(
                f"{est.chunks_per_shard:,}  ({' × '.join(map(str, first.chunk_shape))} in "
                f"{' × '.join(map(str, first.stored_shape))})"
            )
            self.estimate_labels["Shard size"].setText(
                f"{first.shard_bytes / 2**20:.2f} MiB per {unit}, uncompressed"
            )
            self.estimate_labels["Entries"].setText(
                f"{est.entries:,} {what} ({est.metadata_entries} metadata)"
            )
            self.estimate_labels["Pyramid levels"].setText(
                ", ".join(f"{m.plan.name}: {len(m.levels)}" for m in est.multiscales)
            )
            from napari_ozx.inspection import format_bytes

            self.estimate_labels["Data"].setText(
                f"{format_bytes(est.nbytes)} uncompressed, all levels"
            )
            self.estimate_note.setText("")
        self._update_buttons()
        self.estimates_updated.emit()

    # ------------------------------------------------------------------ export
    @property
    def busy(self) -> bool:
        return self._cancel is not None

    def _update_buttons(self, *_: object) -> None:
        self.export_button.setEnabled(
            not self.busy and self.estimate is not None and bool(self.target_edit.text().strip())
        )
        self.cancel_button.setEnabled(self.busy)

    def _browse(self) -> None:
        fmt = self.format_combo.currentData()
        start = self.target_edit.text() or os.path.join(
            os.getcwd(), retarget(self._default_name(), fmt)
        )
        filt = (
            "OME-Zarr single file (*.ozx)"
            if fmt == "ozx"
            else "OME-Zarr directory (*.ome.zarr *.zarr)"
        )
        path, _ = QFileDialog.getSaveFileName(
            self, "Export OME-Zarr", start, filt, options=QFileDialog.Option.DontConfirmOverwrite
        )
        if path:
            self.target_edit.setText(retarget(path, fmt))

    def _default_name(self) -> str:
        sel = self.selected_layers()
        return (sel[0].name if sel else "image") or "image"

    def start_export(self) -> None:
        """Export the chosen layers to the target in a worker thread."""
        if self.busy:
            return
        target = self.target_edit.text().strip()
        if not target:
            self._set_status("Choose a target first.")
            return
        opts = self.options()
        target = retarget(target, opts.format)
        try:
            layers = self._layer_data()
            plans_from_layer_data(layers)  # the same checks as the writer, before any thread
        except OzxError as e:
            self._set_status(str(e))
            return
        if os.path.exists(target) and self.isVisible():
            answer = QMessageBox.question(self, "Export OME-Zarr", f"{target} exists. Replace it?")
            if answer != QMessageBox.StandardButton.Yes:
                return
        try:
            save_options(opts)
        except OSError as e:
            logger.warning("cannot remember the export options: %s", e)
        self._cancel = threading.Event()
        self._set_busy(True)
        self.progress.setRange(0, max(self.estimate.data_entries if self.estimate else 1, 1))
        self.progress.setValue(0)
        self._set_status(f"Exporting to {target}…")
        relay, cancel = self._relay, self._cancel

        def job() -> WriteSummary:
            return export_layers_summary(target, layers, opts, progress=relay, cancel=cancel)

        # the base sets *cancel* when the widget goes away: the writer stops, nothing stays
        self._worker = self.start_worker(
            job, returned=self._on_export_done, errored=self._on_export_error, cancel=cancel
        )

    def cancel_export(self) -> None:
        if self._cancel is not None:
            self._cancel.set()
            self.cancel_button.setEnabled(False)
            self._set_status("Cancelling…")

    def _on_progress(self, done: int, total: int) -> None:
        if total > 0 and self.progress.maximum() != total:
            self.progress.setRange(0, total)
        self.progress.setValue(done)

    def _on_export_done(self, written: WriteSummary) -> None:
        self._finish()
        self.progress.setValue(self.progress.maximum())
        self._set_status(f"Exported to {written.target}: {written.content()}")
        # the line File > Save and `napari-ozx convert` show; the full path in the details
        self.notify_info(written.message(), written.target, headline_names_file=False)
        self.export_finished.emit("done")

    def _on_export_error(self, err: BaseException) -> None:
        self._finish()
        if isinstance(err, WriteCancelled):
            self.progress.setValue(0)
            self._set_status("Export cancelled; nothing was written.")
            self.export_finished.emit("cancelled")
            return
        self._set_status(f"Export failed: {err}")
        self.notify_error(f"Export failed: {err}", self.target_edit.text().strip() or None, err)
        self.export_finished.emit("error")

    def _finish(self) -> None:
        self._cancel = None
        self._worker = None
        self._set_busy(False)

    def _set_busy(self, busy: bool) -> None:
        for w in self._option_widgets:
            w.setEnabled(not busy)
        self._sync_enabled()
        self._update_buttons()

    def _set_status(self, text: str) -> None:
        self.status.setText(text)

    def shutdown(self) -> None:
        """Cancel a running export and stop following the viewer (idempotent)."""
        self._refresh_soon.cancel()
        super().shutdown()


def _spin(lo: int, hi: int, step: int, suffix: str, tip: str) -> QSpinBox:
    s = QSpinBox()
    s.setRange(lo, hi)
    s.setSingleStep(step)
    if suffix:
        s.setSuffix(suffix)
    s.setToolTip(tip)
    s.setKeyboardTracking(False)
    return s


def _spin_for(name: str) -> QSpinBox:
    """A spin box with the range, step, unit and help :class:`WriteOptions` declares for
    *name*; an optional option (None = auto) gets one value below its minimum for "auto"."""
    spec = option_spec(name)
    lo = spec.min if spec.min is not None else -(1 << 30)
    hi = spec.max if spec.max is not None else 1 << 30
    if spec.optional:
        lo -= 1
    unit = {"px": " px", "planes": " planes"}.get(
        spec.unit or "", f" {spec.unit}" if spec.unit else ""
    )
    return _spin(lo, hi, spec.step or 1, unit, spec.help[:1].upper() + spec.help[1:])


def _select(combo: QComboBox, value: object) -> None:
    i = combo.findData(value)
    if i >= 0:
        combo.setCurrentIndex(i)


def _shape_of(layer: Layer) -> str:
    data = layer.data[0] if getattr(layer, "multiscale", False) else layer.data
    shape = getattr(data, "shape", ())
    return "×".join(str(s) for s in shape)
