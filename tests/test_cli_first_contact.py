"""The command line a new user meets first: --version, help, convert keeping the source's
layout and refusing to overwrite, info's exit code and JSON errors, a closed pipe, and
OME-Zarr 0.6 through convert."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from napari_ozx import __version__
from napari_ozx.__main__ import build_parser, main
from napari_ozx.layers.reading import read_layer_data
from tests._support.classic_dask import peer_in_process
from tests._support.paths import ROOT

ROOT = ROOT
SAMPLE = ROOT / "resources" / "cells.ozx"
EXE = [sys.executable, "-m", "napari_ozx"]


def _run(*args: str) -> tuple[int, str]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(list(args))
    return code, buf.getvalue()


def _zarr_json(path: Path, key: str) -> dict:
    if path.suffix == ".ozx":
        with zipfile.ZipFile(path) as z:
            return json.loads(z.read(key))
    return json.loads((path / key).read_text())


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"napari-ozx {__version__}"


def test_every_argument_has_help_and_the_exit_codes_are_in_help():
    ap = build_parser()
    assert "exit codes" in ap.format_help()
    sub = next(a for a in ap._actions if a.choices and "convert" in a.choices)
    for name, parser in sub.choices.items():
        assert "exit codes" in parser.format_help(), name
        for action in parser._actions:
            if action.dest != "help":
                assert action.help, f"{name} {action.dest} has no help"


def test_convert_keeps_the_source_layout_unless_told(tmp_path):
    """The sample: zstd level 9, shards of 8 planes, 256x256 chunks."""
    src_meta = _zarr_json(SAMPLE, "0/zarr.json")
    code, _ = _run("convert", str(SAMPLE), str(tmp_path / "a.ome.zarr"))
    assert code == 0
    a = _zarr_json(tmp_path / "a.ome.zarr", "0/zarr.json")
    assert a["chunk_grid"] == src_meta["chunk_grid"]
    assert (
        a["codecs"][0]["configuration"]["codecs"]
        == src_meta["codecs"][0]["configuration"]["codecs"]
    )
    levels = len(_zarr_json(SAMPLE, "zarr.json")["attributes"]["ome"]["multiscales"][0]["datasets"])
    got = _zarr_json(tmp_path / "a.ome.zarr", "zarr.json")["attributes"]["ome"]
    assert len(got["multiscales"][0]["datasets"]) == levels
    code, _ = _run("convert", str(tmp_path / "a.ome.zarr"), str(tmp_path / "b.ozx"), "--level", "4")
    assert code == 0
    inner = _zarr_json(tmp_path / "b.ozx", "0/zarr.json")["codecs"][0]["configuration"]["codecs"]
    assert inner[-1] == {"name": "zstd", "configuration": {"level": 4, "checksum": True}}


def test_convert_refuses_an_existing_target_unless_overwrite(tmp_path, capsys):
    target = tmp_path / "t.ozx"
    target.write_bytes(b"precious")
    assert main(["convert", str(SAMPLE), str(target)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert target.read_bytes() == b"precious"
    assert main(["convert", str(SAMPLE), str(target), "--overwrite"]) == 0
    assert len(read_layer_data(str(target))) >= 2


def test_info_on_a_folder_without_ome_metadata_fails_with_the_reason(tmp_path):
    (tmp_path / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    code, out = _run("info", str(tmp_path))
    assert code == 1 and "no OME-Zarr metadata" in out
    code, out = _run("info", "--json", str(tmp_path / "missing.ozx"))
    assert code == 2 and "no such file" in json.loads(out)["error"]


def test_a_closed_pipe_ends_quietly():
    """`napari-ozx info ... | head -1`: no "Broken pipe" traceback or message."""
    p = subprocess.Popen(
        [*EXE, "info", str(SAMPLE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()
    p.stdout.close()  # the reader goes away, as `head` does
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(timeout=120) == 0
    assert "Broken pipe" not in err and "Traceback" not in err


def _rotated_06(tmp_path: Path) -> Path:
    from napari_ozx.layers.writing import write_layer_data

    data = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    meta = {"name": "img", "scale": [0.5, 0.5], "rotate": 30.0}
    return write_layer_data(tmp_path / "rot.ozx", [(data, meta, "image")]).target


def _world(path: Path):
    from napari.components import ViewerModel

    ((data, kw, _kind),) = read_layer_data(str(path))
    layer = ViewerModel().add_image(data, **kw)
    return [layer.data_to_world(p) for p in [(0, 0), (10, 20), (63, 1)]]


def test_convert_keeps_06_and_its_transform(tmp_path):
    """'convert keeps a 0.6 source's version (and its transforms)'; ngff-zarr reads it."""
    src = _rotated_06(tmp_path)
    for target in ("rot2.ome.zarr", "rot3.ozx"):
        assert _run("convert", str(src), str(tmp_path / target))[0] == 0
        assert _zarr_json(tmp_path / target, "zarr.json")["attributes"]["ome"]["version"] == "0.6"
        np.testing.assert_allclose(_world(tmp_path / target), _world(src))
    with zipfile.ZipFile(tmp_path / "rot3.ozx") as z:
        assert json.loads(z.comment)["ome"]["version"] == "0.6"
    nz = pytest.importorskip("ngff_zarr")
    peer_in_process("ngff-zarr reading")
    ms = nz.from_ngff_zarr(str(tmp_path / "rot2.ome.zarr"))
    assert ms.images[0].data.shape == (64, 64)


def test_convert_06_to_05_is_refused_naming_the_transform(tmp_path, capsys):
    src = _rotated_06(tmp_path)
    target = tmp_path / "r.ome.zarr"
    assert main(["convert", str(src), str(target), "--version", "0.5"]) == 2
    assert "cannot store the rotation" in capsys.readouterr().err
    assert not target.exists()


def test_convert_upgrades_04_to_06(tmp_path):
    from tests._support.omegen import write_image

    write_image(tmp_path / "v04.zarr", np.ones((2, 4, 32, 32), np.uint8), version="0.4")
    assert (
        _run("convert", str(tmp_path / "v04.zarr"), str(tmp_path / "v06.ozx"), "--version", "0.6")[
            0
        ]
        == 0
    )
    ome = _zarr_json(tmp_path / "v06.ozx", "zarr.json")["attributes"]["ome"]
    assert ome["version"] == "0.6" and "coordinateSystems" in ome["multiscales"][0]
