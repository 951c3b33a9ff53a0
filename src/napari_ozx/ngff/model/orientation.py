"""RFC-4 axis orientation: ``axes[i].orientation = {"type": "anatomical", "value":
"anterior-to-posterior"}`` on an image's space axes (0.6: on its ``coordinateSystems``).

The RFC's rules, once, for the reader, the validator and the writer: :class:`Orientation`
keeps an axis's orientation as written (another ``type`` or value too, never dropped; an
absent, ``null`` or empty one is none: "there is no implicit default");
:data:`ANATOMICAL_VALUES` are the RFC's 18 values and the six layered-tissue ones
(ome/ngff#528); :func:`family` pairs a value with its reverse, and two axes may not share a
family; :func:`orientation_problems` checks an axis list ("MUST only be used on spatial
axes", type, vocabulary, families). :func:`axis_label` / :func:`split_axis_label` write
and read napari's axis label (``y (anterior→posterior)``: coordinates grow towards
posterior), so File > Save keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANATOMICAL",
    "ANATOMICAL_VALUES",
    "Orientation",
    "axis_label",
    "family",
    "orientation_problems",
    "split_axis_label",
]

#: the one orientation ``type`` RFC-4 defines
ANATOMICAL = "anatomical"

#: RFC-4's controlled vocabulary for ``"type": "anatomical"``, each value beside its
#: reverse: the 18 of the RFC (both sexes of biped and quadruped terms) and the six
#: layered-tissue values of ome/ngff#528 (superficial/deep, apical/basal, apex/base)
ANATOMICAL_VALUES: tuple[str, ...] = (
    "left-to-right",
    "right-to-left",
    "anterior-to-posterior",
    "posterior-to-anterior",
    "inferior-to-superior",
    "superior-to-inferior",
    "dorsal-to-ventral",
    "ventral-to-dorsal",
    "dorsal-to-palmar",
    "palmar-to-dorsal",
    "dorsal-to-plantar",
    "plantar-to-dorsal",
    "rostral-to-caudal",
    "caudal-to-rostral",
    "cranial-to-caudal",
    "caudal-to-cranial",
    "proximal-to-distal",
    "distal-to-proximal",
    "superficial-to-deep",
    "deep-to-superficial",
    "apical-to-basal",
    "basal-to-apical",
    "apex-to-base",
    "base-to-apex",
)
_VALUES = frozenset(ANATOMICAL_VALUES)

#: the arrow of a shown direction: "anterior-to-posterior" -> "anterior→posterior"
ARROW = "→"


@dataclass(frozen=True, slots=True)
class Orientation:
    """One axis's ``orientation`` object, as written (any ``type`` / ``value`` strings)."""

    type: str
    value: str

    @classmethod
    def parse(cls, raw: object) -> Orientation | None:
        """The orientation of an axis entry's ``orientation`` field; ``None`` where it is
        absent, ``null`` or ``{}`` (undefined) or not an object of two strings (the
        validator names that)."""
        if not isinstance(raw, Mapping) or not raw:
            return None
        t, v = raw.get("type"), raw.get("value")
        if isinstance(t, str) and isinstance(v, str):
            return cls(t, v)
        return None

    @property
    def known(self) -> bool:
        """An anatomical orientation of RFC-4's vocabulary."""
        return self.type == ANATOMICAL and self.value in _VALUES

    @property
    def direction(self) -> str:
        """How it is shown: "anterior→posterior" (low to high coordinates); another type's
        value as written."""
        if self.known:
            return self.value.replace("-to-", ARROW)
        return self.value if self.type == ANATOMICAL else f"{self.type}: {self.value}"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "value": self.value}


def family(value: str) -> str:
    """The pair a value belongs to, the same for a value and its reverse:
    "anterior-to-posterior" and "posterior-to-anterior" -> "anterior-posterior"."""
    a, sep, b = value.partition("-to-")
    return "-".join(sorted((a, b))) if sep else value


def axis_label(name: str, orientation: Orientation | None) -> str:
    """The label napari shows for an axis: ``y (anterior→posterior)``, or the bare name."""
    if orientation is None:
        return name
    return f"{name} ({orientation.direction})"


def split_axis_label(label: str) -> tuple[str, Orientation | None]:
    """The inverse of :func:`axis_label` for RFC-4's vocabulary: ``"y
    (anterior→posterior)"`` -> ``("y", Orientation("anatomical",
    "anterior-to-posterior"))``; any other label is a bare name."""
    name, sep, rest = label.partition(" (")
    if sep and rest.endswith(")"):
        value = rest[:-1].replace(ARROW, "-to-")
        if value in _VALUES and ARROW in rest:
            return name, Orientation(ANATOMICAL, value)
    return label, None


def orientation_problems(axes: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """RFC-4's rules over one set of axis entries (raw JSON): ``(code, message)`` with
    the codes ``orientation-space``, ``orientation-object``, ``orientation-type``,
    ``orientation-value`` and ``orientation-family``."""
    out: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for a in axes:
        name = a.get("name")
        raw = a.get("orientation")
        if raw is None or (isinstance(raw, Mapping) and not raw):
            continue  # undefined: "there is no implicit default"
        if a.get("type") != "space":
            out.append(
                (
                    "orientation-space",
                    f"axis {name!r} of type {a.get('type')!r} has an orientation",
                )
            )
        o = Orientation.parse(raw)
        if o is None:
            out.append(
                (
                    "orientation-object",
                    f"axis {name!r}: orientation {raw!r} is not an object "
                    "with a string 'type' and 'value'",
                )
            )
            continue
        if o.type != ANATOMICAL:
            out.append(("orientation-type", f"axis {name!r}: orientation type {o.type!r}"))
            continue
        if o.value not in _VALUES:
            out.append(("orientation-value", f"axis {name!r}: orientation value {o.value!r}"))
            continue
        fam = family(o.value)
        if fam in seen:
            out.append(
                (
                    "orientation-family",
                    f"axes {seen[fam]!r} and {name!r} both lie on {fam} "
                    f"({o.value!r}): one direction per anatomical axis",
                )
            )
        else:
            seen[fam] = str(name)
    return out
