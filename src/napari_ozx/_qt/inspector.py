"""Metadata inspector dock widget: hierarchy tree, node details, raw JSON, .ozx findings.

All reading happens in :mod:`napari_ozx.inspection` (no Qt) and runs in worker threads:
opening a source, loading a node's children when it is expanded, a node's details when
it is selected and the RFC-9 validation of an ``.ozx``. The widget only renders results.
It follows napari's active layer (its ``LayerSource``; a table's layer, e.g. a ROI
table's Shapes, by its ``TableOrigin``: the table node is selected and its rows shown)
and can open any OME-Zarr directory or ``.ozx`` with its *Open* buttons.

An image's (or a plate's) tables are a ``tables`` node under it, one child per table
(type, backend, rows from the tables' metadata); selecting a table shows its facts and,
in the *Table* tab, its first rows, read in a worker (capped in bytes).
"""

from __future__ import annotations

import html
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from qtpy.QtCore import QPoint, Qt, Signal
from qtpy.QtGui import QColor, QFontDatabase, QIcon, QPainter, QPixmap, QTextCursor, QTextDocument
from qtpy.QtWidgets import (
    QApplication,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QStyle,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QTextBrowser,
    QTextEdit,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from napari_ozx._qt.base import OzxDockWidget
from napari_ozx.errors import OzxError
from napari_ozx.inspection import (
    ArchiveFacts,
    Inspection,
    MetadataFacts,
    NodeDetails,
    Row,
    TablePreview,
    TreeNode,
)
from napari_ozx.inspection.tree import (
    ARRAY,
    FIELD,
    IMAGE,
    LABEL_IMAGE,
    LABELS,
    LEVEL,
    PLATE,
    ROW,
    TABLE,
    TABLES,
    WELL,
)
from napari_ozx.layers.categories.colouring import is_number
from napari_ozx.layers.provenance import LayerSource, TableOrigin

if TYPE_CHECKING:
    import napari
    from napari.layers import Layer

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


def layer_source(metadata: object) -> tuple[str, str] | None:
    """(source, node path) of a layer read by napari-ozx, from its metadata.

    Plate overview layers point at the plate group; fields and their labels, like plain
    images, at their own node (see :class:`~napari_ozx.layers.provenance.LayerSource`);
    a table's layer at its table node (:class:`~napari_ozx.layers.provenance.TableOrigin`).
    """
    src = LayerSource.from_metadata(metadata)
    if src is not None:
        return (src.source, src.node)
    table = TableOrigin.from_metadata(metadata)
    return (table.source, table.node) if table is not None else None


__all__ = ["InspectorWidget"]

_NODE_ROLE = Qt.ItemDataRole.UserRole
_KIND_LABEL = {
    IMAGE: "image",
    FIELD: "image",
    LABEL_IMAGE: "label image",
    LABELS: "labels",
    LEVEL: "array",
    ARRAY: "array",
    PLATE: "plate",
    ROW: "row",
    WELL: "well",
    TABLES: "tables",
    TABLE: "table",
}


# ------------------------------------------------------------------ html rendering


def _esc(s: object) -> str:
    return html.escape(str(s))


def _swatch(color: str | None) -> str:
    if not color:
        return ""
    rgb = color[:7]  # "#RRGGBB"; alpha is shown in the text
    return f'<span style="background-color:{rgb};">&nbsp;&nbsp;&nbsp;&nbsp;</span>&nbsp;'


def _table(rows: tuple[Row, ...] | list[Row]) -> str:
    body = "".join(
        f"<tr><td><b>{_esc(r.label)}</b></td><td>{_swatch(r.color)}{_esc(r.value)}</td></tr>"
        for r in rows
    )
    return f'<table cellspacing="0" cellpadding="2">{body}</table>'


def details_html(d: NodeDetails) -> str:
    """The Summary tab: sections, extensions and the node's error."""
    parts = [
        f"<h3>{_esc(d.node.title)} <small>({_esc(_KIND_LABEL.get(d.kind, d.kind))})</small></h3>"
    ]
    if d.node.path:
        parts.append(f"<p><code>{_esc(d.node.path)}</code></p>")
    if d.error:
        parts.append(f"<p><b>Problem:</b> {_esc(d.error)}</p>")
    for s in d.sections:
        parts.append(f"<h4>{_esc(s.title)}</h4>{_table(s.rows)}")
    if d.extensions:
        rows = [
            Row(
                e.name,
                f"must_understand: {str(e.must_understand).lower()} · "
                f"{'understood' if e.understood else 'not implemented'}"
                + (f" · {e.configuration}" if e.configuration else "")
                + (" · top-level key" if e.where == "key" else ""),
            )
            for e in d.extensions
        ]
        parts.append(f"<h4>Zarr extensions (ZEP 10)</h4>{_table(rows)}")
    elif d.raw_files == ("zarr.json",):
        parts.append("<h4>Zarr extensions (ZEP 10)</h4><p>none</p>")
    return "".join(parts)


def array_html(d: NodeDetails) -> str:
    if d.array is None:
        return "<p>Select an image or a pyramid level to see its array.</p>"
    head = f"<h3>Array <code>{_esc(d.array.path or '/')}</code></h3>"
    if d.kind not in (LEVEL, ARRAY):
        head += "<p>The first (full resolution) pyramid level.</p>"
    return head + _table(d.array.rows())


def archive_html(a: ArchiveFacts) -> str:
    return f"<h3>.ozx archive</h3>{_table(a.rows())}"


def _preview_table() -> QTableWidget:
    t = QTableWidget()
    t.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    t.setAlternatingRowColors(True)
    # napari's themes set no alternate colour: Qt's light default under light text
    t.setStyleSheet("QTableWidget { alternate-background-color: rgba(128, 128, 128, 40); }")
    t.verticalHeader().setVisible(False)
    t.verticalHeader().setDefaultSectionSize(t.fontMetrics().height() + 6)
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    return t


def show_preview(
    table: QTableWidget, note: QLabel, p: TablePreview, node: TreeNode | None = None
) -> None:
    """Fill the Table tab with a table's first rows (or say why there are none); with
    its tree *node*, the note names the table's type and the image it belongs to."""
    table.clear()
    if p.error is not None:
        table.setRowCount(0)
        table.setColumnCount(0)
        note.setText(f"<b>{_esc(p.name)}</b>: no preview: {_esc(p.error)}")
        return
    table.setColumnCount(len(p.columns))
    table.setRowCount(len(p.rows))
    table.setHorizontalHeaderLabels(list(p.columns))
    for r, cells in enumerate(p.rows):
        for c, text in enumerate(cells):
            item = QTableWidgetItem(text)
            if is_number(text):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            table.setItem(r, c, item)
    shown = len(p.rows)
    more = f" (the first {shown} of {p.total:,})" if p.total > shown else ""
    note.setText(f"<b>{_esc(p.name)}</b>: {p.total:,} rows{more}{_owner_note(node)}")


def _owner_note(node: TreeNode | None) -> str:
    """The note's " · roi_table of image /B/03/0" for a table node."""
    info = node.table if node is not None else None
    if info is None:
        return ""
    owner = node.parent.parent if node is not None and node.parent is not None else None
    kind = _KIND_LABEL.get(owner.kind, "image") if owner is not None else "image"
    return f" · {_esc(info.type or 'table')} of {kind} <code>/{_esc(info.image)}</code>"


# ------------------------------------------------------------------ source leases


class _Leases:
    """Which inspections are in use by workers; a replaced one is closed once idle.

    Thread-safe and free of Qt, so a worker that outlives the widget still closes what
    it used (no leaked file descriptors).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: Counter[int] = Counter()
        self._live: dict[int, Inspection] = {}
        self._retired: set[int] = set()
        self._shut = False

    @property
    def shut(self) -> bool:
        return self._shut

    def adopt(self, insp: Inspection) -> None:
        with self._lock:
            self._live[id(insp)] = insp
            close = self._shut
            if close:
                self._retired.add(id(insp))
        if close:
            self._maybe_close(insp)

    def acquire(self, insp: Inspection) -> None:
        with self._lock:
            self._users[id(insp)] += 1

    def release(self, insp: Inspection) -> None:
        with self._lock:
            self._users[id(insp)] -= 1
        self._maybe_close(insp)

    def retire(self, insp: Inspection | None) -> None:
        if insp is None:
            return
        with self._lock:
            self._retired.add(id(insp))
        self._maybe_close(insp)

    def _maybe_close(self, insp: Inspection) -> None:
        with self._lock:
            k = id(insp)
            if k not in self._retired or self._users[k] > 0:
                return
            self._retired.discard(k)
            self._live.pop(k, None)
            self._users.pop(k, None)
        insp.close()

    def shutdown(self, *_: object) -> None:
        with self._lock:
            self._shut = True
            live = list(self._live.values())
        for insp in live:
            self.retire(insp)


# ------------------------------------------------------------------------- widget


class InspectorWidget(OzxDockWidget):
    """Dock widget: browse the OME-Zarr hierarchy behind the active layer, or any file."""

    #: emitted (source) when a source has been opened and its tree shown
    source_loaded = Signal(str)
    #: emitted (node path) when the detail pane shows a node
    details_shown = Signal(str)
    #: emitted when the .ozx archive facts and findings are shown
    archive_shown = Signal()
    #: emitted (badge text) when the OME metadata validator's verdict is shown
    metadata_shown = Signal(str)
    #: emitted (table path) when a table's first rows (or why not) are shown
    table_preview_shown = Signal(str)

    def __init__(
        self, napari_viewer: napari.viewer.Viewer | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(napari_viewer, parent)
        self.setObjectName("napari-ozx inspector")
        self._leases = _Leases()
        self._inspection: Inspection | None = None
        self._generation = 0
        self._details_token = 0
        self._items: dict[int, QTreeWidgetItem] = {}
        self._pending_select: str | None = None
        self._icons: dict[str, QIcon] = {}
        self._last_details: NodeDetails | None = None
        self._archive: ArchiveFacts | None = None
        self._metadata: MetadataFacts | None = None
        self._follow_table: TableOrigin | None = None  # the table layer followed

        layout = QVBoxLayout(self)
        layout.addLayout(self._build_top_bar())
        layout.addWidget(self.source_label)
        layout.addWidget(self.validation_badge)
        layout.addWidget(self._build_splitter(), 1)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        self._show_archive(None)
        self._show_metadata(None)

        # the sources still open are closed when the widget goes away (OzxDockWidget)
        self.add_cleanup(self._leases.shutdown)
        if napari_viewer is not None:
            self.connect_event(napari_viewer.layers.selection.events.active, self._on_active_layer)
            self.connect_event(napari_viewer.events.theme, self._on_theme)
            self._on_active_layer()

    # ------------------------------------------------------------------ building
    def _build_top_bar(self) -> QHBoxLayout:
        """The Open buttons (the source's name and the validation badge go below)."""
        self.source_label = QLabel(
            "No OME-Zarr source. Select a layer read by napari-ozx, or open a file."
        )
        self.source_label.setWordWrap(True)
        self.source_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.open_file_button = QPushButton("Open file…")
        self.open_file_button.setToolTip(
            "Inspect an .ozx file (or pick the zarr.json / .zattrs of a directory)"
        )
        self.open_file_button.clicked.connect(self._choose_file)
        self.open_dir_button = QPushButton("Open folder…")
        self.open_dir_button.setToolTip("Inspect an OME-Zarr directory")
        self.open_dir_button.clicked.connect(self._choose_dir)
        self.validation_badge = QLabel("")
        self.validation_badge.setToolTip(
            "OME-Zarr metadata validation of the whole hierarchy (napari-ozx validate)"
        )
        top = QHBoxLayout()
        top.addWidget(self.open_file_button)
        top.addWidget(self.open_dir_button)
        top.addStretch(1)
        return top

    def _build_splitter(self) -> QSplitter:
        """The hierarchy tree above the detail tabs."""
        self.tree = QTreeWidget()
        self.tree.setColumnCount(2)
        self.tree.setHeaderLabels(["Node", "Info"])
        self.tree.setUniformRowHeights(True)
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setStretchLastSection(True)
        self.tree.itemExpanded.connect(self._on_expanded)
        self.tree.currentItemChanged.connect(self._on_current_changed)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.tree)
        splitter.addWidget(self._build_tabs())
        splitter.setStretchFactor(0, 2)
        splitter.setStretchFactor(1, 3)
        return splitter

    def _build_tabs(self) -> QTabWidget:
        """Summary, Array, JSON, Archive, Metadata rules and Table."""
        self.summary = QTextBrowser()
        self.summary.setOpenLinks(False)
        self.array_view = QTextBrowser()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.summary, "Summary")
        self.tabs.addTab(self.array_view, "Array")
        self.tabs.addTab(self._build_json_page(), "JSON")
        self.tabs.addTab(self._build_archive_page(), "Archive")
        self._archive_tab = 3
        self.tabs.addTab(self._build_metadata_page(), "Metadata rules")
        self._metadata_tab = 4
        self.tabs.addTab(self._build_table_page(), "Table")
        self._table_tab = 5
        self.tabs.setTabEnabled(self._table_tab, False)
        return self.tabs

    def _build_json_page(self) -> QWidget:
        """The raw metadata documents, with find and copy."""
        self.json_view = QPlainTextEdit()
        self.json_view.setReadOnly(True)
        self.json_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.json_view.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.find_edit = QLineEdit()
        self.find_edit.setPlaceholderText("Find in JSON…")
        self.find_edit.setClearButtonEnabled(True)
        self.find_edit.textChanged.connect(self._on_find_text)
        self.find_edit.returnPressed.connect(self.find_next)
        self.find_prev_button = QPushButton("◀")
        self.find_prev_button.setToolTip("Previous match")
        self.find_prev_button.clicked.connect(self.find_previous)
        self.find_next_button = QPushButton("▶")
        self.find_next_button.setToolTip("Next match")
        self.find_next_button.clicked.connect(self.find_next)
        self.match_label = QLabel("")
        self.copy_button = QPushButton("Copy")
        self.copy_button.setToolTip("Copy the whole document to the clipboard")
        self.copy_button.clicked.connect(self.copy_json)
        find_row = QHBoxLayout()
        find_row.addWidget(self.find_edit, 1)
        find_row.addWidget(self.find_prev_button)
        find_row.addWidget(self.find_next_button)
        find_row.addWidget(self.match_label)
        find_row.addWidget(self.copy_button)
        page = QWidget()
        lay = QVBoxLayout(page)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(find_row)
        lay.addWidget(self.json_view, 1)
        return page

    def _build_archive_page(self) -> QSplitter:
        """An .ozx's archive facts above its RFC-9 findings."""
        self.archive_view = QTextBrowser()
        self.findings = QTreeWidget()
        self.findings.setColumnCount(3)
        self.findings.setHeaderLabels(["Severity", "Code", "Message"])
        self.findings.setRootIsDecorated(False)
        for col in (0, 1):
            self.findings.header().setSectionResizeMode(
                col, QHeaderView.ResizeMode.ResizeToContents
            )
        page = QSplitter(Qt.Orientation.Vertical)
        page.addWidget(self.archive_view)
        page.addWidget(self.findings)
        return page

    def _build_metadata_page(self) -> QTreeWidget:
        """The OME metadata rules' findings, for directories and archives alike."""
        self.metadata_findings = QTreeWidget()
        self.metadata_findings.setColumnCount(4)
        self.metadata_findings.setHeaderLabels(["Severity", "Node", "Rule", "Found"])
        self.metadata_findings.setRootIsDecorated(False)
        for col in (0, 1, 2):
            self.metadata_findings.header().setSectionResizeMode(
                col, QHeaderView.ResizeMode.ResizeToContents
            )
        return self.metadata_findings

    def _build_table_page(self) -> QWidget:
        """A table's first rows; a ROI table's row, double-clicked, zooms to that ROI;
        its context menu opens it as layers too."""
        self.table_preview = _preview_table()
        self.table_note = QLabel("")
        self.table_note.setWordWrap(True)
        page = QWidget()
        lay = QVBoxLayout(page)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.table_note)
        lay.addWidget(self.table_preview, 1)
        self._preview_node: TreeNode | None = None
        self.table_preview.cellDoubleClicked.connect(self._zoom_to_row)
        self.table_preview.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table_preview.customContextMenuRequested.connect(self._row_menu)
        return page

    def _row_menu(self, pos: QPoint) -> None:
        row = self.table_preview.rowAt(pos.y())
        if row < 0 or self.roi_layer() is None:
            return
        menu = QMenu(self.table_preview)
        menu.addAction("Zoom to ROI", lambda: self._zoom_to_row(row))
        menu.addAction("Open as layers", lambda: self.open_row_as_layers(row))
        viewport = self.table_preview.viewport()
        menu.popup(viewport.mapToGlobal(pos) if viewport is not None else pos)

    def open_row_as_layers(self, row: int) -> None:
        """A previewed ROI table's row as its own layers (``open_roi``, through the
        Levels and ROIs dock: its level and mask): zoomed to, selected, opened."""
        from napari_ozx._qt.levels import open_selected_rois

        self._zoom_to_row(row)  # selects the row's rectangle in its layer
        layer = self.roi_layer()
        if layer is None or self._viewer is None or not layer.selected_data:
            return
        self._viewer.layers.selection.active = layer
        try:
            open_selected_rois(self._viewer)
        except OzxError as e:
            self.table_note.setText(_esc(str(e)))

    # ------------------------------------------------------------------ public API
    @property
    def inspection(self) -> Inspection | None:
        return self._inspection

    def inspect(self, source: str | os.PathLike[str], select: str | None = None) -> None:
        """Show *source* (an ``.ozx`` or OME-Zarr directory), selecting node *select*."""
        source = os.fspath(source)
        self._generation += 1
        gen = self._generation
        self.source_label.setText(
            f"<b>{_esc(os.path.basename(source.rstrip('/')) or source)}</b><br>"
            f"<small>{_esc(source)}</small>"
        )
        self.source_label.setToolTip(source)
        self._set_status(f"Opening {source}…")
        leases = self._leases

        def job() -> tuple[Inspection, list[TreeNode]]:
            insp = Inspection(source)
            leases.adopt(insp)
            leases.acquire(insp)
            try:
                insp.children(insp.root)
                chain = insp.find(select or "")
                return insp, chain
            finally:
                leases.release(insp)

        self.start_worker(
            job,
            returned=lambda r: self._on_opened(gen, r),
            errored=lambda e: self._on_open_failed(gen, source, e),
        )

    def select_path(self, path: str) -> None:
        """Select the node at Zarr *path* in the current source (loads its ancestors)."""
        insp = self._inspection
        if insp is None:
            return
        gen = self._generation
        self._run(insp, lambda i: i.find(path), lambda chain: self._show_chain(gen, chain))

    def current_node(self) -> TreeNode | None:
        item = self.tree.currentItem()
        return item.data(0, _NODE_ROLE) if item is not None else None

    def find_next(self) -> bool:
        return self._find(backward=False)

    def find_previous(self) -> bool:
        return self._find(backward=True)

    def copy_json(self) -> None:
        QApplication.clipboard().setText(self.json_view.toPlainText())
        self._set_status("JSON copied to the clipboard")

    # ------------------------------------------------------------------ workers
    def _run(
        self, insp: Inspection, fn: Callable[[Inspection], _T], on_result: Callable[[_T], None]
    ) -> None:
        leases = self._leases
        leases.acquire(insp)

        def job() -> _T:
            try:
                return fn(insp)
            finally:
                leases.release(insp)

        gen = self._generation
        if (
            self.start_worker(
                job, returned=on_result, errored=lambda e: self._on_task_failed(gen, e)
            )
            is None
        ):  # closed: the lease is not used
            leases.release(insp)

    def _alive(self, gen: int) -> bool:
        return gen == self._generation and not self._leases.shut

    def _on_task_failed(self, gen: int, err: BaseException) -> None:
        if self._alive(gen):
            self._set_status(f"Error: {err}")
            logger.warning("inspector task failed: %s", err)

    # ------------------------------------------------------------------ opening
    def _on_opened(self, gen: int, result: tuple[Inspection, list[TreeNode]]) -> None:
        insp, chain = result
        if not self._alive(gen):
            self._leases.retire(insp)
            return
        self._leases.retire(self._inspection)
        self._inspection = insp
        self._archive = None
        self.tree.clear()
        self._items.clear()
        root_item = self._make_item(insp.root)
        self.tree.addTopLevelItem(root_item)
        self._fill(root_item)
        root_item.setExpanded(True)
        self._show_chain(gen, chain)
        self._set_status("")
        self._show_archive(None)
        self._show_metadata(None)
        self.tabs.setTabText(self._metadata_tab, "Metadata rules …")
        self._run(insp, lambda i: i.metadata(), lambda m: self._on_metadata(gen, m))
        if insp.is_ozx:
            self.tabs.setTabText(self._archive_tab, "Archive …")
            self._run(insp, lambda i: i.archive(), lambda a: self._on_archive(gen, a))
        self.source_loaded.emit(insp.source)

    def _on_open_failed(self, gen: int, source: str, err: BaseException) -> None:
        if not self._alive(gen):
            return
        self._leases.retire(self._inspection)
        self._inspection = None
        self.tree.clear()
        self._items.clear()
        self._clear_details()
        self._set_status(f"Cannot inspect {source}: {err}")
        self.notify_error(f"Cannot inspect: {err}", source, err)

    def _show_chain(self, gen: int, chain: list[TreeNode]) -> None:
        if not self._alive(gen) or not chain:
            return
        item = None
        for node in chain:
            item = self._items.get(id(node))
            if item is None:
                break
            if node.loaded and node is not chain[-1]:
                self._fill(item)
                item.setExpanded(True)
        if item is not None:
            self.tree.setCurrentItem(item)
            self.tree.scrollToItem(item)

    # ------------------------------------------------------------------ tree
    def _icon_for(self, node: TreeNode) -> QIcon:
        style = self.style()
        if node.error:
            return style.standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning)
        if node.kind in (LEVEL, ARRAY):
            return style.standardIcon(QStyle.StandardPixmap.SP_FileIcon)
        if node.kind == TABLE:
            return style.standardIcon(QStyle.StandardPixmap.SP_FileDialogDetailedView)
        return style.standardIcon(QStyle.StandardPixmap.SP_DirIcon)

    def _make_item(self, node: TreeNode) -> QTreeWidgetItem:
        item = QTreeWidgetItem([node.title, node.info])
        item.setData(0, _NODE_ROLE, node)
        item.setIcon(0, self._icon_for(node))
        tip = f"{_KIND_LABEL.get(node.kind, node.kind)} · /{node.path}"
        if node.error:
            tip += f"\n{node.error}"
        item.setToolTip(0, tip)
        item.setToolTip(1, node.info)
        if node.expandable:
            item.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.ShowIndicator)
        self._items[id(node)] = item
        return item

    def _fill(self, item: QTreeWidgetItem) -> None:
        """Create the child items of a node whose children are loaded (no I/O)."""
        node: TreeNode = item.data(0, _NODE_ROLE)
        if node.children is None or item.childCount():
            return
        item.addChildren([self._make_item(c) for c in node.children])
        item.setIcon(0, self._icon_for(node))
        if not node.children:
            item.setChildIndicatorPolicy(QTreeWidgetItem.ChildIndicatorPolicy.DontShowIndicator)

    def _on_expanded(self, item: QTreeWidgetItem) -> None:
        node: TreeNode | None = item.data(0, _NODE_ROLE)
        insp = self._inspection
        if node is None or insp is None:
            return
        if node.loaded:
            self._fill(item)
            return
        item.setText(1, "loading…")
        gen = self._generation

        def done(_: object) -> None:
            if not self._alive(gen):
                return
            item.setText(1, node.info)
            self._fill(item)

        self._run(insp, lambda i: i.children(node), done)

    # ------------------------------------------------------------------ details
    def _on_current_changed(
        self, current: QTreeWidgetItem | None, _previous: QTreeWidgetItem | None = None
    ) -> None:
        insp = self._inspection
        node: TreeNode | None = current.data(0, _NODE_ROLE) if current is not None else None
        if node is None or insp is None:
            return
        self._details_token += 1
        token, gen = self._details_token, self._generation
        self._set_status("")
        self._run(insp, lambda i: i.details(node), lambda d: self._on_details(gen, token, d))

    def _on_details(self, gen: int, token: int, d: NodeDetails) -> None:
        if not self._alive(gen) or token != self._details_token:
            return
        self._last_details = d
        self.summary.setHtml(details_html(d))
        self.array_view.setHtml(array_html(d))
        self.tabs.setTabEnabled(1, d.array is not None)
        self.json_view.setPlainText(d.raw_json)
        self.tabs.setTabText(2, " + ".join(d.raw_files) if d.raw_files else "JSON")
        self._on_find_text(self.find_edit.text())
        self._start_preview(gen, token, d.node)
        self.details_shown.emit(d.node.path)

    # ------------------------------------------------------------------ table preview
    def _start_preview(self, gen: int, token: int, node: TreeNode) -> None:
        """A table node: read its first rows in a worker; another node: no Table tab."""
        insp = self._inspection
        is_table = node.kind == TABLE and insp is not None
        self._preview_node = node if is_table else None
        self.tabs.setTabEnabled(self._table_tab, is_table)
        self.table_preview.clear()
        self.table_preview.setRowCount(0)
        self.table_preview.setColumnCount(0)
        if not is_table:
            self.table_note.setText("")
            if self.tabs.currentIndex() == self._table_tab:
                self.tabs.setCurrentIndex(0)
            return
        assert insp is not None
        self.table_note.setText(f"Reading the first rows of {_esc(node.title)}…")
        self._run(
            insp,
            lambda i: i.table_preview(node),
            lambda p: self._on_preview(gen, token, node, p),
        )

    def _on_preview(self, gen: int, token: int, node: TreeNode, p: TablePreview | None) -> None:
        if not self._alive(gen) or token != self._details_token or p is None:
            return
        show_preview(self.table_preview, self.table_note, p, node)
        follow = self._follow_table
        if follow is not None and node.path == follow.node:
            self.tabs.setCurrentIndex(self._table_tab)  # a table's layer: show its rows
        self.table_preview_shown.emit(node.path)

    def roi_layer(self, node: TreeNode | None = None) -> Layer | None:
        """The viewer's Shapes layer showing the ROI table of *node* (default: the one
        previewed), read from the file inspected; else None."""
        from napari_ozx.layers.tables import TABLE_KEY

        node = node or self._preview_node
        insp = self._inspection
        if self._viewer is None or node is None or insp is None:
            return None
        name = node.path.rstrip("/").rsplit("/", 1)[-1]
        here = os.path.realpath(str(insp.source))
        for layer in self._viewer.layers:
            meta = getattr(layer, "metadata", None)
            info = meta.get(TABLE_KEY) if isinstance(meta, dict) else None
            if (
                isinstance(info, dict)
                and info.get("table") == name
                and os.path.realpath(str(info.get("source"))) == here
            ):
                return layer
        return None

    def _zoom_to_row(self, row: int, _column: int = 0) -> None:
        """Double-click on a previewed ROI table's row: zoom the viewer to that ROI
        (its Shapes layer must be shown; the first column is the ROI's name)."""
        from napari_ozx.layers.tables import zoom_to_roi

        layer = self.roi_layer()
        if layer is None:
            self.table_note.setText(
                self.table_note.text().split("<br>")[0]
                + "<br>(open the image with its ROI table to zoom to a row)"
            )
            return
        item = self.table_preview.item(row, 0)
        names = layer.features["name"].astype(str).tolist() if "name" in layer.features else []
        key: int | str = item.text() if item is not None and item.text() in names else row
        try:
            zoom_to_roi(self._viewer, layer, key)
        except OzxError as e:
            self.table_note.setText(f"{_esc(str(e))}")

    def _clear_details(self) -> None:
        self._last_details = None
        self.summary.clear()
        self.array_view.clear()
        self.json_view.clear()
        self._show_archive(None)
        self._show_metadata(None)

    # ------------------------------------------------------------------ archive
    def _on_archive(self, gen: int, facts: ArchiveFacts | None) -> None:
        if not self._alive(gen):
            return
        self._archive = facts
        self._show_archive(facts)
        self.archive_shown.emit()

    def _show_archive(self, facts: ArchiveFacts | None) -> None:
        self.findings.clear()
        if facts is None:
            self.archive_view.setHtml(
                "<p>Archive facts and RFC-9 findings are shown for <code>.ozx</code> files.</p>"
            )
            self.tabs.setTabText(self._archive_tab, "Archive")
            self.tabs.setTabEnabled(
                self._archive_tab, bool(self._inspection and self._inspection.is_ozx)
            )
            return
        self.tabs.setTabEnabled(self._archive_tab, True)
        self.archive_view.setHtml(archive_html(facts))
        items = []
        for f in facts.findings:
            it = QTreeWidgetItem(
                [f.severity, f.code, f"{f.member}: {f.message}" if f.member else f.message]
            )
            it.setIcon(0, self._severity_icon(f.severity))
            it.setToolTip(2, f"{f.message}\n\nRule: {f.rule}" if f.rule else f.message)
            items.append(it)
        self.findings.addTopLevelItems(items)
        c = facts.counts()
        parts = [f"{c[k]} {k}{'s' if c[k] != 1 else ''}" for k in ("error", "warning") if c[k]]
        self.tabs.setTabText(
            self._archive_tab, f"Archive ({', '.join(parts)})" if parts else "Archive"
        )

    # ------------------------------------------------------------------ metadata rules
    def _on_metadata(self, gen: int, facts: MetadataFacts) -> None:
        if not self._alive(gen):
            return
        self._metadata = facts
        self._show_metadata(facts)
        self.metadata_shown.emit(facts.badge())

    def _show_metadata(self, facts: MetadataFacts | None) -> None:
        self.metadata_findings.clear()
        if facts is None:
            self.validation_badge.setText("")
            self.tabs.setTabText(self._metadata_tab, "Metadata rules")
            return
        colour = "#2e7d32" if facts.ok else "#c62828"
        self.validation_badge.setText(
            f"<span style='color:{colour}; font-weight:bold'>{_esc(facts.badge())}</span>"
        )
        items = []
        for f in facts.findings:
            it = QTreeWidgetItem([f.severity, f.node, f.code, f.message])
            it.setIcon(0, self._severity_icon(f.severity))
            it.setToolTip(3, f"{f.message}\n\nRule ({f.section}): {f.rule}")
            items.append(it)
        self.metadata_findings.addTopLevelItems(items)
        c = facts.counts()
        parts = [f"{c[k]} {k}{'s' if c[k] != 1 else ''}" for k in ("error", "warning") if c[k]]
        self.tabs.setTabText(
            self._metadata_tab,
            f"Metadata rules ({', '.join(parts)})" if parts else "Metadata rules",
        )

    def _severity_icon(self, severity: str) -> QIcon:
        if severity in self._icons:
            return self._icons[severity]
        color = self._theme_color({"error": "error", "warning": "warning"}.get(severity, "current"))
        if color is None:
            sp = {
                "error": QStyle.StandardPixmap.SP_MessageBoxCritical,
                "warning": QStyle.StandardPixmap.SP_MessageBoxWarning,
            }.get(severity, QStyle.StandardPixmap.SP_MessageBoxInformation)
            icon = self.style().standardIcon(sp)
        else:
            pix = QPixmap(12, 12)
            pix.fill(Qt.GlobalColor.transparent)
            p = QPainter(pix)
            p.setRenderHint(QPainter.RenderHint.Antialiasing)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(color))
            p.drawEllipse(1, 1, 10, 10)
            p.end()
            icon = QIcon(pix)
        self._icons[severity] = icon
        return icon

    def _theme_color(self, name: str) -> str | None:
        if self._viewer is None:
            return None
        try:
            from napari.utils.theme import get_theme

            return getattr(get_theme(self._viewer.theme), name).as_hex()
        except Exception:
            return None

    def _on_theme(self, *_: object) -> None:
        self._icons.clear()
        if self._archive is not None:
            self._show_archive(self._archive)

    # ------------------------------------------------------------------ find
    def _on_find_text(self, text: str) -> None:
        doc = self.json_view.document()
        selections = []
        if text:
            fmt_color = self.json_view.palette().highlight()
            cursor = QTextCursor(doc)
            while True:
                cursor = doc.find(text, cursor)
                if cursor.isNull():
                    break
                sel = QTextEdit.ExtraSelection()
                sel.cursor = cursor
                sel.format.setBackground(fmt_color)
                sel.format.setForeground(self.json_view.palette().highlightedText())
                selections.append(sel)
                if len(selections) >= 10_000:
                    break
        self.json_view.setExtraSelections(selections)
        self.match_label.setText(
            f"{len(selections)} match{'es' if len(selections) != 1 else ''}" if text else ""
        )
        if text and selections:
            c = self.json_view.textCursor()
            c.movePosition(QTextCursor.MoveOperation.Start)
            self.json_view.setTextCursor(c)
            self._find(backward=False)

    def _find(self, backward: bool) -> bool:
        text = self.find_edit.text()
        if not text:
            return False
        flags = QTextDocument.FindFlag.FindBackward if backward else QTextDocument.FindFlag(0)
        if self.json_view.find(text, flags):
            return True
        c = self.json_view.textCursor()  # wrap around
        c.movePosition(
            QTextCursor.MoveOperation.End if backward else QTextCursor.MoveOperation.Start
        )
        self.json_view.setTextCursor(c)
        return self.json_view.find(text, flags)

    # ------------------------------------------------------------------ viewer / files
    def _on_active_layer(self, event: object = None) -> None:
        if self._viewer is None:
            return
        layer = self._viewer.layers.selection.active
        meta = getattr(layer, "metadata", None) if layer is not None else None
        found = layer_source(meta)
        if found is None:
            return
        table = TableOrigin.from_metadata(meta) if LayerSource.from_metadata(meta) is None else None
        self._follow_table = table
        source, path = found
        insp = self._inspection
        if insp is not None and os.path.abspath(insp.source) == os.path.abspath(source):
            self.select_path(path)
        else:
            self.inspect(source, select=path)

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Inspect OME-Zarr", "", "OME-Zarr (*.ozx *.zip zarr.json .zattrs);;All files (*)"
        )
        if path:
            if os.path.basename(path) in ("zarr.json", ".zattrs", ".zgroup"):
                path = os.path.dirname(path)
            self.inspect(path)

    def _choose_dir(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Inspect an OME-Zarr directory")
        if path:
            self.inspect(path)

    def _set_status(self, text: str) -> None:
        self.status.setText(text)
        self.status.setVisible(bool(text))

    def shutdown(self) -> None:
        """Stop following the viewer and close the inspected source (idempotent)."""
        self._generation += 1
        self._inspection = None
        super().shutdown()
