"""Condition tables of HCS plates: each well's treatment (drug, concentration ...).

Fractal keeps a plate's conditions in a plate-level ``tables/<name>`` of type
``condition_table`` (any backend). :func:`plate_conditions` reads it once (the plate
group's metadata only: no well is read) and maps its rows to the plate's wells, by
``row`` and ``column``, else ``well``, else ``well_path`` (case-insensitive where that is
unambiguous): a :class:`PlateConditions`, well path -> column -> value (a tuple where a
well's rows disagree). :func:`condition_tables` lists a plate's condition tables;
:func:`format_value` shows one value. The matching rules: ``docs/design/tables.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from napari_ozx.errors import NotOmeZarrError, TableError
from napari_ozx.ngff.model.metadata import Plate
from napari_ozx.ngff.tables.read import TableData, TableInfo, list_tables, opened_source, read_table

__all__ = [
    "CONDITIONS_MAX_BYTES",
    "PlateConditions",
    "condition_tables",
    "format_value",
    "plate_conditions",
]

#: a condition table larger than this is not read (conditions are one row per well)
CONDITIONS_MAX_BYTES = 64 << 20
#: the name Fractal gives a plate's condition table (preferred when there are several)
DEFAULT_NAME = "condition_table"

_ROW_KEYS = ("row",)
_COLUMN_KEYS = ("column", "col")
_WELL_KEYS = ("well", "well_name")
_PATH_KEYS = ("well_path", "path")
_OTHER_KEYS = ("path_in_well",)
_WELL_NAME = re.compile(r"^\s*([A-Za-z]+)\s*[/_\-]?\s*(\d+)\s*$")


def format_value(value: Any) -> str:
    """A condition value as people read it: numbers without trailing zeros, a missing
    value as "", several values joined by ", "."""
    if value is None:
        return ""
    if isinstance(value, tuple):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _python(value: Any) -> Any:
    """A numpy element as a plain Python value; NaN and None as None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


@dataclass(frozen=True, eq=False)
class PlateConditions(Mapping[str, Mapping[str, Any]]):
    """A plate's conditions: well path -> condition column -> value (a mapping).

    Made by :func:`plate_conditions`.

    Parameters
    ----------
    table : TableInfo, optional
        The condition table read (None: the plate has none).
    columns : tuple of str, default ()
        The condition columns, in the table's order.
    wells : dict, optional
        Well path -> column -> value (a tuple where a well's rows disagree).
    key : str, optional
        How rows were matched to wells (``"row and column"``, ``"well"``, ``"well path"``).
    unmatched : int, default 0
        The rows whose well the plate does not list.
    """

    table: TableInfo | None = None
    columns: tuple[str, ...] = ()
    wells: dict[str, dict[str, Any]] = field(default_factory=dict)
    key: str | None = None
    unmatched: int = 0

    def __getitem__(self, well: str) -> Mapping[str, Any]:
        return self.wells[well.strip("/")]

    def __iter__(self) -> Iterator[str]:
        return iter(self.wells)

    def __len__(self) -> int:
        return len(self.wells)

    def distinct(self, column: str) -> list[str]:
        """The values of *column* over the wells (as :func:`format_value` shows them;
        each of a well's several values), numbers in numeric order, then text."""
        seen: dict[str, Any] = {}
        for cond in self.wells.values():
            value = cond.get(column)
            for v in value if isinstance(value, tuple) else (value,):
                seen.setdefault(format_value(v), v)

        def order(item: tuple[str, Any]) -> tuple[int, float, str]:
            text, v = item
            if isinstance(v, int | float) and not isinstance(v, bool):
                return (0, float(v), text)
            return (1, 0.0, text)

        return [text for text, _ in sorted(seen.items(), key=order)]

    def matching(
        self, column: str | None, value: str | None = None, text: str | None = None
    ) -> set[str]:
        """The wells whose *column* shows *value* exactly (as :func:`format_value` shows
        it; one of a well's several values), or contains *text* (case-insensitive; any
        column when *column* is None). Neither: every well with conditions."""
        out = set()
        needle = text.casefold() if text else None
        for well, cond in self.wells.items():
            values = [cond.get(column)] if column is not None else list(cond.values())
            shown = [
                format_value(v)
                for value_ in values
                for v in (value_ if isinstance(value_, tuple) else (value_,))
            ]
            if value is not None and value not in shown:
                continue
            if needle is not None and not any(needle in s.casefold() for s in shown):
                continue
            out.add(well)
        return out

    def describe(self, well: str) -> list[str]:
        """A well's conditions as "column: value" lines (empty without conditions)."""
        cond = self.wells.get(well.strip("/"))
        if not cond:
            return []
        return [f"{c}: {format_value(cond.get(c))}" for c in self.columns]


# ------------------------------------------------------------------------- reading


def _plate_model(src: Any, plate: str) -> Plate:
    root = getattr(src, "root", None)
    group = root if not plate.strip("/") else src.group(plate.strip("/"))
    model = group.meta.plate if group is not None else None
    if model is None:
        raise NotOmeZarrError(f"{src.source}: {plate or '/'!r} is not an HCS plate")
    return model


def condition_tables(source: Any, plate: str = "") -> list[TableInfo]:
    """The condition tables of the plate at *plate* in *source* (the plate group's
    ``tables/``), metadata only; one named ``condition_table`` first."""
    source, plate = _unwrap(source, plate)
    with opened_source(source) as src:
        infos = [t for t in list_tables(src, plate) if t.type == "condition_table"]
    return sorted(infos, key=lambda t: t.name != DEFAULT_NAME)


def _unwrap(source: Any, plate: str) -> tuple[Any, str]:
    """An :class:`~napari_ozx.ngff.read.plate.HcsPlate` is its hierarchy and path."""
    if hasattr(source, "oz") and hasattr(source, "by_path"):
        return source.oz, plate or source.path
    return source, plate


def plate_conditions(
    source: Any, table: str | None = None, plate: str = "", model: Plate | None = None
) -> PlateConditions:
    """Each well's conditions from the plate's condition table, read once.

    Parameters
    ----------
    source : str, os.PathLike, OmeZarr, HcsPlate or TableSource
        A path or URL, an opened hierarchy or plate, or any table source (then with
        *model*).
    table : str, optional
        The table's name (any type); by default the plate's condition table
        (``condition_table`` when there are several).
    plate : str, default ""
        The plate group's path in *source*; "" is the root.
    model : Plate, optional
        The plate's parsed metadata, when *source* is a bare table source (as
        ``napari-ozx info`` has it).

    Returns
    -------
    PlateConditions
        Well path -> column -> value; empty for a plate without a condition table.

    Raises
    ------
    TableError
        The table cannot be read or names no well (no row and column, well or well path
        column).
    NotOmeZarrError
        *plate* is not a plate.
    """
    source, plate = _unwrap(source, plate)
    with opened_source(source) as src:
        model = model if model is not None else _plate_model(src, plate)
        if table is None:
            found = [t for t in list_tables(src, plate) if t.type == "condition_table"]
            found.sort(key=lambda t: t.name != DEFAULT_NAME)
            if not found:
                return PlateConditions()
            info: TableInfo | str = found[0]
        else:
            info = table
        data = read_table(src, info, plate, max_bytes=CONDITIONS_MAX_BYTES)
    return map_conditions(data, model)


def _find_column(names: Sequence[str], wanted: Sequence[str]) -> str | None:
    folded = {n.casefold(): n for n in reversed(names)}
    return next((folded[w] for w in wanted if w in folded), None)


def _names(names: Sequence[str]) -> dict[str, int]:
    """Names -> index: each name as it is, and without regard to case where that is
    unambiguous (a 1536-well plate has rows "A" and "a")."""
    out = {n: i for i, n in enumerate(names)}
    folded: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        folded.setdefault(n.casefold(), []).append(i)
    for f, idx in folded.items():
        if len(idx) == 1:
            out.setdefault(f, idx[0])
    return out


class _Wells:
    """The plate's wells by row and column names (columns by number too), by name and
    by path."""

    def __init__(self, plate: Plate) -> None:
        self.rows = _names(plate.rows)
        self.columns: dict[Any, int] = dict(_names(plate.columns))
        for j, c in enumerate(plate.columns):
            if c.isdigit():
                self.columns.setdefault(int(c), j)
        self.at = {(w.row, w.column): w.path for w in plate.wells}
        self.paths = {w.path.strip("/"): w.path for w in plate.wells}

    @staticmethod
    def _lookup(names: Mapping[Any, int], text: str) -> int | None:
        found = names.get(text)
        return found if found is not None else names.get(text.casefold())

    def _column(self, value: Any) -> int | None:
        text = format_value(value).strip()
        j = self._lookup(self.columns, text)
        if j is None:
            try:
                number = float(text)
            except ValueError:
                return None
            if number.is_integer():
                j = self.columns.get(int(number))
        return j

    def by_row_column(self, row: Any, column: Any) -> str | None:
        i = self._lookup(self.rows, format_value(row).strip())
        j = self._column(column)
        return None if i is None or j is None else self.at.get((i, j))

    def by_name(self, name: Any) -> str | None:
        text = format_value(name)
        m = _WELL_NAME.match(text)
        if m is not None:
            found = self.by_row_column(m.group(1), m.group(2))
            if found is not None:
                return found
        return self.paths.get(text.strip().strip("/"))


def map_conditions(data: TableData, plate: Plate) -> PlateConditions:
    """A condition table's rows mapped to *plate*'s wells (see the module docstring)."""
    info = data.info
    names = list(data.columns)
    wells = _Wells(plate)
    row_c, col_c = _find_column(names, _ROW_KEYS), _find_column(names, _COLUMN_KEYS)
    well_c, path_c = _find_column(names, _WELL_KEYS), _find_column(names, _PATH_KEYS)
    keys: tuple[str, ...]
    if row_c is not None and col_c is not None:
        key, keys = "row and column", (row_c, col_c)
        rows, cols = data.columns[row_c], data.columns[col_c]
        where = [wells.by_row_column(r, c) for r, c in zip(rows, cols, strict=True)]
    elif well_c is not None or path_c is not None:
        name = well_c if well_c is not None else path_c
        assert name is not None
        key, keys = ("well" if well_c is not None else "well path"), (name,)
        where = [wells.by_name(v) for v in data.columns[name]]
    else:
        raise TableError(
            "no column names each row's well (row and column, well, or well_path)",
            info.name,
            info.source,
        )
    other = {n for n in names if n.casefold() in _OTHER_KEYS}
    columns = tuple(n for n in names if n not in keys and n not in other)
    values = {c: [_python(v) for v in data.columns[c]] for c in columns}
    per_well: dict[str, list[int]] = {}
    for i, path in enumerate(where):
        if path is not None:
            per_well.setdefault(path, []).append(i)
    out: dict[str, dict[str, Any]] = {}
    for path, idx in per_well.items():
        cond: dict[str, Any] = {}
        for c in columns:
            distinct = list(dict.fromkeys(values[c][i] for i in idx))
            cond[c] = distinct[0] if len(distinct) == 1 else tuple(distinct)
        out[path] = cond
    unmatched = sum(1 for p in where if p is None)
    return PlateConditions(info, columns, out, key, unmatched)
