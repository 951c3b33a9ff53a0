"""napari-ozx: OME-Zarr directories and zipped OME-Zarr (``.ozx``) in napari.

The core (:mod:`napari_ozx.ozx`, :mod:`napari_ozx.ngff`) imports neither napari nor
Qt; the napari glue lives in ``_reader.py`` / ``_writer.py`` and Qt only under ``_qt``.
"""

__version__ = "0.1.0"
