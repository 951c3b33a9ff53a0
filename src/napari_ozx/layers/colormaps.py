"""napari colormaps -> the omero ``color`` of a channel (``RRGGBB``).

napari hands a writer a colormap in several shapes: the state dict of a layer
(``{"colors": ..., "name": ...}``), a ``Colormap`` object, or — when layer data from a
reader goes straight to a writer — just the name our reader chose (``"green"``) or a
``"#rrggbb"`` string. Every shape must become the colour it shows; a name must never
fall back to white.
"""

from __future__ import annotations

import re

import numpy as np

from napari_ozx._compat import napari_colormap_display_name

__all__ = ["colormap_hex"]

_HEX = re.compile(r"^#?([0-9a-fA-F]{6})([0-9a-fA-F]{2})?$")


def colormap_hex(cmap: object) -> str | None:
    """The brightest colour of *cmap* as ``RRGGBB``, or None when it has none."""
    if cmap is None:
        return None
    if isinstance(cmap, str):
        m = _HEX.match(cmap.strip())
        if m:
            return m.group(1).upper()
        return _named(cmap)
    colors = cmap.get("colors") if isinstance(cmap, dict) else getattr(cmap, "colors", None)
    if colors is None:
        name = cmap.get("name") if isinstance(cmap, dict) else getattr(cmap, "name", None)
        return _named(name) if isinstance(name, str) else None
    arr = np.asarray(colors, dtype=float)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 3:
        return None
    r, g, b = (round(float(c) * 255) for c in np.clip(arr[-1][:3], 0, 1))
    return f"{r:02X}{g:02X}{b:02X}"


def _named(name: str) -> str | None:
    """A napari (or vispy / matplotlib) colormap name -> its last colour."""
    try:
        from napari.utils.colormaps import ensure_colormap
    except ImportError:  # pragma: no cover - napari is a dependency
        return None
    try:
        cm = ensure_colormap(name)
    except (KeyError, ValueError, TypeError):
        return None
    if cm.name != name and name.lower() not in (cm.name.lower(), napari_colormap_display_name(cm)):
        # napari warns and falls back to a default for unknown names: not this colour
        return None
    return colormap_hex({"colors": cm.colors})
