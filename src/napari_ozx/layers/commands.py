"""napari commands (Layers > Annotate, layer context menu) for editing labels in place,
and for saving drawn rectangles as a ROI table.

The viewer is injected by napari from the annotation, so this module imports napari at
its top; it is imported only when a command runs.
"""

import logging
import os

import napari
from napari.utils.notifications import show_info

from napari_ozx.errors import OzxError
from napari_ozx.layers.add_labels import add_labels_to_image
from napari_ozx.layers.editable import EditableLabels, edit_selected_labels
from napari_ozx.layers.provenance import LayerSource
from napari_ozx.layers.saveback import save_labels_back

__all__ = ["add_labels", "edit_labels", "save_labels", "save_roi_table"]

logger = logging.getLogger(__name__)


def edit_labels(viewer: napari.viewer.Viewer) -> None:
    """Make the selected multiscale (read-only) labels layers editable at level 0."""
    new = edit_selected_labels(viewer)
    if not new:
        raise OzxError(
            "select a read-only (multiscale) labels layer opened from OME-Zarr to edit it"
        )
    show_info(f"napari-ozx: {', '.join(lyr.name for lyr in new)} can be painted now")


def save_labels(viewer: napari.viewer.Viewer) -> None:
    """Save the edits of the selected labels layers back into their files."""
    layers = [lyr for lyr in viewer.layers.selection if isinstance(lyr.data, EditableLabels)]
    if not layers:
        raise OzxError("select an edited labels layer opened from OME-Zarr to save it back")
    done = [str(save_labels_back(lyr)) for lyr in layers]
    # a notification, as every save says what it wrote (it costs napari's GUI ~65 ms
    # to post under software OpenGL, measured by benchmarks/bench_saveback_napari.py,
    # inside the bar), and the status bar for whoever missed it
    text = f"napari-ozx: labels saved back into {', '.join(sorted(set(done)))}"
    logger.info("%s", text)
    viewer.status = text
    show_info(text)


def add_labels(viewer: napari.viewer.Viewer) -> None:
    """Save the selected new labels layers into the file of the image they were drawn
    over (as ``labels/<layer name>``); afterwards they save back like opened labels."""
    from napari.layers import Labels

    new = [
        lyr
        for lyr in viewer.layers.selection
        if isinstance(lyr, Labels)
        and not isinstance(lyr.data, EditableLabels)
        and (LayerSource.of(lyr) is None or LayerSource.of(lyr).kind != "labels")  # type: ignore[union-attr]
    ]
    if not new:
        raise OzxError(
            "select a new labels layer (e.g. Layers > New labels over an opened image) "
            "to save it into the image's file"
        )
    _, image = _target_image(viewer, "to save the labels into", "the labels layer")
    done = [str(add_labels_to_image(lyr, image)) for lyr in new]
    names = ", ".join(repr(lyr.name) for lyr in new)
    show_info(f"napari-ozx: labels {names} saved into {', '.join(sorted(set(done)))}")


def save_roi_table(viewer: napari.viewer.Viewer) -> None:
    """Save the selected Shapes layers' rectangles as ROI tables (``tables/<layer name>``)
    of the image they lie over: the selected napari-ozx image layer, else the only one.
    A layer read from a ROI table of that image replaces that table; any other name that
    exists is refused."""
    from napari.layers import Shapes

    from napari_ozx.layers.save_roi import save_roi_table as save
    from napari_ozx.layers.tables import TABLE_KEY

    shapes = [lyr for lyr in viewer.layers.selection if isinstance(lyr, Shapes)]
    if not shapes:
        raise OzxError("select a Shapes layer with rectangles to save it as a ROI table")
    (source, node), image = _target_image(viewer, "the ROIs were drawn over", "the Shapes layer")
    done = []
    for lyr in shapes:
        meta = lyr.metadata.get(TABLE_KEY) if isinstance(lyr.metadata, dict) else None
        same = (
            isinstance(meta, dict)
            and meta.get("type") == "roi_table"
            and os.path.realpath(str(meta.get("source"))) == os.path.realpath(source)
            and meta.get("image") == node
        )
        name = str(meta["table"]) if same and meta and meta.get("table") else None
        done.append((lyr.name, str(save(lyr, image, name, overwrite=name is not None))))
    text = ", ".join(f"{n!r}" for n, _ in done)
    show_info(f"napari-ozx: ROIs {text} saved into {', '.join(sorted({p for _, p in done}))}")


def _target_image(
    viewer: napari.Viewer, role: str, with_what: str
) -> tuple[tuple[str, str], "napari.layers.Image"]:
    """``((source, node), layer)`` of the one image a command writes into: the selected
    image layers opened by napari-ozx, else all of them, naming one image; else one
    :class:`OzxError` saying what to select (*role*: "to save the labels into")."""
    from napari.layers import Image

    images: dict[tuple[str, str], Image] = {}
    selected = [lyr for lyr in viewer.layers.selection if isinstance(lyr, Image)]
    for lyr in selected or [lyr for lyr in viewer.layers if isinstance(lyr, Image)]:
        src = LayerSource.of(lyr)
        if src is not None and src.kind in ("image", "well"):
            images.setdefault((src.source, src.node), lyr)
    if len(images) != 1:
        raise OzxError(
            f"select the image (opened from an OME-Zarr file) {role}, together with "
            f"{with_what} ({len(images)} candidate images)"
        )
    return next(iter(images.items()))
