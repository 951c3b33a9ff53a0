"""The plate map: a painted grid of a plate's wells (the plate navigator's main view).

One cell per well, rows A.. down and columns 1.. across; a cell's colour says whether
the well is there, read, empty in the chosen acquisition, failed or loaded, and a
condition overlay (:mod:`.plate_conditions`) can colour and filter the wells. Clicking a
well, or Enter on the keyboard cursor, emits :attr:`PlateMap.wellActivated`; the
navigator (:mod:`.plate_navigator`) loads it.
"""

from __future__ import annotations

import math
from typing import cast

from qtpy.QtCore import QEvent, QPoint, QPointF, QRectF, QSize, Qt, Signal
from qtpy.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QHelpEvent,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
)
from qtpy.QtWidgets import QSizePolicy, QToolTip, QWidget

__all__ = ["ABSENT", "EMPTY", "ERROR", "PRESENT", "PlateMap"]

#: a well's state on the map
ABSENT, PRESENT, EMPTY, ERROR = range(4)

_FILL = {
    PRESENT: QColor(74, 144, 217),  # a well with fields
    EMPTY: QColor(110, 110, 110),  # listed, but no field in the chosen acquisition
    ERROR: QColor(192, 57, 43),  # metadata (or loading) failed
}
_LOADED = QColor(245, 166, 35)
_BOTTOM_CENTRE = int(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignBottom)
_RIGHT_MIDDLE = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_ABSENT_PEN = QColor(120, 120, 120)


class PlateMap(QWidget):
    """A painted plate map: rows A.. down, columns 1.. across, one cell per well.

    Scales from 6 to 1536 wells (cell size follows the widget, 6-44 px). Present wells
    are blue, absent ones an empty grey outline, wells without fields in the current
    acquisition grey, failed ones red, loaded ones orange; the keyboard cursor is a
    white ring. Arrow keys move it, Enter / Return / Space open the well under it. A
    condition overlay (:meth:`set_conditions`) fills wells with their condition's colour
    (loaded ones get an orange ring), fades the wells a filter leaves out (they do not
    open) and adds each well's conditions to its tooltip.
    """

    wellActivated = Signal(int, int)
    currentChanged = Signal(int, int)

    MIN_CELL = 6
    MAX_CELL = 44

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self._rows: tuple[str, ...] = ()
        self._cols: tuple[str, ...] = ()
        self._state: dict[tuple[int, int], int] = {}
        self._tips: dict[tuple[int, int], str] = {}
        self._loaded: set[tuple[int, int]] = set()
        self._failed: set[tuple[int, int]] = set()
        self._current: tuple[int, int] | None = None
        self._hover: tuple[int, int] | None = None
        # a condition table's overlay (see plate_conditions.ConditionPanel.overlay)
        self._colors: dict[tuple[int, int], QColor] = {}
        self._hidden: set[tuple[int, int]] = set()
        self._notes: dict[tuple[int, int], str] = {}

    # -- content -------------------------------------------------------------
    def set_plate(
        self,
        rows: tuple[str, ...],
        cols: tuple[str, ...],
        state: dict[tuple[int, int], int],
        tips: dict[tuple[int, int], str],
    ) -> None:
        self._rows, self._cols = tuple(rows), tuple(cols)
        self._state, self._tips = dict(state), dict(tips)
        self._loaded.clear()
        self._failed.clear()
        self._colors, self._hidden, self._notes = {}, set(), {}
        present = [k for k, s in sorted(self._state.items()) if s == PRESENT]
        self._current = present[0] if present else ((0, 0) if rows and cols else None)
        self.updateGeometry()
        self.update()

    def set_state(self, state: dict[tuple[int, int], int]) -> None:
        self._state = dict(state)
        self.update()

    def update_wells(
        self, state: dict[tuple[int, int], int], tips: dict[tuple[int, int], str]
    ) -> None:
        """New states and tooltips (wells read since), keeping the cursor and marks."""
        self._state = dict(state)
        for cell, tip in tips.items():
            if cell not in self._failed:  # (a failure's tip says why)
                self._tips[cell] = tip
        self.update()

    def set_conditions(
        self,
        colors: dict[tuple[int, int], QColor],
        hidden: set[tuple[int, int]],
        notes: dict[tuple[int, int], str],
    ) -> None:
        """A condition overlay: wells filled with their condition's colour, wells the
        filter leaves out faded and not clickable, and each well's conditions in its
        tooltip (empty: none)."""
        self._colors, self._hidden, self._notes = dict(colors), set(hidden), dict(notes)
        self.update()

    def filtered_out(self, row: int, col: int) -> bool:
        """The condition filter leaves this well out (it cannot be opened from the map)."""
        return (row, col) in self._hidden

    def set_loaded(self, cells: set[tuple[int, int]]) -> None:
        self._loaded = set(cells)
        self.update()

    def mark_failed(self, cell: tuple[int, int], why: str | None = None) -> None:
        self._failed.add(cell)
        if why:
            head = self._tips.get(cell, "").split("\n", 1)[0]
            self._tips[cell] = f"{head}\nnot shown: {why}" if head else f"not shown: {why}"
        self.update()

    def state(self, row: int, col: int) -> int:
        if (row, col) in self._failed:
            return ERROR
        return self._state.get((row, col), ABSENT)

    def is_loaded(self, row: int, col: int) -> bool:
        return (row, col) in self._loaded

    @property
    def current(self) -> tuple[int, int] | None:
        return self._current

    def set_current(self, row: int, col: int) -> None:
        if not (0 <= row < len(self._rows) and 0 <= col < len(self._cols)):
            return
        if self._current != (row, col):
            self._current = (row, col)
            self.currentChanged.emit(row, col)
            self.update()

    # -- geometry ------------------------------------------------------------
    def _font(self, cell: float) -> QFont:
        f = QFont(self.font())
        f.setPixelSize(int(max(7, min(12, cell * 0.5))))
        return f

    def _layout(self) -> tuple[float, float, float]:
        """(cell size, x of column 0, y of row 0)."""
        nr, nc = max(len(self._rows), 1), max(len(self._cols), 1)
        head_w, head_h = self._heads()
        w, h = self.width() - head_w - 4, self.height() - head_h - 4
        cell = max(self.MIN_CELL, min(self.MAX_CELL, w / nc, h / nr))
        return cell, float(head_w), float(head_h)

    def _heads(self) -> tuple[float, float]:
        fm = QFontMetrics(self._font(self.MAX_CELL))
        return fm.horizontalAdvance(max(self._rows, key=len, default="A")) + 8.0, fm.height() + 4.0

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        """As tall as the cells that fit the width need (the map keeps square cells)."""
        nr, nc = max(len(self._rows), 1), max(len(self._cols), 1)
        head_w, head_h = self._heads()
        cell = max(self.MIN_CELL, min(self.MAX_CELL, (width - head_w - 4) / nc))
        return int(nr * cell + head_h + 4)

    def sizeHint(self) -> QSize:
        nr, nc = max(len(self._rows), 1), max(len(self._cols), 1)
        cell = max(self.MIN_CELL, min(24, 480 / nc))
        head_w, head_h = self._heads()
        return QSize(int(nc * cell + head_w + 4), int(nr * cell + head_h + 4))

    def minimumSizeHint(self) -> QSize:
        nr, nc = max(len(self._rows), 1), max(len(self._cols), 1)
        head_w, head_h = self._heads()
        return QSize(int(nc * self.MIN_CELL + head_w + 4), int(nr * self.MIN_CELL + head_h + 4))

    def cell_rect(self, row: int, col: int) -> QRectF:
        cell, x0, y0 = self._layout()
        return QRectF(x0 + col * cell, y0 + row * cell, cell, cell)

    def well_center(self, row: int, col: int) -> QPoint:
        """Widget coordinates of a well's centre (for tests and accessibility tools)."""
        return self.cell_rect(row, col).center().toPoint()

    def cell_at(self, pos: QPoint | QPointF) -> tuple[int, int] | None:
        cell, x0, y0 = self._layout()
        c = math.floor((pos.x() - x0) / cell)
        r = math.floor((pos.y() - y0) / cell)
        if 0 <= r < len(self._rows) and 0 <= c < len(self._cols):
            return r, c
        return None

    # -- painting ------------------------------------------------------------
    def paintEvent(self, event: QPaintEvent | None) -> None:
        if not self._rows or not self._cols:
            return
        cell, x0, y0 = self._layout()
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing, cell >= 10)
        text_color = self.palette().color(self.foregroundRole())
        p.setFont(self._font(cell))
        fm = p.fontMetrics()
        p.setPen(text_color)
        # header labels: thin out when cells are smaller than the text
        col_step = max(1, math.ceil((fm.horizontalAdvance("00") + 2) / cell))
        row_step = max(1, math.ceil((fm.height() - 2) / cell))
        for c, name in enumerate(self._cols):
            if c % col_step == 0:
                p.drawText(QRectF(x0 + c * cell - cell, 0, 3 * cell, y0 - 2), _BOTTOM_CENTRE, name)
        for r, name in enumerate(self._rows):
            if r % row_step == 0:
                p.drawText(QRectF(0, y0 + r * cell, x0 - 4, cell), _RIGHT_MIDDLE, name)
        pad = max(1.0, cell * 0.1)
        round_wells = cell >= 10
        for r in range(len(self._rows)):
            for c in range(len(self._cols)):
                rect = QRectF(
                    x0 + c * cell + pad, y0 + r * cell + pad, cell - 2 * pad, cell - 2 * pad
                )
                st = self.state(r, c)
                if st == ABSENT:
                    p.setPen(QPen(_ABSENT_PEN, 1))
                    p.setBrush(Qt.BrushStyle.NoBrush)
                else:
                    self._well_pen_brush(p, r, c, st, cell)
                if round_wells:
                    p.drawEllipse(rect)
                else:
                    p.drawRect(rect)
        if self._current is not None and (self.hasFocus() or self._current in self._loaded):
            r, c = self._current
            p.setPen(QPen(QColor(255, 255, 255), 2 if cell >= 10 else 1))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawRect(QRectF(x0 + c * cell + 0.5, y0 + r * cell + 0.5, cell - 1, cell - 1))
        p.end()

    def _well_pen_brush(self, p: QPainter, r: int, c: int, st: int, cell: float) -> None:
        """A well's fill: its state's colour, or its condition's (loaded: an orange
        ring then); faded when the condition filter leaves it out."""
        loaded = (r, c) in self._loaded
        color = self._colors.get((r, c)) if st == PRESENT else None
        fill = color if color is not None else (_LOADED if loaded else _FILL[st])
        if self._hover == (r, c) and st == PRESENT:
            fill = fill.lighter(130)
        pen = QPen(fill.darker(140), 1)
        if color is not None and loaded:
            pen = QPen(_LOADED, max(2.0, cell * 0.12))
        if (r, c) in self._hidden:
            fill = QColor(fill)
            fill.setAlpha(40)
            pen = QPen(QColor(128, 128, 128, 90), 1)
        p.setPen(pen)
        p.setBrush(fill)

    # -- interaction -----------------------------------------------------------
    def event(self, ev: QEvent | None) -> bool:
        if ev is not None and ev.type() == QEvent.Type.ToolTip:
            help_ev = cast(QHelpEvent, ev)
            cell = self.cell_at(help_ev.pos())
            if cell is not None:
                QToolTip.showText(help_ev.globalPos(), self.tooltip(*cell), self)
            else:
                QToolTip.hideText()
            return True
        return super().event(ev)

    def tooltip(self, row: int, col: int) -> str:
        tip = self._tips.get((row, col)) or f"{self._rows[row]}{self._cols[col]}: no well"
        note = self._notes.get((row, col))
        return f"{tip}\n{note}" if note else tip

    def mouseMoveEvent(self, ev: QMouseEvent | None) -> None:
        cell = self.cell_at(_mouse_pos(ev)) if ev is not None else None
        if cell != self._hover:
            self._hover = cell
            self.update()
        super().mouseMoveEvent(ev)

    def leaveEvent(self, ev: QEvent | None) -> None:
        self._hover = None
        self.update()
        super().leaveEvent(ev)

    def mousePressEvent(self, ev: QMouseEvent | None) -> None:
        if ev is None or ev.button() != Qt.MouseButton.LeftButton:
            return super().mousePressEvent(ev)
        cell = self.cell_at(_mouse_pos(ev))
        if cell is None:
            return None
        self.setFocus()
        self.set_current(*cell)
        if cell not in self._hidden:
            self.wellActivated.emit(*cell)
        return None

    def keyPressEvent(self, ev: QKeyEvent | None) -> None:
        key = ev.key()
        moves: dict[int, tuple[int, int]] = {
            Qt.Key.Key_Left: (0, -1),
            Qt.Key.Key_Right: (0, 1),
            Qt.Key.Key_Up: (-1, 0),
            Qt.Key.Key_Down: (1, 0),
        }
        if self._current is None or not self._rows:
            return super().keyPressEvent(ev)
        r, c = self._current
        if key in moves:
            dr, dc = moves[key]
            self.set_current(
                min(max(r + dr, 0), len(self._rows) - 1), min(max(c + dc, 0), len(self._cols) - 1)
            )
        elif key == Qt.Key.Key_Home:
            self.set_current(r, 0)
        elif key == Qt.Key.Key_End:
            self.set_current(r, len(self._cols) - 1)
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space):
            if (r, c) not in self._hidden:
                self.wellActivated.emit(r, c)
        else:
            return super().keyPressEvent(ev)
        return None


def _mouse_pos(ev: QMouseEvent) -> QPoint | QPointF:
    """Where a mouse event happened in the widget (Qt 6 ``position()``, Qt 5 ``pos()``)."""
    return ev.position() if hasattr(ev, "position") else ev.pos()
