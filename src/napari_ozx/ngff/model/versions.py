"""OME-Zarr metadata versions: which ones exist, what a declared one is read as, how two
compare; the reader (:mod:`.metadata`), the validator and the writer all ask here.

Released versions are :data:`KNOWN_VERSIONS` (0.1 to 0.6). 0.6 release candidates
("0.6rc0") and earlier tools' pre-release tags ("0.6.dev3" by acquire-zarr, "0.6.dev4" by
ngff-zarr before 0.50) are read as 0.6; SpatialData's "0.5-dev-spatialdata" as 0.5.
Development versions after 0.6 (:func:`is_development`: "0.9.devN", which ngff-zarr 0.50
writes, and bioformats2raw's "1.0-DEV") are read as 0.6 plus the RFCs of
:data:`DEVELOPMENT_RFCS`, with one warning naming what of them is not implemented.
Anything else is unknown: a made-up version may change what every key means. Versions are
compared with :func:`version_key` (tuples of ints), never as strings.
"""

from __future__ import annotations

import functools
import logging
import re

from napari_ozx.errors import MetadataError

__all__ = [
    "DEVELOPMENT_RFCS",
    "KNOWN_VERSIONS",
    "SPATIALDATA_05",
    "development_note",
    "is_06_draft",
    "is_development",
    "needs_06_shape",
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


#: a development tag of a version after the newest release: "0.9.dev1", "0.9.dev", "1.0-DEV"
_DEV_AFTER = re.compile(r"(?P<major>\d+)\.(?P<minor>\d+)[.-]?dev\d*", re.IGNORECASE)

#: What the development series after 0.6 adds (ngff-spec's 0.9.devN: 0.9.dev1 is 0.6 +
#: RFC-3 + RFC-4, 0.9.dev3 adds RFC-8), and what napari-ozx does *not* implement of each
#: ("" = all of it): the warning of :func:`development_note` names these, so nothing a
#: development file says is dropped silently.
DEVELOPMENT_RFCS: tuple[tuple[str, str, str], ...] = (
    (
        "RFC-3",
        "any number, names, types and order of axes",
        "an image without a space axis is refused and only its first channel axis is "
        "split into layers",
    ),
    ("RFC-4", "anatomical orientation of space axes", ""),
    (
        "RFC-8",
        "collections and the node model (draft)",
        "only collection nodes listing images by a 'zarr' path are opened; inline "
        "'multiscale' / 'singlescale' nodes and 'json' paths are not read",
    ),
)


def _pre_06(declared: str) -> re.Match[str] | None:
    return _PRE_06.fullmatch(declared)


def is_development(declared: str | None) -> bool:
    """Whether *declared* is a development tag of a version after the newest release
    (:data:`KNOWN_VERSIONS`): "0.9.dev1" (ngff-zarr 0.50), "1.0-DEV" (bioformats2raw).
    A released number we do not know ("0.7", "1.0") is not: it is unknown."""
    m = None if declared is None else _DEV_AFTER.fullmatch(declared)
    if m is None:
        return False
    newest = tuple(int(p) for p in KNOWN_VERSIONS[-1].split("."))
    return (int(m.group("major")), int(m.group("minor"))) > newest


def needs_06_shape(declared: str | None) -> bool:
    """Whether *declared* opens only where its multiscales have 0.6's shape
    (``coordinateSystems``): drafts of 0.6 and development versions after it."""
    return is_06_draft(declared) or is_development(declared)


def development_note(declared: str) -> str:
    """The one warning of a development version: read as what, and what of the
    development series napari-ozx does not implement."""
    missing = "; ".join(f"{rfc} ({what}): {gap}" for rfc, what, gap in DEVELOPMENT_RFCS if gap)
    full = ", ".join(f"{rfc} ({what})" for rfc, what, gap in DEVELOPMENT_RFCS if not gap)
    return (
        f"OME-Zarr {declared!r} is a development version after {KNOWN_VERSIONS[-1]}: read as "
        f"OME-Zarr {KNOWN_VERSIONS[-1]}{f' with {full}' if full else ''}; not implemented of "
        f"what the development series adds: {missing}"
    )


def is_06_draft(declared: str | None) -> bool:
    """Whether *declared* is a pre-release draft tag of 0.6 ("0.6.dev4"), not a release
    or a release candidate."""
    m = None if declared is None else _pre_06(declared)
    return m is not None and m.group("dev") is not None


def read_as(version: str | None) -> str | None:
    """The version a declared one is read (and checked) as: 0.6 release candidates and
    drafts as 0.6, development versions after it (:func:`is_development`) as the newest
    release, SpatialData's deviation as 0.5; ``None`` for a version we do not know
    (and for ``None``)."""
    if version is None or version in KNOWN_VERSIONS:
        return version
    if _pre_06(version):
        return "0.6"
    if is_development(version):
        return KNOWN_VERSIONS[-1]
    if version == SPATIALDATA_05:
        return "0.5"
    return None


@functools.lru_cache(maxsize=64)  # asked for every node of a plate: a few versions
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
    elif is_development(declared):
        logger.warning("%s: %s", node or "/", development_note(declared))
    return version
