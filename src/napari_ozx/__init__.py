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

#: The one list of the public API: name -> the module that defines it. ``__getattr__``
#: (names resolve on first use, PEP 562), ``__all__`` and ``__dir__`` follow from it. A
#: new name: one line here, and its import line below for type checkers (a test checks).
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
    "open_roi": "napari_ozx.layers.regions.crop",
    "color_labels_by": "napari_ozx.layers.tables",
    "color_by": "napari_ozx.layers.categories.colouring",
    "show_categories": "napari_ozx.layers.categories.colouring",
    "save_roi_table": "napari_ozx.layers.save_roi",
    "save_to_spatialdata": "napari_ozx.layers.spatial.save",
    "SpatialDataSaveError": "napari_ozx.layers.spatial.save",
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

__all__ = sorted(["__version__", *_EXPORTS])

# For type checkers and IDEs only, never run (without it mypy types every name ``Any``):
# ``_EXPORTS`` as imports, ``X as X`` to re-export. tests/test_public_api.py checks it
# against ``_EXPORTS`` and prints the block to paste. (Reading this block at run time
# instead would need the source file, which frozen applications do not ship.)
if TYPE_CHECKING:  # pragma: no cover
    from napari_ozx.errors import ChunkDecodeError as ChunkDecodeError
    from napari_ozx.errors import InvalidOptionError as InvalidOptionError
    from napari_ozx.errors import MetadataError as MetadataError
    from napari_ozx.errors import NotOmeZarrError as NotOmeZarrError
    from napari_ozx.errors import OzxError as OzxError
    from napari_ozx.errors import ReadOnlyStoreError as ReadOnlyStoreError
    from napari_ozx.errors import TableError as TableError
    from napari_ozx.errors import UnsupportedExtensionError as UnsupportedExtensionError
    from napari_ozx.errors import UnsupportedZipFeature as UnsupportedZipFeature
    from napari_ozx.errors import ZipFormatError as ZipFormatError
    from napari_ozx.layers.add_labels import add_labels_to_image as add_labels_to_image
    from napari_ozx.layers.categories.colouring import color_by as color_by
    from napari_ozx.layers.categories.colouring import show_categories as show_categories
    from napari_ozx.layers.reading import table_layer_data as table_layer_data
    from napari_ozx.layers.regions.crop import open_roi as open_roi
    from napari_ozx.layers.save_roi import save_roi_table as save_roi_table
    from napari_ozx.layers.saveback import SaveBackError as SaveBackError
    from napari_ozx.layers.saveback import save_labels_back as save_labels_back
    from napari_ozx.layers.spatial.save import SpatialDataSaveError as SpatialDataSaveError
    from napari_ozx.layers.spatial.save import save_to_spatialdata as save_to_spatialdata
    from napari_ozx.layers.tables import color_labels_by as color_labels_by
    from napari_ozx.layers.tables import zoom_to_roi as zoom_to_roi
    from napari_ozx.ngff.read.open import Image as Image
    from napari_ozx.ngff.read.open import OmeZarr as OmeZarr
    from napari_ozx.ngff.read.open import open_ome_zarr as open_ome_zarr
    from napari_ozx.ngff.read.plate import open_hcs as open_hcs
    from napari_ozx.ngff.tables.conditions import PlateConditions as PlateConditions
    from napari_ozx.ngff.tables.conditions import plate_conditions as plate_conditions
    from napari_ozx.ngff.tables.read import TableData as TableData
    from napari_ozx.ngff.tables.read import TableInfo as TableInfo
    from napari_ozx.ngff.tables.read import list_tables as list_tables
    from napari_ozx.ngff.tables.read import read_table as read_table
    from napari_ozx.ngff.tables.read import roi_pixel_boxes as roi_pixel_boxes
    from napari_ozx.ngff.tables.read import roi_world_boxes as roi_world_boxes
    from napari_ozx.ngff.validate.walk import validate as validate
    from napari_ozx.ngff.write.convert import convert as convert
    from napari_ozx.ngff.write.options import WriteOptions as WriteOptions
    from napari_ozx.ngff.write.writer import ImageSpec as ImageSpec
    from napari_ozx.ngff.write.writer import LabelsSpec as LabelsSpec
    from napari_ozx.ngff.write.writer import WriteCancelled as WriteCancelled
    from napari_ozx.ngff.write.writer import write_ome_zarr as write_ome_zarr
    from napari_ozx.ozx.store import OzxStore as OzxStore
    from napari_ozx.ozx.validate import Finding as Finding
    from napari_ozx.ozx.validate import ValidationReport as ValidationReport
    from napari_ozx.ozx.validate import validate_rfc9 as validate_rfc9
    from napari_ozx.ozx.write_store import OzxWriteStore as OzxWriteStore
    from napari_ozx.ozx.writer import OzxWriter as OzxWriter


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # resolve once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
