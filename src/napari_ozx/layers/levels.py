"""Which pyramid level napari should render in 3D.

napari draws a multiscale image in 3D from its *coarsest* level, whatever its size: a
pyramid whose coarsest level is a 64³ thumbnail shows as a blur although a 512³ level
would fit the GPU. :func:`choose_3d_level` picks the finest level whose displayed
extent fits the GPU's 3D texture size and whose volume (the displayed axes of one
slice) fits a memory budget; the reader applies it through napari's
``layer.locked_data_level`` when the view turns 3D (and lets go in 2D).

The budget is ``DEFAULT_3D_BUDGET`` bytes, or ``NAPARI_OZX_3D_BUDGET_MB`` from the
environment, for all the layers shown in 3D together (shared evenly), and counts the
copies a volume is held in while napari shows it (:data:`VOLUME_COPIES`); a layer's
``metadata["napari_ozx_3d_level"]`` (an int) pins the level.
Qt-free and napari-free: plain shapes in, a level index out.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from napari_ozx.layers.provenance import LEVEL_3D_KEY

__all__ = [
    "DEFAULT_3D_BUDGET",
    "LEVEL_3D_KEY",
    "VOLUME_COPIES",
    "budget_3d",
    "choose_3d_level",
]

#: 1 GiB: a 512³ uint16 volume (256 MiB) in its :data:`VOLUME_COPIES` copies
DEFAULT_3D_BUDGET = 1 << 30
#: the copies of a volume in memory while napari shows it in 3D: the array napari slices
#: (read once, handed over without a copy), the texture data vispy uploads from, and the
#: OpenGL driver's own copy of the texture (in main memory with software OpenGL); measured
#: by ``benchmarks/bench_3d.py`` (peak resident memory over the volumes' size)
VOLUME_COPIES = 3
#: layer metadata key that pins the 3D level (user override)


def budget_3d() -> int:
    """The 3D memory budget in bytes (``NAPARI_OZX_3D_BUDGET_MB`` overrides)."""
    raw = os.environ.get("NAPARI_OZX_3D_BUDGET_MB", "")
    try:
        mb = float(raw)
    except ValueError:
        return DEFAULT_3D_BUDGET
    return int(mb * (1 << 20)) if mb > 0 else DEFAULT_3D_BUDGET


def choose_3d_level(
    level_shapes: Sequence[Sequence[int]],
    displayed: Sequence[int],
    itemsize: int,
    max_texture: int,
    budget: int,
    copies: int = 1,
) -> int:
    """The finest level whose displayed axes are each at most *max_texture* pixels and
    whose displayed volume, held in *copies* copies, is at most *budget* bytes; the
    coarsest when none is."""
    for i, shape in enumerate(level_shapes):
        dims = [int(shape[d]) for d in displayed if d < len(shape)]
        size = math.prod(dims) * itemsize * max(1, copies)
        if max(dims, default=0) <= max_texture and size <= budget:
            return i
    return len(level_shapes) - 1
