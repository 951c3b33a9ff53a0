"""The reader's layers of a file in a headless napari ``ViewerModel``, added as napari adds
them (the tests that edit or save layers start from one)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any


def open_in_viewer_model(path: Path | str) -> Any:
    """A new ``ViewerModel`` holding every layer napari-ozx's reader returns for *path*
    (the reader's warnings silenced)."""
    from napari.components import ViewerModel

    from napari_ozx._reader import read_layer_data

    vm = ViewerModel()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for data, kw, kind in read_layer_data(str(path)):
            getattr(vm, f"add_{kind}")(data, **kw)
    return vm
