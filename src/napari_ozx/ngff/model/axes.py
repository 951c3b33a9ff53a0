"""Which axes of a multiscale are spatial, and which two are its y and x.

One rule for the reader (plates, tables, regions of interest) and the writer (chunks,
shards and the pyramid it halves): an axis is spatial when its ``type`` is ``"space"``,
or, untyped (0.4 allows axes without a type), when its name is exactly ``"z"``, ``"y"``
or ``"x"``. The y and x axes are the last two spatial axes (the spec orders spatial axes
last, ``zyx``).
"""

from __future__ import annotations

from collections.abc import Sequence

from napari_ozx.ngff.model.metadata import Axis

__all__ = ["SPATIAL_NAMES", "is_spatial", "spatial_axes", "spatial_yx", "yx_axes"]

#: the names an untyped axis is spatial by (an exact match, never a substring)
SPATIAL_NAMES: tuple[str, ...] = ("z", "y", "x")


def is_spatial(axis: Axis) -> bool:
    """``type == "space"``, or untyped and named exactly ``z``, ``y`` or ``x``."""
    return axis.type == "space" or (axis.type is None and axis.name in SPATIAL_NAMES)


def spatial_axes(axes: Sequence[Axis]) -> tuple[int, ...]:
    """Indices of the spatial axes, in order."""
    return tuple(i for i, a in enumerate(axes) if is_spatial(a))


def spatial_yx(axes: Sequence[Axis]) -> tuple[int, ...]:
    """Indices of the last two spatial axes (fewer when there are fewer): the axes a
    pyramid level halves and a chunk tiles."""
    return spatial_axes(axes)[-2:]


def yx_axes(axes: Sequence[Axis]) -> tuple[int, int]:
    """Indices of the y and x axes: the last two spatial axes, else the last two axes."""
    spatial = spatial_axes(axes)
    if len(spatial) >= 2:
        return spatial[-2], spatial[-1]
    n = len(axes)
    return n - 2, n - 1
