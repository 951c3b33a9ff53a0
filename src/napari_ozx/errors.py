"""Exceptions shared by every layer of napari-ozx.

Every error we raise on purpose derives from :class:`OzxError`, so the napari glue can
turn it into one clear message (path + reason) and never show a traceback for a file
that is merely broken or unsupported.
"""

from __future__ import annotations


class OzxError(Exception):
    """Base class: something about a file or request that we can explain to a user."""


class ZipFormatError(OzxError, ValueError):
    """The bytes are not a readable ZIP archive (truncated, corrupt, lying records)."""


class UnsupportedZipFeature(OzxError, ValueError):
    """A valid ZIP that uses something we refuse to read (encryption, multi-part, ...)."""


class ReadOnlyStoreError(OzxError, PermissionError):
    """A write was attempted on a read-only store."""


class ChunkDecodeError(OzxError, ValueError):
    """Stored chunk data failed to decode (corrupt, truncated, checksum mismatch)."""


class MetadataError(OzxError, ValueError):
    """OME-Zarr / Zarr metadata is missing, invalid or inconsistent."""


class NotOmeZarrError(MetadataError):
    """The location holds no OME-Zarr metadata (may still be plain Zarr)."""


class UnsupportedExtensionError(MetadataError):
    """A must-understand Zarr extension (ZEP 10), codec, data type ... we do not implement."""

    def __init__(self, name: str, node: str, what: str = "extension") -> None:
        self.name = name
        self.node = node
        self.what = what
        super().__init__(
            f"{what} {name!r} on node {node or '/'!r} is required to read this data "
            f"(must_understand) but is not supported by napari-ozx"
        )


class InvalidOptionError(OzxError, ValueError):
    """A write option outside what it allows (the message names the option and the range)."""

    def __init__(self, option: str, value: object, reason: str) -> None:
        self.option = option
        self.value = value
        self.reason = reason
        super().__init__(f"write option {option}={value!r} {reason}")
