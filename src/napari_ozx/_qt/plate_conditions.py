"""The plate navigator's condition panel: colour the plate map by a condition column (with
a legend), filter wells by a column's value or a text, each well's conditions in its
tooltip.

The conditions come from the plate's condition table (:mod:`napari_ozx.ngff.tables.conditions`),
read once per plate in the navigator's worker (:func:`read_conditions`); this module only
turns them into the map's overlay (:meth:`ConditionPanel.overlay`). The panel is hidden
for a plate without a condition table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING, TypeGuard

from qtpy.QtCore import Qt, Signal
from qtpy.QtGui import QColor
from qtpy.QtWidgets import QComboBox, QGridLayout, QLabel, QVBoxLayout, QWidget

from napari_ozx.errors import OzxError
from napari_ozx.ngff.tables.conditions import (
    PlateConditions,
    condition_tables,
    format_value,
    plate_conditions,
)

if TYPE_CHECKING:
    from napari_ozx.ngff.read.plate import HcsPlate

__all__ = ["ConditionPanel", "ConditionsRead", "read_conditions"]

Cell = tuple[int, int]

#: categorical colours (none close to the map's blue, orange or red states)
PALETTE = (
    "#1b9e77",
    "#e7298a",
    "#7570b3",
    "#66a61e",
    "#e6ab02",
    "#a6761d",
    "#17becf",
    "#bcbd22",
    "#f781bf",
    "#8dd3c7",
    "#b15928",
    "#cab2d6",
)
_OTHER = "#9e9e9e"  # values beyond the palette, and missing values
_RAMP = ("#440154", "#3b528b", "#21918c", "#5ec962", "#fde725")  # viridis
#: the value choices a filter lists at most (any text can still be typed)
MAX_CHOICES = 500
_ANY = "\x00any"  # the filter's "any column" choice


@dataclass(frozen=True)
class ConditionsRead:
    """What the worker read: the plate's condition tables' names, the chosen one's
    conditions, or why they cannot be shown."""

    tables: tuple[str, ...] = ()
    conditions: PlateConditions | None = None
    error: str | None = None


def read_conditions(plate: HcsPlate, table: str | None = None) -> ConditionsRead:
    """Worker thread: the plate's condition tables (metadata) and one of them read (by
    default ``condition_table``, else the first). Never raises for a table."""
    if plate.kind != "plate":
        return ConditionsRead()
    try:
        names = tuple(t.name for t in condition_tables(plate))
        if not names:
            return ConditionsRead()
        conds = plate_conditions(plate, table or names[0])
    except OzxError as e:
        return ConditionsRead(error=str(e))
    return ConditionsRead(names, conds)


def _numeric(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _order(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def ramp(t: float) -> QColor:
    """The colour of *t* in 0..1 on the viridis ramp."""
    t = min(max(t, 0.0), 1.0) * (len(_RAMP) - 1)
    i = min(int(t), len(_RAMP) - 2)
    a, b = QColor(_RAMP[i]), QColor(_RAMP[i + 1])
    f = t - i
    return QColor(
        round(a.red() + (b.red() - a.red()) * f),
        round(a.green() + (b.green() - a.green()) * f),
        round(a.blue() + (b.blue() - a.blue()) * f),
    )


class ConditionPanel(QWidget):
    """Colour by, legend, filter and the count of matching wells."""

    #: the overlay changed (colours or filter): ask :meth:`overlay` again
    changed = Signal()
    #: another of the plate's condition tables was chosen (its name): read it
    tableChosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._conds: PlateConditions | None = None
        self._cells: dict[str, Cell] = {}  # well path (in the plate) -> map cell
        self._updating = False

        self.title = QLabel("")
        self.title.setWordWrap(True)
        self.table_combo = QComboBox()
        self.table_combo.setToolTip("The plate's condition table shown")
        self.table_combo.currentIndexChanged.connect(self._on_table)
        self.color_combo = QComboBox()
        self.color_combo.setToolTip("Fill each well with the colour of its value in this column")
        self.color_combo.currentIndexChanged.connect(self._on_changed)
        self.legend = QLabel("")
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.filter_combo = QComboBox()
        self.filter_combo.setToolTip("Keep only the wells whose value in this column matches")
        self.filter_combo.currentIndexChanged.connect(self._on_filter_column)
        self.value_combo = QComboBox()
        self.value_combo.setEditable(True)
        self.value_combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.value_combo.setToolTip(
            "A value (exact match) or any text (wells whose value contains it)"
        )
        line = self.value_combo.lineEdit()
        if line is not None:
            line.setPlaceholderText("value or text")
            line.setClearButtonEnabled(True)
        self.value_combo.currentTextChanged.connect(self._on_changed)
        for combo in (self.table_combo, self.color_combo, self.filter_combo, self.value_combo):
            # the layout's stretch sizes them, not their longest value
            combo.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            combo.setMinimumContentsLength(6)
        self.count = QLabel("")

        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        self._table_label = QLabel("Table")
        grid.addWidget(self._table_label, 0, 0)
        grid.addWidget(self.table_combo, 0, 1, 1, 2)
        grid.addWidget(QLabel("Colour by"), 1, 0)
        grid.addWidget(self.color_combo, 1, 1, 1, 2)
        grid.addWidget(QLabel("Filter"), 2, 0)
        grid.addWidget(self.filter_combo, 2, 1, 1, 2)
        grid.addWidget(self.value_combo, 3, 1, 1, 2)
        grid.setColumnStretch(1, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 4, 0, 0)
        lay.addWidget(self.title)
        lay.addLayout(grid)
        lay.addWidget(self.legend)
        lay.addWidget(self.count)
        self._controls: Sequence[QWidget] = (
            self.color_combo,
            self.filter_combo,
            self.value_combo,
            self.legend,
            self.count,
        )
        self.hide()

    # -- content ---------------------------------------------------------------
    @property
    def conditions(self) -> PlateConditions | None:
        return self._conds

    def clear(self) -> None:
        """No conditions (another plate is being read, or it has none)."""
        self._conds = None
        self._cells = {}
        self.hide()
        self.changed.emit()

    def set_result(self, plate: HcsPlate, result: ConditionsRead) -> None:
        """Show what :func:`read_conditions` read for *plate*."""
        self._updating = True
        try:
            self._conds = result.conditions if result.error is None else None
            prefix = plate.path + "/" if plate.path else ""
            self._cells = {w.path.removeprefix(prefix): (w.row, w.column) for w in plate.wells}
            self.table_combo.clear()
            self.table_combo.addItems(list(result.tables))
            if self._conds is not None and self._conds.table is not None:
                self.table_combo.setCurrentText(self._conds.table.name)
            many = len(result.tables) > 1
            self.table_combo.setVisible(many)
            self._table_label.setVisible(many)
            self._fill_columns()
        finally:
            self._updating = False
        if result.error is not None:
            self.title.setText(f"<b>Conditions</b>: cannot be shown: {escape(result.error)}")
            for w in self._controls:
                w.hide()
            self.show()
        elif self._conds is None or self._conds.table is None:
            self.hide()
        else:
            c = self._conds
            assert c.table is not None
            n = c.unmatched
            extra = f", {n} row{'s name' if n != 1 else ' names'} no well of the plate" if n else ""
            self.title.setText(
                f"<b>Conditions</b> ({escape(c.table.name)}): {len(c)} wells{escape(extra)}"
            )
            for w in self._controls:
                w.show()
            self.show()
        self._refresh()

    def _fill_columns(self) -> None:
        cols = list(self._conds.columns) if self._conds is not None else []
        self.color_combo.clear()
        self.color_combo.addItem("(none)", None)
        for c in cols:
            self.color_combo.addItem(c, c)
        if cols:
            self.color_combo.setCurrentIndex(1)
        self.filter_combo.clear()
        self.filter_combo.addItem("(no filter)", None)
        self.filter_combo.addItem("any column", _ANY)
        for c in cols:
            self.filter_combo.addItem(c, c)
        self.value_combo.clear()
        self.value_combo.setEnabled(False)

    # -- choices -----------------------------------------------------------------
    def set_filter(self, column: str | None, text: str) -> None:
        """Filter by *column* (None: any column) with *text* (a value or a text)."""
        i = self.filter_combo.findData(_ANY if column is None else column)
        self.filter_combo.setCurrentIndex(max(i, 0))
        self.value_combo.setCurrentText(text)

    def set_color_column(self, column: str | None) -> None:
        self.color_combo.setCurrentIndex(max(self.color_combo.findData(column), 0))

    def _on_table(self, _index: int) -> None:
        if not self._updating and self.table_combo.currentText():
            self.tableChosen.emit(self.table_combo.currentText())

    def _on_filter_column(self, _index: int) -> None:
        if self._updating:
            return
        self._updating = True
        try:
            column = self.filter_combo.currentData()
            self.value_combo.clear()
            self.value_combo.setEnabled(column is not None)
            if column is not None and self._conds is not None:
                cols = self._conds.columns if column == _ANY else (column,)
                values = sorted({v for c in cols for v in self._conds.distinct(c)}, key=_order)
                self.value_combo.addItems([v for v in values if v][:MAX_CHOICES])
                self.value_combo.setCurrentIndex(-1)
                self.value_combo.setEditText("")
        finally:
            self._updating = False
        self._refresh()

    def _on_changed(self, *_: object) -> None:
        if not self._updating:
            self._refresh()

    def _refresh(self) -> None:
        self.legend.setText(self._legend_html())
        matched = self.matched()
        if matched is None:
            self.count.setText("")
        else:
            self.count.setText(f"{len(matched)} of {len(self._cells)} wells match")
        self.changed.emit()

    # -- the overlay -------------------------------------------------------------
    def matched(self) -> set[str] | None:
        """The wells the filter keeps (None: no filter)."""
        conds = self._conds
        column = self.filter_combo.currentData()
        text = self.value_combo.currentText().strip()
        if conds is None or column is None or not text:
            return None
        col = None if column == _ANY else column
        choices = {self.value_combo.itemText(i) for i in range(self.value_combo.count())}
        if text in choices:
            return conds.matching(col, value=text)
        return conds.matching(col, text=text)

    def _categories(self, column: str) -> tuple[dict[str, QColor], bool, tuple[float, float]]:
        """The colour of each value of *column* (as shown), whether it is a ramp, and the
        ramp's range."""
        assert self._conds is not None
        values = [c.get(column) for c in self._conds.wells.values()]
        shown = sorted({format_value(v) for v in values}, key=_order)
        nums = {format_value(v): float(v) for v in values if _numeric(v)}
        if nums and len(nums) == len(shown) and len(shown) > len(PALETTE):
            lo, hi = min(nums.values()), max(nums.values())
            span = hi - lo or 1.0
            colors = {text: ramp((v - lo) / span) for text, v in nums.items()}
            return colors, True, (lo, hi)
        present = [s for s in shown if s]
        colors = {
            s: QColor(PALETTE[i] if i < len(PALETTE) else _OTHER) for i, s in enumerate(present)
        }
        colors[""] = QColor(_OTHER)
        return colors, False, (0.0, 0.0)

    def overlay(self) -> tuple[dict[Cell, QColor], set[Cell], dict[Cell, str]]:
        """The map's overlay: each well's colour, the wells the filter leaves out, and
        each well's conditions for its tooltip."""
        conds = self._conds
        if conds is None or conds.table is None:
            return {}, set(), {}
        colors: dict[Cell, QColor] = {}
        column = self.color_combo.currentData()
        if column is not None:
            by_value, _, _ = self._categories(column)
            for path, cond in conds.wells.items():
                cell = self._cells.get(path)
                if cell is not None:
                    colors[cell] = by_value.get(format_value(cond.get(column)), QColor(_OTHER))
        matched = self.matched()
        hidden: set[Cell] = set()
        if matched is not None:
            hidden = {cell for path, cell in self._cells.items() if path not in matched}
        name = conds.table.name
        notes = {}
        for path, cell in self._cells.items():
            lines = conds.describe(path)
            notes[cell] = (
                "\n".join([f"conditions ({name}):", *(f"  {x}" for x in lines)])
                if lines
                else f"no row in {name}"
            )
        return colors, hidden, notes

    def _legend_html(self) -> str:
        conds = self._conds
        column = self.color_combo.currentData()
        if conds is None or column is None or not conds.wells:
            return ""
        colors, is_ramp, (lo, hi) = self._categories(column)
        if is_ramp:
            steps = "".join(
                f"<span style='color:{ramp(i / 8).name()}'>&#9632;</span>" for i in range(9)
            )
            return f"{escape(format_value(lo))} {steps} {escape(format_value(hi))}"
        counts = Counter(format_value(c.get(column)) for c in conds.wells.values())
        items = []
        rest = [0, 0]  # values beyond the palette, their wells
        for i, (text, color) in enumerate(colors.items()):
            if not counts.get(text):
                continue
            if text and i >= len(PALETTE):
                rest[0] += 1
                rest[1] += counts[text]
                continue
            label = escape(text) if text else "<i>missing</i>"
            items.append(_swatch(color, label, counts[text]))
        if rest[0]:
            items.append(_swatch(QColor(_OTHER), f"{rest[0]} other values", rest[1]))
        return " &nbsp; ".join(items)


def _swatch(color: QColor, label: str, wells: int) -> str:
    return (
        f"<span style='color:{color.name()}'>&#9632;</span>&nbsp;{label}"
        f"&nbsp;<small>({wells})</small>"
    )
