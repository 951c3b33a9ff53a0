"""The manual works as written: every ```bash and ```python block of ``README.md`` and
``docs/*.md`` runs, and every relative link in them leads somewhere.

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

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._support.paths import ROOT

ROOT = ROOT
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: the napari hub's description of the plugin (napari-hub.org shows it instead of the README)
HUB = ROOT / ".napari-hub" / "DESCRIPTION.md"
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
    for page in (*PAGES, HUB):
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
