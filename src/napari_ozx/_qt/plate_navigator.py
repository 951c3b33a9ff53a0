"""Plate navigator: a dock widget whose plate map (:mod:`.plate_map`) opens wells at full
resolution.

The reader never hands it a plate: reading a plate asks napari to show this dock by its
manifest name (one per window), and :class:`PlateNavigator` finds plates from the
:class:`~napari_ozx.layers.provenance.LayerSource` of the layers in the viewer, now and
as napari inserts them (opened by hand from the Plugins menu, it does the same). Clicking
a well (on the map or its tile on the canvas), or Enter, loads its field (or all fields as
a grid) in a worker, metadata only; the layers are added on the GUI thread over the well's
tile, replacing the previous well's unless "Keep previous wells" is checked. A failed well
is marked red and notified. A plate with a condition table gets the condition panel
(:mod:`.plate_conditions`: colours, legend, filter, tooltips), and its wells layer carries
the conditions as ``features``
(:func:`napari_ozx.layers.tables.well_condition_points`) for napari's status bar.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Generator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
from qtpy.QtCore import QTimer, Signal
from qtpy.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QVBoxLayout

from napari_ozx._qt.base import OzxDockWidget
from napari_ozx._qt.plate_conditions import ConditionPanel, ConditionsRead, read_conditions
from napari_ozx._qt.plate_map import ABSENT, EMPTY, ERROR, PRESENT, PlateMap
from napari_ozx.errors import OzxError
from napari_ozx.layers.provenance import LayerSource
from napari_ozx.layers.reading import well_layer_data
from napari_ozx.layers.tables import CONDITIONS_KEY, set_well_conditions
from napari_ozx.ngff.read.plate import HcsPlate, Overview, WellInfo, open_hcs, plate_by_id
from napari_ozx.ngff.tables.conditions import format_value

if TYPE_CHECKING:
    import napari
    from napari.layers import Layer, Shapes
    from napari.utils.events import Event

    from napari_ozx.layers.reading import LayerData

logger = logging.getLogger(__name__)

# the plate map's names stay importable from here (the map lives in .plate_map)
__all__ = ["ABSENT", "EMPTY", "ERROR", "PRESENT", "PlateMap", "PlateNavigator"]


class _MouseEvent(Protocol):
    """What napari hands a canvas mouse callback (the parts used here)."""

    @property
    def position(self) -> Sequence[float]: ...

    @property
    def type(self) -> str: ...


@dataclass
class _Entry:
    plate: HcsPlate
    layers: list[Layer] = field(default_factory=list)  # its overview + well-label layers
    overview: Overview | None = None
    conditions: ConditionsRead | None = None  # its condition table, once read


@dataclass(frozen=True)
class _Request:
    plate_id: str
    well: str
    field: int
    grid: bool
    acquisition: int | None


class PlateNavigator(OzxDockWidget):
    """The plate map, field / acquisition choices and the well loading."""

    wellLoaded = Signal(str)  # well path, after its layers were added
    wellFailed = Signal(str, str)  # well path, message

    def __init__(self, napari_viewer: napari.viewer.Viewer) -> None:
        super().__init__(napari_viewer)
        self.viewer = napari_viewer
        self._entries: dict[str, _Entry] = {}
        self._current: str | None = None
        self._well_layers: list[Layer] = []
        self._loaded_cells: set[tuple[int, int]] = set()
        self._shown: _Request | None = None
        self._pending: _Request | None = None
        self._updating = False
        self._adding = False  # our own layers are being inserted
        self._aliases: dict[str, str] = {}  # plate id in layers -> id of the plate reopened
        self._outline: Shapes | None = None  # the layer framing the well on screen
        self._hovered: str | None = None
        self._marked: set[str] = set()  # wells marked failed from the overview
        self._generation = -1  # of the shown plate's wells, as last shown on the map

        lay = QVBoxLayout(self)
        self._build_plate_view(lay)
        self._build_options(lay)
        self.conditions = ConditionPanel()
        self.conditions.changed.connect(self._apply_conditions)
        self.conditions.tableChosen.connect(self._load_conditions)
        lay.addWidget(self.conditions)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.hover_label = QLabel("")
        self.hover_label.setToolTip("The well under the mouse on the canvas")
        lay.addWidget(self.hover_label)
        lay.addStretch(1)
        self.plate_combo.hide()
        self._set_enabled(False)
        self._follow_viewer()

    # -- building -----------------------------------------------------------------
    def _build_plate_view(self, lay: QVBoxLayout) -> None:
        """The plate choice (shown with more than one plate), its title, the map and the
        progress of a plate whose fields are still being read."""
        self.plate_combo = QComboBox()
        self.plate_combo.currentIndexChanged.connect(self._on_plate_changed)
        self.title = QLabel("Open an HCS plate (OME-Zarr) to browse its wells.")
        self.title.setWordWrap(True)
        self.map = PlateMap()
        self.map.wellActivated.connect(self._on_activated)
        # a large plate's fields are read as their tiles are first drawn: say how far
        self.progress = QLabel("")
        self.progress.setWordWrap(True)
        self.progress.hide()
        self._progress_timer = QTimer(self)
        self._progress_timer.setInterval(400)
        self._progress_timer.timeout.connect(self._refresh_progress)
        self.add_cleanup(self._progress_timer.stop)
        lay.addWidget(self.plate_combo)
        lay.addWidget(self.title)
        lay.addWidget(self.map)
        lay.addWidget(self.progress)

    def _build_options(self, lay: QVBoxLayout) -> None:
        """Field, all fields as a grid, acquisition, keep previous wells."""
        self.field_combo = QComboBox()
        self.field_combo.setToolTip("Which field of view of a well to open")
        self.field_combo.currentIndexChanged.connect(self._on_options_changed)
        self.grid_check = QCheckBox("All fields as grid")
        self.grid_check.setToolTip("Open every field of the well, side by side")
        self.grid_check.toggled.connect(self._on_options_changed)
        self.acq_combo = QComboBox()
        self.acq_combo.setToolTip("Only fields of this acquisition")
        self.acq_combo.currentIndexChanged.connect(self._on_acquisition_changed)
        self.keep_check = QCheckBox("Keep previous wells")
        self.keep_check.setToolTip("Add the next well's layers instead of replacing this well's")
        opts = QHBoxLayout()
        opts.addWidget(QLabel("Field"))
        opts.addWidget(self.field_combo, 1)
        opts.addWidget(self.grid_check)
        opts2 = QHBoxLayout()
        self._acq_label = QLabel("Acquisition")
        opts2.addWidget(self._acq_label)
        opts2.addWidget(self.acq_combo, 1)
        opts2.addWidget(self.keep_check)
        lay.addLayout(opts)
        lay.addLayout(opts2)

    def _follow_viewer(self) -> None:
        """Layers inserted and removed, canvas clicks and hovering; the plates of the
        layers already there."""
        self.connect_event(self.viewer.layers.events.inserted, self._on_inserted)
        self.connect_event(self.viewer.layers.events.removed, self._on_removed)
        drags, drag = self.viewer.mouse_drag_callbacks, self._on_canvas_drag
        drags.append(drag)
        self.add_cleanup(lambda: drags.remove(drag) if drag in drags else None)
        moves, move = self.viewer.mouse_move_callbacks, self._on_canvas_move
        moves.append(move)
        self.add_cleanup(lambda: moves.remove(move) if move in moves else None)
        for layer in list(self.viewer.layers):
            self._bind_layer(layer)

    # -- plates -------------------------------------------------------------------
    @property
    def plate(self) -> HcsPlate | None:
        e = self._entries.get(self._current or "")
        return e.plate if e else None

    @property
    def busy(self) -> bool:
        """A worker thread is still running (loading or finishing)."""
        return bool(self.workers)

    @property
    def loading(self) -> bool:
        """A well was asked for and its layers are not there yet."""
        return self._pending is not None

    @property
    def well_layers(self) -> list[Layer]:
        return list(self._well_layers)

    def add_plate(self, plate: HcsPlate) -> None:
        """Show *plate* (found from the layers of the viewer)."""
        if plate.id not in self._entries:
            self._entries[plate.id] = _Entry(plate)
            self.plate_combo.addItem(f"{plate.name} ({plate.oz.source})", plate.id)
        self.plate_combo.setVisible(self.plate_combo.count() > 1)
        self.plate_combo.setCurrentIndex(self.plate_combo.findData(plate.id))
        self._show_plate(plate.id)

    def _bind_layer(self, layer: Layer) -> None:
        """A layer in the viewer that comes from a plate: remember its plate.

        Overview layers anchor their plate (canvas clicks; the plate is forgotten when
        they are all deleted). The field layers of a well opened on its own become this
        navigator's well layers, so choosing a field replaces them.
        """
        src = LayerSource.of(layer)
        if self._adding or src is None or not src.is_plate:
            return
        entry = self._entry_for(src)
        if entry is None:
            return
        if src.kind == "well":
            if entry.plate.kind == "well" and layer not in self._well_layers:
                self._adopt_well_layer(entry.plate, layer)
            return
        if layer not in entry.layers:
            entry.layers.append(layer)
        if entry.overview is None and src.overview_level is not None:
            entry.overview = entry.plate.overview(src.field_index or 0, src.acquisition)
            # napari fits the view to the first layer it adds and selects the last one
            # (the row / column names): once the plate's layers are all in, fit the
            # whole plate and select its first image layer
            QTimer.singleShot(0, lambda pid=entry.plate.id: self._first_view(pid))
            if entry.plate.id == self._current:
                self._watch_overview()

    def _first_view(self, pid: str) -> None:
        entry = self._entries.get(pid)
        if entry is None:
            return
        layers = [lyr for lyr in entry.layers if lyr in self.viewer.layers]
        if not layers:
            return
        with contextlib.suppress(Exception):  # a viewer being closed
            self.viewer.reset_view()
            if any(CONDITIONS_KEY in lyr.metadata for lyr in layers):
                return  # the wells layer stays selected: hovering shows the conditions
            images = [lyr for lyr in layers if type(lyr).__name__ == "Image"]
            active = self.viewer.layers.selection.active
            if images and (active is None or active in layers):
                self.viewer.layers.selection.active = images[0]

    def _entry_for(self, src: LayerSource) -> _Entry | None:
        """The entry of the plate behind *src*: the very object the reader made while it
        lives (``plate_by_id``), else the plate reopened from its source (once)."""
        pid = src.plate_id or ""
        pid = self._aliases.get(pid, pid)
        entry = self._entries.get(pid)
        if entry is not None:
            return entry
        plate = plate_by_id(pid) if pid else None
        if plate is None:
            try:  # e.g. a layer from a session where the object is gone
                plate = open_hcs(src.source, src.plate_path or "")
            except (OzxError, OSError) as e:
                logger.warning("plate navigator: cannot reopen %s: %s", src.source, e)
                return None
            if pid:
                self._aliases[pid] = plate.id
        self.add_plate(plate)
        return self._entries[plate.id]

    def _adopt_well_layer(self, plate: HcsPlate, layer: Layer) -> None:
        """The reader showed a well's fields (all of them, as a grid): take them over."""
        w = plate.wells[0]
        self._well_layers.append(layer)
        if self._shown is None:
            self._shown = _Request(plate.id, w.path, 0, True, None)
            self._updating = True
            try:
                self.grid_check.setChecked(True)
            finally:
                self._updating = False
        self._loaded_cells.add((w.row, w.column))
        if self._current == plate.id:
            self.map.set_loaded(self._loaded_cells)

    def _on_inserted(self, event: Event) -> None:
        self._bind_layer(event.value)

    def _on_removed(self, event: Event) -> None:
        layer = event.value
        if layer is self._outline:
            self._outline = None
        if layer in self._well_layers:
            self._well_layers.remove(layer)
            if not self._well_layers:
                self._loaded_cells.clear()
                self.map.set_loaded(set())
                self._shown = None
        for pid, entry in list(self._entries.items()):
            if layer in entry.layers:
                entry.layers.remove(layer)
                if not entry.layers:  # the plate's overview is gone: forget the plate
                    self._forget(pid)

    def _forget(self, pid: str) -> None:
        self._entries.pop(pid, None)
        self._aliases = {k: v for k, v in self._aliases.items() if v != pid}
        i = self.plate_combo.findData(pid)
        if i >= 0:
            self.plate_combo.removeItem(i)
        self.plate_combo.setVisible(self.plate_combo.count() > 1)
        if self._current == pid:
            self._current = None
            nxt = self.plate_combo.currentData()
            if nxt:
                self._show_plate(nxt)
            else:
                self.map.set_plate((), (), {}, {})
                self.conditions.clear()
                self.title.setText("Open an HCS plate (OME-Zarr) to browse its wells.")
                self._set_enabled(False)

    def _on_plate_changed(self, index: int) -> None:
        pid = self.plate_combo.itemData(index)
        if pid and pid != self._current:
            self._show_plate(pid)

    def _show_plate(self, pid: str) -> None:
        self._current = pid
        plate = self._entries[pid].plate
        self._updating = True
        try:
            self.acq_combo.clear()
            self.acq_combo.addItem("All acquisitions", None)
            names = {a.id: a.name for a in plate.acquisitions}
            for aid in plate.acquisition_ids():
                self.acq_combo.addItem(names.get(aid) or f"Acquisition {aid}", aid)
            has_acq = self.acq_combo.count() > 1
            self.acq_combo.setVisible(has_acq)
            self._acq_label.setVisible(has_acq)
            self._fill_fields()
        finally:
            self._updating = False
        n = len(plate.wells)
        if plate.kind == "plate":
            self.title.setText(
                f"<b>{plate.name}</b>: {n} wells in {len(plate.rows)} x {len(plate.columns)}, "
                f"up to {plate.max_fields()} fields"
            )
        else:
            self.title.setText(f"<b>Well {plate.name}</b>: {len(plate.wells[0].fields)} fields")
        tips = {(w.row, w.column): self._tip(w) for w in plate.wells}
        self.map.set_plate(plate.rows, plate.columns, self._states(), tips)
        self.map.set_loaded(
            self._loaded_cells if self._shown and self._shown.plate_id == pid else set()
        )
        self._set_enabled(True)
        self._watch_overview()
        self._show_conditions(self._entries[pid])

    # -- conditions -----------------------------------------------------------------
    def _show_conditions(self, entry: _Entry) -> None:
        if entry.conditions is not None:
            self.conditions.set_result(entry.plate, entry.conditions)
        else:
            self.conditions.clear()
            self._load_conditions()

    def _load_conditions(self, table: str | None = None) -> None:
        """Read the shown plate's condition table (*table*: that one) in a worker."""
        plate = self.plate
        if plate is None or plate.kind != "plate":
            return
        self.start_worker(
            read_conditions,
            plate,
            table,
            returned=functools.partial(self._on_conditions, plate.id),
        )

    def _on_conditions(self, pid: str, result: ConditionsRead) -> None:
        entry = self._entries.get(pid)
        if entry is None:
            return
        entry.conditions = result
        if result.conditions is not None and result.conditions.table is not None:
            name = result.conditions.table.name
            for layer in entry.layers:  # the wells layer shows the table chosen
                if layer.metadata.get(CONDITIONS_KEY) not in (None, name):
                    set_well_conditions(layer, result.conditions)
        if pid == self._current:
            self.conditions.set_result(entry.plate, result)

    def _apply_conditions(self) -> None:
        self.map.set_conditions(*self.conditions.overlay())

    # -- a partly read plate -----------------------------------------------------------
    def _watch_overview(self) -> None:
        """Follow the shown plate's overview until every well's field is read."""
        self._marked.clear()
        self._generation = -1
        self._refresh_progress()
        if not self.progress.isHidden():
            self._progress_timer.start()

    def _refresh_progress(self) -> None:
        """Wells whose field failed (at open or when first drawn) turn red on the map with
        the reason; while fields are still being read, say how many."""
        entry = self._entries.get(self._current or "")
        ov = entry.overview if entry else None
        if entry is None or ov is None:
            self.progress.hide()
            self._progress_timer.stop()
            return
        if entry.plate.generation != self._generation:  # wells read since: states, tips
            self._generation = entry.plate.generation
            self.map.update_wells(
                self._states(), {(w.row, w.column): self._tip(w) for w in entry.plate.wells}
            )
            if self.field_combo.count() != entry.plate.max_fields(self.acquisition):
                self._updating = True
                try:
                    self._fill_fields()
                finally:
                    self._updating = False
        for path, why in ov.failed().items():
            if path not in self._marked:
                self._marked.add(path)
                w = entry.plate.well(path)
                self.map.mark_failed((w.row, w.column), why)
        done, total = ov.progress()
        if done < total:
            self.progress.setText(
                f"Still loading: the fields of {done} of {total} wells are read; the others "
                "are read as they are first shown."
            )
            self.progress.show()
        else:
            self.progress.hide()
            self._progress_timer.stop()

    def _fill_fields(self) -> None:
        plate = self.plate
        if plate is None:
            return
        keep = self.field_combo.currentIndex()
        self.field_combo.clear()
        n = plate.max_fields(self.acquisition)
        for i in range(n):
            self.field_combo.addItem(f"Field {i}", i)
        self.field_combo.setCurrentIndex(min(max(keep, 0), n - 1) if n else -1)

    def _states(self) -> dict[tuple[int, int], int]:
        plate = self.plate
        acq = self.acquisition
        out = {}
        for w in plate.wells if plate else ():
            if w.error:
                out[(w.row, w.column)] = ERROR
            elif not w.read:
                out[(w.row, w.column)] = PRESENT  # listed by the plate; read when shown
            else:
                out[(w.row, w.column)] = PRESENT if w.fields_in(acq) else EMPTY
        return out

    @staticmethod
    def _tip(w: WellInfo) -> str:
        head = f"{w.name}  ({w.path})" if w.path else w.name
        if w.error:
            return f"{head}\n{w.error}"
        if not w.read:
            return f"{head}\nnot read yet: read when its tile is shown or it is opened"
        lines = [head, f"{len(w.fields)} field{'s' if len(w.fields) != 1 else ''}:"]
        for f in w.fields[:12]:
            acq = f" (acquisition {f.acquisition})" if f.acquisition is not None else ""
            lines.append(f"  {f.path}{acq}")
        if len(w.fields) > 12:
            lines.append(f"  ... {len(w.fields) - 12} more")
        return "\n".join(lines)

    def _set_enabled(self, on: bool) -> None:
        for w in (self.map, self.field_combo, self.grid_check, self.acq_combo, self.keep_check):
            w.setEnabled(on)

    # -- options -------------------------------------------------------------------
    @property
    def acquisition(self) -> int | None:
        return self.acq_combo.currentData() if self.acq_combo.count() else None

    @property
    def field_index(self) -> int:
        return max(self.field_combo.currentIndex(), 0)

    def _on_acquisition_changed(self, _index: int) -> None:
        if self._updating:
            return
        self._updating = True
        try:
            self._fill_fields()
        finally:
            self._updating = False
        self.map.set_state(self._states())
        self._reload()

    def _on_options_changed(self, *_: object) -> None:
        if not self._updating:
            self._reload()

    def _reload(self) -> None:
        """Options changed: show the well on screen again with them."""
        if self._shown is None or self.plate is None or self._shown.plate_id != self._current:
            return
        try:
            w = self.plate.well(self._shown.well)
        except KeyError:
            return
        self.open_well(w)

    # -- loading -----------------------------------------------------------------
    def _on_activated(self, row: int, col: int) -> None:
        plate = self.plate
        if plate is None:
            return
        w = plate.by_position.get((row, col))
        if w is None:
            self.status.setText(f"{plate.rows[row]}{plate.columns[col]}: no well here")
            return
        self.open_well(w)

    def open_well(self, well: WellInfo | str) -> None:
        """Load a well's field(s) in a worker; the layers appear when it is done."""
        plate = self.plate
        if plate is None:
            return
        w = plate.well(well.path if isinstance(well, WellInfo) else well)  # as read so far
        self.map.set_current(w.row, w.column)
        self.focus_well(w)
        if w.error:
            self._fail(w, w.error)
            return
        acq = self.acquisition
        if w.read and not w.fields_in(acq):  # (a well not read yet is, in the worker)
            self.status.setText(f"{w.name}: no field in this acquisition")
            return
        req = _Request(plate.id, w.path, self.field_index, self.grid_check.isChecked(), acq)
        if req == self._shown and self._well_layers and not self.keep_check.isChecked():
            return  # already on screen
        entry = self._entries[plate.id]
        self._pending = req
        self.status.setText(f"Loading {w.name} ...")
        self.start_worker(
            _load_well,
            plate,
            w,
            req,
            entry.overview,
            returned=functools.partial(self._on_loaded, req, w),
            errored=functools.partial(self._on_error, req, w),
        )

    def _on_loaded(
        self, req: _Request, w: WellInfo, res: tuple[list[LayerData], list[str]]
    ) -> None:
        if req != self._pending:
            return  # a later click superseded this one
        self._pending = None
        layer_data, errors = res
        if not layer_data:
            self._fail(w, "; ".join(errors) or "no field could be read")
            return
        keep = self.keep_check.isChecked()
        layers = None if keep else self._reuse_layers(layer_data)
        if layers is None:
            try:
                layers = self._add_layers(layer_data, replace=not keep)
            except Exception as e:
                self._fail(w, f"{type(e).__name__}: {e}")
                return
            self._well_layers.extend(layers)
        if not keep:
            self._loaded_cells.clear()
        self._raise_outline()
        self._shown = req
        self._loaded_cells.add((w.row, w.column))
        self.map.set_loaded(self._loaded_cells)
        what = "all fields" if req.grid else f"field {req.field}"
        self.status.setText(f"{w.name}: {what}, {len(layers)} layers")
        for msg in errors:
            self.notify_warning(msg, self._source())
        self.wellLoaded.emit(w.path)

    def _add_layers(self, layer_data: list[LayerData], replace: bool) -> list[Layer]:
        added: list[Layer] = []
        # removing layers makes napari rebuild its scene graph with a full gc.collect per
        # layer: batch the swap so that happens once (adding alone needs no batch)
        with _batched(self.viewer) if replace and self._well_layers else contextlib.nullcontext():
            if replace:
                self._drop_well_layers()
            self._adding = True
            try:
                for data, kwargs, kind in layer_data:
                    out = getattr(self.viewer, f"add_{kind}")(data, **kwargs)
                    added.extend(out if isinstance(out, list) else [out])
            except Exception:
                for layer in added:
                    if layer in self.viewer.layers:
                        self.viewer.layers.remove(layer)
                raise
            finally:
                self._adding = False
        return added

    def _reuse_layers(self, layer_data: list[LayerData]) -> list[Layer] | None:
        """Show the next well in the layers of the previous one when they line up (same
        kinds, channels, dimensions): no layer is removed or created, so napari rebuilds
        no visual, and contrast limits set by the user stay. None when they do not."""
        current = [lyr for lyr in self._well_layers if lyr in self.viewer.layers]
        if not current or len(current) != len(self._well_layers):
            return None
        flat = _per_layer(layer_data)
        if len(flat) != len(current):
            return None
        for entry, layer in zip(flat, current, strict=True):
            if not _reusable(layer, entry):
                return None
        for (data, kw, kind), layer in zip(flat, current, strict=True):
            layer.metadata = kw.get("metadata", {})
            layer.name = kw["name"]
            layer.scale = kw["scale"]
            layer.translate = kw["translate"]
            layer.data = data
            if kind == "shapes":  # a field's ROI table: its rows
                layer.features = kw.get("features", {})
        return current

    def _on_error(self, req: _Request, w: WellInfo, err: BaseException) -> None:
        if req != self._pending:
            return
        self._pending = None
        self._fail(
            w, str(err) if isinstance(err, OzxError | OSError) else f"{type(err).__name__}: {err}"
        )

    def _fail(self, w: WellInfo, msg: str) -> None:
        self.map.mark_failed((w.row, w.column))
        text = f"Cannot open well {w.name}: {msg}"
        self.status.setText(text)
        self.notify_error(text, self._source())
        self.wellFailed.emit(w.path, msg)

    def _source(self) -> str | None:
        plate = self.plate
        return str(plate.oz.source) if plate is not None else None

    def _drop_well_layers(self) -> None:
        layers, self._well_layers = self._well_layers, []
        for layer in layers:
            if layer in self.viewer.layers:
                self.viewer.layers.remove(layer)
        self._loaded_cells.clear()
        self._shown = None

    # -- camera, outline, hover ----------------------------------------------------------
    def focus_well(self, w: WellInfo) -> None:
        """Frame the well's tile: outline it and move + zoom the camera onto it.

        The outline is a non-editable Shapes layer that is never left selected (the
        layer the user had selected stays so)."""
        entry = self._entries.get(self._current or "")
        ov = entry.overview if entry else None
        if ov is None:
            return
        y0, x0, y1, x1 = ov.tile_box(w.row, w.column)
        rect = np.array([[y0, x0], [y0, x1], [y1, x1], [y1, x0]], dtype=float)
        width = max((y1 - y0), (x1 - x0)) * 0.012
        try:
            layer = self._outline
            if layer is None or layer not in self.viewer.layers:
                active = self.viewer.layers.selection.active
                selected = set(self.viewer.layers.selection)
                self._adding = True
                try:
                    layer = self.viewer.add_shapes(
                        [rect],
                        shape_type="rectangle",
                        edge_color="#ffd400",
                        face_color="transparent",
                        edge_width=width,
                        name=f"{ov.plate.name} selected well",
                        units=_yx_units(ov),
                    )
                finally:
                    self._adding = False
                layer.editable = False
                self._outline = layer
                self.viewer.layers.selection.clear()
                self.viewer.layers.selection.update(selected)
                self.viewer.layers.selection.active = active
            else:
                layer.data = [rect]
                layer.edge_width = width
                layer.edge_color = "#ffd400"
                self._raise_outline()
            if self.viewer.dims.ndisplay == 2:
                self.viewer.fit_to_view(layers=[layer], margin=0.08)
        except Exception:  # the camera is a convenience: never fail a load for it
            logger.warning("plate navigator: could not frame well %s", w.name, exc_info=True)

    def _raise_outline(self) -> None:
        layer = self._outline
        if layer is None or layer not in self.viewer.layers:
            return
        with contextlib.suppress(Exception):
            i = self.viewer.layers.index(layer)
            if i != len(self.viewer.layers) - 1:
                active = self.viewer.layers.selection.active
                self.viewer.layers.move(i, len(self.viewer.layers))
                self.viewer.layers.selection.active = active

    def well_label(self, position: tuple[float, ...]) -> str | None:
        """'B3 (field 0)' for the well under a world position, None off the plate."""
        if len(position) < 2:
            return None
        entry = self._entries.get(self._current or "")
        ov = entry.overview if entry else None
        if ov is None:
            return None
        w = ov.well_at(float(position[-2]), float(position[-1]))
        if w is None:
            return None
        label = f"{w.name} ({ov.field_label(w.row, w.column)})"
        read = entry.conditions if entry is not None else None
        conds = read.conditions if read is not None else None
        if conds is not None and w.path.strip("/") in conds:
            cond = conds[w.path]
            label += "".join(f" {c}={format_value(cond.get(c))}" for c in conds.columns)
        return label

    def _on_canvas_move(self, viewer: napari.viewer.Viewer, event: _MouseEvent) -> None:
        """Hovering the plate names the well (and field) in the tooltip and the status."""
        label = self.well_label(tuple(event.position))
        if label == self._hovered:
            return
        self._hovered = label
        with contextlib.suppress(Exception):
            viewer.tooltip.text = label or ""
            if label:
                viewer.status = label
        self.hover_label.setText(label or "")

    # -- canvas clicks -------------------------------------------------------------
    def _on_canvas_drag(
        self, viewer: napari.viewer.Viewer, event: _MouseEvent
    ) -> Generator[None, None, None]:
        """A click (press + release without dragging) on a well's overview tile opens it.

        Registered on the viewer, not on the overview layer, so it works whatever layer is
        selected; it stays out of the way of tools: only in pan/zoom mode, no modifiers.
        """
        if getattr(event, "button", 1) != 1 or getattr(event, "modifiers", ()):
            return
        active = viewer.layers.selection.active
        if active is not None and str(getattr(active, "mode", "pan_zoom")) != "pan_zoom":
            return
        start = np.asarray(event.position, dtype=float)
        yield
        dragged = False
        while event.type == "mouse_move":
            if not np.allclose(np.asarray(event.position, dtype=float), start):
                dragged = True
            yield
        if dragged:
            return
        self.open_at(tuple(event.position))

    def open_at(self, position: tuple[float, ...]) -> bool:
        """Open the well under a world position (last two coordinates y, x)."""
        if len(position) < 2:
            return False
        y, x = float(position[-2]), float(position[-1])
        for pid, entry in self._entries.items():
            ov = entry.overview
            if ov is None or not any(getattr(lyr, "visible", True) for lyr in entry.layers):
                continue
            w = ov.well_at(y, x)
            if w is not None:
                if pid != self._current:
                    self.plate_combo.setCurrentIndex(self.plate_combo.findData(pid))
                self.open_well(w)
                return True
        return False

    # -- lifetime --------------------------------------------------------------------
    def shutdown(self) -> None:
        """Disconnect from the viewer, stop waiting for a well; a running load is waited
        for (bounded), loads of other widgets are not (idempotent)."""
        self._pending = None
        super().shutdown()


def _yx_units(ov: Overview) -> tuple[str, str]:
    """The overview's y / x units as napari takes them (pixel when not a length)."""
    from napari_ozx.ngff.model.metadata import SPACE_UNITS

    y, x = ov.yx
    return tuple(  # type: ignore[return-value]
        u if u in SPACE_UNITS else "pixel" for u in (ov.axes[y].unit, ov.axes[x].unit)
    )


def _load_well(
    plate: HcsPlate, w: WellInfo, req: _Request, overview: Overview | None
) -> tuple[list[LayerData], list[str]]:
    """Worker thread: metadata of the well's fields and their layer data (no pixels)."""
    fields = None if req.grid else [req.field]
    return well_layer_data(
        plate, w, fields=fields, grid=req.grid, acquisition=req.acquisition, overview=overview
    )


def _reusable(layer: Layer, entry: LayerData) -> bool:
    """Whether *layer* can show the layer data (data, kw, kind) of the next well."""
    data, kw, kind = entry
    if layer.__class__.__name__.lower() != kind:  # (napari may hand us proxies)
        return False
    if kind == "shapes":  # a ROI table of as many rows (their names and colours stay)
        return len(layer.data) == len(data) and layer.ndim == kw.get("ndim", 2)
    levels = data if kw.get("multiscale") else [data]
    return not (
        bool(kw.get("multiscale")) != bool(layer.multiscale)
        or levels[0].ndim != layer.ndim
        or (kw.get("multiscale") and len(levels) != len(layer.data))
    )


def _per_layer(layer_data: list[LayerData]) -> list[LayerData]:
    """Layer data with napari's channel split applied: one entry per napari layer."""
    out = []
    for data, kw, kind in layer_data:
        if kind == "image" and kw.get("channel_axis") is not None:
            from napari.layers.utils.stack_utils import split_channels

            kw = dict(kw)
            axis = kw.pop("channel_axis")
            out.extend(split_channels(data, axis, **kw))
        else:
            out.append((data, kw, kind))
    return out


def _batched(viewer: napari.viewer.Viewer) -> AbstractContextManager[object]:
    """``viewer.layers.batched_update()`` where napari has it: napari's canvas then
    rebuilds its scene graph (with a full ``gc.collect``) once instead of per layer."""
    batched = getattr(viewer.layers, "batched_update", None)
    return batched() if callable(batched) else contextlib.nullcontext()
