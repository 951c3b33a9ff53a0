"""The manual works as written: every ```bash and ```python block of ``README.md`` and
``docs/*.md`` runs, and every relative link in them (and in ``architecture.md`` and the
design notes, ``docs/design/``) leads somewhere. The source's own docs can be trusted too:
module docstrings fit a screen, and every name, test file and page they cite exists.

Each page's blocks run in order (a later block may use what an earlier one wrote) in a
directory of its own holding a copy of the bundled sample as ``cells.ozx`` and the other
small inputs the pages name (``plate.ome.zarr``, ``scene.ozx``, ``store.zarr``: the
SpatialData test store), with ``napari-ozx`` of this environment on PATH and the
session's temporary napari / napari-ozx config (see ``conftest.py``) passed on. Python
blocks run in this process (napari is imported once). What cannot run there in a few
seconds -- the napari window, remote URLs, a cluster, the quick start that installs --
is fenced ```text, and a test checks that no runnable block does any of it.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tokenize
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests._support.paths import ROOT

ROOT = ROOT
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: the napari hub's description of the plugin (napari-hub.org shows it instead of the README)
HUB = ROOT / ".napari-hub" / "DESCRIPTION.md"
#: why things are built the way they are, linked from architecture.md
DESIGN = sorted((ROOT / "docs" / "design").glob("*.md"))
RUNNABLE = ("bash", "python")
#: fences a page may use: runnable ones, and ``text`` for what must not run here
LANGUAGES = {*RUNNABLE, "text", "json"}

#: a fenced block, also indented inside a list item (its code dedented by the fence's indent)
_FENCE = re.compile(r"^([ \t]*)```([^\n`]*)\n(.*?)^\1```[ \t]*$", re.S | re.M)
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
_URL = re.compile(r"\b(?:https?|s3|gs)://", re.I)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line} ({self.lang})"


def _blocks(page: Path) -> list[Block]:
    text = page.read_text()
    return [
        Block(
            page,
            text.count("\n", 0, m.start()) + 1,
            m.group(2).strip(),
            re.sub(rf"(?m)^{m.group(1)}", "", m.group(3)),
        )
        for m in _FENCE.finditer(text)
    ]


def _quickstart_block() -> Block:
    """The README's quick start (tests/test_readme.py parses it): it installs, so it is
    the one runnable block not run here."""
    readme = ROOT / "README.md"
    start = readme.read_text().index("## Quick start")
    return next(
        b
        for b in _blocks(readme)
        if b.lang == "bash" and readme.read_text().count("\n", 0, start) < b.line
    )


def _runnable(page: Path) -> list[Block]:
    skip = _quickstart_block()
    return [b for b in _blocks(page) if b.lang in RUNNABLE and b != skip]


def test_every_fence_names_its_language():
    """A block with no language or another one (```sh, ```console) would silently go
    unrun: only ```bash / ```python (run) and ```text / ```json (shown) are allowed."""
    wrong = [
        f"{b} '{b.lang}'" for p in (*PAGES, HUB) for b in _blocks(p) if b.lang not in LANGUAGES
    ]
    assert not wrong, wrong
    assert sum(len(_runnable(p)) for p in PAGES) >= 10


def _launches_napari(block: Block) -> bool:
    if block.lang == "python":
        return bool(re.search(r"napari\.(Viewer|run|view_\w+|gui_qt)\b", block.code))
    for line in block.code.splitlines():
        words = line.split("#", 1)[0].split()
        while words and re.fullmatch(r"\w+=\S*", words[0]):  # VAR=value napari ...
            words.pop(0)
        if words and Path(words[0]).name == "napari":
            return True
    return False


def test_runnable_blocks_need_no_window_no_network_no_cluster():
    """What needs a display, a remote URL or a cluster is fenced ```text."""
    bad = [
        str(b)
        for p in (*PAGES, HUB)
        for b in _runnable(p)
        if _launches_napari(b) or _URL.search(b.code) or "--scheduler" in b.code
    ]
    assert not bad, bad


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text())
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}


def _relative_links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text())
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans are not links
    targets = _LINK.findall(text) + _REF_LINK.findall(text)
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t, re.I)]


def test_every_relative_link_resolves():
    """Every relative link or image of the README and docs/ names a file of the repository
    (and, for a page, a heading of it)."""
    broken = []
    for page in (*PAGES, HUB, ROOT / "architecture.md", *DESIGN):
        for target in _relative_links(page):
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists() or ROOT.resolve() not in (dest, *dest.parents):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken


def test_every_page_is_reachable_from_the_readme():
    """The README links the index; the index links every page of docs/."""
    assert "docs/index.md" in _relative_links(ROOT / "README.md")
    listed = {t.partition("#")[0] for t in _relative_links(ROOT / "docs/index.md")}
    missing = [p.name for p in PAGES[1:] if p.name != "index.md" and p.name not in listed]
    assert not missing, missing


def test_hub_description_follows_napari_conventions():
    """napari's "Writing the perfect description for your plugin": a summary (who, what
    data, why), a screenshot, a quick start for napari users, headings the hub turns into
    its navigation, no badges, no title (the hub shows the name), and where to get help;
    for a reader/writer plugin, the file types it supports."""
    text = HUB.read_text()
    headings = re.findall(r"^##\s+(.+)$", text, re.M)
    assert not re.search(r"^#\s", text, re.M)
    assert {"Description", "Supported data", "Quick start", "Getting help"} <= set(headings)
    assert "shields.io" not in text and "badge" not in text.lower()
    images = [t for t in _relative_links(HUB) if t.endswith(".png")]
    assert images and all((HUB.parent / t).is_file() for t in images)
    assert re.search(r'^\s*pip install "napari-ozx\[all\]"$', text, re.M)
    for fmt in (".ozx", ".ome.zarr", "0.4", "0.5", "0.6", "https://", "s3://"):
        assert fmt in text, fmt
    assert "File > Open Sample > napari-ozx OME-Zarr" in text  # the sample napari.yaml ships
    assert "../docs/index.md" in _relative_links(HUB)


# ----------------------------------------------------------------- running the blocks


def _write_plate(path: Path) -> None:
    """A 2 x 3 plate (hand-written Zarr) with a condition table as ngio writes one
    (``tables/condition_table``: csv backend, Fractal table specification V1)."""
    from tests._support.plategen import PlateSpec, write_plate

    spec = PlateSpec(2, 3, fields=1, labels=False)
    write_plate(path, spec, "0.5")
    tables = path / "tables"
    (tables / "condition_table").mkdir(parents=True)

    def group(p: Path, attrs: dict[str, object]) -> None:
        doc = {"attributes": attrs, "zarr_format": 3, "node_type": "group"}
        (p / "zarr.json").write_text(json.dumps(doc))

    group(tables, {"tables": ["condition_table"]})
    group(
        tables / "condition_table",
        {"backend": "csv", "table_version": "1", "type": "condition_table"},
    )
    rows = ['"row","column","drug","concentration"']
    for r, row in enumerate(spec.rows):
        for c, col in enumerate(spec.cols):
            rows.append(f'"{row}","{col}","{"DMSO" if c == 0 else "taxol"}",{0.5 * r}')
    (tables / "condition_table" / "table.csv").write_text("\n".join(rows) + "\n")


def _write_scene(path: Path) -> None:
    """A 0.6 scene of two images (tileA, tileB rotated), written by napari's save."""
    import npe2
    import numpy as np
    from napari.components import ViewerModel

    npe2.PluginManager.instance().discover()
    vm = ViewerModel()
    vm.add_image(np.arange(64 * 64, dtype="uint16").reshape(64, 64), name="tileA")
    vm.add_image(np.ones((32, 48), "uint16"), name="tileB", translate=(0, 40), rotate=30)
    assert vm.layers.save(str(path), plugin="napari-ozx") == [str(path)]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("docs-inputs")
    shutil.copy(ROOT / "resources/cells.ozx", d / "cells.ozx")
    shutil.copytree(ROOT / "tests/ngff/spatial/data/blobs.zarr", d / "store.zarr")
    _write_plate(d / "plate.ome.zarr")
    _write_scene(d / "scene.ozx")
    return d


def _environment(config: Path) -> dict[str, str]:
    """This process's environment (conftest points NAPARI_CONFIG / NAPARI_OZX_CONFIG_DIR
    at the session's temporary folder), with the page's own napari settings file, so
    ``napari-ozx set-default-reader`` in a page changes no other test's preferences."""
    env = dict(os.environ)
    assert "NAPARI_OZX_CONFIG_DIR" in env and "NAPARI_CONFIG" in env
    env["NAPARI_CONFIG"] = str(config / "napari" / "settings.yaml")
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    return env


def _run_bash(block: Block, cwd: Path, config: Path) -> None:
    proc = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.code],
        cwd=cwd,
        env=_environment(config),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"{block} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"


def _run_python(block: Block, namespace: dict[str, object]) -> None:
    try:
        exec(compile(block.code, str(block), "exec"), namespace)
    except Exception as e:
        raise AssertionError(f"{block} raised {type(e).__name__}: {e}") from e


@pytest.mark.parametrize(
    "page",
    [p for p in PAGES if _runnable(p)],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_page_blocks_run(page: Path, inputs: Path, tmp_path: Path, monkeypatch):
    work, config = tmp_path / "work", tmp_path / "config"
    shutil.copytree(inputs, work)
    monkeypatch.chdir(work)
    monkeypatch.setenv("NAPARI_OZX_CONFIG_DIR", str(config / "napari-ozx"))
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in _runnable(page):
        if block.lang == "bash":
            _run_bash(block, work, config)
        else:
            _run_python(block, namespace)


# ------------------------------------------------------- names cited in src/ and architecture


SRC = ROOT / "src"
PACKAGE = SRC / "napari_ozx"
ARCHITECTURE = ROOT / "architecture.md"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
#: a citation role (``:func:`~.plan.downsample2```), its target without ``~`` / ``()``
_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj|exc|const):`[~!]?([^`<]+?)(?:\(\))?`")
_DOTTED = re.compile(r"(?<![\w.])napari_ozx(?:\.\w+)+")
_TESTS_PATH = re.compile(r"(?<![\w/.])tests/(?:[\w./-]*[\w/])?")
#: a page of the manual or a design note, a benchmark script
_DOCS_PATH = re.compile(r"(?<![\w/.])(?:docs/[\w./-]*\.md|benchmarks/[\w./-]*\.py)")


def _defined(body: list[ast.stmt]) -> dict[str, ast.AST | None]:
    """The names a module or class body binds (a def or class -> its node; a value or
    an import -> None), through ``if`` / ``try`` / ``with`` blocks."""
    out: dict[str, ast.AST | None] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(
                (n.id, None) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)
            )
        elif isinstance(node, ast.Import | ast.ImportFrom):
            out.update(((a.asname or a.name).split(".")[0], None) for a in node.names)
        elif isinstance(node, ast.If | ast.Try | ast.With):
            handlers = [s for h in getattr(node, "handlers", []) for s in h.body]
            for block in (node.body, getattr(node, "orelse", []), handlers):
                out.update(_defined(block))
            out.update(_defined(getattr(node, "finalbody", [])))
    return out


@cache
def _module_names(module: str) -> dict[str, ast.AST | None]:
    tree = ast.parse(MODULES[module].read_text())
    names = _defined(tree.body)
    if module == "napari_ozx":  # the lazily resolved public names
        names.update(dict.fromkeys(importlib.import_module("napari_ozx").__all__))
    return names


def _class_members(cls: ast.ClassDef) -> set[str]:
    """What a class defines, and the ``self.x`` its methods assign."""
    assigned = {
        n.attr
        for n in ast.walk(cls)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Store)
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
    }
    return set(_defined(cls.body)) | assigned


def _resolves(dotted: str) -> bool:
    """Whether ``napari_ozx.a.b.C.m`` names a module of src/, a name it binds, or a
    member of a class it defines (read with ``ast``: nothing is imported)."""
    parts = dotted.split(".")
    i = next((i for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in MODULES), 0)
    if not i:
        return False
    rest, names = parts[i:], _module_names(".".join(parts[:i]))
    if not rest:
        return True
    if rest[0] not in names:
        return False
    node = names[rest[0]]
    if len(rest) > 1 and isinstance(node, ast.ClassDef):
        return rest[1] in _class_members(node)
    return len(rest) == 1 or node is None  # an attribute of a value is not followed


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and every string statement (docstrings)."""
    text = path.read_text()
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    out = [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]
    out += [
        (n.lineno, n.value.value)
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
        if isinstance(n.value.value, str)
    ]
    return out


def _unresolved_citations(path: Path, module: str) -> list[str]:
    """Citations in the docstrings and comments of *path* (module *module*) that name
    nothing: roles with a relative target (``.x``: the module's own names, then its
    package's), any ``napari_ozx.*`` dotted name, any ``tests/...`` path."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    bad = []
    for line, text in _prose(path):
        where = f"{path.name}:{line}"
        for m in _ROLE.finditer(text):
            target = m.group(1).strip()
            if target.startswith(".") and not any(_resolves(b + target) for b in (module, package)):
                bad.append(f"{where}: {m.group(0)}")
        bad += [
            f"{where}: {m.group(0)}" for m in _DOTTED.finditer(text) if not _resolves(m.group(0))
        ]
        bad += [
            f"{where}: {m.group(0)}"
            for m in (*_TESTS_PATH.finditer(text), *_DOCS_PATH.finditer(text))
            if not (ROOT / m.group(0)).exists()
        ]
    return bad


def test_names_and_test_paths_cited_in_the_source_exist():
    """A docstring or comment that cites a module, function or test file names one that
    exists, so a citation cannot go stale when code moves."""
    bad = [
        b for module, path in sorted(MODULES.items()) for b in _unresolved_citations(path, module)
    ]
    assert not bad, "\n".join(bad)


def test_the_resolver_refuses_what_does_not_exist(tmp_path):
    """The check above can fail: stale names of each kind are caught."""
    assert _resolves("napari_ozx.ngff.read.open.OmeZarr.images")
    assert _resolves("napari_ozx.open_ome_zarr") and _resolves("napari_ozx.ngff.write")
    for stale in ("napari_ozx.ngff.open_ome_zarr", "napari_ozx.ngff.write.table_write"):
        assert not _resolves(stale), stale
    probe = tmp_path / "probe.py"  # as if it were napari_ozx/ngff/read/probe.py
    probe.write_text(
        '"""See :mod:`.extensions`, :func:`.open.open_ome_zarr`, :mod:`.fastread` and\n'
        "tests/test_no_such_file.py, not tests/test_docs.py; docs/design/gone.md,\n"
        'benchmarks/bench_gone.py, not docs/design/reading.md."""\n'
        "# napari_ozx.ngff.read.open.no_such_name, napari_ozx.ngff.read.open.open_store\n"
    )
    bad = _unresolved_citations(probe, "napari_ozx.ngff.read.probe")
    assert [b.partition(": ")[2] for b in bad] == [
        "napari_ozx.ngff.read.open.no_such_name",
        ":mod:`.extensions`",
        "tests/test_no_such_file.py",
        "docs/design/gone.md",
        "benchmarks/bench_gone.py",
    ]


#: a folder's heading in architecture.md: "**`ozx/` — ..." or "*`ngff/read/` — ..."
_FOLDER = re.compile(r"^\*{1,2}`([\w/]+)/`")


def test_architecture_names_what_exists_where_it_says():
    """architecture.md's ``napari_ozx.*`` names, its dotted names of the package's
    modules (``ngff.read.lazy.LazyArray``) and its ``tests/`` paths exist; a file
    listed under a folder's heading is in that folder (or named by its path)."""
    heads = {m.split(".")[1] for m in MODULES if "." in m}
    bad = []
    folder: str | None = None
    for n, line in enumerate(ARCHITECTURE.read_text().splitlines(), 1):
        if m := _FOLDER.match(line):
            folder = m.group(1)
        elif line.startswith(("**Entry points", "## ")):
            folder = ""
        for name in re.findall(r"`([\w.]+)`", line):
            ours = name.split(".")[0] in heads | {"napari_ozx"} and not name.endswith(".py")
            dotted = name if name.startswith("napari_ozx.") else f"napari_ozx.{name}"
            if ours and "." in name and not _resolves(dotted):
                bad.append(f"{n}: {name}")
        for file in re.findall(r"`([\w/]+\.py)`", line):
            if folder is not None and not any(
                p.exists() for p in (PACKAGE / folder / file, PACKAGE / file, ROOT / file)
            ):
                bad.append(f"{n}: {file} (not in {folder or 'napari_ozx'}/)")
        bad += [f"{n}: {m}" for m in _DOTTED.findall(line) if not _resolves(m)]
        bad += [f"{n}: {m}" for m in _TESTS_PATH.findall(line) if not (ROOT / m).exists()]
    assert not bad, "\n".join(bad)


#: a module docstring says what the module does; why is in docs/design/
MODULE_DOCSTRING_MAX_LINES = 15


def test_module_docstrings_fit_a_screen():
    """No module docstring is longer than :data:`MODULE_DOCSTRING_MAX_LINES` lines: design
    arguments live in ``docs/design/``, linked from architecture.md."""
    long = {
        str(path.relative_to(ROOT)): n
        for path in MODULES.values()
        if (doc := ast.get_docstring(ast.parse(path.read_text()), clean=False))
        and (n := len(doc.splitlines())) > MODULE_DOCSTRING_MAX_LINES
    }
    assert not long, long


def test_module_docstrings_name_what_the_module_defines():
    """A plain name a module docstring cites (``:func:`read_table```) is defined, or
    imported, by that module (or is a builtin): a rename cannot leave it behind."""
    bad = []
    for module, path in sorted(MODULES.items()):
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
        for m in _ROLE.finditer(doc):
            name = m.group(1).strip()
            known = name in _module_names(module) or hasattr(builtins, name)
            if "." not in name and not known:
                bad.append(f"{path.relative_to(ROOT)}: {m.group(0)}")
    assert not bad, "\n".join(bad)


def test_every_design_note_is_linked_from_the_architecture():
    """architecture.md's "Design notes" list links every page of docs/design/."""
    links = {t.partition("#")[0] for t in _relative_links(ARCHITECTURE)}
    assert DESIGN, "docs/design/ has no page"
    missing = [p.name for p in DESIGN if f"docs/design/{p.name}" not in links]
    assert not missing, missing


# ------------------------------------------------------------ the public API's docstrings


def _section(doc: str, title: str) -> str | None:
    """The body of numpy-style section *title* of *doc* (``Title`` over dashes)."""
    m = re.search(rf"^{title}\n-+\n(.*?)(?=^\w[\w ]*\n-+\n|\Z)", doc, re.S | re.M)
    return m.group(1) if m else None


def _documented_parameters(doc: str) -> set[str]:
    """The names a Parameters section describes (``name : type``, ``a, b : type``)."""
    body = _section(doc, "Parameters") or ""
    names: set[str] = set()
    for line in body.splitlines():
        if line and not line[0].isspace():
            names.update(n.strip().lstrip("*") for n in line.partition(":")[0].split(","))
    return names


def _public_callables() -> list[tuple[str, object]]:
    import napari_ozx

    return [(n, getattr(napari_ozx, n)) for n in napari_ozx.__all__ if n != "__version__"]


def test_public_callables_document_their_parameters():
    """Every public function and class with parameters says what it takes (a numpy-style
    Parameters section naming each one) and, for a function, what it returns."""
    import inspect

    bad = []
    for name, obj in _public_callables():
        try:
            signature = inspect.signature(obj)  # type: ignore[arg-type]
        except (TypeError, ValueError):  # an exception class with Exception's own __init__
            continue
        doc = inspect.getdoc(obj) or ""
        params = [p for p in signature.parameters if p != "self"]
        missing = [p for p in params if p not in _documented_parameters(doc)]
        if missing:
            bad.append(f"{name}: Parameters lacks {missing}")
        returns = signature.return_annotation not in ("None", None, inspect.Signature.empty)
        if inspect.isfunction(obj) and returns and _section(doc, "Returns") is None:
            bad.append(f"{name}: no Returns section")
    assert not bad, "\n".join(bad)


def test_the_parameters_check_reads_numpy_sections():
    doc = (
        "Do it.\n\nParameters\n----------\na, b : int\n    Two.\n**kw\n    More.\n\n"
        "Returns\n-------\nint\n    One.\n"
    )
    assert _documented_parameters(doc) == {"a", "b", "kw"}
    assert _section(doc, "Returns") == "int\n    One.\n"
    assert _documented_parameters("Do it. a: the a.") == set()
