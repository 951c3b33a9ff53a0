"""Text helpers shared by the facts (their rows) and the plain-text rendering."""

from __future__ import annotations

import json
from collections.abc import Sequence

__all__ = ["format_bytes", "num_text", "nums_text", "pretty_json", "shape_text"]


def format_bytes(n: float | None) -> str:
    """``1536`` -> ``"1.5 KiB"`` (binary units; ``None`` -> ``"?"``)."""
    if n is None:
        return "?"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def shape_text(s: Sequence[int] | None) -> str:
    """``(2, 3)`` -> ``"2 × 3"``; ``()`` -> ``"scalar"``; ``None`` -> ``"–"``."""
    if s is None:
        return "–"
    return " × ".join(str(v) if isinstance(v, int) else repr(v) for v in s) or "scalar"


def num_text(v: float) -> str:
    return f"{v:g}"


def nums_text(vs: Sequence[float]) -> str:
    return ", ".join(num_text(v) for v in vs)


def pretty_json(doc: object, indent: int = 2, width: int = 88) -> str:
    """Indented JSON in which short lists of numbers or strings (shapes, scales,
    colours) stay on one line."""

    def short(v: object) -> str | None:
        if isinstance(v, list) and all(not isinstance(x, dict | list) for x in v):
            s = json.dumps(v, ensure_ascii=False)
            return s if len(s) <= width else None
        return None

    def dump(v: object, level: int) -> str:
        pad, inner = " " * (indent * level), " " * (indent * (level + 1))
        one = short(v)
        if one is not None:
            return one
        if isinstance(v, dict):
            if not v:
                return "{}"
            items = [
                f"{inner}{json.dumps(str(k), ensure_ascii=False)}: {dump(x, level + 1)}"
                for k, x in v.items()
            ]
            return "{\n" + ",\n".join(items) + f"\n{pad}}}"
        if isinstance(v, list):
            if not v:
                return "[]"
            return "[\n" + ",\n".join(f"{inner}{dump(x, level + 1)}" for x in v) + f"\n{pad}]"
        return json.dumps(v, ensure_ascii=False)

    return dump(doc, 0)
