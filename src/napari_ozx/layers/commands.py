"""napari commands (Layers > Annotate, layer context menu) for editing labels in place.

The viewer is injected by napari from the annotation, so this module imports napari at
its top; it is imported only when a command runs.
"""

import napari
from napari.utils.notifications import show_info

from ..errors import OzxError
from .editable import EditableLabels, edit_selected_labels
from .saveback import save_labels_back

__all__ = ["edit_labels", "save_labels"]


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
    show_info(f"napari-ozx: labels saved back into {', '.join(sorted(set(done)))}")
