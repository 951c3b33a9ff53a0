"""The "Save to SpatialData store…" dock: save the active Shapes, Points or Labels layer
as an element of a SpatialData store (:func:`napari_ozx.save_to_spatialdata`).

It asks for the store (a ``.zarr`` directory, created when missing; the store of an
opened SpatialData layer is proposed), the element's name (the layer's, by default) and
the coordinate system (the store's systems, the default first; any new name can be
typed). Reading the store's systems and the save itself run off the GUI thread; an error
is reported reason first. Opened from Layers > Annotate, the scene dock's "Save a layer
into this store…" (when a SpatialData store is open) or Plugins (napari 0.9 takes no
plugin command in the layer list's context menu: ``napari/layers/context`` is not among
its ``MenuId.contributables``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from qtpy.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from napari_ozx._qt.base import OzxDockWidget

if TYPE_CHECKING:
    import napari

__all__ = ["SAVE_DOCK_NAME", "SaveToSpatialDataWidget", "open_save_dock"]

#: display_name of the dock (napari.yaml)
SAVE_DOCK_NAME = "Save to SpatialData store…"


def _open_store(viewer: Any) -> str | None:
    """The SpatialData store an opened layer of *viewer* comes from (the active one's
    first), or None."""
    from napari_ozx.layers.spatial.elements import SPATIAL_KEY

    layers = list(viewer.layers)
    active = viewer.layers.selection.active
    for layer in ([active] if active is not None else []) + layers:
        rec = layer.metadata.get(SPATIAL_KEY) if isinstance(layer.metadata, Mapping) else None
        if isinstance(rec, Mapping) and isinstance(rec.get("source"), str):
            source = str(rec["source"])
            if "://" not in source and os.path.isdir(source):
                return source
    return None


class SaveToSpatialDataWidget(OzxDockWidget):
    def __init__(
        self, napari_viewer: napari.viewer.Viewer | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(napari_viewer, parent)
        self.layer: Any = None
        self.layer_label = QLabel()
        self.layer_label.setWordWrap(True)
        self.store_edit = QLineEdit()
        self.store_edit.setPlaceholderText("a .zarr directory (created when missing)")
        self.browse = QPushButton("Browse…")
        self.name_edit = QLineEdit()
        self.system_combo = QComboBox()
        self.system_combo.setEditable(True)
        self.system_combo.setToolTip(
            "The coordinate system the element's transformation goes to: the layer's "
            "world coordinates are placed there as napari draws them"
        )
        self.overwrite = QCheckBox("Replace an element of that name")
        self.save_button = QPushButton("Save")
        self.status = QLabel()
        self.status.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.store_edit, 1)
        row.addWidget(self.browse)
        form = QFormLayout()
        form.addRow("Store", row)
        form.addRow("Name", self.name_edit)
        form.addRow("Coordinate system", self.system_combo)
        form.addRow("", self.overwrite)
        lay = QVBoxLayout(self)
        lay.addWidget(self.layer_label)
        lay.addLayout(form)
        lay.addWidget(self.save_button)
        lay.addWidget(self.status)
        lay.addStretch(1)
        self.browse.clicked.connect(self._browse)
        self.store_edit.editingFinished.connect(self.read_systems)
        self.save_button.clicked.connect(self.save)
        if napari_viewer is not None:
            self.connect_event(napari_viewer.layers.selection.events.active, self.refresh)
            store = _open_store(napari_viewer)
            if store:
                self.set_store(store)
        self.refresh()

    # ------------------------------------------------------------------ model
    def refresh(self, *_: object) -> None:
        """Follow the active layer: its name as the element's, Save for the kinds a
        store takes."""
        from napari_ozx.layers.spatial.save import default_name, layer_kind

        layer = self._viewer.layers.selection.active if self._viewer is not None else None
        self.layer = layer
        kind = layer_kind(layer) if layer is not None else None
        if layer is None:
            self.layer_label.setText("Select a Shapes, Points or Labels layer to save.")
        elif kind is None:
            self.layer_label.setText(
                f"{layer.name!r} is not a Shapes, Points or Labels layer: a SpatialData "
                f"store takes those."
            )
        else:
            self.layer_label.setText(f"Layer {layer.name!r} as a {kind} element")
            self.name_edit.setText(default_name(layer))
        self.save_button.setEnabled(kind is not None)

    def set_store(self, path: str) -> None:
        self.store_edit.setText(path)
        self.read_systems()

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "SpatialData store (.zarr)")
        if path:
            self.set_store(path)

    def read_systems(self) -> None:
        """List the store's coordinate systems (in the background)."""
        from napari_ozx.layers.spatial.save import store_systems

        store = self.store_edit.text().strip()
        if not store:
            return

        def got(systems: list[str]) -> None:
            typed = self.system_combo.currentText()
            self.system_combo.clear()
            self.system_combo.addItems(systems)
            if typed and typed in systems:
                self.system_combo.setCurrentText(typed)

        self.start_worker(store_systems, store, returned=got, errored=self._failed)

    # ------------------------------------------------------------------ actions
    def save(self) -> Any:
        """Save the active layer with what the form says (in the background)."""
        from napari_ozx.layers.spatial.save import save_to_spatialdata

        store = self.store_edit.text().strip()
        layer = self.layer
        if layer is None or not store:
            self.status.setText("Choose a layer and a store first.")
            return None
        name = self.name_edit.text().strip() or None
        system = self.system_combo.currentText().strip() or None

        def done(path: str) -> None:
            self.save_button.setEnabled(True)
            text = f"Saved {layer.name!r} as {path}"
            self.status.setText(f"{text} in {store}")
            self.notify_info(text, store)
            self.read_systems()

        self.save_button.setEnabled(False)
        self.status.setText(f"Saving {layer.name!r}…")
        return self.start_worker(
            save_to_spatialdata,
            layer,
            store,
            name,
            coordinate_system=system,
            overwrite=self.overwrite.isChecked(),
            returned=done,
            errored=self._failed,
        )

    def _failed(self, e: BaseException) -> None:
        from napari_ozx.errors import OzxError
        from napari_ozx.layers.spatial.save import layer_kind

        self.save_button.setEnabled(self.layer is not None and layer_kind(self.layer) is not None)
        store = self.store_edit.text().strip()
        reason = getattr(e, "reason", None) or str(e)
        self.status.setText(f"Not saved: {reason}")
        if isinstance(e, OzxError):
            self.notify_error(reason, store)
        else:
            self.notify_error(f"cannot save into the SpatialData store: {e}", store, e)


def open_save_dock(viewer: napari.viewer.Viewer) -> SaveToSpatialDataWidget:
    """Dock (or show) the save widget for the active layer (the menus' command)."""
    _, widget = viewer.window.add_plugin_dock_widget("napari-ozx", SAVE_DOCK_NAME)
    assert isinstance(widget, SaveToSpatialDataWidget)
    widget.refresh()
    return widget
