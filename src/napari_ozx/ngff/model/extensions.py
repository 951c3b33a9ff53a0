"""Zarr v3 extensions: ZEP 9 names and the ZEP 10 ``extensions`` extension point.

Our own pass runs on every ``zarr.json`` before zarr-python sees it (zarr-python 3.1 refuses
any document with an ``extensions`` list). :func:`read_extensions` parses a document once,
tolerantly: a copy zarr-python accepts, every extension and extension-like top-level key
found (a :class:`NodeExtensions`), and the first refusal, not raised, so the inspector can
show a node the reader refuses; :func:`check_document` raises it. An extension we do not
implement with ``must_understand`` true (the default) refuses the node
(:class:`UnsupportedExtensionError`); ``must_understand: false`` ones are ignored or used
(``array-statistics``: :class:`ArrayStatistics`). Names: :data:`RAW_NAME` or URIs. The
rules in full: ``docs/design/metadata-model.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from napari_ozx.errors import MetadataError, OzxError, UnsupportedExtensionError

__all__ = [
    "ArrayStatistics",
    "Extension",
    "NodeExtensions",
    "check_document",
    "read_extensions",
]

RAW_NAME = re.compile(r"^[a-z0-9-_.]+$")
_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://\S+$")

# Extensions we implement (their behaviour is only informative, so understanding them
# means: we read them and nothing is wrong if we use the data without them).
_STATISTICS_NAMES = frozenset({"array-statistics", "example.array-statistics"})
UNDERSTOOD = _STATISTICS_NAMES

_V3_ARRAY_KEYS = frozenset(
    {
        "zarr_format",
        "node_type",
        "shape",
        "data_type",
        "chunk_grid",
        "chunk_key_encoding",
        "fill_value",
        "codecs",
        "attributes",
        "dimension_names",
        "storage_transformers",
        "extensions",
    }
)
_V3_GROUP_KEYS = frozenset(
    {"zarr_format", "node_type", "attributes", "extensions", "consolidated_metadata"}
)


@dataclass(frozen=True, slots=True)
class Extension:
    name: str
    must_understand: bool = True
    configuration: Mapping[str, Any] = field(default_factory=dict)
    understood: bool = False


@dataclass(frozen=True, slots=True)
class ArrayStatistics:
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True, slots=True)
class NodeExtensions:
    #: the entries of the ``extensions`` list (those refused too, when read tolerantly)
    extensions: tuple[Extension, ...] = ()
    #: unknown top-level keys that may be ignored (``must_understand: false``)
    ignored_keys: tuple[str, ...] = ()
    #: every unknown top-level key as an extension (ignored ones and refused ones)
    keys: tuple[Extension, ...] = ()

    @property
    def statistics(self) -> ArrayStatistics | None:
        for e in self.extensions:
            if e.name in _STATISTICS_NAMES:
                lo, hi = e.configuration.get("min"), e.configuration.get("max")
                ok = [isinstance(v, int | float) and not isinstance(v, bool) for v in (lo, hi)]
                return ArrayStatistics(lo if ok[0] else None, hi if ok[1] else None)
        return None


def _parse_one(raw: object, node: str) -> Extension:
    conf: Mapping[str, Any]
    if isinstance(raw, str):
        name, must, conf = raw, True, {}
    elif isinstance(raw, Mapping) and isinstance(raw.get("name"), str):
        name = raw["name"]
        must = raw.get("must_understand", True)
        if not isinstance(must, bool):
            raise MetadataError(
                f"{node or '/'}: extension {name!r} has a non-boolean must_understand"
            )
        conf = raw.get("configuration") or {}
        if not isinstance(conf, Mapping):
            raise MetadataError(f"{node or '/'}: extension {name!r} configuration is not an object")
    else:
        raise MetadataError(f"{node or '/'}: invalid extension entry {raw!r}")
    if not (RAW_NAME.match(name) or _URI.match(name)):
        raise MetadataError(
            f"{node or '/'}: extension name {name!r} is neither a raw name nor a URI (ZEP 9)"
        )
    return Extension(name, must, dict(conf), name in UNDERSTOOD)


def check_document(doc: Mapping[str, object], node: str) -> tuple[dict[str, Any], NodeExtensions]:
    """Apply the must-understand rules to one Zarr v3 ``zarr.json`` document.

    Returns the document without what zarr-python would refuse, and the extensions.
    Raises :class:`UnsupportedExtensionError` for a must-understand extension (or
    unknown key) we do not implement, :class:`MetadataError` for a malformed one.
    """
    out, exts, refusal = read_extensions(doc, node)
    if refusal is not None:
        raise refusal
    return out, exts


def read_extensions(
    doc: Mapping[str, object], node: str
) -> tuple[dict[str, Any], NodeExtensions, OzxError | None]:
    """The must-understand pass without raising: (document zarr-python accepts, the
    extensions and extension-like keys found, the first refusal or ``None``).

    Malformed entries are left out of the extensions; refused ones are listed (with
    ``understood`` false) so that a viewer can say what a node needs.
    """
    out = dict(doc)
    exts: list[Extension] = []
    refusal: OzxError | None = None
    raw = out.pop("extensions", None)
    if raw is not None:
        if not isinstance(raw, list) or not raw:
            refusal = MetadataError(
                f"{node or '/'}: 'extensions' must be a non-empty list (ZEP 10)"
            )
        for r in raw if isinstance(raw, list) else ():
            try:
                e = _parse_one(r, node)
            except MetadataError as err:
                refusal = refusal or err
                continue
            if e.must_understand and not e.understood:
                refusal = refusal or UnsupportedExtensionError(e.name, node)
            exts.append(e)
    known = _V3_ARRAY_KEYS if out.get("node_type") == "array" else _V3_GROUP_KEYS
    ignored: list[str] = []
    keys: list[Extension] = []
    for key in list(out):
        if key in known:
            continue
        value = out.pop(key)
        conf = (
            {k: v for k, v in value.items() if k != "must_understand"}
            if isinstance(value, Mapping)
            else {}
        )
        if isinstance(value, Mapping) and value.get("must_understand") is False:
            ignored.append(key)
            keys.append(Extension(key, False, conf))
        else:
            keys.append(Extension(key, True, conf))
            refusal = refusal or UnsupportedExtensionError(key, node, what="metadata key")
    return out, NodeExtensions(tuple(exts), tuple(ignored), tuple(keys)), refusal
