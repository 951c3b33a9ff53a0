"""Edit a store in place, all or nothing: the container half of an edit transaction.

``staged``: :class:`StagedEdit`, the keys an edit puts (bytes, or a function that writes
a group through a zarr store) and deletes; :class:`Fingerprint`, what must not have
changed since the file was opened. ``directory``: :func:`commit_directory`, the edit
applied to a directory store (new sub-trees built beside their place and renamed in,
files through temporaries, data before the documents that list it). ``archive``:
:func:`rebuild_archive`, a new ``.ozx`` with the edit applied, every unchanged member
copied byte for byte, renamed onto the old one; :class:`CopyAhead` starts that copy
while the caller still computes its edit. Nothing here knows OME or napari; the
napari half (layers that read the file follow it) is ``napari_ozx.layers.transaction``.
"""

from __future__ import annotations

from napari_ozx.ozx.edit.archive import CopyAhead, rebuild_archive
from napari_ozx.ozx.edit.directory import commit_directory, unwritable
from napari_ozx.ozx.edit.staged import (
    EditError,
    Fingerprint,
    StagedEdit,
    WriteData,
    check_key,
    under,
)

__all__ = [
    "CopyAhead",
    "EditError",
    "Fingerprint",
    "StagedEdit",
    "WriteData",
    "check_key",
    "commit_directory",
    "rebuild_archive",
    "under",
    "unwritable",
]
