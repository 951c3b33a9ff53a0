"""The categories dock: a legend, hide / show / "Only this", a search box, colour by.

:class:`CategoriesDock` lists the feature columns of the active Points, Shapes, polygon
Surface or Labels layer; choosing one colours the layer by it
(:func:`napari_ozx.layers.categories.colouring.color_by`). A categorical column shows its
legend (swatch and count per category; a row's box hides or shows it, **Only this**,
**Show all**, a search box for one gene among 300); a numeric column a colormap, its range
and a colour bar (:func:`colour_bar`). It opens from **Plugins > napari-ozx OME-Zarr >
Categories**, and by itself when a SpatialData store with something to colour by is
opened in a window (:mod:`napari_ozx._viewer_hooks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from qtpy.QtCore import Qt
from qtpy.QtGui import QColor, QIcon, QImage, QPixmap
from qtpy.QtWidgets import (
    QApplication,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from napari_ozx._compat import napari_unproxied
from napari_ozx._qt.base import OzxDockWidget
from napari_ozx.errors import OzxError
from napari_ozx.layers.categories.colouring import (
    Legend,
    color_by,
    colour_columns,
    current_legend,
    hidden_categories,
    layer_kind,
    show_categories,
)
from napari_ozx.layers.categories.hover import install_hover

if TYPE_CHECKING:
    import napari

__all__ = ["CategoriesDock"]

#: the colormaps offered for a numeric column (any napari colormap works from Python)
COLORMAPS = ("viridis", "magma", "inferno", "plasma", "turbo", "twilight", "gray")
_KINDS = {"points": "Points", "shapes": "Shapes", "surface": "polygons", "labels": "Labels"}
_CHOOSE = "Choose a column…"
_CATEGORY = Qt.ItemDataRole.UserRole


def _swatch(rgba: Any, size: int = 14) -> QIcon:
    pix = QPixmap(size, size)
    r, g, b = (round(float(c) * 255) for c in list(rgba)[:3])
    pix.fill(QColor(r, g, b))
    return QIcon(pix)


def colour_bar(colormap: str, width: int = 200, height: int = 14) -> QPixmap:
    """A horizontal bar of *colormap* from its low end (left) to its high end."""
    from napari.utils.colormaps import ensure_colormap

    rgba = np.asarray(ensure_colormap(colormap).map(np.linspace(0, 1, width)), dtype=np.float64)
    row = (np.clip(rgba, 0, 1) * 255).astype(np.uint8)
    img = np.ascontiguousarray(np.repeat(row[None], height, axis=0))
    qimg = QImage(img.tobytes(), width, height, width * 4, QImage.Format.Format_RGBA8888)
    return QPixmap.fromImage(qimg.copy())


class CategoriesDock(OzxDockWidget):
    def __init__(
        self, napari_viewer: napari.viewer.Viewer | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(napari_viewer, parent)
        self.layer: Any = None
        self.legend: Legend | None = None
        self._filling = False
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.column_combo = QComboBox()
        self.column_combo.setToolTip("The feature column that colours the layer")
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search categories…")
        self.search.setClearButtonEnabled(True)
        self.list = QListWidget()
        self.list.setToolTip("Click a box to hide or show a category")
        self.only_button = QPushButton("Only this")
        self.only_button.setToolTip("Show the selected category alone")
        self.all_button = QPushButton("Show all")
        self.summary = QLabel()
        # a numeric column: colormap, range, colour bar
        self.continuous = QWidget()
        self.colormap_combo = QComboBox()
        self.colormap_combo.addItems(COLORMAPS)
        self.low = QDoubleSpinBox()
        self.high = QDoubleSpinBox()
        for box in (self.low, self.high):
            box.setDecimals(3)
            box.setRange(-1e300, 1e300)
            box.setKeyboardTracking(False)
        self.bar = QLabel()
        self.bar.setScaledContents(True)
        self.bar.setFixedHeight(14)
        self.bar_low, self.bar_high = QLabel(), QLabel()
        cform = QFormLayout(self.continuous)
        cform.setContentsMargins(0, 0, 0, 0)
        cform.addRow("Colormap", self.colormap_combo)
        cform.addRow("Minimum", self.low)
        cform.addRow("Maximum", self.high)
        cform.addRow(self.bar)
        ends = QHBoxLayout()
        ends.addWidget(self.bar_low)
        ends.addStretch(1)
        ends.addWidget(self.bar_high)
        cform.addRow(ends)

        form = QFormLayout()
        form.addRow("Colour by", self.column_combo)
        buttons = QHBoxLayout()
        buttons.addWidget(self.only_button)
        buttons.addWidget(self.all_button)
        lay = QVBoxLayout(self)
        lay.addWidget(self.status)
        lay.addLayout(form)
        lay.addWidget(self.search)
        lay.addWidget(self.list, 1)
        lay.addLayout(buttons)
        lay.addWidget(self.continuous)
        lay.addWidget(self.summary)

        self.column_combo.activated.connect(self._column_chosen)
        self.search.textChanged.connect(self._filter_rows)
        self.list.itemChanged.connect(self._item_changed)
        self.only_button.clicked.connect(self.only_this)
        self.all_button.clicked.connect(self.show_all)
        self.colormap_combo.activated.connect(self._range_changed)
        self.low.valueChanged.connect(self._range_changed)
        self.high.valueChanged.connect(self._range_changed)
        if napari_viewer is not None:
            layers = napari_viewer.layers
            self.connect_event(layers.selection.events.active, self.refresh)
            self.connect_event(layers.events.removed, self.refresh)
            for ly in layers:
                install_hover(ly)
            self.connect_event(layers.events.inserted, self._inserted)
        self.refresh()

    # ------------------------------------------------------------------ model
    def _inserted(self, event: Any = None) -> None:
        install_hover(getattr(event, "value", None))

    def _active(self) -> Any:
        if self._viewer is None:
            return None
        layer = napari_unproxied(self._viewer.layers.selection.active)
        if layer is not None and layer_kind(layer) is not None:
            return layer
        return None

    def refresh(self, *_: object) -> None:
        """Follow the active layer: its columns and what it is coloured by."""
        layer = self._active()
        if layer is self.layer and layer is not None:
            return
        self.layer = layer
        self.legend = None
        self._filling = True
        try:
            self.column_combo.clear()
            if layer is None:
                self.status.setText(
                    "Select a Points, Shapes, polygons or Labels layer with features "
                    "(a table) to see its categories."
                )
                self._show_legend(None)
                return
            try:
                columns = colour_columns(layer)
                legend = current_legend(layer)
            except OzxError as e:
                self.status.setText(str(e))
                self._show_legend(None)
                return
            kind = _KINDS.get(layer_kind(layer) or "", "")
            self.status.setText(f"{layer.name} ({kind})")
            self.column_combo.addItem(_CHOOSE)
            self.column_combo.addItems(columns)
            if legend is not None:
                self.column_combo.setCurrentText(legend.column)
            self._show_legend(legend)
        finally:
            self._filling = False

    def _show_legend(self, legend: Legend | None) -> None:
        self.legend = legend
        self._filling = True
        try:
            self.list.clear()
            categorical = legend is not None and legend.kind == "categorical"
            self.list.setVisible(legend is None or categorical)
            self.search.setVisible(legend is None or categorical)
            self.only_button.setEnabled(categorical)
            self.all_button.setEnabled(categorical)
            self.continuous.setVisible(legend is not None and legend.kind == "continuous")
            if legend is None:
                self.summary.setText("")
                return
            if categorical:
                hidden = hidden_categories(self.layer)
                for cat, count, rgba in zip(
                    legend.categories, legend.counts, legend.colours, strict=True
                ):
                    item = QListWidgetItem(_swatch(rgba), f"{cat}  ({count:,})")
                    item.setData(_CATEGORY, cat)
                    item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                    shown = cat not in hidden
                    item.setCheckState(Qt.CheckState.Checked if shown else Qt.CheckState.Unchecked)
                    self.list.addItem(item)
                self._filter_rows(self.search.text())
            else:
                lo, hi = legend.limits or (0.0, 1.0)
                self.colormap_combo.setCurrentText(legend.colormap or "viridis")
                self.low.setValue(lo)
                self.high.setValue(hi)
                self.bar.setPixmap(colour_bar(legend.colormap or "viridis"))
                self.bar_low.setText(f"{lo:.4g}")
                self.bar_high.setText(f"{hi:.4g}")
            self._summarise()
        finally:
            self._filling = False

    def _summarise(self) -> None:
        lg = self.legend
        if lg is None:
            self.summary.setText("")
            return
        if lg.kind == "continuous":
            lo, hi = lg.data_range or (0.0, 0.0)
            text = f"{lg.rows:,} rows, values {lo:.4g} to {hi:.4g}"
        else:
            hidden = hidden_categories(self.layer)
            shown = sum(
                c for cat, c in zip(lg.categories, lg.counts, strict=True) if cat not in hidden
            )
            text = (
                f"{len(lg.categories) - len(hidden):,} of {len(lg.categories):,} categories "
                f"shown ({shown:,} of {lg.rows:,} rows)"
            )
        if lg.missing:
            text += f"; {lg.missing:,} without a value (grey)"
        self.summary.setText(text)

    # ------------------------------------------------------------------ actions
    def _busy(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run *fn* (a colour update of the layer, on the GUI thread as napari needs),
        with a busy cursor; an error is told, reason first."""
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            return fn(*args, **kwargs)
        except OzxError as e:
            self.notify_error(str(e))
            return None
        finally:
            QApplication.restoreOverrideCursor()

    def _column_chosen(self, *_: object) -> None:
        column = self.column_combo.currentText()
        if self._filling or self.layer is None or column == _CHOOSE or not column:
            return
        self.colour(column)

    def colour(self, column: str, **kwargs: Any) -> Legend | None:
        """Colour the layer by *column* (as choosing it in the box does)."""
        if self.layer is None:
            return None
        legend = self._busy(color_by, self.layer, column, **kwargs)
        if legend is not None:
            self._filling = True
            self.column_combo.setCurrentText(column)
            self._filling = False
            self._show_legend(legend)
        return legend

    def _range_changed(self, *_: object) -> None:
        lg = self.legend
        if self._filling or lg is None or lg.kind != "continuous":
            return
        lo, hi = float(self.low.value()), float(self.high.value())
        if hi <= lo:
            return
        self.colour(lg.column, colormap=self.colormap_combo.currentText(), limits=(lo, hi))

    def _visible_now(self) -> list[str]:
        return [
            str(it.data(_CATEGORY))
            for it in (self.list.item(i) for i in range(self.list.count()))
            if it is not None and it.checkState() == Qt.CheckState.Checked
        ]

    def _item_changed(self, _item: QListWidgetItem) -> None:
        if self._filling or self.legend is None:
            return
        visible = self._visible_now()
        self._show(None if len(visible) == len(self.legend.categories) else visible)

    def _show(self, values: list[str] | None) -> None:
        lg = self.legend
        if lg is None or self.layer is None:
            return
        self._busy(show_categories, self.layer, lg.column, values)
        wanted = None if values is None else set(values)
        self._filling = True
        try:
            for i in range(self.list.count()):
                it = self.list.item(i)
                if it is None:
                    continue
                on = wanted is None or str(it.data(_CATEGORY)) in wanted
                it.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
        finally:
            self._filling = False
        self._summarise()

    def only_this(self, *_: object) -> None:
        """Show the selected category alone."""
        item = self.list.currentItem()
        if item is not None:
            self._show([str(item.data(_CATEGORY))])

    def show_all(self, *_: object) -> None:
        self._show(None)

    def _filter_rows(self, text: str) -> None:
        needle = text.strip().lower()
        first = None
        for i in range(self.list.count()):
            it = self.list.item(i)
            if it is None:
                continue
            hide = bool(needle) and needle not in str(it.data(_CATEGORY)).lower()
            it.setHidden(hide)
            if not hide and first is None:
                first = it
        if needle and first is not None:
            self.list.setCurrentItem(first)  # Enter / "Only this" then acts on it
