"""Categories of a layer's features: colour by a column, hide and show categories.

:mod:`.palettes` (the colours scanpy and spatialdata-plot use), :mod:`.colouring`
(``color_by``, ``show_categories`` and the legend, for Points, Shapes, napari-ozx's
polygon Surface and Labels), :mod:`.hover` (the polygon Surface's features under the
cursor). Qt-free; napari is imported lazily.
"""
