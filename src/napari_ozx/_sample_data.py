"""The bundled sample: a small 2-channel 3D cell image with nucleus labels as ``.ozx``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SAMPLE_NAME = "cells.ozx"


def sample_path() -> Path:
    """Path of the bundled sample ``.ozx`` (in the wheel, or the source checkout)."""
    here = Path(__file__).resolve().parent
    for cand in (here / "resources" / SAMPLE_NAME, here.parents[1] / "resources" / SAMPLE_NAME):
        if cand.is_file():
            return cand
    raise FileNotFoundError(f"bundled sample {SAMPLE_NAME} not found next to {here}")


def sample_cells() -> list[Any]:
    from napari_ozx.layers.reading import read_layer_data

    return read_layer_data(str(sample_path()))
