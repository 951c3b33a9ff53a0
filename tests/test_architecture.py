"""The layers of architecture.md, checked on the source with ``ast``.

Every import statement of every module under ``src/napari_ozx`` counts: module level,
inside functions, under ``if TYPE_CHECKING:``; relative imports are resolved. A module
may import only modules of its own rank or below; no two modules may import each other,
however indirectly; the core never touches Qt (nor, below ``layers``, napari).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests._support.paths import ROOT

PKG = "napari_ozx"
SRC = ROOT / "src" / PKG

#: (module prefix, rank, layer) — the first prefix that matches decides (most specific first)
RANKS: tuple[tuple[str, float, str], ...] = (
    (f"{PKG}.errors", 0, "errors"),
    (f"{PKG}._compat", 0, "compatibility"),  # other packages' private API, in one place
    (f"{PKG}.ozx.remote", 1.5, "container: remote"),  # range readers over the local parser
    (f"{PKG}.ozx", 1, "container"),
    # ngff's sub-ranks: the model knows nothing of reading, writing or validating
    (f"{PKG}.ngff.model", 2, "OME model"),
    (f"{PKG}.ngff.read", 2.1, "OME read"),
    (f"{PKG}.ngff.tables", 2.2, "OME tables"),
    (f"{PKG}.ngff.spatial", 2.2, "OME spatial"),  # SpatialData points and shapes
    (f"{PKG}.ngff.validate", 2.3, "OME validate"),
    (f"{PKG}.ngff.write", 2.3, "OME write"),
    (f"{PKG}.ngff", 2, "OME model and I/O"),
    (f"{PKG}.inspection", 2.5, "inspection"),
    (f"{PKG}.layers", 3, "napari mapping"),
    (f"{PKG}._reader", 4, "entry points"),
    (f"{PKG}._viewer_hooks", 4, "entry points"),  # what a read does to its viewer
    (f"{PKG}._refine3d", 4, "entry points"),  # 3D shown coarsest first, then refined
    (f"{PKG}._writer", 4, "entry points"),
    (f"{PKG}._sample_data", 4, "entry points"),
    (f"{PKG}._preferences", 4, "entry points"),  # napari's reader settings (a command)
    (f"{PKG}.__main__", 4, "entry points"),
    (f"{PKG}._qt", 5, "widgets"),
)
EXEMPT = {PKG}  # napari_ozx/__init__.py: the lazy public API

QT_ROOTS = {"qtpy", "PyQt5", "PyQt6", "PySide2", "PySide6", "superqt", "vispy"}
NO_QT = ("ozx", "ngff", "inspection", "layers")
NO_NAPARI = ("ozx", "ngff", "inspection")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # what it imports (a napari_ozx module, or a third-party dotted name)
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def rank(module: str) -> tuple[float, str] | None:
    for prefix, r, layer in RANKS:
        if module == prefix or module.startswith(prefix + "."):
            return r, layer
    return None


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(module: str, path: Path) -> list[Import]:
    """Every import in *module*, anywhere in its body, as the module(s) it loads."""
    known = modules()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(Import(module, a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, path.name == "__init__.py", node)
            for a in node.names:
                sub = f"{base}.{a.name}"
                # "from . import x" / "from .pkg import mod" load the submodule itself
                out.append(Import(module, sub if sub in known else base, node.lineno))
    return out


@cache
def all_imports() -> tuple[Import, ...]:
    return tuple(i for m, p in modules().items() for i in imports_of(m, p))


def _internal(target: str) -> str | None:
    """The napari_ozx module *target* names (a dotted name may go past a module into
    an attribute: ``import napari_ozx.ngff.read.open.x`` is the module
    ``napari_ozx.ngff.read.open``)."""
    if target != PKG and not target.startswith(PKG + "."):
        return None
    known = modules()
    parts = target.split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts) if parts else target


def internal_edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in modules()}
    for imp in all_imports():
        t = _internal(imp.target)
        if t is not None and t != imp.module and t not in EXEMPT and imp.module not in EXEMPT:
            graph[imp.module].add(t)
    return graph


# --------------------------------------------------------------------------- tests


def test_the_parser_sees_every_kind_of_import(tmp_path):
    """The checker itself: function-level, TYPE_CHECKING and relative imports count."""
    src = tmp_path / PKG / "ngff" / "x.py"
    src.parent.mkdir(parents=True)
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "from ..errors import OzxError\n"
        "if TYPE_CHECKING:\n    from .._qt import export\n"
        "def f():\n    from ..layers.reading import read_layer_data\n    import qtpy.QtCore\n"
    )
    got = {i.target for i in imports_of(f"{PKG}.ngff.x", src)}
    assert {f"{PKG}.errors", f"{PKG}._qt.export", f"{PKG}.layers.reading", "qtpy.QtCore"} <= got


def test_every_module_has_a_rank():
    unranked = [m for m in modules() if m not in EXEMPT and rank(m) is None]
    assert not unranked, f"modules outside architecture.md's layers: {unranked}"


def test_no_upward_imports():
    bad = []
    for imp in all_imports():
        t = _internal(imp.target)
        if t is None or t in EXEMPT or imp.module in EXEMPT:
            continue
        mine, theirs = rank(imp.module), rank(t)
        if mine is None or theirs is None:
            continue  # reported by test_every_module_has_a_rank
        if theirs[0] > mine[0]:
            bad.append(
                f"{imp.module} ({mine[1]}) line {imp.line} imports {t} ({theirs[1]}), "
                "a higher layer"
            )
    assert not bad, "\n".join(bad)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, first repeated at the end), or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        colour[m] = GREY
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if colour.get(t, BLACK) == GREY:
                return [*stack[stack.index(t) :], t]
            if colour.get(t) == WHITE and (found := visit(t)) is not None:
                return found
        stack.pop()
        colour[m] = BLACK
        return None

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for m in sorted(graph):
        if colour[m] == WHITE and (found := visit(m)) is not None:
            return found
    return None


def test_find_cycle_reports_the_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_validate_and_write_stay_apart():
    """The two top sub-ranks of ngff share a rank: neither imports the other, so the
    validator judges files by the model's reading, never by how the writer made them."""
    bad = [
        f"{imp.module} line {imp.line} imports {t}"
        for imp in all_imports()
        if (t := _internal(imp.target)) is not None
        for a, b in (("validate", "write"), ("write", "validate"))
        if imp.module.startswith(f"{PKG}.ngff.{a}") and t.startswith(f"{PKG}.ngff.{b}")
    ]
    assert not bad, "\n".join(bad)


def test_no_package_folder_is_a_heap():
    """No folder of the package holds more than 15 flat modules or 6,000 lines: the
    layout shows the layers (architecture.md)."""
    heaps = []
    for folder in sorted({p.parent for p in SRC.rglob("*.py")}):
        mods = sorted(folder.glob("*.py"))
        lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in mods)
        if len(mods) > 15 or lines > 6000:
            heaps.append(f"{folder.relative_to(SRC.parent)}: {len(mods)} modules, {lines} lines")
    assert not heaps, heaps


def test_no_import_cycles():
    cycle = find_cycle(internal_edges())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_no_module_shadows_the_stdlib():
    shadowing = [
        m for m in modules() if m.rsplit(".", 1)[-1] in sys.stdlib_module_names and m != PKG
    ]
    assert not shadowing, f"modules named like stdlib modules: {shadowing}"


def _third_party(layers: tuple[str, ...], roots: set[str]) -> list[str]:
    prefixes = tuple(f"{PKG}.{x}" for x in layers)
    return [
        f"{i.module} line {i.line}: {i.target}"
        for i in all_imports()
        if (i.module in prefixes or i.module.startswith(tuple(p + "." for p in prefixes)))
        and i.target.split(".")[0] in roots
    ]


def test_core_and_layers_never_import_qt():
    bad = _third_party(NO_QT, QT_ROOTS)
    assert not bad, "Qt / vispy imported below the widgets:\n" + "\n".join(bad)


def test_model_and_inspection_never_import_napari():
    bad = _third_party(NO_NAPARI, {"napari", "npe2"})
    assert not bad, "napari imported below the layers package:\n" + "\n".join(bad)
