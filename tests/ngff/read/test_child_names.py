"""Listing a node's children: one function, :func:`napari_ozx.ngff.read.documents.child_names`,
for the opener, the tables and SpatialData (consolidated metadata first, else a listing)."""

from __future__ import annotations

import json
from pathlib import Path

from zarr.storage import LocalStore

from napari_ozx.ngff.read.documents import child_names
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.ngff.tables.read import StoreDocuments
from tests._support.omegen import zip_dir

GROUP = {"zarr_format": 3, "node_type": "group", "attributes": {}}


def _group(path: Path, attributes: dict | None = None, **extra: object) -> None:
    path.mkdir(parents=True, exist_ok=True)
    doc = {**GROUP, "attributes": attributes or {}, **extra}
    (path / "zarr.json").write_text(json.dumps(doc))


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "store.zarr"
    _group(root, {"spatialdata_attrs": {"version": "0.1"}})
    for name in ("b", "a", ".hidden"):
        _group(root / "tables" / name)
    (root / "tables" / "notes.txt").write_text("a stray file is listed as a name too")
    return root


def test_children_listed_from_the_store_in_a_directory_and_an_archive(tmp_path: Path) -> None:
    root = _store(tmp_path)
    want = ["a", "b", "notes.txt"]  # no metadata document, no hidden name
    with open_ome_zarr(root) as oz:
        assert sorted(child_names(oz, "tables")) == want
        assert child_names(oz, "absent") == []
    docs = StoreDocuments(LocalStore(root, read_only=True), str(root))  # no opener
    assert sorted(child_names(docs, "tables")) == want
    with open_ome_zarr(zip_dir(root, tmp_path / "store.ozx")) as oz:
        assert sorted(child_names(oz, "tables")) == want


def test_consolidated_metadata_answers_without_a_listing(tmp_path: Path) -> None:
    root = _store(tmp_path)
    consolidated = {
        "kind": "inline",
        "must_understand": False,
        "metadata": {"tables": GROUP, "tables/only": GROUP, "tables/only/deeper": GROUP},
    }
    _group(root, {"spatialdata_attrs": {"version": "0.1"}}, consolidated_metadata=consolidated)
    with open_ome_zarr(root) as oz:
        assert child_names(oz, "tables") == ["only"]  # direct children only
        assert child_names(oz, "tables/only") == ["deeper"]
