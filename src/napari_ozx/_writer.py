"""npe2 writers: napari layers -> OME-Zarr ``.ozx`` or directory.

The first writer (napari's default for ``.ozx`` / ``.zarr``) writes 0.5, or 0.6 when a
layer's place needs coordinate systems (rotated, sheared, with an affine), so a save never
drops a transform; the versioned entries write what their names say (0.4 / 0.5 refuse,
naming the transform, what they cannot store).

Thin leaf: :mod:`napari_ozx.layers.writing` turns the layer data into image / label
specs and writes them; this module adds what File > Save needs around that: the options
remembered by the export panel (:func:`napari_ozx.layers.export.load_options`), a
napari progress bar, and one notification saying what was written where ("Saved
cells.ozx: OME-Zarr 0.5, 1 image (2 channels), 1 labels": the version "auto" chose).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from napari_ozx.layers.writing import FullLayerData, write_layer_data
from napari_ozx.ngff.write.writer import WriteOptions, WriteSummary

if TYPE_CHECKING:
    from napari.utils import progress as Progress

    from napari_ozx.ngff.write.specs import ArrayData

logger = logging.getLogger(__name__)

#: napari's single-layer writer: (path, data, layer attributes) -> the paths written
SingleLayerWriter = Callable[[str, "ArrayData | Sequence[ArrayData]", dict[str, object]], list[str]]


def write_layers(
    path: str,
    layers: list[FullLayerData],
    options: WriteOptions | None = None,
    version: str | None = None,
) -> list[str]:
    """Save image and label layers to *path* (``.ozx`` or directory).

    *version* (File > Save's writers) overrides the version of the remembered options."""

    def progress(done: int, n: int) -> None:
        if bar is not None:
            bar.total = n
            bar.n = done
            bar.refresh()

    bar = _progress_bar(f"Saving {path}")
    try:
        if options is None:  # the options remembered by the export panel
            from napari_ozx.layers.export import load_options

            options = load_options(path)
        if version is not None:  # File > Save: the version the writer's name promises
            from napari_ozx.layers.file_save import with_version

            options = with_version(options, version, path)
        written = write_layer_data(path, layers, options, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    notify_written(written)
    return [str(written.target)]


def notify_written(written: WriteSummary) -> None:
    """Show (and log) what a save wrote: its one line, the full path below it (shown when
    the notification is expanded). Never raises: the file is written."""
    text = f"{written.message()}\n{written.target}"
    logger.info("%s", text.replace("\n", "; "))
    try:
        from napari.utils.notifications import show_info

        show_info(text)
    except Exception:  # a notification must never fail a save that succeeded
        logger.debug("notification failed", exc_info=True)


def _progress_bar(desc: str) -> Progress | None:
    try:
        from napari.utils import progress
    except ImportError:  # pragma: no cover
        return None
    return progress(total=0, desc=desc)


# File > Save: one npe2 writer per version and kind, each writing what its display name says
def _layers_writer(version: str) -> Callable[[str, list[FullLayerData]], list[str]]:
    def write(path: str, layers: list[FullLayerData]) -> list[str]:
        return write_layers(path, layers, version=version)

    return write


write_layers_auto = _layers_writer("auto")
write_layers_05 = _layers_writer("0.5")
write_layers_06 = _layers_writer("0.6")
write_layers_04 = _layers_writer("0.4")


def _single_layer_writer(kind: str, version: str) -> SingleLayerWriter:
    def write(
        path: str, data: ArrayData | Sequence[ArrayData], meta: dict[str, object]
    ) -> list[str]:
        return write_layers(path, [(data, meta, kind)], version=version)

    return write


write_single_image = _single_layer_writer("image", "auto")
write_single_labels = _single_layer_writer("labels", "auto")
write_single_image_04 = _single_layer_writer("image", "0.4")
write_single_labels_04 = _single_layer_writer("labels", "0.4")
