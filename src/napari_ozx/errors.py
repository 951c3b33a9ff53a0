"""Exceptions shared by every layer of napari-ozx.

Every error we raise on purpose derives from :class:`OzxError`, so the napari glue can
turn it into one clear message (path + reason) and never show a traceback for a file
that is merely broken or unsupported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable


class OzxError(Exception):
    """Base class: something about a file or request that we can explain to a user."""


#: how a reader that goes on past a part it cannot read tells the user: (what, why)
Report = Callable[[str, OzxError], None]


def log_report(what: str, err: OzxError) -> None:
    """The :data:`Report` when no one else listens: a warning in the log."""
    logging.getLogger(__name__).warning("napari-ozx: %s: %s", what, err)


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


class TransformError(MetadataError):
    """An OME-Zarr 0.6 coordinate transformation that does not fit its coordinate systems,
    cannot be inverted or composed where that is asked, or a coordinate system that is
    unknown or unreachable (the message names the transformation or system)."""


class NotOmeZarrError(MetadataError):
    """The location holds no OME-Zarr metadata (may still be plain Zarr)."""


class UnsupportedExtensionError(MetadataError):
    """A must-understand Zarr extension (ZEP 10), codec, data type ... we do not implement.

    Parameters
    ----------
    name : str
        The extension's (codec's, data type's ...) name.
    node : str
        The node that requires it ("" is the root).
    what : str, default "extension"
        What it is, for the message ("codec", "data type" ...).
    """

    def __init__(self, name: str, node: str, what: str = "extension") -> None:
        self.name = name
        self.node = node
        self.what = what
        super().__init__(
            f"{what} {name!r} on node {node or '/'!r} is required to read this data "
            f"(must_understand) but is not supported by napari-ozx"
        )


class TableError(MetadataError):
    """A table next to an image (Fractal / ngio table specification V1, SpatialData) that
    cannot be read: malformed attributes, missing or truncated columns, an unknown backend,
    a backend whose optional dependency is missing. The image itself still opens.

    Parameters
    ----------
    reason : str
        Why, said first in the message.
    table : str, default ""
        The table's name.
    source : str, default ""
        The file or URL.
    """

    def __init__(self, reason: str, table: str = "", source: str = "") -> None:
        self.reason = reason
        self.table = table
        self.source = source
        where = f"table {table!r}" if table else ""
        if source:
            where = f"{where} in {source}" if where else source
        super().__init__(f"{reason} ({where})" if where else reason)


class InvalidOptionError(OzxError, ValueError):
    """A write option outside what it allows (the message names the option and the range).

    Parameters
    ----------
    option : str
        The option's name (a :class:`~napari_ozx.ngff.write.options.WriteOptions` field).
    value : object
        The value refused.
    reason : str
        What is allowed instead.
    """

    def __init__(self, option: str, value: object, reason: str) -> None:
        self.option = option
        self.value = value
        self.reason = reason
        super().__init__(f"write option {option}={value!r} {reason}")


def reason_of(err: BaseException | str, *paths: str) -> str:
    """The reason in *err*'s message without the file path the lower layers prefix it with.

    Messages built deep down name their file first (``"/data/a.ozx: pyramid level '1' is
    missing"``) so that a log line stands on its own; a notification names the file
    itself, so the path would only push the reason out of a collapsed toast (and repeat
    it). Every spelling of each of *paths* (as given, absolute, resolved) followed by a
    colon is removed; what remains is stripped. Never raises.
    """
    import os

    text = str(err)
    variants: set[str] = set()
    for p in paths:
        if not p:
            continue
        variants.add(p)
        try:
            variants.add(os.path.abspath(p))
            variants.add(os.path.realpath(p))
        except (OSError, ValueError):
            pass
    for v in sorted(variants, key=len, reverse=True):
        for sep in (": ", ":"):
            text = text.replace(v + sep, "")
    return text.strip() or str(err)


def headline(reason: str, path: str | None = None, context: str = "") -> str:
    """What a notification says first, for every notification napari-ozx shows:
    ``"<reason> (<file name>[ context])"`` - the reason leads (a collapsed napari toast
    shows one line), the file is named by its last part (the full path goes in the
    details)."""
    import os

    name = os.path.basename(path.rstrip("/\\")) or path if path else ""
    where = f"{name} {context}".strip()
    return f"{reason} ({where})" if where else reason
