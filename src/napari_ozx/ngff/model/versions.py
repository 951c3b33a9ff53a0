"""OME-Zarr metadata versions: which ones exist, what a declared one is read as, and how
two compare. The reader (:mod:`.metadata`), the validator and the writer all ask here, so
a version means the same thing to each of them.

* the released versions are :data:`KNOWN_VERSIONS` (0.1 to 0.6);
* 0.6 release candidates ("0.6rc0", accepted by the released 0.6 ``_version.schema``) are
  0.6; pre-release tags written by earlier tools ("0.6.dev3" by acquire-zarr, "0.6.dev4" by
  ngff-zarr before 0.50) are drafts of 0.6, read as 0.6;
* SpatialData's "0.5-dev-spatialdata" is 0.5 (with multiscale transformations in the 0.6
  draft form, which the parser handles);
* anything else is unknown: a newer or made-up version may change what every key means.

Versions are compared with :func:`version_key` (tuples of ints), never as strings.
"""

from __future__ import annotations

import logging
import re

from napari_ozx.errors import MetadataError

__all__ = [
    "KNOWN_VERSIONS",
    "SPATIALDATA_05",
    "is_06_draft",
    "normalise_version",
    "read_as",
    "version_key",
]

logger = logging.getLogger(__name__)

#: The OME-Zarr metadata versions the model reads (and the validator checks).
KNOWN_VERSIONS = ("0.1", "0.2", "0.3", "0.4", "0.5", "0.6")

#: SpatialData's deviation, read as 0.5
SPATIALDATA_05 = "0.5-dev-spatialdata"

#: the one pattern of 0.6's pre-release tags: a release candidate ("0.6rc1") or a draft
#: ("0.6.dev4", "0.6-dev", "0.6dev2")
_PRE_06 = re.compile(r"0\.6(?:(?P<rc>rc\d+)|(?P<dev>[.-]?dev\d*))")


def _pre_06(declared: str) -> re.Match[str] | None:
    return _PRE_06.fullmatch(declared)


def is_06_draft(declared: str | None) -> bool:
    """Whether *declared* is a pre-release draft tag of 0.6 ("0.6.dev4"), not a release
    or a release candidate."""
    m = None if declared is None else _pre_06(declared)
    return m is not None and m.group("dev") is not None


def read_as(version: str | None) -> str | None:
    """The version a declared one is read (and checked) as: 0.6 release candidates and
    drafts as 0.6, SpatialData's deviation as 0.5; ``None`` for a version we do not know
    (and for ``None``)."""
    if version is None or version in KNOWN_VERSIONS:
        return version
    if _pre_06(version):
        return "0.6"
    if version == SPATIALDATA_05:
        return "0.5"
    return None


def version_key(version: str | None) -> tuple[int, ...]:
    """A version as a tuple to compare: '0.4' -> (0, 4), '0.6rc1' -> (0, 6) (what it is
    read as); unknown versions and ``None`` sort as (0,) (callers check them first)."""
    known = read_as(version)
    if known is None:
        return (0,)
    return tuple(int(p) for p in known.split("."))


def normalise_version(declared: str, node: str = "") -> str:
    """The version family a declared ``ome.version`` is read as (:func:`read_as`); a draft
    of 0.6 logs one warning naming it, and a version we do not know raises
    :class:`~napari_ozx.errors.MetadataError` (never guess)."""
    version = read_as(declared)
    if version is None:
        raise MetadataError(
            f"{node or '/'}: unsupported OME-Zarr version {declared!r} "
            f"(napari-ozx reads {', '.join(KNOWN_VERSIONS)})"
        )
    if is_06_draft(declared):
        logger.warning(
            "%s: OME-Zarr %r is a pre-release draft of 0.6; read as OME-Zarr 0.6",
            node or "/",
            declared,
        )
    return version
