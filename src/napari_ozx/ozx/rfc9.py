"""RFC-9 (zipped OME-Zarr, ``.ozx``): the rules, once, for the writer and the validator.

Each rule is a :class:`Rule` carrying its exact MUST / SHALL NOT / SHOULD sentence of RFC-9
("Single-file OME-Zarr" > "OME-Zarr zip files") and its item. The writer follows and cites
them; the validator judges archives with the same predicates: entry names
(:func:`name_problems`, :func:`is_nested_archive_name`), entry order
(:func:`is_metadata_name`, :func:`metadata_sort_key`, :func:`order_problem`), the archive
comment (:func:`archive_comment`, :func:`comment_version`), ZIP64 and STORED
(:data:`WRITE_ZIP64`, :data:`WRITE_METHOD`, :func:`is_compressed`), and file names
(:func:`has_ozx_extension`, :data:`ARCHIVE_SUFFIXES` / :func:`is_archive_name`, for every
layer that tells an archive from a directory). No Zarr, no I/O.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from napari_ozx.ozx.records import METHOD_STORED, U16_MAX

__all__ = [
    "ARCHIVE_SUFFIXES",
    "COMMENT",
    "DEFAULT_COMMENT",
    "EXTENSION",
    "NOT_EMBEDDED",
    "ONE_HIERARCHY",
    "ORDER",
    "OZX_SUFFIX",
    "ROOT",
    "RULES",
    "SHARDING",
    "SINGLE_PART",
    "STORED",
    "UNSAFE_NAME_KINDS",
    "WRITE_METHOD",
    "WRITE_ZIP64",
    "ZIP64",
    "NameProblem",
    "Rule",
    "archive_comment",
    "check_entry_name",
    "comment_version",
    "has_ozx_extension",
    "is_archive_name",
    "is_compressed",
    "is_metadata_name",
    "is_nested_archive_name",
    "is_zarr_json",
    "metadata_sort_key",
    "name_depth",
    "name_problems",
    "order_problem",
    "plain_name",
]

Level = Literal["MUST", "SHALL NOT", "SHOULD"]

_CONDITIONS = "Single-file OME-Zarr > OME-Zarr zip files, condition"
_RECOMMENDED = "Single-file OME-Zarr > OME-Zarr zip files, recommendation"


@dataclass(frozen=True)
class Rule:
    """One sentence of RFC-9, quoted exactly."""

    key: str  #: short stable id
    level: Level  #: the strongest RFC 2119 keyword of the sentence
    section: str  #: where the sentence is (section > subsection, numbered item)
    text: str  #: the sentence(s), verbatim

    @property
    def citation(self) -> str:
        """``RFC-9, <section>``: for messages that name the rule without quoting it."""
        return f"RFC-9, {self.section}"

    def __str__(self) -> str:
        return self.text


ONE_HIERARCHY = Rule(
    "one-hierarchy",
    "MUST",
    f"{_CONDITIONS} 1",
    "The ZIP file MUST contain exactly one OME-Zarr hierarchy.",
)
ROOT = Rule(
    "root",
    "MUST",
    f"{_CONDITIONS} 2",
    "The root of the ZIP archive MUST correspond to the root of the OME-Zarr hierarchy. "
    "The ZIP file MUST contain the the OME-Zarr\u2019s root-level zarr.json.",  # sic, verbatim
)
NOT_EMBEDDED = Rule(
    "not-embedded",
    "SHALL NOT",
    f"{_CONDITIONS} 3",
    "OME-Zarr zip files SHALL NOT be embedded in a parent OME-Zarr hierarchy "
    "(as a sub-hierarchy or otherwise).",
)
SINGLE_PART = Rule(
    "single-part",
    "SHALL NOT",
    f"{_CONDITIONS} 4",
    "OME-Zarr zip files SHALL NOT be split into multiple parts.",
)
ZIP64 = Rule(
    "zip64",
    "SHOULD",
    f"{_RECOMMENDED} 1",
    "The ZIP64 format extension SHOULD be used, irrespective of the ZIP file size.",
)
STORED = Rule(
    "stored",
    "SHOULD",
    f"{_RECOMMENDED} 2",
    "ZIP-level compression SHOULD be disabled in favor of Zarr-level compression codecs.",
)
SHARDING = Rule(
    "sharding",
    "SHOULD",
    f"{_RECOMMENDED} 3",
    "The sharding codec SHOULD be used to reduce the number of entries within the ZIP archive.",
)
ORDER = Rule(
    "order",
    "SHOULD",
    f"{_RECOMMENDED} 4",
    "The root-level zarr.json file SHOULD be the first ZIP file entry and the first entry in "
    "the central directory header; other zarr.json files SHOULD follow immediately "
    "afterwards, in breadth-first order.",
)
COMMENT = Rule(
    "comment",
    "SHOULD",
    f"{_RECOMMENDED} 5",
    "The ZIP archive comment SHOULD contain an UTF-8-encoded JSON string with an ome "
    "attribute that holds a version key with the OME-Zarr version as string value, "
    'equivalent to {"ome": { "version": "XX.YY" }}.',
)
EXTENSION = Rule(
    "extension",
    "SHOULD",
    f"{_RECOMMENDED} 6",
    "The name of OME-Zarr zip files SHOULD end with .ozx.",
)

#: every rule, in the order of the specification
RULES: tuple[Rule, ...] = (
    ONE_HIERARCHY,
    ROOT,
    NOT_EMBEDDED,
    SINGLE_PART,
    ZIP64,
    STORED,
    SHARDING,
    ORDER,
    COMMENT,
    EXTENSION,
)

# --------------------------------------------------------------------------- ZIP64, STORED

#: :data:`ZIP64`: the writer emits ZIP64 extra fields and end records for every archive.
WRITE_ZIP64 = True
#: :data:`STORED`: the writer stores every entry uncompressed.
WRITE_METHOD = METHOD_STORED


def is_compressed(method: int) -> bool:
    """Whether a member's method goes against :data:`STORED` (anything but STORED)."""
    return method != METHOD_STORED


# --------------------------------------------------------------------------- names


class NameProblem(NamedTuple):
    """Why an entry name may not be written."""

    kind: str  #: "empty", "backslash", "nul", "absolute", "parent", "empty-segment", ...
    reason: str  #: phrase completing "entry name 'x' ..."
    rule: Rule | None  #: the RFC-9 rule, when it is one (else ZIP hygiene, APPNOTE 4.4.17)


#: problems that let an extractor write outside its target directory (validator: unsafe-name)
UNSAFE_NAME_KINDS = frozenset({"absolute", "parent", "backslash"})


def is_nested_archive_name(name: str) -> bool:
    """A member named like an ``.ozx`` (:data:`NOT_EMBEDDED`)."""
    return name.lower().endswith(OZX_SUFFIX)


def name_problems(name: str) -> list[NameProblem]:
    """Everything wrong with ``name`` as an ``.ozx`` member name, in a fixed order.

    Hygiene (APPNOTE 4.4.17: relative paths, forward slashes, no drive letter): empty
    names, backslashes, NUL characters, absolute names (``/x``, ``C:...``), empty, ``.`` or
    ``..`` segments (so also directory entries, which end in ``/``), names longer than a
    ZIP record can hold. RFC-9: names ending in ``.ozx`` (:data:`NOT_EMBEDDED`).
    """
    if not name:
        return [NameProblem("empty", "is empty", None)]
    out: list[NameProblem] = []
    if "\\" in name:
        out.append(NameProblem("backslash", "contains a backslash", None))
    if "\x00" in name:
        out.append(NameProblem("nul", "contains a NUL character", None))
    if name.startswith("/") or (len(name) >= 2 and name[1] == ":" and name[0].isalpha()):
        out.append(NameProblem("absolute", "is absolute", None))
    else:
        segments = name.split("/")
        if ".." in segments:
            out.append(NameProblem("parent", "has a '..' segment", None))
        if any(seg in ("", ".") for seg in segments):
            out.append(NameProblem("empty-segment", "has an empty or '.' path segment", None))
    if is_nested_archive_name(name):
        out.append(
            NameProblem("nested", "is an .ozx: an .ozx must not contain another", NOT_EMBEDDED)
        )
    if len(name.encode("utf-8", "surrogatepass")) > U16_MAX:
        out.append(NameProblem("too-long", "is longer than 65535 bytes", None))
    return out


def check_entry_name(name: str, error: type[Exception] = ValueError) -> bytes:
    """Validate a member name for writing and return its UTF-8 encoding.

    Raises ``error`` (the writer passes its ``InvalidEntryNameError``) for the first of
    :func:`name_problems`, citing the RFC-9 rule where there is one.
    """
    if not isinstance(name, str):
        raise error(f"entry name must be str, not {type(name).__name__}")
    problems = name_problems(name)
    if problems:
        first = problems[0]
        cite = f" ({first.rule.citation}: {first.rule.text})" if first.rule else ""
        raise error(f"entry name {name!r} {first.reason}{cite}")
    return name.encode("utf-8")


# --------------------------------------------------------------------------- order

_METADATA_BASENAMES = ("zarr.json", ".zgroup", ".zarray", ".zattrs", ".zmetadata")


def is_zarr_json(name: str) -> bool:
    """A Zarr v3 metadata document: the entries :data:`ORDER` is about."""
    return name == "zarr.json" or name.endswith("/zarr.json")


def is_metadata_name(name: str) -> bool:
    """True for Zarr metadata documents (``zarr.json``; Zarr v2 ``.zgroup`` etc. too)."""
    return name.rsplit("/", 1)[-1] in _METADATA_BASENAMES


def name_depth(name: str) -> int:
    """Depth of a member in the hierarchy (number of ``/``): breadth-first is by depth."""
    return name.count("/")


def metadata_sort_key(name: str) -> tuple[int, int, list[str]]:
    """The writer's order of metadata entries (:data:`ORDER`): ``zarr.json`` files first,
    root first, breadth-first (depth, then path segments); Zarr v2 documents after them.

    Any sequence of names that lists metadata sorted by this key before the other members
    passes :func:`order_problem`.
    """
    parts = name.split("/")
    return (0 if parts[-1] == "zarr.json" else 1, len(parts), parts)


def order_problem(names: Sequence[str], where: str) -> tuple[str, str] | None:
    """How ``names`` (members in local or central-directory order) break :data:`ORDER`
    past the first entry, as ``(message, member)``; ``None`` when they follow it.

    Checks that every ``zarr.json`` precedes every other member and that their depths never
    decrease. Whether the root ``zarr.json`` comes first is asked separately (the
    validator reports it under its own code).
    """
    n_meta = sum(1 for n in names if is_zarr_json(n))
    for pos, name in enumerate(names):
        if is_zarr_json(name) and pos >= n_meta:
            first_other = next(x for x in names[:pos] if not is_zarr_json(x))
            return (
                f"{name!r} comes after the non-metadata member {first_other!r} "
                f"{where}: zarr.json files are not all at the start",
                name,
            )
    meta = [n for n in names if is_zarr_json(n)]
    for a, b in itertools.pairwise(meta):
        if name_depth(b) < name_depth(a):
            return (
                f"{b!r} (depth {name_depth(b)}) comes after {a!r} "
                f"(depth {name_depth(a)}) {where}: not breadth-first",
                b,
            )
    return None


# --------------------------------------------------------------------------- comment


def archive_comment(version: str = "0.5") -> bytes:
    """The archive comment :data:`COMMENT` asks for, compact UTF-8 JSON."""
    return json.dumps({"ome": {"version": version}}, separators=(",", ":")).encode("utf-8")


#: what the writer puts in the archive comment unless told otherwise
DEFAULT_COMMENT = archive_comment("0.5")


def comment_version(comment: bytes) -> tuple[str | None, str | None]:
    """``(version, None)`` if ``comment`` follows :data:`COMMENT`, else ``(None, problem)``.

    An empty comment is a problem too (``"the archive has no comment"``).
    """
    if not comment:
        return None, 'the archive has no comment (expected {"ome": {"version": ...}})'
    try:
        doc = json.loads(comment.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, f"archive comment is not UTF-8 JSON ({exc})"
    ome = doc.get("ome") if isinstance(doc, dict) else None
    version = ome.get("version") if isinstance(ome, dict) else None
    if not isinstance(version, str):
        return None, f"archive comment {comment[:80]!r} has no string ome.version"
    return version, None


# --------------------------------------------------------------------------- file name


#: what :data:`EXTENSION` asks an ``.ozx`` to be named with (and nested members not to)
OZX_SUFFIX = ".ozx"
#: file names that mean a single-file (zipped) OME-Zarr: ``.ozx`` and plain ``.zip``
ARCHIVE_SUFFIXES = (OZX_SUFFIX, ".zip")


def has_ozx_extension(path: str | os.PathLike[str]) -> bool:
    """Whether a file name follows :data:`EXTENSION` (case-insensitive)."""
    return os.fspath(path).lower().endswith(OZX_SUFFIX)


def plain_name(path_or_url: str | os.PathLike[str]) -> str:
    """``path_or_url`` lower-cased, without a URL's ``?query`` and trailing slashes: what
    its suffix is read from (a ``?`` in a local path is part of the name)."""
    name = os.fspath(path_or_url)
    if "://" in name:
        name = name.split("?", 1)[0]
    return name.rstrip("/").lower()


def is_archive_name(path_or_url: str | os.PathLike[str]) -> bool:
    """Whether a path or URL names a zipped OME-Zarr (:data:`ARCHIVE_SUFFIXES`,
    case-insensitive, see :func:`plain_name`)."""
    return plain_name(path_or_url).endswith(ARCHIVE_SUFFIXES)
