"""``atomic.create_partial``: the one place a save's hidden ``.partial`` file or directory
is made, for the ``.ozx`` writer and the directory writer alike."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from napari_ozx.ozx import atomic
from napari_ozx.ozx.writer import OzxWriter


@pytest.mark.parametrize("directory", [False, True])
def test_partial_is_hidden_locked_and_swept_only_when_dead(tmp_path: Path, directory: bool):
    target = tmp_path / "out.ozx"
    path, fd = atomic.create_partial(target, directory=directory)
    try:
        assert path.parent == tmp_path and path.name.startswith(".out.ozx.")
        assert path.name.endswith(".partial") and path.is_dir() is directory
        assert not list(tmp_path.glob("*.creating"))
        assert atomic.remove_stale_partials(target) == []  # our lock is held
    finally:
        atomic.release(fd)
    assert atomic.remove_stale_partials(target) == [path]
    assert not path.exists()


def test_taken_names_are_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    target = tmp_path / "out.ozx"
    taken = tmp_path / ".out.ozx.000000000000.creating"
    taken.write_bytes(b"")
    names = iter([taken.with_suffix(".partial"), tmp_path / ".out.ozx.111111111111.partial"])
    monkeypatch.setattr(atomic, "partial_name", lambda _target: next(names))
    path, fd = atomic.create_partial(target)
    atomic.release(fd)
    assert path.name == ".out.ozx.111111111111.partial" and taken.exists()


def test_writer_writes_through_a_partial(tmp_path: Path):
    target = tmp_path / "out.ozx"
    with OzxWriter(target) as w:
        temp = w.temp_path
        assert temp.name.startswith(".out.ozx.") and temp.suffix == ".partial"
        assert os.access(temp, os.W_OK)
        w.add("zarr.json", b"{}")
    assert target.is_file() and not temp.exists()
