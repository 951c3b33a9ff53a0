"""Lazy opening of OME-Zarr directories: versions, pixels, labels, refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
import zarr

from napari_ozx.errors import MetadataError, NotOmeZarrError, UnsupportedExtensionError
from napari_ozx.ngff.read.open import open_ome_zarr
from tests._support.omegen import write_image

RNG = np.random.default_rng(0)
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
        },
    ]
}


@pytest.fixture
def data():
    return RNG.integers(0, 1000, (2, 4, 64, 96), dtype=np.uint16)


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_open_pixels_and_metadata(tmp_path, data, version):
    labels = (data[0] > 500).astype(np.uint32)
    lv = write_image(
        tmp_path / "img.zarr",
        data,
        version=version,
        levels=3,
        scale=[1, 2, 0.5, 0.5],
        translation=[0, 1, 2, 3],
        omero=OMERO,
        labels={"cells": labels},
    )
    with open_ome_zarr(tmp_path / "img.zarr") as oz:
        assert oz.zarr_format == (3 if version == "0.5" else 2)
        (img,) = oz.images()
        assert img.multiscale.version == version
        assert [tuple(x.shape) for x in img.levels] == [x.shape for x in lv]
        for lazy, truth in zip(img.levels, lv):
            np.testing.assert_array_equal(np.asarray(lazy), truth)
        assert img.multiscale.datasets[2].scale == (1, 2, 2, 2)
        assert img.multiscale.datasets[0].translation == (0, 1, 2, 3)
        (lab,) = img.labels
        assert lab.name == "cells"
        np.testing.assert_array_equal(np.asarray(lab.levels[0]), labels)


def test_open_reads_no_chunks(tmp_path, data, store_reads):
    """Opening is metadata only: count every store get and check none is a chunk."""
    write_image(tmp_path / "img.zarr", data, levels=3, omero=OMERO, labels={"cells": data[0] > 9})
    keys = store_reads
    keys.clear()  # the writer's own reads (it builds the pyramid from level 0)
    with open_ome_zarr(tmp_path / "img.zarr") as oz:
        (img,) = oz.images()
        _ = img.levels, img.labels[0].levels
    assert keys and all(k.endswith(("zarr.json", ".zattrs", ".zgroup", ".zarray")) for k in keys), (
        keys
    )


def test_v05_preferred_when_both_versions_present(tmp_path, data):
    # RFC-2: "If implementations encounter 0.4 and 0.5 metadata side-by-side, 0.5 SHOULD
    # be treated preferentially."
    p = tmp_path / "both.zarr"
    write_image(p, data, version="0.4", scale=[1, 1, 7, 7])
    write_image(p, data, version="0.5", scale=[1, 1, 3, 3])
    with open_ome_zarr(p) as oz:
        assert oz.zarr_format == 3
        assert oz.images()[0].multiscale.datasets[0].scale == (1, 1, 3, 3)


@pytest.mark.parametrize("version", ["0.1", "0.2", "0.3"])
def test_old_versions(tmp_path, version):
    d5 = RNG.integers(0, 255, (1, 2, 3, 32, 32), dtype=np.uint8)
    p = tmp_path / "old.zarr"
    root = zarr.open_group(p, mode="w", zarr_format=2)
    root.create_array("0", data=d5, chunks=(1, 1, 1, 16, 16))
    root.create_array("1", data=d5[..., ::2, ::2], chunks=(1, 1, 1, 16, 16))
    ms = {"version": version, "datasets": [{"path": "0"}, {"path": "1"}]}
    if version == "0.3":
        ms["axes"] = ["t", "c", "z", "y", "x"]
    root.attrs.update(
        {
            "multiscales": [ms],
            "omero": {
                "channels": [{"label": "a", "color": "FF0000"}, {"label": "b", "color": "00FF00"}]
            },
        }
    )
    with open_ome_zarr(p) as oz:
        (img,) = oz.images()
        assert img.multiscale.axis_names == ("t", "c", "z", "y", "x")
        assert img.multiscale.channel_axis == 1
        np.testing.assert_array_equal(np.asarray(img.levels[1]), d5[..., ::2, ::2])


def test_not_ome(tmp_path):
    zarr.open_group(tmp_path / "plain.zarr", mode="w").create_array("a", shape=(4,), dtype="u1")
    with open_ome_zarr(tmp_path / "plain.zarr") as oz, pytest.raises(NotOmeZarrError):
        oz.images()


def test_missing_level_is_clear(tmp_path, data):
    write_image(tmp_path / "img.zarr", data, levels=2)
    import shutil

    shutil.rmtree(tmp_path / "img.zarr" / "1")
    with (
        open_ome_zarr(tmp_path / "img.zarr") as oz,
        pytest.raises(MetadataError, match="level '1' is missing"),
    ):
        oz.images()


def test_dimension_names_must_match_axes(tmp_path, data):
    # RFC-2: "The dimension_names attribute in the Zarr metadata must match the axes names"
    write_image(tmp_path / "img.zarr", data, array_extra={"dimension_names": ["c", "z", "x", "y"]})
    with (
        open_ome_zarr(tmp_path / "img.zarr") as oz,
        pytest.raises(MetadataError, match="dimension_names"),
    ):
        oz.images()


def test_levels_must_not_grow(tmp_path, data):
    p = tmp_path / "img.zarr"
    write_image(p, data, levels=2)
    doc = json.loads((p / "zarr.json").read_text())
    ds = doc["attributes"]["ome"]["multiscales"][0]["datasets"]
    ds.reverse()
    (p / "zarr.json").write_text(json.dumps(doc))
    with open_ome_zarr(p) as oz, pytest.raises(MetadataError, match="larger than the level before"):
        oz.images()


def test_must_understand_extension_refused_optional_ignored(tmp_path, data):
    # ZEP 10: must_understand (default true) -> "the node must not be loaded"
    p = tmp_path / "img.zarr"
    write_image(
        p,
        data,
        array_extra={
            "extensions": [{"name": "example.offset", "configuration": {"offset": [0, 0, 1, 1]}}]
        },
    )
    with open_ome_zarr(p) as oz, pytest.raises(UnsupportedExtensionError, match=r"example\.offset"):
        oz.images()
    q = tmp_path / "ok.zarr"
    write_image(
        q,
        data,
        array_extra={
            "extensions": [
                {
                    "name": "array-statistics",
                    "must_understand": False,
                    "configuration": {"min": 0, "max": 999},
                }
            ]
        },
    )
    with open_ome_zarr(q) as oz:
        (img,) = oz.images()
        assert img.arrays[0].extensions.statistics.max == 999
        np.testing.assert_array_equal(np.asarray(img.levels[0]), data)


def test_unknown_codec_is_a_clear_error(tmp_path, data):
    p = tmp_path / "img.zarr"
    write_image(p, data, levels=1, sharded=False)
    doc = json.loads((p / "0" / "zarr.json").read_text())
    doc["codecs"].append({"name": "made-up-codec"})
    (p / "0" / "zarr.json").write_text(json.dumps(doc))
    with open_ome_zarr(p) as oz, pytest.raises(UnsupportedExtensionError, match="'0'"):
        oz.images()


def test_dask_chunks_follow_zarr_chunks(tmp_path):
    data = RNG.integers(0, 9, (2, 4, 1024, 1024), dtype=np.uint16)
    write_image(tmp_path / "big.zarr", data, levels=1, chunks=(1, 1, 256, 256))
    with open_ome_zarr(tmp_path / "big.zarr") as oz:
        lvl = oz.images()[0].levels[0]
        # 256x256 uint16 inner chunks are grown within the shard to whole shard planes
        assert lvl.chunksize == (1, 1, 1024, 1024)
        assert all(c % 256 == 0 for c in lvl.chunks[-1])


def test_a_tile_of_a_large_dask_chunk_reads_only_its_inner_chunks(tmp_path, monkeypatch):
    from napari_ozx.ngff.read.chunks import ChunkLayout

    data = RNG.integers(0, 9, (1, 2, 1024, 1024), dtype=np.uint16)
    write_image(tmp_path / "big.zarr", data, levels=1, chunks=(1, 1, 256, 256))
    decoded = []
    orig = ChunkLayout.decode

    def spy(self, raw):
        decoded.append(len(raw))
        return orig(self, raw)

    monkeypatch.setattr(ChunkLayout, "decode", spy)
    with open_ome_zarr(tmp_path / "big.zarr") as oz:
        lvl = oz.images()[0].levels[0]
        assert lvl.chunksize[-2:] == (1024, 1024)
        tile = np.asarray(lvl[0, 1, 256:512, 512:768])
        np.testing.assert_array_equal(tile, data[0, 1, 256:512, 512:768])
        assert len(decoded) == 1  # dask fused the slice into the read: one inner chunk
        decoded.clear()
        np.testing.assert_array_equal(
            np.asarray(lvl[0, 1, 250:260, 0:10]), data[0, 1, 250:260, :10]
        )
        assert len(decoded) == 2
        # integer lists mean what they mean to dask (orthogonal: one list, its own axis)
        want = np.take(data[0, :, :, 5], [3, 900], axis=1)
        np.testing.assert_array_equal(np.asarray(lvl[0, :, [3, 900], 5]), want)


def test_dask_chunks_grow_tiny_chunks_within_the_shard_and_cap_the_count():
    from napari_ozx.ngff.read.open import _MAX_DASK_CHUNKS, _dask_chunks

    # 64x64 uint16 (8 KiB) grows square-ish to the shard's plane, never past it
    assert _dask_chunks((2, 8, 1024, 1024), (1, 1, 64, 64), (1, 8, 1024, 1024), 2) == (
        1,
        1,
        1024,
        1024,
    )
    assert _dask_chunks((2, 8, 1024, 1024), (1, 1, 64, 64), (1, 8, 128, 128), 2) == (
        1,
        1,
        128,
        128,
    )
    # unsharded: up to ~4 MiB
    out = _dask_chunks((1, 1, 8192, 8192), (1, 1, 64, 64), None, 2)
    assert out == (1, 1, 1024, 2048)
    # a huge array is grown until dask's graph stays bounded
    shape = (2, 600, 65536, 65536)
    out = _dask_chunks(shape, (1, 1, 256, 256), None, 2)
    count = np.prod([-(-s // c) for s, c in zip(shape, out, strict=True)])
    assert count <= _MAX_DASK_CHUNKS
    assert out[:2] == (1, 1)


def test_our_zstd_chunks_carry_a_checksum_so_bitflips_are_errors(tmp_path):
    """A flipped byte inside a stored shard of a file we wrote is a ChunkDecodeError,
    not silently different pixels (zstd content checksum)."""
    from napari_ozx.errors import ChunkDecodeError
    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr
    from napari_ozx.ozx.store import OzxStore

    data = RNG.integers(0, 60000, (4, 256, 256), dtype=np.uint16)
    axes = [Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]
    path = write_ome_zarr(
        tmp_path / "a.ozx", ImageSpec(data, axes), options=WriteOptions(pyramid_levels=1)
    )
    with OzxStore(path) as st:
        entry = st.index.by_name["0/c/0/0/0"]
        from napari_ozx.ozx._zip import data_offset

        start = data_offset(st.reader, entry)
    raw = bytearray(path.read_bytes())
    raw[start + 200] ^= 0x40  # inside the first inner chunk's zstd frame
    path.write_bytes(bytes(raw))
    with open_ome_zarr(path) as oz:
        lvl = oz.images()[0].levels[0]
        # a shard this small is read whole, so the member's CRC-32 reports it first;
        # larger shards are read in ranges and zstd's content checksum reports it
        from napari_ozx.errors import ZipFormatError

        with pytest.raises((ChunkDecodeError, ZipFormatError), match="0/c/0/0/0"):
            np.asarray(lvl[0])
