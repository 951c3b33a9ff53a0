"""The "Levels and ROIs" dock: the pyramid level a layer is shown from, and ROIs opened
as their own layers.

**Resolution level** of the active multiscale layer (and every selected layer with as many
levels): "automatic" (napari's choice by zoom in 2D; in 3D the finest level within the 3D
budget) or one level, listed by pixel size (``1: 1.3 µm (48 × 60 px)``), then pinned in 2D
and 3D (``layer.locked_data_level``, :mod:`napari_ozx.layers.regions.resolution`) so
napari reads that level only. A dock, because plugins cannot add to napari's layer panel.
**Open as layers**: the ROIs selected in a ROI table's Shapes layer (:func:`roi_selection`)
open with :func:`~napari_ozx.layers.regions.crop.open_roi` at the level chosen here,
masked or not, off the GUI thread, named after the ROI, over the image (in a plate's well
view too); the layer menu's "Open selected ROIs as layers" (:func:`open_selected_rois`)
docks this and opens them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from qtpy.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)
from superqt.utils import WorkerBase

from napari_ozx._qt.base import OzxDockWidget
from napari_ozx.errors import OzxError
from napari_ozx.layers.provenance import TABLE_KEY
from napari_ozx.layers.regions.resolution import can_pin, layer_level_labels, pin_level

if TYPE_CHECKING:
    import napari

__all__ = ["LEVELS_DOCK_NAME", "LevelsDock", "open_selected_rois", "roi_selection"]

LEVELS_DOCK_NAME = "Levels and ROIs"  # display_name in napari.yaml
_PLUGIN = "napari-ozx"


def roi_selection(layer: Any) -> dict[str, Any] | None:
    """What "Open as layers" would open for *layer*: ``{"path", "table", "type",
    "rois", "view"}`` for a ROI table's Shapes layer (``rois``: the selected rectangles'
    ROI names, a masking table's label ids; empty when none is selected), else None."""
    meta = getattr(layer, "metadata", None)
    rec = meta.get(TABLE_KEY) if isinstance(meta, dict) else None
    if not isinstance(rec, dict) or rec.get("type") not in ("roi_table", "masking_roi_table"):
        return None
    source, node = str(rec.get("source") or ""), str(rec.get("image") or "")
    if not source:
        return None
    # an image inside a directory, an .ozx (open_roi splits it) or a URL
    path = f"{source.rstrip('/')}/{node}" if node else source
    masking = rec.get("type") == "masking_roi_table"
    features = getattr(layer, "features", None)
    column = "label" if masking else "name"
    rois: list[Any] = []
    if features is not None and column in features:
        values = list(features[column])
        for i in sorted(getattr(layer, "selected_data", ()) or ()):
            if 0 <= i < len(values):
                rois.append(int(values[i]) if masking else str(values[i]))
    view = (tuple(float(s) for s in layer.scale), tuple(float(t) for t in layer.translate))
    return {
        "path": path,
        "table": str(rec.get("table")),
        "type": rec.get("type"),
        "rois": rois,
        "view": view,
    }


def _image_levels(path: str) -> list[str]:
    """The levels of the image at *path* with their pixel sizes (worker thread)."""
    from napari_ozx.layers.regions.crop import split_image_path
    from napari_ozx.layers.regions.resolution import image_level_labels
    from napari_ozx.ngff.read.open import open_ome_zarr

    source, node = split_image_path(path)
    with open_ome_zarr(source) as root:
        return image_level_labels(root.image(node))


def _open_rois(sel: dict[str, Any], level: int, masked: bool) -> list[Any]:
    """Every selected ROI's layer data (worker thread); the first error stops it."""
    from napari_ozx.layers.regions.crop import open_roi

    out: list[Any] = []
    for roi in sel["rois"]:
        out.extend(
            open_roi(sel["path"], sel["table"], roi, level=level, masked=masked, view=sel["view"])
        )
    return out


class LevelsDock(OzxDockWidget):
    def __init__(
        self, napari_viewer: napari.viewer.Viewer | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(napari_viewer, parent)
        self.layer: Any = None  # the layer whose level the combo shows
        self.roi_layer: Any = None
        self._levels_of: str | None = None  # the image path roi_level lists
        # resolution
        self.layer_label = QLabel("No multiscale layer selected.")
        self.layer_label.setWordWrap(True)
        self.level_combo = QComboBox()
        self.level_combo.setToolTip(
            "The pyramid level the layer is shown from, in 2D and 3D; automatic: napari's "
            "choice (by zoom in 2D, within the 3D budget in 3D)"
        )
        self.level_combo.setEnabled(False)
        res = QGroupBox("Resolution level")
        rl = QFormLayout(res)
        rl.addRow(self.layer_label)
        rl.addRow("Level", self.level_combo)
        # ROIs
        self.roi_label = QLabel("Select rectangles of a ROI table layer.")
        self.roi_label.setWordWrap(True)
        self.roi_level = QComboBox()
        self.roi_level.setToolTip("The pyramid level the ROI is read from")
        self.masked = QCheckBox("Masked: only the object's pixels")
        self.masked.setToolTip("Masking ROI tables: pixels outside the object are 0")
        self.open_button = QPushButton("Open as layers")
        roi = QGroupBox("Open ROI as layers")
        fl = QFormLayout(roi)
        fl.addRow(self.roi_label)
        fl.addRow("Level", self.roi_level)
        fl.addRow(self.masked)
        fl.addRow(self.open_button)
        lay = QVBoxLayout(self)
        lay.addWidget(res)
        lay.addWidget(roi)
        lay.addStretch(1)
        self.level_combo.activated.connect(self._level_chosen)
        self.open_button.clicked.connect(self.open_selected)
        if napari_viewer is not None:
            self.connect_event(napari_viewer.layers.selection.events.active, self.refresh)
            self.connect_event(napari_viewer.layers.events.removed, self.refresh)
            self.connect_event(napari_viewer.dims.events.ndisplay, self._show_level)
        self.refresh()

    # ------------------------------------------------------------------ model
    def refresh(self, *_: object) -> None:
        active = self._viewer.layers.selection.active if self._viewer is not None else None
        if active is not None and can_pin(active):
            self._follow(active)
        elif self.layer is not None and self.layer not in (
            self._viewer.layers if self._viewer else []
        ):
            self._follow(None)
        if roi_selection(active) is not None:
            self._follow_roi(active)
        elif self.roi_layer is not None and self.roi_layer not in (
            self._viewer.layers if self._viewer else []
        ):
            self._follow_roi(None)
        self._update_roi()

    def _follow(self, layer: Any) -> None:
        if layer is self.layer:
            return
        if self.layer is not None:
            for ev in ("locked_data_level", "set_data"):
                emitter = getattr(self.layer.events, ev, None)
                if emitter is not None:
                    emitter.disconnect(self._show_level)
        self.layer = layer
        if layer is not None:
            for ev in ("locked_data_level", "set_data"):
                emitter = getattr(layer.events, ev, None)
                if emitter is not None:
                    self.connect_event(emitter, self._show_level)
        self._fill_levels()

    def _fill_levels(self) -> None:
        self.level_combo.clear()
        layer = self.layer
        self.level_combo.setEnabled(layer is not None)
        if layer is None:
            self.layer_label.setText("No multiscale layer selected.")
            return
        self.layer_label.setText(f"Layer {layer.name!r}")
        self.level_combo.addItem("automatic", None)
        for i, text in enumerate(layer_level_labels(layer)):
            self.level_combo.addItem(text, i)
        self._show_level()

    def _show_level(self, *_: object) -> None:
        layer = self.layer
        if layer is None or self.level_combo.count() == 0:
            return
        locked = layer.locked_data_level
        self.level_combo.setItemText(0, f"automatic (now level {layer.data_level})")
        self.level_combo.setCurrentIndex(0 if locked is None or self._ours(layer) else locked + 1)

    @staticmethod
    def _ours(layer: Any) -> bool:
        """napari-ozx's own 3D choice holds the lock (automatic, for the user)."""
        from napari_ozx.layers.provenance import LOCKED_3D_KEY

        return bool(layer.metadata.get(LOCKED_3D_KEY))

    def _level_chosen(self, index: int) -> None:
        if self.layer is None:
            return
        self.set_level(self.level_combo.itemData(index))

    def set_level(self, level: int | None) -> None:
        """Pin the level (None: automatic) of the followed layer and of every other
        selected layer with as many levels (an image's channels, selected together)."""
        layer = self.layer
        if layer is None:
            return
        from napari_ozx._refine3d import cancel

        selected = list(self._viewer.layers.selection) if self._viewer is not None else []
        n = len(layer.level_shapes)
        targets = [layer] + [
            o for o in selected if o is not layer and can_pin(o) and len(o.level_shapes) == n
        ]
        for target in targets:
            cancel(target)  # a 3D refinement in flight must not replace the user's level
            pin_level(target, level)
        if level is None and self._viewer is not None and self._viewer.dims.ndisplay == 3:
            from napari_ozx._viewer_hooks import apply_3d_levels

            apply_3d_levels(self._viewer)  # automatic in 3D: napari-ozx's budget choice
        self._show_level()

    # ------------------------------------------------------------------ ROIs
    def _follow_roi(self, layer: Any) -> None:
        if layer is self.roi_layer:
            return
        if self.roi_layer is not None:
            self.roi_layer.events.highlight.disconnect(self._update_roi)
        self.roi_layer = layer
        if layer is not None:
            # napari emits highlight when the selection of shapes changes
            self.connect_event(layer.events.highlight, self._update_roi)

    def _update_roi(self, *_: object) -> None:
        sel = roi_selection(self.roi_layer) if self.roi_layer is not None else None
        masking = sel is not None and sel["type"] == "masking_roi_table"
        self.masked.setEnabled(masking)
        if not masking:
            self.masked.setChecked(False)
        if sel is None:
            self.roi_label.setText("Select rectangles of a ROI table layer.")
            self.open_button.setEnabled(False)
            self.roi_level.clear()
            self._levels_of = None
            return
        rois = sel["rois"]
        what = ", ".join(map(str, rois[:5])) + (", …" if len(rois) > 5 else "")
        self.roi_label.setText(
            f"{self.roi_layer.name}: {what}"
            if rois
            else f"{self.roi_layer.name}: select rectangles"
        )
        self.open_button.setEnabled(bool(rois))
        if self._levels_of != sel["path"]:
            self._levels_of = sel["path"]
            self.roi_level.clear()
            self.roi_level.addItem("0", 0)
            self.start_worker(_image_levels, sel["path"], returned=self._got_levels)

    def _got_levels(self, labels: list[str]) -> None:
        keep = max(self.roi_level.currentIndex(), 0)
        self.roi_level.clear()
        for i, text in enumerate(labels):
            self.roi_level.addItem(text, i)
        self.roi_level.setCurrentIndex(min(keep, len(labels) - 1))

    def open_selected(self, *_: object) -> WorkerBase | None:
        """Open the selected ROIs as layers, in the background."""
        sel = roi_selection(self.roi_layer) if self.roi_layer is not None else None
        if sel is None or not sel["rois"] or self._viewer is None:
            self.notify_warning("select rectangles of a ROI table layer to open them")
            return None
        level = self.roi_level.currentData()
        masked = self.masked.isChecked() and self.masked.isEnabled()
        self.open_button.setEnabled(False)
        self.roi_label.setText(f"Opening {', '.join(map(str, sel['rois']))}…")
        viewer = self._viewer

        def done(layers: list[Any]) -> None:
            for data, kwargs, kind in layers:
                getattr(viewer, f"add_{kind}")(data, **kwargs)
            self._update_roi()

        def failed(e: BaseException) -> None:
            self._update_roi()
            if isinstance(e, OzxError):
                self.notify_error(str(e), sel["path"])
            else:
                self.notify_error(f"cannot open the ROI: {e}", sel["path"], e)

        return self.start_worker(
            _open_rois, sel, int(level or 0), masked, returned=done, errored=failed
        )


def open_selected_rois(viewer: napari.viewer.Viewer) -> None:
    """Layer context menu: open the selected rectangles of the active ROI table layer as
    layers (through the "Levels and ROIs" dock, which shows the level and mask chosen)."""
    active = viewer.layers.selection.active
    sel = roi_selection(active)
    if sel is None or not sel["rois"]:
        raise OzxError(
            "select rectangles of a ROI table layer (napari's select tool) to open them as layers"
        )
    _, widget = viewer.window.add_plugin_dock_widget(_PLUGIN, LEVELS_DOCK_NAME)
    if isinstance(widget, LevelsDock):
        widget.refresh()
        widget.open_selected()
