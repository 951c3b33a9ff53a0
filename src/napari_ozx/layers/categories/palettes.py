"""The categorical palettes of scanpy and spatialdata-plot, as data, and how they choose.

A table's ``uns["<column>_colors"]`` (scanpy, spatialdata) is used when present; otherwise
:func:`default_palette` picks what spatialdata-plot picks for that many categories, so its
figures and the napari view agree: up to 10 matplotlib's ``tab10``, up to 20 / 28 / 102
scanpy's ``default_20`` / ``default_28`` / ``default_102``; above 102 (grey in
spatialdata-plot) distinct golden-ratio :func:`hues`, so 300 genes can be told apart.
:func:`to_rgba` reads colour strings; :data:`MISSING_RGBA` is the grey of no category.
The colour lists are data from scanpy's ``scanpy/plotting/palettes.py`` (BSD-3,
https://github.com/scverse/scanpy) and matplotlib's ``tab10`` (matplotlib licence,
https://matplotlib.org); ``default_20`` is scanpy's ``vega_20_scanpy`` evaluated.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "DEFAULT_20",
    "DEFAULT_28",
    "DEFAULT_102",
    "MISSING_RGBA",
    "TAB10",
    "default_palette",
    "hues",
    "to_rgba",
]

#: matplotlib's default colour cycle (``tab10``)
TAB10 = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)  # fmt: skip

#: scanpy's ``default_20`` (``vega_20_scanpy``)
DEFAULT_20 = (
    "#1f77b4", "#ff7f0e", "#279e68", "#d62728", "#aa40fc",
    "#8c564b", "#e377c2", "#b5bd61", "#17becf", "#aec7e8",
    "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
    "#f7b6d2", "#dbdb8d", "#9edae5", "#ad494a", "#8c6d31",
)  # fmt: skip

#: scanpy's ``default_28`` (``zeileis_28``)
DEFAULT_28 = (
    "#023fa5", "#7d87b9", "#bec1d4", "#d6bcc0", "#bb7784", "#8e063b", "#4a6fe3",
    "#8595e1", "#b5bbe3", "#e6afb9", "#e07b91", "#d33f6a", "#11c638", "#8dd593",
    "#c6dec7", "#ead3c6", "#f0b98d", "#ef9708", "#0fcfc0", "#9cded6", "#d5eae7",
    "#f3e1eb", "#f6c4e1", "#f79cd4", "#7f7f7f", "#c7c7c7", "#1CE6FF", "#336600",
)  # fmt: skip

#: scanpy's ``default_102`` (``godsnot_102``)
DEFAULT_102 = (
    "#FFFF00", "#1CE6FF", "#FF34FF", "#FF4A46", "#008941", "#006FA6", "#A30059",
    "#FFDBE5", "#7A4900", "#0000A6", "#63FFAC", "#B79762", "#004D43", "#8FB0FF",
    "#997D87", "#5A0007", "#809693", "#6A3A4C", "#1B4400", "#4FC601", "#3B5DFF",
    "#4A3B53", "#FF2F80", "#61615A", "#BA0900", "#6B7900", "#00C2A0", "#FFAA92",
    "#FF90C9", "#B903AA", "#D16100", "#DDEFFF", "#000035", "#7B4F4B", "#A1C299",
    "#300018", "#0AA6D8", "#013349", "#00846F", "#372101", "#FFB500", "#C2FFED",
    "#A079BF", "#CC0744", "#C0B9B2", "#C2FF99", "#001E09", "#00489C", "#6F0062",
    "#0CBD66", "#EEC3FF", "#456D75", "#B77B68", "#7A87A1", "#788D66", "#885578",
    "#FAD09F", "#FF8A9A", "#D157A0", "#BEC459", "#456648", "#0086ED", "#886F4C",
    "#34362D", "#B4A8BD", "#00A6AA", "#452C2C", "#636375", "#A3C8C9", "#FF913F",
    "#938A81", "#575329", "#00FECF", "#B05B6F", "#8CD0FF", "#3B9700", "#04F757",
    "#C8A1A1", "#1E6E00", "#7900D7", "#A77500", "#6367A9", "#A05837", "#6B002C",
    "#772600", "#D790FF", "#9B9700", "#549E79", "#FFF69F", "#201625", "#72418F",
    "#BC23FF", "#99ADC0", "#3A2465", "#922329", "#5B4534", "#FDE8DC", "#404E55",
    "#0089A3", "#CB7E98", "#A4E804", "#324E72",
)  # fmt: skip

#: what a row without a category (or without a value) is drawn in: grey
MISSING_RGBA = (0.5, 0.5, 0.5, 1.0)


def hues(n: int) -> np.ndarray:
    """*n* distinct RGBA colours (golden-ratio hues, saturated and bright), float32."""
    h = (np.arange(n) * 0.618033988749895) % 1.0
    s, v = 0.75, 0.95
    i = np.floor(h * 6).astype(int) % 6
    f = h * 6 - np.floor(h * 6)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    table = np.stack(
        [
            np.choose(i, [v, q, p, p, t, v]),
            np.choose(i, [t, v, v, q, p, p]),
            np.choose(i, [p, p, t, v, v, q]),
            np.ones(n),
        ],
        axis=1,
    )
    return table.astype(np.float32)


def to_rgba(colours: list[str] | tuple[str, ...]) -> np.ndarray:
    """``#rrggbb`` / ``#rrggbbaa`` strings (or names napari knows) as an (n, 4) float32
    array."""
    out = np.empty((len(colours), 4), dtype=np.float32)
    for i, c in enumerate(colours):
        s = str(c).strip()
        if s.startswith("#") and len(s) in (7, 9):
            vals = [int(s[k : k + 2], 16) / 255 for k in range(1, len(s), 2)]
            out[i] = [*vals, 1.0] if len(vals) == 3 else vals
        else:
            from napari.utils.colormaps.standardize_color import transform_color

            out[i] = transform_color(s)[0]
    return out


def default_palette(n: int) -> np.ndarray:
    """The colours of *n* categories, in their order, as spatialdata-plot chooses them
    (module docstring), as an (n, 4) float32 array."""
    if n <= len(TAB10):
        return to_rgba(TAB10[:n])
    if n <= len(DEFAULT_20):
        return to_rgba(DEFAULT_20[:n])
    if n <= len(DEFAULT_28):
        return to_rgba(DEFAULT_28[:n])
    if n <= len(DEFAULT_102):
        return to_rgba(DEFAULT_102[:n])
    return hues(n)
