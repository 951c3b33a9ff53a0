"""Coarse levels padded beyond the data, as webknossos 4.3 writes them:
the levels are ordered by resolution (their scales grow), but a coarse level is stored as
a larger array with the data in its corner. The reader crops each such level to level 0's
extent at its scale (ceil(shape0 * scale0 / scaleN)) with one warning; ``validate`` and
``info`` agree with it (a warning, not a refusal). A level that is larger without being
coarser is still refused."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import zarr

from napari_ozx.__main__ import info, validate_path
from napari_ozx.errors import OzxError
from napari_ozx.layers.reading import read_layer_data
from tests._support.omegen import write_image


def _padded(tmp_path, coarser=True):
    p = tmp_path / "wk.zarr"
    data = np.arange(1 * 8 * 64 * 64, dtype=np.uint8).reshape(1, 8, 64, 64)
    write_image(p, data, "czyx", "0.4", levels=3)
    g = zarr.open_group(p, mode="a", zarr_format=2)
    for lvl, pad in ((1, (1, 8, 256, 256)), (2, (1, 8, 512, 512))):
        small = np.asarray(g[str(lvl)])
        big = np.zeros(pad, np.uint8)
        big[tuple(slice(0, n) for n in small.shape)] = small
        del g[str(lvl)]
        a = g.create_array(
            str(lvl),
            shape=pad,
            dtype=np.uint8,
            chunks=(1, 1, 64, 64),
            chunk_key_encoding={"name": "v2", "separator": "/"},
        )
        a[...] = big
    if not coarser:  # the scales no longer say the larger level is coarser
        attrs = json.loads((p / ".zattrs").read_text())
        for d in attrs["multiscales"][0]["datasets"]:
            d["coordinateTransformations"][0]["scale"] = [1.0, 1.0, 1.0, 1.0]
        (p / ".zattrs").write_text(json.dumps(attrs))
    return p, data


def test_padded_levels_are_cropped_to_the_data(tmp_path, caplog):
    p, data = _padded(tmp_path)
    with caplog.at_level(logging.WARNING):
        lds = read_layer_data(str(p))
    assert "padded beyond the data" in caplog.text
    levels = lds[0][0]
    assert [tuple(lv.shape) for lv in levels] == [(1, 8, 64, 64), (1, 8, 32, 32), (1, 8, 16, 16)]
    np.testing.assert_array_equal(np.asarray(levels[1]), data[:, :, ::2, ::2])
    code, rep = validate_path(str(p), deep=False)
    codes = {f["code"]: f["severity"] for f in rep["findings"]}
    assert code == 0 and codes.get("dataset-padded") == "warning", codes
    assert not info(str(p))["problems"]


def test_a_larger_level_that_is_not_coarser_is_still_refused(tmp_path):
    p, _ = _padded(tmp_path, coarser=False)
    with pytest.raises(OzxError, match="larger than the level before"):
        read_layer_data(str(p))
    code, rep = validate_path(str(p), deep=False)
    assert code == 1 and "dataset-order" in {f["code"] for f in rep["findings"]}
