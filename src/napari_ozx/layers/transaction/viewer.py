"""The viewer after an edit of the file it shows: what reads the old bytes follows.

* ``.ozx`` rebuilt (:func:`after_archive`): every open lazy level of the old archive reads
  the new one (same member bytes), and editable labels that had opened it count as having
  opened the new file (:func:`~napari_ozx.layers.editable.repoint_archive`), so a later
  save of another label image of that file is not refused as "changed since opened";
* a directory group swapped for a new copy (:func:`keep_for_readers`): readers opened on
  that group keep its old files (a hard-linked clone, :mod:`napari_ozx.ngff.read.live`);
* files rewritten in a directory (:func:`after_directory`): readers of those arrays drop
  their cached shard indexes (offsets of the old files).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from napari_ozx.ozx.edit import Fingerprint, StagedEdit, under

if TYPE_CHECKING:
    from napari_ozx.layers.editable import EditableLabels

logger = logging.getLogger(__name__)

__all__ = ["after_archive", "after_directory", "keep_for_readers"]


def after_archive(
    target: Path, before: Fingerprint, follow: list[EditableLabels], changed: str | None
) -> None:
    from napari_ozx.layers.editable import repoint_archive

    repoint_archive(target, before, follow, changed)


def keep_for_readers(group: Path) -> None:
    from napari_ozx.ngff.read.live import retain_for_readers

    try:
        retain_for_readers(group)
    except OSError:  # no hard links here: those readers see the new files
        logger.warning("open layers reading %s now read its new content", group)


def after_directory(root: Path, edit: StagedEdit) -> None:
    from napari_ozx.ngff.read.live import live_readers, set_array

    keys = list(edit.staged_keys())
    for reader, rel in live_readers(root):
        parts = [rel.replace(os.sep, "/")] if rel else []
        path = "/".join([*parts, reader.array.path.strip("/")]).strip("/")
        if any(under(k, path) or k == path or under(path, k) for k in keys):
            set_array(reader, reader.array)
