"""OzxDockWidget: one lifecycle for the dock widgets (connections, own workers, reports).

Qt widgets with napari's ``ViewerModel`` (no window, no OpenGL): closing, undocking or
deleting a widget disconnects it from the viewer; closing stops and waits for the
widget's own workers only; reports put the reason first.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from qtpy.QtWidgets import QWidget

from napari_ozx._qt.base import OzxDockWidget, notify
from tests._support.classic_dask import QUERY_PLANNING, tokened

pytestmark = pytest.mark.usefixtures("config_dir")

napari = pytest.importorskip("napari")


@pytest.fixture
def viewer():
    from napari.components import ViewerModel

    return ViewerModel()


class Probe(OzxDockWidget):
    """A dock widget that counts the viewer events it receives."""

    def __init__(self, viewer: Any = None) -> None:
        super().__init__(viewer)
        self.seen: list[Any] = []
        if viewer is not None:
            self.connect_event(viewer.layers.events.inserted, self.on_inserted)

    def on_inserted(self, event: Any) -> None:
        self.seen.append(event.value.name)


def _own_threads() -> set[threading.Thread]:
    """Python threads, without the placeholders Python makes for Qt's pool threads."""
    return {t for t in threading.enumerate() if not isinstance(t, threading._DummyThread)}


# ----------------------------------------------------------------------- connections


@pytest.mark.parametrize("how", ["close", "undock", "delete", "shutdown twice"])
def test_every_ending_disconnects_from_the_viewer(qtbot, viewer, how):
    w = Probe(viewer)
    viewer.add_image(np.zeros((4, 4)), name="before")
    assert w.seen == ["before"]
    if how == "close":
        qtbot.addWidget(w)
        w.close()
    elif how == "undock":  # what napari does when the dock is removed
        dock = QWidget()
        qtbot.addWidget(dock)
        w.setParent(dock)
        assert not w.closed
        w.setParent(None)
        qtbot.addWidget(w)
    elif how == "delete":  # the viewer's window closed: the C++ widget is deleted
        w.deleteLater()
        qtbot.waitUntil(lambda: w.closed, timeout=5_000)
    else:
        qtbot.addWidget(w)
        w.shutdown()
        w.shutdown()  # idempotent
    assert w.closed
    viewer.add_image(np.zeros((4, 4)), name="after")
    assert w.seen == ["before"]
    assert w.start_worker(lambda: 1) is None  # and nothing new starts


def test_real_widgets_stop_following_the_viewer(qtbot, viewer, monkeypatch):
    from napari_ozx._qt.export import ExportWidget
    from napari_ozx._qt.inspector import InspectorWidget
    from napari_ozx._qt.plate_navigator import PlateNavigator

    calls: list[str] = []
    for cls, name in (
        (InspectorWidget, "_on_active_layer"),
        (InspectorWidget, "_on_theme"),
        (ExportWidget, "_refresh_layers"),
        (PlateNavigator, "_on_inserted"),
        (PlateNavigator, "_on_removed"),
    ):
        monkeypatch.setattr(
            cls, name, lambda self, *a, _n=f"{cls.__name__}.{name}": calls.append(_n)
        )
    widgets = [InspectorWidget(viewer), ExportWidget(viewer), PlateNavigator(viewer)]
    for w in widgets:
        qtbot.addWidget(w)
    nav = widgets[2]
    assert nav._on_canvas_drag in viewer.mouse_drag_callbacks

    layer = viewer.add_image(np.zeros((4, 4)), name="a")
    viewer.theme = "light"
    qtbot.waitUntil(lambda: "ExportWidget._refresh_layers" in calls, timeout=5_000)  # debounced
    assert {"InspectorWidget._on_active_layer", "InspectorWidget._on_theme"} <= set(calls)
    assert "PlateNavigator._on_inserted" in calls

    for w in widgets:
        w.close()
    calls.clear()
    viewer.add_image(np.zeros((4, 4)), name="b")
    viewer.layers.remove(layer)
    viewer.theme = "dark"
    qtbot.wait(100)  # longer than the export panel's debounce
    assert calls == []
    assert nav._on_canvas_drag not in viewer.mouse_drag_callbacks


# --------------------------------------------------------------------------- workers


def test_close_cancels_only_its_own_worker(qtbot, monkeypatch):
    """A's close stops A's work and returns while B's long job goes on (superqt's
    await_workers would have blocked on B's worker too)."""
    from superqt.utils import WorkerBase

    def global_wait(*_: Any) -> None:
        raise AssertionError("a widget waited for every worker of the process")

    monkeypatch.setattr(WorkerBase, "await_workers", global_wait)
    a, b = Probe(), Probe()
    qtbot.addWidget(a)
    qtbot.addWidget(b)
    a_cancel, b_gate = threading.Event(), threading.Event()
    a_started, b_started, b_done = threading.Event(), threading.Event(), threading.Event()
    a_results: list[Any] = []

    def a_job() -> str:
        a_started.set()
        while not a_cancel.wait(0.01):
            pass
        return "cancelled"

    def b_job() -> str:
        b_started.set()
        try:
            b_gate.wait(60)
            return "b done"
        finally:
            b_done.set()

    b_results: list[Any] = []
    a.start_worker(a_job, returned=a_results.append, cancel=a_cancel)
    b.start_worker(b_job, returned=b_results.append)
    assert a_started.wait(10) and b_started.wait(10)
    try:
        a.close()
        assert a_cancel.is_set() and not a.workers  # A's job ended within the close
        assert not b_done.is_set() and len(b.workers) == 1  # B's job was not waited for
    finally:
        b_gate.set()
    qtbot.waitUntil(lambda: not b.workers, timeout=10_000)
    assert b_results == ["b done"]
    qtbot.wait(20)
    assert a_results == []  # a closed widget gets no callbacks


def test_close_aborts_a_generator_worker_at_its_next_yield(qtbot):
    w = Probe()
    qtbot.addWidget(w)
    steps: list[int] = []
    started = threading.Event()

    def gen():
        for i in range(10_000):
            steps.append(i)
            started.set()
            threading.Event().wait(0.005)
            yield i

    w.start_worker(gen)
    assert started.wait(10)
    w.close()
    assert not w.workers
    n = len(steps)
    qtbot.wait(50)
    assert len(steps) == n < 10_000


def test_no_thread_outlives_close(qtbot):
    """Work that runs its own thread pool (like the writer) is cancelled and joined."""
    before = _own_threads()
    w = Probe()
    qtbot.addWidget(w)
    cancel = threading.Event()
    running = threading.Event()

    def spin() -> None:
        running.set()
        cancel.wait(60)

    def job() -> None:
        with ThreadPoolExecutor(2, thread_name_prefix="dock-base-test") as pool:
            for _ in range(2):
                pool.submit(spin)

    w.start_worker(job, cancel=cancel)
    assert running.wait(10)
    assert any(t.name.startswith("dock-base-test") for t in threading.enumerate())
    w.close()
    assert not w.workers
    assert not [t.name for t in _own_threads() - before if t.is_alive()]


def test_closing_the_export_panel_cancels_its_export(qtbot, viewer, tmp_path):
    """A running export is cancelled by closing the panel: no writer thread, no file."""
    import dask.array as da

    from napari_ozx._qt.export import ExportWidget

    gate = threading.Event()
    entered = threading.Event()

    def block(block_info=None):
        if threading.current_thread().name.startswith("ozx-write"):
            entered.set()
            gate.wait(0.05)
        return np.zeros(block_info[None]["chunk-shape"], dtype=np.uint8)

    big = da.map_blocks(
        tokened(block),
        chunks=((1,) * 64, (256,) * 2, (256,) * 2),
        dtype=np.uint8,
        meta=np.empty((0, 0, 0), np.uint8),  # query planning would not infer it
    )
    # hidden under query planning: napari cannot show its dask arrays (classic_dask.py)
    viewer.add_image(big, name="lazy", contrast_limits=[0, 1], visible=not QUERY_PLANNING)
    w = ExportWidget(viewer)
    qtbot.addWidget(w)
    w.chunk_spin.setValue(64)
    w.shard_spin.setValue(256)
    w.shard_z_spin.setValue(1)
    target = tmp_path / "out" / "big.ozx"
    target.parent.mkdir()
    w.target_edit.setText(str(target))
    finished: list[str] = []
    w.export_finished.connect(finished.append)
    w.start_export()
    assert w.busy and entered.wait(30)
    w.close()
    assert not w.workers
    assert not [t.name for t in threading.enumerate() if t.name.startswith("ozx-write")]
    assert list(target.parent.iterdir()) == []
    qtbot.wait(20)
    assert finished == []  # the closed panel is not updated


# ------------------------------------------------------------------------- reporting


def test_notification_puts_the_reason_first(tmp_path):
    from napari.utils.notifications import notification_manager

    seen: list[Any] = []
    notification_manager.notification_ready.connect(seen.append)
    try:
        path = tmp_path / "deep" / "plate.ozx"
        note = notify("error", "Cannot open well B2: field 1 missing", path, ValueError("boom"))
        notify("info", "Exported", None)
    finally:
        notification_manager.notification_ready.disconnect(seen.append)
    assert [n.message for n in seen] == [
        "Cannot open well B2: field 1 missing (plate.ozx)",
        "Exported",
    ]
    assert note is seen[0] and str(note.severity) == "error"
    assert str(tmp_path) not in note.message  # the short name only
    assert note.details.splitlines() == [
        "Cannot open well B2: field 1 missing",
        f"File: {path}",
        "ValueError: boom",
    ]
    assert [name for name, _ in note.actions] == ["Details"]


def test_inspector_failure_is_notified_reason_first(qtbot, tmp_path):
    from napari.utils.notifications import notification_manager

    from napari_ozx._qt.inspector import InspectorWidget

    w = InspectorWidget()
    qtbot.addWidget(w)
    empty = tmp_path / "not-a-zarr"
    empty.mkdir()
    seen: list[Any] = []
    notification_manager.notification_ready.connect(seen.append)
    try:
        w.inspect(empty)
        qtbot.waitUntil(lambda: bool(seen), timeout=10_000)
    finally:
        notification_manager.notification_ready.disconnect(seen.append)
    (note,) = seen
    assert note.message.startswith("Cannot inspect: ")
    assert note.message.endswith("(not-a-zarr)")
    assert f"File: {empty}" in note.details


@pytest.mark.gui
@pytest.mark.parametrize("how", ["close the viewer", "remove the dock"])
def test_a_docked_widget_ends_with_its_dock(make_napari_viewer, qtbot, how):
    """The viewer's window deletes its docks when it closes, and napari reparents a
    removed dock's widget to nothing: either way the widget lets go of the viewer."""
    viewer = make_napari_viewer()
    w = Probe(viewer)
    dock = viewer.window.add_dock_widget(w, name="probe")

    def connected() -> bool:
        for cb in viewer.layers.events.inserted.callbacks:
            owner = cb[0]() if isinstance(cb, tuple) else getattr(cb, "__self__", None)
            if owner is w:
                return True
        return False

    assert connected() and not w.closed
    w_ref = w._life  # the record outlives the Qt object
    if how == "close the viewer":
        viewer.close()
    else:
        viewer.window.remove_dock_widget(dock)
    qtbot.waitUntil(lambda: w_ref.closed, timeout=10_000)
    assert not connected()
