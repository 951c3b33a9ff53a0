"""The single-file container: ZIP index, read-only zarr store, streaming writer, RFC-9 validator.

One home per concern: ``records`` (ZIP record layouts), ``rfc9`` (the RFC-9 rules, quoted),
``_zip`` (parser), ``store`` (read-only zarr store), ``members`` (a member's bytes: data
offsets, CRC checks, inflating within limits), ``lookalikes`` (why a key is missing),
``writer`` (archive writer), ``write_store`` (append-only zarr store over it), ``edit`` (a
store edited in place, all or nothing), ``validate`` (findings), ``protocol`` (what the OME
layer may ask of a container).

Names are imported lazily, so ``import napari_ozx.ozx`` costs nothing and the ZIP parser
and validator never load zarr.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "OzxStore": ".store",
    "OzxWriter": ".writer",
    "OzxWriteStore": ".write_store",
    "validate": ".validate",
    "ValidationReport": ".validate",
    "Finding": ".validate",
    "read_zip_index": "._zip",
    "ZipIndex": "._zip",
    "ZipEntry": "._zip",
    "RangeReader": "._zip",
    "FileRangeReader": "._zip",
    "FileObjRangeReader": "._zip",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
