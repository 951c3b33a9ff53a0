"""The scene dock: pick the coordinate system an OME-Zarr 0.6 scene is shown in.

For the scene of the active layer (or the first scene among the layers) it lists the
scene's coordinate systems (its own first, then each image's as ``path:name``) and, on a
choice, re-places that scene's layers (:func:`napari_ozx.layers.scene.place_scene`):
metadata is read again off the GUI thread, the new transforms are set on it, no pixel is
re-read. Images that cannot reach the chosen system are reported and shown in their own.
A SpatialData store is listed too (its elements' coordinate systems); its elements with
no transformation to the chosen system are hidden, named in one message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qtpy.QtWidgets import QComboBox, QFormLayout, QLabel, QPushButton, QVBoxLayout, QWidget
from superqt.utils import WorkerBase

from napari_ozx._qt.base import OzxDockWidget
from napari_ozx.errors import OzxError
from napari_ozx.layers.scene import (
    Placed,
    apply_placements,
    layer_scene,
    scene_placements,
    scene_sources,
    shown_system,
    systems_of,
)

if TYPE_CHECKING:
    import napari

__all__ = ["SceneDock"]


def _short(source: str) -> str:
    """The name of a scene's file or folder (the full path is the label's tooltip)."""
    return source.rstrip("/").rsplit("/", 1)[-1]


class SceneDock(OzxDockWidget):
    def __init__(
        self, napari_viewer: napari.viewer.Viewer | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(napari_viewer, parent)
        self.source: str | None = None
        self.status = QLabel("No OME-Zarr 0.6 scene or SpatialData store is open.")
        self.status.setWordWrap(True)
        self.status.setMinimumHeight(self.status.fontMetrics().lineSpacing() * 2 + 6)
        self.system_combo = QComboBox()
        self.system_combo.setToolTip(
            "The coordinate system the scene's images are placed in (napari's world)"
        )
        self.system_combo.setEnabled(False)
        # a SpatialData store takes the layers drawn over it (the save dock)
        self.save_button = QPushButton("Save a layer into this store…")
        self.save_button.setToolTip(
            "Save the selected Shapes, Points or Labels layer as an element of this "
            "SpatialData store"
        )
        self.save_button.setVisible(False)
        form = QFormLayout()
        form.addRow("Coordinate system", self.system_combo)
        lay = QVBoxLayout(self)
        lay.addWidget(self.status)
        lay.addLayout(form)
        lay.addWidget(self.save_button)
        lay.addStretch(1)
        self.system_combo.activated.connect(self._chosen)
        self.save_button.clicked.connect(self.open_save)
        if napari_viewer is not None:
            layers = napari_viewer.layers
            self.connect_event(layers.events.inserted, self.refresh)
            self.connect_event(layers.events.removed, self.refresh)
            self.connect_event(layers.selection.events.active, self.refresh)
        self.refresh()

    # ------------------------------------------------------------------ model
    def _current_source(self) -> str | None:
        if self._viewer is None:
            return None
        mine = layer_scene(self._viewer.layers.selection.active)
        if mine is not None:
            return mine[0]
        found = scene_sources(self._viewer.layers)
        return found[0] if found else None

    def _shown_system(self, source: str) -> str | None:
        return shown_system(self._viewer.layers, source)

    def refresh(self, *_: object) -> None:
        source = self._current_source()
        if source == self.source and source is not None:
            self._select(self._shown_system(source))
            return
        self.source = source
        self.save_button.setVisible(self._is_store(source))
        self.system_combo.clear()
        self.system_combo.setEnabled(False)
        if source is None:
            self.status.setText("No OME-Zarr 0.6 scene or SpatialData store is open.")
            return
        self.status.setText(f"Scene {_short(source)} (reading its coordinate systems…)")
        self.start_worker(systems_of, source, returned=self._got_systems, errored=self._failed)

    def _got_systems(self, systems: list[str]) -> None:
        if self.source is None:
            return
        self.system_combo.clear()
        self.system_combo.addItems(systems)
        self.system_combo.setEnabled(bool(systems))
        self.status.setText(f"Scene {_short(self.source)}")
        self.status.setToolTip(self.source)
        self._select(self._shown_system(self.source))

    def _select(self, system: str | None) -> None:
        i = self.system_combo.findText(system) if system else -1
        if i >= 0:
            self.system_combo.setCurrentIndex(i)

    def _failed(self, e: BaseException) -> None:
        self.status.setText(f"Scene {_short(self.source or '')}: {e}")
        if isinstance(e, OzxError):
            self.notify_error(str(e), self.source)
        else:
            self.notify_error(f"cannot read the scene: {e}", self.source, e)

    def _is_store(self, source: str | None) -> bool:
        """Whether *source* is a SpatialData store opened in the viewer."""
        from collections.abc import Mapping

        from napari_ozx.layers.spatial.elements import SPATIAL_KEY

        if source is None or self._viewer is None:
            return False
        for layer in self._viewer.layers:
            rec = layer.metadata.get(SPATIAL_KEY) if isinstance(layer.metadata, Mapping) else None
            if isinstance(rec, Mapping) and rec.get("source") == source:
                return True
        return False

    # ------------------------------------------------------------------ actions
    def open_save(self) -> None:
        """The save dock, its store this one's."""
        from napari_ozx._qt.spatial_save import open_save_dock

        if self._viewer is None or self.source is None:
            return
        open_save_dock(self._viewer).set_store(self.source)

    def _chosen(self, *_: object) -> None:
        system = self.system_combo.currentText()
        if not system or self.source is None or self._viewer is None:
            return
        self.place(system)

    def place(self, system: str) -> WorkerBase | None:
        """Re-place the current scene's layers in *system* (in the background)."""
        source = self.source
        assert source is not None
        problems: list[str] = []

        def report(what: str, err: OzxError) -> None:
            problems.append(f"{what}: {err}")

        def done(placements: list[Placed]) -> None:
            apply_placements(placements)
            self._select(system)
            self.status.setText(f"Scene {_short(source)}: shown in {system!r}")
            for p in problems:
                self.notify_warning(p, source)

        return self.start_worker(
            scene_placements,
            list(self._viewer.layers),
            source,
            system,
            report,
            returned=done,
            errored=self._failed,
        )
