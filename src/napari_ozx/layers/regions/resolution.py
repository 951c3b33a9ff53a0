"""The pyramid level a multiscale layer is shown from, as a user chooses it.

napari picks a level itself (2D: by zoom; 3D: the coarsest, or napari-ozx's choice
within the 3D budget, :mod:`napari_ozx.layers.levels`); ``layer.locked_data_level``
(napari 0.7.1+) pins one, in 2D and in 3D, and napari then reads only that level. Here:
each level described by its pixel size in the file's units (``"1: 1.3 µm"``), and
:func:`pin_level` (None gives napari its automatic choice back). The same descriptions
list an opened image's levels for :func:`~napari_ozx.layers.regions.crop.open_roi`.

Qt-free; napari layers are used through their attributes only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from napari_ozx.layers.provenance import LOCKED_3D_KEY

if TYPE_CHECKING:
    from napari_ozx.ngff.read.open import Image as OmeImage

__all__ = ["can_pin", "image_level_labels", "layer_level_labels", "pin_level", "pixel_size_text"]

_SHORT_UNITS = {
    "angstrom": "Å",
    "nanometer": "nm",
    "micrometer": "µm",
    "micron": "µm",
    "millimeter": "mm",
    "centimeter": "cm",
    "meter": "m",
    "pixel": "px",
}


def _unit(unit: object) -> str:
    text = str(unit) if unit is not None else ""
    return _SHORT_UNITS.get(text, text or "px")


def _axis(name: object) -> str:
    """``y`` of an axis label such as ``y (anterior→posterior)``."""
    return str(name).split(" ", 1)[0].strip().lower()


def _num(v: float) -> str:
    return f"{v:.4g}"


def pixel_size_text(
    sizes: Sequence[float], units: Sequence[object], names: Sequence[object]
) -> str:
    """A level's pixel size as a user reads it: y and x (one number when they are equal:
    ``"0.65 µm"``, else ``"0.65 × 0.7 µm"``), then z when there is one
    (``"0.65 µm, z 1.5 µm"``); axes named otherwise: the last two."""
    axes = [_axis(n) for n in names]
    yx = [axes.index(a) for a in ("y", "x") if a in axes]
    if len(yx) < 2:
        yx = list(range(max(0, len(sizes) - 2), len(sizes)))
    parts = [float(sizes[i]) for i in yx]
    units = [_unit(units[i]) if i < len(units) else "px" for i in yx]
    same_unit = len(set(units)) == 1
    if same_unit and len(set(parts)) == 1:
        text = f"{_num(parts[0])} {units[0]}"
    elif same_unit:
        text = " × ".join(_num(p) for p in parts) + f" {units[0]}"
    else:
        text = " × ".join(f"{_num(p)} {u}" for p, u in zip(parts, units, strict=True))
    if "z" in axes:
        z = axes.index("z")
        text += f", z {_num(float(sizes[z]))} {_unit(units[z] if z < len(units) else None)}"
    return text


def can_pin(layer: object) -> bool:
    """Whether *layer* is multiscale and napari can pin its level (napari 0.7.1+)."""
    return bool(getattr(layer, "multiscale", False)) and hasattr(layer, "locked_data_level")


def layer_level_labels(layer: Any) -> list[str]:
    """Each level of a multiscale napari layer: ``"<i>: <pixel size> (<y × x> px)"``,
    the pixel size in world units (the layer's scale times the level's downsampling)."""
    scale = [float(s) for s in layer.scale]
    units = list(getattr(layer, "units", ()) or ())
    names = list(getattr(layer, "axis_labels", ()) or ())
    factors = getattr(layer, "downsample_factors", None)
    shapes = [tuple(int(n) for n in s) for s in layer.level_shapes]
    out = []
    for i, shape in enumerate(shapes):
        f = (
            factors[i]
            if factors is not None
            else [a / b for a, b in zip(shapes[0], shape, strict=True)]
        )
        sizes = [s * float(d) for s, d in zip(scale, f, strict=True)]
        out.append(f"{i}: {pixel_size_text(sizes, units, names)} ({_plane(shape)} px)")
    return out


def image_level_labels(image: OmeImage) -> list[str]:
    """Each level of an opened image as :func:`layer_level_labels` says it, from its
    datasets' scales and its axes' units."""
    ms = image.multiscale
    names = list(ms.axis_names)
    units = [a.unit for a in ms.axes]
    out = []
    for i, (ds, lvl) in enumerate(zip(ms.datasets, image.levels, strict=True)):
        shape = tuple(int(n) for k, n in enumerate(lvl.shape) if k != ms.channel_axis)
        out.append(f"{i}: {pixel_size_text(ds.scale, units, names)} ({_plane(shape)} px)")
    return out


def _plane(shape: Sequence[int]) -> str:
    return " × ".join(str(n) for n in shape[-2:])


def pin_level(layer: Any, level: int | None) -> None:
    """Show *layer* from *level* only, in 2D and in 3D (napari reads no other level);
    None: napari's automatic choice again (in 3D napari-ozx's budget choice comes back
    with the next switch to 3D, or at once through ``_viewer_hooks.apply_3d_levels``).
    The choice is the user's: napari-ozx's 3D hook leaves it alone."""
    if not can_pin(layer):
        return
    layer.metadata.pop(LOCKED_3D_KEY, None)
    layer.locked_data_level = level
