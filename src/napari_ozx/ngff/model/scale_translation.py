"""Per-axis scale and translation: the one reading of a ``coordinateTransformations`` list of
``scale`` / ``translation`` / ``identity`` steps (and 0.6 ``sequence`` wrappers of them),
for the reader (:mod:`.metadata`), the validator and the transformation graph.

:func:`unwrap_sequences` unwraps ``sequence`` wrappers (0.6 writes a sequence where 0.4 /
0.5 wrote a list); :func:`fold_scale_translation` is the reader's fold into one scale and
one translation (a later scale also scales the translation so far), raising
:class:`~napari_ozx.errors.MetadataError` for what it cannot fold;
:func:`plain_scale_translation` is the same fold, or ``None`` where the list is not plain
numbers of one length (the validator's and the graph's view); :func:`is_scale_translation`
says whether one transformation is of that kind (strict for a dataset, or 0.4/0.5's loose
form). No zarr, napari or Qt.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeGuard

from napari_ozx.errors import MetadataError

if TYPE_CHECKING:
    from napari_ozx.ngff.model.transforms import Transform

__all__ = [
    "fold_scale_translation",
    "is_scale_translation",
    "plain_scale_translation",
    "unwrap_sequences",
]

logger = logging.getLogger(__name__)

#: a scale and a translation, one value per axis each
ScaleTranslation = tuple[tuple[float, ...], tuple[float, ...]]


class _NotFoldable(Exception):
    """A step that cannot be folded (the message says why)."""


def unwrap_sequences(raw: Sequence[object]) -> list[object]:
    """*raw*'s transformations with every ``sequence`` replaced by its own (recursively;
    a sequence whose ``transformations`` is no list contributes none). Other entries,
    objects or not, are kept as they are for the caller to judge."""
    out: list[object] = []
    for t in raw:
        if isinstance(t, Mapping) and t.get("type") == "sequence":
            inner = t.get("transformations")
            out.extend(unwrap_sequences(inner) if isinstance(inner, list) else [])
        else:
            out.append(t)
    return out


def _is_num(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _values(t: Mapping[str, object], kind: str, n: int | None, reader: bool) -> list[float]:
    """The numbers of one scale / translation step, one per axis."""
    values = t.get(kind)
    if not isinstance(values, list) or (n is not None and len(values) != n):
        raise _NotFoldable(f"{kind} {values!r} does not have one value per axis ({n})")
    if not reader and not all(_is_num(v) for v in values):
        raise _NotFoldable(f"{kind} {values!r} is not a list of numbers")
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        raise _NotFoldable(f"{kind} {values!r} is not a list of numbers") from None


def _fold(
    items: list[object], ndim: int | None, node: str, *, reader: bool
) -> ScaleTranslation | None:
    """Fold *items* (sequences unwrapped); *ndim* ``None``: the first step's length.
    ``reader``: the reader's leniency (numbers as strings, a step stored at a ``path``
    skipped with a warning) and strictness (positive scales). ``None`` when no step
    fixes the dimensionality."""
    scale = None if ndim is None else [1.0] * ndim
    translation = None if ndim is None else [0.0] * ndim
    for t in items:
        if not isinstance(t, Mapping):
            raise _NotFoldable(f"invalid coordinate transformation {t!r}")
        kind = t.get("type")
        if kind == "identity":
            continue
        if kind not in ("scale", "translation"):
            raise _NotFoldable(f"unsupported coordinate transformation type {kind!r}")
        if t.get(kind) is None and "path" in t:
            if not reader:
                raise _NotFoldable(f"{kind} stored at a path")
            logger.warning("%s: %s transform stored at a path is ignored", node, kind)
            continue
        raw_values = t.get(kind)
        if scale is None or translation is None:  # the first step fixes the length
            n = len(raw_values) if isinstance(raw_values, list) else 0
            scale, translation = [1.0] * n, [0.0] * n
        vals = _values(t, str(kind), len(scale), reader)
        if kind == "scale":
            if reader and any(v <= 0 or v != v for v in vals):
                raise _NotFoldable(f"scale {raw_values!r} must be positive")
            # a later scale also scales the translation accumulated so far
            translation = [tr * s for tr, s in zip(translation, vals, strict=True)]
            scale = [a * b for a, b in zip(scale, vals, strict=True)]
        else:
            translation = [a + b for a, b in zip(translation, vals, strict=True)]
    if scale is None or translation is None:
        return None
    return tuple(scale), tuple(translation)


def fold_scale_translation(raw: object, ndim: int, node: str = "") -> ScaleTranslation:
    """The scale and translation a ``coordinateTransformations`` list amounts to, one
    value per axis (*ndim*): ``identity`` steps change nothing, a later ``scale`` scales
    the translation so far (OME-Zarr 0.4/0.5 §trafo-md: "The transformations in the list
    are applied sequentially"). ``None`` (no list) is no transformation. A step stored at
    a ``path`` is skipped with a warning; anything else raises
    :class:`~napari_ozx.errors.MetadataError` naming *node* and the step."""
    if raw is None:
        return (1.0,) * ndim, (0.0,) * ndim
    if not isinstance(raw, list):
        raise MetadataError(f"{node or '/'}: 'coordinateTransformations' must be a list")
    try:
        folded = _fold(unwrap_sequences(raw), ndim, node, reader=True)
    except _NotFoldable as e:
        raise MetadataError(f"{node or '/'}: {e}") from None
    assert folded is not None  # ndim is given
    return folded


def plain_scale_translation(raw: object, ndim: int | None = None) -> ScaleTranslation | None:
    """:func:`fold_scale_translation` of a list whose every step is an ``identity`` or a
    ``scale`` / ``translation`` of plain JSON numbers, one per axis (*ndim*, or the first
    step's length); ``None`` for anything else, or where no step states a length."""
    if not isinstance(raw, list):
        return None
    try:
        return _fold(unwrap_sequences(raw), ndim, "", reader=False)
    except _NotFoldable:
        return None


def _kind_and_parts(t: Transform | Mapping[str, object]) -> tuple[object, list[object]]:
    """A transformation's type and the steps of a sequence (JSON or parsed)."""
    if isinstance(t, Mapping):
        parts = t.get("transformations")
        return t.get("type"), list(parts) if isinstance(parts, list) else []
    return t.type, list(getattr(t, "transformations", ()))


def is_scale_translation(t: Transform | Mapping[str, object], *, dataset: bool = False) -> bool:
    """Whether *t* (its JSON or the parsed :class:`~.transforms.Transform`) maps each axis
    by a scale and a translation only.

    ``dataset=False``: what OME-Zarr 0.4/0.5 can store as a scale and a translation (spec
    0.6 "Conforming readers MUST parse identity, scale, translation transformations, as
    well as sequences of them"): an ``identity``, ``scale``, ``translation`` or a
    ``sequence`` (nested or not) of them.

    ``dataset=True``: the form 0.6 §multiscales-md allows a dataset's transformation ("The
    transformation MUST be one of the following: A single scale or identity
    transformation; A sequence transformation containing one scale and one translation
    transformation"), the scale first (§coord-trafo-constraints: "sequence of a scale
    followed by a translation"); a sequence of a scale alone is accepted as the scale.
    """
    kind, parts = _kind_and_parts(t)
    if dataset:
        if kind in ("scale", "identity"):
            return True
        if kind != "sequence":
            return False
        kinds = [_kind_and_parts(x)[0] for x in parts if _is_transformation(x)]
        return kinds in (["scale", "translation"], ["scale"])
    if kind in ("identity", "scale", "translation"):
        return True
    if kind == "sequence":
        return all(_is_transformation(x) and is_scale_translation(x) for x in parts)
    return False


def _is_transformation(x: object) -> TypeGuard[Transform | Mapping[str, object]]:
    """A transformation's JSON object or a parsed one (anything with a ``type``)."""
    return isinstance(x, Mapping) or hasattr(x, "type")
