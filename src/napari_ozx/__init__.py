"""napari-ozx: OME-Zarr directories and zipped OME-Zarr (``.ozx``, RFC-9) in napari.

The public API. Names resolve lazily (PEP 562), so ``import napari_ozx`` imports neither
zarr, dask, napari nor Qt; see ``architecture.md`` for the layers behind them.

>>> from napari_ozx import open_ome_zarr
>>> with open_ome_zarr("resources/cells.ozx") as oz:  # doctest: +SKIP
...     (image,) = oz.images()
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # reading
    "open_ome_zarr": "napari_ozx.ngff.read.open",
    "OmeZarr": "napari_ozx.ngff.read.open",
    "Image": "napari_ozx.ngff.read.open",
    "open_hcs": "napari_ozx.ngff.read.plate",
    # writing and converting
    "write_ome_zarr": "napari_ozx.ngff.write.writer",
    "ImageSpec": "napari_ozx.ngff.write.writer",
    "LabelsSpec": "napari_ozx.ngff.write.writer",
    "WriteOptions": "napari_ozx.ngff.write.options",
    "WriteCancelled": "napari_ozx.ngff.write.writer",
    "convert": "napari_ozx.ngff.write.convert",
    # labels into the file they belong to
    "add_labels_to_image": "napari_ozx.layers.add_labels",
    "save_labels_back": "napari_ozx.layers.saveback",
    "SaveBackError": "napari_ozx.layers.saveback",
    # tables (Fractal / ngio table specification V1, SpatialData)
    "list_tables": "napari_ozx.ngff.tables.read",
    "read_table": "napari_ozx.ngff.tables.read",
    "TableInfo": "napari_ozx.ngff.tables.read",
    "TableData": "napari_ozx.ngff.tables.read",
    "roi_pixel_boxes": "napari_ozx.ngff.tables.read",
    "roi_world_boxes": "napari_ozx.ngff.tables.read",
    "table_layer_data": "napari_ozx.layers.reading",
    "plate_conditions": "napari_ozx.ngff.tables.conditions",
    "PlateConditions": "napari_ozx.ngff.tables.conditions",
    "zoom_to_roi": "napari_ozx.layers.tables",
    "color_labels_by": "napari_ozx.layers.tables",
    "color_by": "napari_ozx.layers.categories.colouring",
    "show_categories": "napari_ozx.layers.categories.colouring",
    "save_roi_table": "napari_ozx.layers.save_roi",
    # validating: the OME-Zarr rules and the container; the container (RFC-9) alone
    "validate": "napari_ozx.ngff.validate.walk",
    "validate_rfc9": "napari_ozx.ozx.validate",
    "ValidationReport": "napari_ozx.ozx.validate",
    "Finding": "napari_ozx.ozx.validate",
    # stores
    "OzxStore": "napari_ozx.ozx.store",
    "OzxWriteStore": "napari_ozx.ozx.write_store",
    "OzxWriter": "napari_ozx.ozx.writer",
    # errors
    "OzxError": "napari_ozx.errors",
    "ZipFormatError": "napari_ozx.errors",
    "UnsupportedZipFeature": "napari_ozx.errors",
    "ReadOnlyStoreError": "napari_ozx.errors",
    "ChunkDecodeError": "napari_ozx.errors",
    "MetadataError": "napari_ozx.errors",
    "NotOmeZarrError": "napari_ozx.errors",
    "UnsupportedExtensionError": "napari_ozx.errors",
    "InvalidOptionError": "napari_ozx.errors",
    "TableError": "napari_ozx.errors",
}

__all__ = [
    "ChunkDecodeError",
    "Finding",
    "Image",
    "ImageSpec",
    "InvalidOptionError",
    "LabelsSpec",
    "MetadataError",
    "NotOmeZarrError",
    "OmeZarr",
    "OzxError",
    "OzxStore",
    "OzxWriteStore",
    "OzxWriter",
    "PlateConditions",
    "ReadOnlyStoreError",
    "SaveBackError",
    "TableData",
    "TableError",
    "TableInfo",
    "UnsupportedExtensionError",
    "UnsupportedZipFeature",
    "ValidationReport",
    "WriteCancelled",
    "WriteOptions",
    "ZipFormatError",
    "__version__",
    "add_labels_to_image",
    "color_by",
    "color_labels_by",
    "convert",
    "list_tables",
    "open_hcs",
    "open_ome_zarr",
    "plate_conditions",
    "read_table",
    "roi_pixel_boxes",
    "roi_world_boxes",
    "save_labels_back",
    "save_roi_table",
    "show_categories",
    "table_layer_data",
    "validate",
    "validate_rfc9",
    "write_ome_zarr",
    "zoom_to_roi",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from napari_ozx.errors import (
        ChunkDecodeError,
        InvalidOptionError,
        MetadataError,
        NotOmeZarrError,
        OzxError,
        ReadOnlyStoreError,
        TableError,
        UnsupportedExtensionError,
        UnsupportedZipFeature,
        ZipFormatError,
    )
    from napari_ozx.layers.add_labels import add_labels_to_image
    from napari_ozx.layers.categories.colouring import color_by, show_categories
    from napari_ozx.layers.reading import table_layer_data
    from napari_ozx.layers.save_roi import save_roi_table
    from napari_ozx.layers.saveback import SaveBackError, save_labels_back
    from napari_ozx.layers.tables import color_labels_by, zoom_to_roi
    from napari_ozx.ngff.read.open import Image, OmeZarr, open_ome_zarr
    from napari_ozx.ngff.read.plate import open_hcs
    from napari_ozx.ngff.tables.conditions import PlateConditions, plate_conditions
    from napari_ozx.ngff.tables.read import (
        TableData,
        TableInfo,
        list_tables,
        read_table,
        roi_pixel_boxes,
        roi_world_boxes,
    )
    from napari_ozx.ngff.validate.walk import validate
    from napari_ozx.ngff.write.convert import convert
    from napari_ozx.ngff.write.options import WriteOptions
    from napari_ozx.ngff.write.writer import ImageSpec, LabelsSpec, WriteCancelled, write_ome_zarr
    from napari_ozx.ozx.store import OzxStore
    from napari_ozx.ozx.validate import Finding, ValidationReport, validate_rfc9
    from napari_ozx.ozx.write_store import OzxWriteStore
    from napari_ozx.ozx.writer import OzxWriter


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
