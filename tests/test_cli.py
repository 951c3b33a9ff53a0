"""Command line: info, validate (exit codes 0/1/2, --json), convert."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from napari_ozx.__main__ import main
from napari_ozx._sample_data import sample_path
from napari_ozx.ngff.read.open import open_ome_zarr
from tests._support.omegen import write_image
from tests._support.paths import CORPUS


def test_info_reports_shards_codecs_archive(capsys):
    assert main(["info", str(sample_path()), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["archive"]["zip64"] is True
    (img,) = d["images"]
    assert img["channels"] == ["Nuclei", "Membrane"] and img["labels"] == ["nuclei"]
    # info describes codecs as the inspector does (from zarr's parsed codec objects):
    # sharding is the "shards" fact, the codecs are the inner pipeline with settings
    # (formerly "sharding_indexed[bytes, zstd]", a third description of the same array)
    level0 = img["levels"][0]
    assert level0["codecs"][:2] == ["bytes (little)", "zstd level 9 checksum"]
    assert level0["shards"] == [1, 8, 256, 512] and level0["chunks"] == [1, 1, 256, 256]
    assert 0 < level0["stored_bytes"] < level0["nbytes"]
    assert d["archive"]["rfc9"]["ok"] is True and d["problems"] == []


def test_info_text_matches_the_inspector_and_flags_unreadable_nodes(tmp_path, capsys):
    from napari_ozx.inspection import Inspection

    assert main(["info", str(sample_path())]) == 0
    text = capsys.readouterr().out
    with Inspection(sample_path()) as insp:
        facts = insp.array_facts("0")
    assert " → ".join(facts.codecs) in text and "RFC-9 conformant" in text
    # a level refused by the reader (unknown must-understand extension) is reported,
    # with exit code 1, instead of a traceback or a silent success
    write_image(
        tmp_path / "ext.zarr",
        np.zeros((1, 8, 8), np.uint8),
        axes="cyx",
        levels=1,
        array_extra={"extensions": [{"name": "example.unknown", "must_understand": True}]},
    )
    assert main(["info", str(tmp_path / "ext.zarr"), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    (problem,) = d["problems"]
    assert problem["path"] == "0" and "example.unknown" in problem["error"]
    assert d["images"][0]["levels"][0]["shape"] == [1, 8, 8]  # still described


def test_validate_exit_codes(tmp_path, capsys):
    assert main(["validate", str(sample_path())]) == 0
    bad = tmp_path / "trunc.ozx"
    bad.write_bytes(sample_path().read_bytes()[:3000])
    assert main(["validate", str(bad)]) == 2
    # a zip without a root zarr.json violates RFC-9 "The ZIP file MUST contain the
    # OME-Zarr's root-level zarr.json"
    nozarr = tmp_path / "nozarr.ozx"
    with zipfile.ZipFile(nozarr, "w") as zf:
        zf.writestr("image/zarr.json", "{}")
    capsys.readouterr()
    assert main(["validate", str(nozarr), "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] is False and any(f["severity"] == "error" for f in rep["findings"])
    assert main(["validate", str(sample_path()), str(bad)]) == 2  # the worst wins


def test_validate_flags_broken_ome_metadata(tmp_path):
    d = tmp_path / "img.zarr"
    write_image(
        d,
        np.zeros((2, 4, 32, 32), np.uint16),
        array_extra={"dimension_names": ["c", "z", "x", "y"]},
    )
    assert main(["validate", str(d)]) == 1


def test_convert_dir_v04_to_ozx_and_back(tmp_path):
    data = np.random.default_rng(0).integers(0, 999, (2, 3, 80, 96), dtype=np.uint16)
    write_image(
        tmp_path / "in.zarr",
        data,
        version="0.4",
        labels={"cells": (data[0] > 500).astype(np.uint8)},
        omero={"channels": [{"label": "a", "color": "FF0000"}, {"label": "b", "color": "00FF00"}]},
    )
    out = tmp_path / "out.ozx"
    assert (
        main(["convert", str(tmp_path / "in.zarr"), str(out), "--chunk", "32", "--shard", "64"])
        == 0
    )
    assert main(["validate", str(out)]) == 0
    with open_ome_zarr(out) as oz:
        (img,) = oz.images()
        assert img.multiscale.version == "0.5"
        assert img.arrays[0].array.chunks == (1, 1, 32, 32)
        np.testing.assert_array_equal(np.asarray(img.levels[0]), data)
        assert [c.label for c in img.meta.omero.channels] == ["a", "b"]
        np.testing.assert_array_equal(np.asarray(img.labels[0].levels[0]), data[0] > 500)
    back = tmp_path / "back.ome.zarr"
    assert main(["convert", str(out), str(back), "--codec", "gzip"]) == 0
    with open_ome_zarr(back) as oz:
        np.testing.assert_array_equal(np.asarray(oz.images()[0].levels[0]), data)


def test_convert_prints_what_it_wrote(tmp_path, capsys):
    """`convert` prints the line File > Save notifies: where, which OME-Zarr
    version (what "auto" chose), the images with their channels and the labels."""
    data = np.random.default_rng(1).integers(0, 999, (2, 1, 32, 40), dtype=np.uint16)
    write_image(tmp_path / "in.zarr", data, version="0.4", labels={"cells": data[0] > 500})
    out = tmp_path / "out.ozx"
    assert main(["convert", str(tmp_path / "in.zarr"), str(out), "--version", "auto"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["Saved out.ozx: OME-Zarr 0.5, 1 image (2 channels), 1 labels"]
    six = tmp_path / "six.ome.zarr"
    assert main(["convert", str(out), str(six), "--version", "0.6"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Saved six.ome.zarr: OME-Zarr 0.6, 1 image (2 channels), 1 labels"
    ]
    with open_ome_zarr(six) as oz:
        assert oz.images()[0].multiscale.version == "0.6"
    # the source's version is kept when none is asked for
    back = tmp_path / "back.ozx"
    assert main(["convert", str(six), str(back)]) == 0
    assert capsys.readouterr().out.startswith("Saved back.ozx: OME-Zarr 0.6,")


def test_cli_entry_point_imports_no_qt(tmp_path):
    code = (
        "import sys; from napari_ozx.__main__ import main; rc = main(['info', sys.argv[1]]); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('PyQt6','qtpy','napari')]; "
        "sys.exit(10 if bad else rc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(sample_path())], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


def test_convert_on_a_dask_distributed_cluster(tmp_path):
    """`convert --scheduler ADDRESS` computes the source on an existing cluster."""
    distributed = pytest.importorskip("distributed")
    data = np.random.default_rng(1).integers(0, 999, (2, 4, 96, 80), dtype=np.uint16)
    write_image(
        tmp_path / "in.zarr",
        data,
        version="0.5",
        labels={"cells": (data[0] > 500).astype(np.uint8)},
    )
    out = tmp_path / "out.ozx"
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:

            def transitions() -> int:
                return client.run_on_scheduler(
                    lambda dask_scheduler: dask_scheduler.transition_counter
                )

            before = transitions()
            assert (
                main(
                    [
                        "convert",
                        str(tmp_path / "in.zarr"),
                        str(out),
                        "--scheduler",
                        cluster.scheduler_address,
                    ]
                )
                == 0
            )
            # the cluster really did the work: its scheduler moved tasks through their states
            assert transitions() > before
    assert main(["validate", str(out)]) == 0
    with open_ome_zarr(out) as oz:
        (img,) = oz.images()
        np.testing.assert_array_equal(np.asarray(img.levels[0]), data)
        np.testing.assert_array_equal(np.asarray(img.labels[0].levels[0]), data[0] > 500)


def test_convert_with_unreachable_scheduler_is_a_clear_error(tmp_path, capsys):
    pytest.importorskip("distributed")
    data = np.zeros((2, 32, 32), np.uint16)
    write_image(tmp_path / "in.zarr", data, axes="cyx", levels=1)
    assert (
        main(
            [
                "convert",
                str(tmp_path / "in.zarr"),
                str(tmp_path / "o.ozx"),
                "--scheduler",
                "tcp://127.0.0.1:9",
                "--scheduler-timeout",
                "2",
            ]
        )
        == 2
    )
    assert "dask scheduler" in capsys.readouterr().err
    assert not (tmp_path / "o.ozx").exists()


def test_validate_reports_deeply_nested_json_instead_of_crashing(capsys):
    # json.loads raises RecursionError (not a ValueError) on deep nesting: the validator
    # used to crash with a traceback; it is an invalid zarr.json finding

    f = CORPUS / "files" / "json_deep_nesting.ozx"
    assert main(["validate", str(f), "--json"]) == 1
    rep = json.loads(capsys.readouterr().out)
    assert "root-zarr-json-invalid" in {x["code"] for x in rep["findings"]}
