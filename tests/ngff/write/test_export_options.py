"""Export options without Qt: estimates, remembered options, File > Save uses them."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import zipfile

import numpy as np
import pytest

from napari_ozx.errors import OzxError
from napari_ozx.layers.export import (
    ArrayPlan,
    constrain,
    estimate_export,
    estimate_multiscale,
    export_layers,
    level_range,
    load_options,
    options_from_dict,
    options_path,
    plans_from_layer_data,
    retarget,
    save_options,
)
from napari_ozx.ngff.model.metadata import Axis
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.ngff.write.writer import WriteCancelled, WriteOptions

pytestmark = pytest.mark.usefixtures("config_dir")

RNG = np.random.default_rng(2)
ZYX = (Axis("z", "space"), Axis("y", "space"), Axis("x", "space"))


def _layers():
    img = RNG.integers(1, 1000, (5, 300, 200), dtype=np.uint16)
    lab = RNG.integers(1, 5, (5, 300, 200), dtype=np.uint32)
    return [
        (img, {"name": "a", "scale": [1, 0.5, 0.5]}, "image"),
        (img + 1, {"name": "b", "scale": [1, 0.5, 0.5]}, "image"),
        (lab, {"name": "cells", "scale": [1, 0.5, 0.5]}, "labels"),
    ]


def _stored_names(out) -> list[str]:
    if str(out).endswith(".ozx"):
        with zipfile.ZipFile(out) as zf:
            return zf.namelist()
    return [os.path.relpath(os.path.join(a, f), out) for a, _, fs in os.walk(out) for f in fs]


# ------------------------------------------------------------------------ estimates


def test_estimates_change_with_options():
    plan = ArrayPlan("img", (64, 2048, 2048), np.dtype("uint16"), ZYX)
    base = estimate_export(WriteOptions(), [plan], "x.ozx")
    first = base.first
    assert first.chunk_shape == (1, 256, 256) and first.shard_shape == (16, 1024, 1024)
    assert base.chunks_per_shard == 16 * 4 * 4
    assert first.shard_bytes == 16 * 1024 * 1024 * 2  # 32 MiB
    assert base.levels == 4  # 2048 -> 1024 -> 512 -> 256
    assert base.metadata_entries == 1 + 4
    assert base.data_entries == 4 * 2 * 2 + 4 + 4 + 4  # level 0: 4 z-shards x 2 x 2
    small = estimate_export(
        dataclasses.replace(WriteOptions(), shard_yx=512, shard_z=4), [plan], "x.ozx"
    )
    assert small.chunks_per_shard == 4 * 2 * 2
    assert small.first.shard_bytes == 4 * 512 * 512 * 2
    assert small.entries > base.entries
    chunky = estimate_export(dataclasses.replace(WriteOptions(), chunk_yx=512), [plan], "x.ozx")
    assert chunky.chunks_per_shard == 16 * 2 * 2 and chunky.levels == 3
    two = estimate_export(dataclasses.replace(WriteOptions(), pyramid_levels=2), [plan], "x.ozx")
    assert two.levels == 2
    v04 = estimate_export(WriteOptions(format="directory", version="0.4"), [plan], "x.zarr")
    assert v04.first.shard_shape is None and v04.chunks_per_shard == 1
    assert v04.first.shard_bytes == 256 * 256 * 2
    assert v04.format == "directory" and v04.metadata_entries == 2 + 4 * 2
    assert v04.entries > 64 * 8 * 8  # one file per chunk without sharding
    rows = dict(base.rows())
    assert rows["Shard size"] == "32.00 MiB uncompressed" and rows["Entries"].startswith(
        f"{base.entries:,} "
    )


@pytest.mark.parametrize(
    "opts,name",
    [
        (WriteOptions(), "a.ozx"),
        (WriteOptions(format="directory", version="0.4"), "b.ome.zarr"),
        (
            WriteOptions(
                format="directory", chunk_yx=64, shard_yx=128, shard_z=2, codec="blosc-lz4"
            ),
            "c.ome.zarr",
        ),
        (
            WriteOptions(chunk_yx=32, shard_yx=32, shard_z=1, pyramid_levels=3, codec="none"),
            "d.ozx",
        ),
    ],
)
def test_entry_estimate_matches_what_is_written(tmp_path, opts, name):
    layers = _layers()
    target = tmp_path / name
    est = estimate_export(opts, plans_from_layer_data(layers), target)
    out = export_layers(target, layers, opts)
    names = _stored_names(out)
    assert est.entries == len(names)
    meta = [
        n for n in names if os.path.basename(n) in ("zarr.json", ".zattrs", ".zgroup", ".zarray")
    ]
    assert est.metadata_entries == len(meta)
    with open_ome_zarr(out) as oz:
        (img,) = oz.images()
        assert len(img.arrays) == est.levels
        a0 = img.arrays[0].array
        assert tuple(a0.chunks) == est.first.chunk_shape
        assert (tuple(a0.shards) if a0.shards else None) == est.first.shard_shape


def test_plans_follow_the_writer_rules():
    layers = _layers()
    plans = plans_from_layer_data(layers)
    assert [(p.name, p.shape, p.is_labels) for p in plans] == [
        ("image", (2, 5, 300, 200), False),
        ("cells", (5, 300, 200), True),
    ]
    assert [a.name for a in plans[0].axes] == ["c", "z", "y", "x"]
    with pytest.raises(OzxError, match="need an image"):
        plans_from_layer_data([layers[2], (layers[2][0], {"name": "more"}, "labels")])
    with pytest.raises(OzxError, match="at least one"):
        plans_from_layer_data([])
    with pytest.raises(OzxError, match="images and labels only"):
        plans_from_layer_data([(np.zeros((3, 2)), {"name": "pts"}, "points")])
    est = estimate_multiscale(WriteOptions(), ArrayPlan("x", (100, 100), np.dtype("uint8"), ()))
    assert est.levels[0].chunk_shape == (100, 100)


def test_valid_combinations():
    assert constrain(WriteOptions(format="ozx", version="0.4")).version == "0.5"
    assert constrain(WriteOptions(format="directory", version="0.4")).version == "0.4"
    assert constrain(WriteOptions(codec="gzip", level=15)).level == 9
    assert constrain(WriteOptions(codec="zstd", level=15)).level == 15
    assert level_range("none") is None and level_range("blosc-lz4") == (0, 9)
    assert retarget("/d/cells.ozx", "directory") == "/d/cells.ome.zarr"
    assert retarget("/d/cells.ome.zarr", "ozx") == "/d/cells.ozx"
    assert retarget("/d/cells.zarr", "directory") == "/d/cells.zarr"
    assert retarget("", "ozx") == ""


# ---------------------------------------------------------------------- persistence


def test_options_round_trip(config_dir):
    assert load_options() == WriteOptions()  # nothing saved yet
    opts = WriteOptions(
        format="directory",
        version="0.4",
        chunk_yx=128,
        shard_yx=512,
        shard_z=4,
        codec="gzip",
        level=6,
        pyramid_levels=3,
        downsample="nearest",
    )
    p = save_options(opts)
    assert p == options_path() and p.parent == config_dir
    assert json.loads(p.read_text())["chunk_yx"] == 128
    assert load_options() == opts
    assert [f.name for f in config_dir.iterdir()] == ["export_options.json"]  # no temp files left


def test_file_save_gets_the_format_from_the_file_name(config_dir):
    save_options(WriteOptions(format="directory", version="0.4", chunk_yx=64))
    for_ozx = load_options("x.ozx")
    assert for_ozx.format == "auto" and for_ozx.version == "0.5" and for_ozx.chunk_yx == 64
    for_dir = load_options("x.ome.zarr")
    assert for_dir.format == "auto" and for_dir.version == "0.4"


def test_damaged_options_fall_back_to_defaults(config_dir, caplog):
    config_dir.mkdir()
    options_path().write_text("{not json")
    assert load_options() == WriteOptions()
    options_path().write_text(
        json.dumps(
            {
                "chunk_yx": "big",
                "codec": "lzma",
                "level": 5,
                "shard_z": True,
                "pyramid_levels": None,
                "unknown": 1,
            }
        )
    )
    opts = load_options()
    assert opts == WriteOptions(level=5)
    assert "chunk_yx" in caplog.text and "codec" in caplog.text
    assert options_from_dict([1, 2]) == WriteOptions()
    assert options_from_dict({"format": "ozx", "version": "0.4"}).version == "0.5"


def test_file_save_uses_the_remembered_options(tmp_path, config_dir):
    from napari_ozx._writer import write_layers

    save_options(
        WriteOptions(chunk_yx=64, shard_yx=128, shard_z=2, codec="gzip", level=1, pyramid_levels=2)
    )
    img = RNG.integers(0, 255, (4, 256, 256), dtype=np.uint8)
    (out,) = write_layers(str(tmp_path / "saved.ozx"), [(img, {"name": "img"}, "image")])
    with open_ome_zarr(out) as oz:
        (im,) = oz.images()
        assert len(im.arrays) == 2
        a = im.arrays[0].array
        assert tuple(a.chunks) == (1, 64, 64) and tuple(a.shards) == (2, 128, 128)
        codecs = json.dumps(im.arrays[0].document["codecs"])
        assert '"gzip"' in codecs
        np.testing.assert_array_equal(np.asarray(im.levels[0]), img)
    # explicit options still win
    (out2,) = write_layers(
        str(tmp_path / "explicit.ozx"), [(img, {"name": "img"}, "image")], WriteOptions()
    )
    with open_ome_zarr(out2) as oz:
        assert tuple(oz.images()[0].arrays[0].array.chunks) == (1, 256, 256)


# --------------------------------------------------------------------------- export


def test_export_reports_progress_and_cancels_cleanly(tmp_path):
    layers = _layers()
    seen = []
    out = export_layers(
        tmp_path / "p.ozx",
        layers,
        WriteOptions(chunk_yx=64, shard_yx=64, shard_z=1, workers=2),
        progress=lambda d, n: seen.append((d, n)),
    )
    assert out.exists() and seen and seen[-1][0] == seen[-1][1]
    cancel = threading.Event()

    def progress(done, total):
        if done >= 3:
            cancel.set()

    with pytest.raises(WriteCancelled):
        export_layers(
            tmp_path / "c.ozx",
            layers,
            WriteOptions(chunk_yx=64, shard_yx=64, shard_z=1, workers=1),
            progress=progress,
            cancel=cancel,
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config", "p.ozx"] or sorted(
        p.name for p in tmp_path.iterdir()
    ) == ["p.ozx"]
