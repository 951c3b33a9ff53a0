"""The inspection (Qt-free): lazy hierarchy trees, node details, .ozx facts, CLI text."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import zarr

from napari_ozx._sample_data import sample_path
from napari_ozx.inspection import Inspection, TreeNode, format_bytes
from tests._support.omegen import write_image, zip_dir
from tests._support.paths import CORPUS, open_fds_to

RNG = np.random.default_rng(1)
OMERO = {
    "channels": [
        {
            "label": "DAPI",
            "color": "0000FF",
            "window": {"start": 10, "end": 900, "min": 0, "max": 65535},
        },
        {
            "label": "GFP",
            "color": "00FF00",
            "window": {"start": 0, "end": 500, "min": 0, "max": 65535},
            "active": False,
        },
    ]
}


def _tree(
    insp: Inspection, node: TreeNode | None = None, depth: int = 0
) -> list[tuple[int, str, str, str]]:
    """(depth, kind, path, title) of every node, loading everything."""
    node = node or insp.root
    out = [(depth, node.kind, node.path, node.title)]
    for c in insp.children(node):
        out += _tree(insp, c, depth + 1)
    return out


def _rows(section) -> dict[str, str]:
    return {r.label: r.value for r in section.rows}


@pytest.fixture
def image_dir(tmp_path):
    data = RNG.integers(0, 1000, (2, 3, 40, 70), dtype=np.uint16)
    write_image(
        tmp_path / "img.zarr",
        data,
        version="0.5",
        levels=3,
        scale=[1, 2, 0.5, 0.5],
        translation=[0, 1, 2, 3],
        omero=OMERO,
    )
    return tmp_path / "img.zarr"


@pytest.fixture
def image_labels_dir(tmp_path):
    data = RNG.integers(0, 1000, (2, 3, 40, 70), dtype=np.uint16)
    labels = (data[0] > 500).astype(np.uint32) + (data[0] > 800)
    write_image(
        tmp_path / "lab.zarr",
        data,
        version="0.4",
        levels=2,
        omero=OMERO,
        labels={"cells": labels},
        label_colors={1: [255, 0, 0, 255], 2: [0, 128, 255, 128]},
    )
    return tmp_path / "lab.zarr"


def make_plate(
    path: Path, rows: str = "AB", cols: int = 3, fields: int = 2, wells=None, write_fields=True
) -> Path:
    """A tiny OME-Zarr 0.5 HCS plate written with plain zarr (no plate writer needed)."""
    root = zarr.open_group(path, mode="w", zarr_format=3)
    columns = [str(c + 1) for c in range(cols)]
    wells = (
        wells
        if wells is not None
        else [(r, c) for r in range(len(rows)) for c in range(cols) if (r + c) % 2 == 0]
    )
    for r, c in wells if write_fields else ():
        wpath = f"{rows[r]}/{columns[c]}"
        for f in range(fields):
            write_image(
                path,
                RNG.integers(0, 255, (1, 16, 24), dtype=np.uint8),
                axes="cyx",
                levels=2,
                group_path=f"{wpath}/{f}",
            )
        well = zarr.open_group(path, mode="a", zarr_format=3, path=wpath)
        well.attrs["ome"] = {
            "version": "0.5",
            "well": {"images": [{"path": str(f), "acquisition": 0} for f in range(fields)]},
        }
    root.attrs["ome"] = {
        "version": "0.5",
        "plate": {
            "name": "test plate",
            "rows": [{"name": r} for r in rows],
            "columns": [{"name": c} for c in columns],
            "wells": [
                {"path": f"{rows[r]}/{columns[c]}", "rowIndex": r, "columnIndex": c}
                for r, c in wells
            ],
            "acquisitions": [{"id": 0, "name": "first", "maximumfieldcount": fields}],
            "field_count": fields,
        },
    }
    return path


# ------------------------------------------------------------------------- trees


def test_image_tree_and_summary(image_dir):
    with Inspection(image_dir) as insp:
        assert not insp.is_ozx and insp.zarr_format == 3
        assert insp.root.kind == "image" and insp.root.expandable
        assert insp.root.children is None  # nothing below the root is read yet
        tree = _tree(insp)
        assert tree == [
            (0, "image", "", "img.zarr"),
            (1, "level", "0", "Level 0"),
            (1, "level", "1", "Level 1"),
            (1, "level", "2", "Level 2"),
        ]
        assert insp.root.children[0].info == "2 × 3 × 40 × 70  uint16"
        d = insp.details(insp.root)
        assert d.error is None
        axes = _rows(d.section("Axes"))
        assert axes == {
            "c": "channel",
            "z": "space, micrometer",
            "y": "space, micrometer",
            "x": "space, micrometer",
        }
        levels = _rows(d.section("Levels"))
        assert levels["0"] == "2 × 3 × 40 × 70 · scale 1, 2, 0.5, 0.5 · translation 0, 1, 2, 3"
        assert levels["2"].startswith("2 × 3 × 10 × 18 · scale 1, 2, 2, 2")
        ch = d.section("Channels").rows
        assert [(r.label, r.color) for r in ch] == [("DAPI", "#0000FF"), ("GFP", "#00FF00")]
        assert (
            "window 10–900" in ch[0].value
            and "range 0–65535" in ch[0].value
            and "active" in ch[0].value
        )
        assert "hidden" in ch[1].value
        assert _rows(d.section("Image"))["OME-Zarr version"] == "0.5"
        # an image also shows the facts of its full-resolution array
        assert d.array is not None and d.array.path == "0"
        doc = json.loads(d.raw_json)
        assert doc["attributes"]["ome"]["multiscales"][0]["name"] == "test"
        assert d.raw_files == ("zarr.json",)


def test_array_facts_count_chunks_and_stored_bytes(image_dir):
    with Inspection(image_dir) as insp:
        level0 = insp.find("0")[-1]
        assert level0.kind == "level" and level0.level == 0
        d = insp.details(level0)
        a = d.array
        assert a.shape == (2, 3, 40, 70) and a.dtype == "uint16"
        assert a.chunk_shape == (1, 1, 32, 32)
        assert a.shard_shape == (1, 1, 64, 96)  # omegen: one shard covers y and x
        assert a.chunks_per_shard == 6
        assert a.n_chunks == 2 * 3 * 2 * 3 and a.n_shards == 2 * 3
        assert a.codecs[0] == "bytes (little)" and "zstd level 1" in a.codecs
        on_disk = [p for p in (image_dir / "0").rglob("*") if p.is_file() and p.name != "zarr.json"]
        assert a.stored_objects == len(on_disk) == 6
        assert a.stored_bytes == sum(p.stat().st_size for p in on_disk)
        assert a.nbytes == 2 * 3 * 40 * 70 * 2
        assert a.ratio == pytest.approx(a.nbytes / a.stored_bytes)
        rows = {r.label: r.value for r in a.rows()}
        assert rows["Number of chunks"] == "36" and rows["Chunks per shard"] == "6"
        assert rows["Stored size"].endswith("in 6 entries")
        assert _rows(d.section("Level"))["Scale"] == "c 1, z 2, y 0.5, x 0.5"


def test_image_with_labels_v04(image_labels_dir):
    with Inspection(image_labels_dir) as insp:
        assert insp.zarr_format == 2
        tree = _tree(insp)
        assert [(d, k, p) for d, k, p, _ in tree] == [
            (0, "image", ""),
            (1, "level", "0"),
            (1, "level", "1"),
            (1, "labels", "labels"),
            (2, "label-image", "labels/cells"),
            (3, "level", "labels/cells/0"),
            (3, "level", "labels/cells/1"),
        ]
        cells = insp.find("labels/cells")[-1]
        d = insp.details(cells)
        colours = d.section("Label colours").rows
        assert [(r.label, r.color) for r in colours] == [("1", "#FF0000FF"), ("2", "#0080FF80")]
        assert _rows(d.section("Image label"))["Property keys"] == "name"
        assert (
            _rows(d.section("Image" if d.section("Image") else "Label image"))["OME-Zarr version"]
            == "0.4"
        )
        # Zarr v2: the raw view shows .zattrs and .zgroup, arrays .zarray
        assert set(d.raw_files) == {".zattrs", ".zgroup"}
        assert "// .zattrs" in d.raw_json and '"image-label"' in d.raw_json
        lvl = insp.details(insp.find("labels/cells/0")[-1])
        assert ".zarray" in lvl.raw_files
        assert lvl.array.shard_shape is None and lvl.array.zarr_format == 2
        assert lvl.array.stored_objects > 0
        labels_group = insp.details(insp.find("labels")[-1])
        assert _rows(labels_group.section("Label images")) == {"0": "cells"}


def test_plate_tree_is_lazy_and_complete(tmp_path):
    plate = make_plate(tmp_path / "plate.zarr")
    with Inspection(plate) as insp:
        assert insp.root.kind == "plate"
        assert insp.root.info == "2×3 · 3 wells"
        rows = insp.children(insp.root)
        assert [(r.kind, r.title, r.info) for r in rows] == [
            ("row", "Row A", "2 wells"),
            ("row", "Row B", "1 well"),
        ]
        wells = insp.children(rows[0])
        assert [(w.kind, w.path, w.title) for w in wells] == [
            ("well", "A/1", "A1"),
            ("well", "A/3", "A3"),
        ]
        # rows and wells come from the plate metadata alone (and its tables group, if any)
        assert insp.paths_read() == ("", "tables")
        fields = insp.children(wells[0])
        assert [(f.kind, f.path, f.title) for f in fields] == [
            ("field", "A/1/0", "Field 0"),
            ("field", "A/1/1", "Field 1"),
        ]
        assert "A/3" not in insp.paths_read()  # a well is read when expanded, not before
        levels = insp.children(fields[1])
        assert [(n.kind, n.path) for n in levels] == [("level", "A/1/1/0"), ("level", "A/1/1/1")]
        chain = insp.find("B/2/1/1")
        assert [n.path for n in chain] == ["", "B", "B/2", "B/2/1", "B/2/1/1"]
        d = insp.details(insp.root)
        layout = _rows(d.section("Layout"))
        assert (
            layout["Rows"] == "2 (A…B)"
            and layout["Columns"] == "3 (1…3)"
            and layout["Wells"] == "3"
        )
        assert _rows(d.section("Acquisitions")) == {"0": "first · up to 2 fields"}
        wd = insp.details(wells[0])
        assert _rows(wd.section("Fields")) == {"0": "acquisition 0", "1": "acquisition 0"}
        fd = insp.details(fields[0])
        assert _rows(fd.section("Axes")) == {
            "c": "channel",
            "y": "space, micrometer",
            "x": "space, micrometer",
        }
        assert fd.array.shape == (1, 16, 24)


def test_1536_well_plate_lists_wells_from_plate_metadata_only(tmp_path):
    rows = "ABCDEFGHIJKLMNOPQRSTUVWXYZ" + "abcdef"
    wells = [(r, c) for r in range(32) for c in range(48)]
    plate = make_plate(tmp_path / "big.zarr", rows=rows, cols=48, wells=wells, write_fields=False)
    with Inspection(plate) as insp:
        row_nodes = insp.children(insp.root)
        assert len(row_nodes) == 32
        assert sum(len(insp.children(r)) for r in row_nodes) == 1536
        assert insp.paths_read() == ("", "tables")  # the plate's documents for 1536 wells
        # a well that does not exist is an error on that node, not an exception
        w = insp.children(row_nodes[0])[0]
        assert insp.children(w) == []
        assert insp.details(w).error


def test_ozx_archive_facts_and_findings(image_labels_dir, tmp_path):
    # a v3 copy zipped with Python's zipfile: no ZIP64 records -> an RFC-9 warning
    data = RNG.integers(0, 1000, (2, 3, 40, 70), dtype=np.uint16)
    write_image(
        tmp_path / "v3.zarr",
        data,
        levels=2,
        omero=OMERO,
        labels={"nuc": (data[0] > 700).astype(np.uint8)},
    )
    ozx = zip_dir(tmp_path / "v3.zarr", tmp_path / "plain.ozx")
    with Inspection(ozx) as insp:
        assert insp.is_ozx
        assert [p for _, _, p, _ in _tree(insp)] == [
            "",
            "0",
            "1",
            "labels",
            "labels/nuc",
            "labels/nuc/0",
            "labels/nuc/1",
        ]
        facts = insp.archive()
        assert facts.entries == sum(1 for p in (tmp_path / "v3.zarr").rglob("*") if p.is_file())
        assert facts.zip64 is False
        assert facts.comment == '{"ome":{"version":"0.5"}}'
        assert facts.methods == {"stored (method 0)": facts.entries}
        codes = {f.code: f.severity for f in facts.findings}
        assert codes["zip64-missing"] == "warning"
        assert facts.ok  # warnings only
        rows = {r.label: r.value for r in facts.rows()}
        assert rows["ZIP64"] == "no" and rows["RFC-9"].startswith(
            "conformant (0 errors, 1 warnings"
        )
        # stored size of an array = the sizes of its entries in the central directory
        import zipfile

        with zipfile.ZipFile(ozx) as zf:
            want = [
                i
                for i in zf.infolist()
                if i.filename.startswith("labels/nuc/0/") and not i.filename.endswith("zarr.json")
            ]
        a = insp.details(insp.find("labels/nuc/0")[-1]).array
        assert a.stored_objects == len(want) and a.stored_bytes == sum(
            i.compress_size for i in want
        )
    assert open_fds_to(ozx) == []


def test_bundled_sample_is_conformant(tmp_path):
    with Inspection(sample_path()) as insp:
        facts = insp.archive()
        assert facts.zip64 and facts.ok and facts.counts()["warning"] == 0
        assert [f.severity for f in facts.findings] == ["info"]
        assert [n.path for n in insp.find("labels/nuclei/1")] == [
            "",
            "labels",
            "labels/nuclei",
            "labels/nuclei/1",
        ]
        d = insp.details(insp.find("labels/nuclei")[-1])
        assert len(d.section("Label colours").rows) == 22
        assert insp.archive() is facts  # computed once
    assert open_fds_to(sample_path()) == []


def test_extensions_are_listed_and_refusals_become_node_errors(tmp_path):
    data = RNG.integers(0, 9, (1, 8, 8), dtype=np.uint8)
    write_image(
        tmp_path / "ext.zarr",
        data,
        axes="cyx",
        levels=1,
        array_extra={
            "extensions": [
                {
                    "name": "array-statistics",
                    "must_understand": False,
                    "configuration": {"min": 0, "max": 8},
                },
                {"name": "example.unknown", "must_understand": True},
            ],
            "my-note": {"must_understand": False, "text": "ignorable"},
        },
    )
    with Inspection(tmp_path / "ext.zarr") as insp:
        (lvl,) = insp.children(insp.root)
        assert lvl.error and "example.unknown" in lvl.error  # shown, not raised
        d = insp.details(lvl)
        assert [(e.name, e.must_understand, e.understood, e.where) for e in d.extensions] == [
            ("array-statistics", False, True, "extensions"),
            ("example.unknown", True, False, "extensions"),
            ("my-note", False, False, "key"),
        ]
        assert d.extensions[0].configuration == {"min": 0, "max": 8}
        assert d.array.shape == (1, 8, 8)
        assert "example.unknown" in d.raw_json


def test_invalid_metadata_is_a_node_error(tmp_path):
    g = zarr.open_group(tmp_path / "bad.zarr", mode="w", zarr_format=3)
    g.attrs["ome"] = {"version": "0.5", "multiscales": [{"axes": [{"name": "y"}], "datasets": []}]}
    sub = g.create_group("child")
    sub.attrs["note"] = "plain group"
    with Inspection(tmp_path / "bad.zarr") as insp:
        assert insp.root.error and "datasets" in insp.root.error
        kids = insp.children(insp.root)  # falls back to listing the group
        assert [(k.kind, k.path) for k in kids] == [("group", "child")]
        assert (
            _rows(insp.details(kids[0]).section("Group"))["Kind"] == "Zarr group (no OME metadata)"
        )


def test_not_zarr_raises_and_closes(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(Exception, match=r"no zarr\.json"):
        Inspection(tmp_path / "empty")


def test_details_from_many_threads(tmp_path):
    plate = make_plate(
        tmp_path / "plate.zarr",
        rows="ABC",
        cols=4,
        wells=[(r, c) for r in range(3) for c in range(4)],
        fields=1,
    )
    with Inspection(plate) as insp:
        wells = [w for r in insp.children(insp.root) for w in insp.children(r)]
        errors = []

        def work(w):
            try:
                for f in insp.children(w):
                    insp.details(f)
                    for lv in insp.children(f):
                        assert insp.details(lv).array.shape[0] == 1
            except Exception as e:
                errors.append(e)

        threads = [threading.Thread(target=work, args=(w,)) for w in wells]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []


def test_closed_inspection_refuses_reads(image_dir):
    insp = Inspection(image_dir)
    insp.close()
    insp.close()  # idempotent
    with pytest.raises(Exception, match="closed"):
        insp.details(insp.root)


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 * 2**20) == "3.0 MiB"
    assert format_bytes(None) == "?"


@pytest.mark.network
def test_remote_sources(tmp_path):
    pytest.importorskip("aiohttp")
    import shutil

    from tests._support.httpserver import Server

    shutil.copy(sample_path(), tmp_path / "cells.ozx")
    write_image(
        tmp_path / "img.ome.zarr",
        RNG.integers(0, 9, (1, 16, 16), dtype=np.uint8),
        axes="cyx",
        levels=1,
    )
    with Server(tmp_path) as srv:
        with Inspection(f"{srv.url}/cells.ozx") as insp:
            assert insp.is_ozx and insp.name == "cells.ozx"
            assert [n.path for n in insp.find("labels/nuclei/0")][-1] == "labels/nuclei/0"
            a = insp.details(insp.find("0")[-1]).array
            assert a.stored_objects == 4 and a.ratio > 1
            assert insp.archive().zip64 and insp.archive().ok
        with Inspection(f"{srv.url}/img.ome.zarr") as insp:
            assert not insp.is_ozx
            (lvl,) = insp.children(insp.root)
            d = insp.details(lvl)
            assert d.array.shape == (1, 16, 16)  # stored size: whatever the server lets us list


def test_pretty_json_keeps_short_lists_on_one_line():
    from napari_ozx.inspection import pretty_json

    doc = {
        "shape": [2, 16, 256],
        "codecs": [{"name": "zstd", "configuration": {"level": 3}}],
        "e": {},
        "l": [],
        "long": list(range(100)),
        "text": 'ü "q"',
    }
    text = pretty_json(doc)
    assert json.loads(text) == doc
    assert '"shape": [2, 16, 256]' in text and '"e": {}' in text
    assert text.count("\n") > 100  # a long list is not squeezed onto one line


def test_info_report_of_a_plate_reads_the_plate_document_only(tmp_path):
    from napari_ozx.inspection import info_report, info_text

    plate = make_plate(tmp_path / "plate.zarr")
    with Inspection(plate) as insp:
        rep = info_report(insp)
        # a plate's summary needs no well: the plate and its own tables/ (conditions)
        assert insp.paths_read() == ("", "tables")
    assert rep["kind"] == "plate" and rep["images"] == [] and rep["problems"] == []
    assert rep["plate"]["wells"] == 3 and rep["plate"]["rows"] == ["A", "B"]
    assert "2 rows × 3 columns, 3 wells, 2 fields per well" in info_text(rep)
    # it says so, rather than let "3 wells" read as "3 readable wells"
    assert rep["plate"]["wells_read"] is False
    assert "their own metadata is not read here" in info_text(rep)


def test_broken_json_is_shown_not_raised(image_dir):
    (image_dir / "1" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "arr')
    with Inspection(image_dir) as insp:
        lvl = insp.find("1")[-1]
        assert lvl.error and "invalid JSON" in lvl.error
        d = insp.details(lvl)
        assert d.array is None and d.raw_files == ("zarr.json",)
        assert "not valid JSON" in d.raw_json
        # the image still describes its other levels
        levels = _rows(insp.details(insp.root).section("Levels"))
        assert levels["1"].startswith("unreadable") and levels["0"].startswith("2 × 3 × 40 × 70")


def test_hostile_corpus_never_raises_anything_but_ozx_errors():
    """Every hand-made broken file: the whole tree, every node's details, the archive
    facts and the info report either work or raise an OzxError / OSError (no bug)."""
    from napari_ozx.errors import OzxError
    from napari_ozx.inspection import info_report

    files = sorted((CORPUS / "files").glob("*"))
    assert len(files) > 50
    readable = 0
    for f in files:
        try:
            with Inspection(f) as insp:
                stack = [insp.root]
                while stack:
                    node = stack.pop()
                    insp.details(node)
                    stack += insp.children(node)[:20]
                insp.archive()
                info_report(insp)
            readable += 1
        except (OzxError, OSError):
            continue
    assert readable > 10
