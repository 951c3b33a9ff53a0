"""Issue 26: public ground. Private API of other packages only in ``_compat.py``, each use
still there in the installed releases, and the fast paths' switch and log."""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from pathlib import Path

import numpy as np
import pytest

from napari_ozx._compat import dask_query_planning

SRC = Path(__file__).resolve().parents[1] / "src" / "napari_ozx"
PRIVATE = re.compile(r"zarr\.core|_Array__|sys\._getframe")


def test_private_api_only_in_compat():
    found = [
        f"{p.relative_to(SRC)}:{i}: {line.strip()}"
        for p in sorted(SRC.rglob("*.py"))
        if p.name != "_compat.py"
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not found, "\n".join(found)


def test_zarr_event_loop_runs_a_coroutine():
    from napari_ozx._compat import zarr_sync

    async def answer() -> int:
        await asyncio.sleep(0)
        return 42

    assert zarr_sync(answer()) == 42


def test_npe2_read_loop_still_names_the_plugin():
    """``npe2_reading_plugin`` looks for ``npe2.io_utils._read(…, plugin_name=…)``: if
    npe2 renames either, this fails (and the reader would quietly decline again)."""
    import npe2.io_utils

    params = inspect.signature(npe2.io_utils._read).parameters
    assert "plugin_name" in params
    # (what it is for, end to end through napari: test_preferences'
    # test_a_folder_picked_with_napari_ozx_gets_a_reason)


def test_query_planning_flag_follows_dask():
    import dask.array as da

    from napari_ozx._compat import dask_query_planning

    assert dask_query_planning() == da.Array.__module__.startswith("dask.array._array_expr")


# ------------------------------------------------------------------ fast paths


def _levels(path):
    from napari_ozx.layers.reading import read_layer_data

    return next(ld[0] for ld in read_layer_data(str(path)) if ld[2] == "image")


def test_fast_paths_off_by_environment_same_pixels(monkeypatch, caplog):
    from napari_ozx.ngff.fastpaths import ENV
    from napari_ozx.ngff.lazy import LazyArray

    sample = Path(__file__).resolve().parents[1] / "resources" / "cells.ozx"
    on = _levels(sample)
    monkeypatch.setenv(ENV, "0")
    with caplog.at_level(logging.INFO, logger="napari_ozx.ngff.fastpaths"):
        off = _levels(sample)
    assert not any(isinstance(a, LazyArray) for a in off)
    assert any(f"{ENV}=0" in r.getMessage() for r in caplog.records)
    for a, b in zip(on, off, strict=True):
        np.testing.assert_array_equal(np.asarray(a[..., :40, :40]), np.asarray(b[..., :40, :40]))


def test_a_declined_fast_path_is_said_once_with_the_reason(tmp_path, caplog):
    """A Zarr v2 array with a filter: the direct reader declines (zarr-python reads it),
    says so once for both levels, naming why."""
    import zarr
    from numcodecs import Delta

    from napari_ozx.ngff import fastpaths
    from napari_ozx.ngff.fastread import fast_reader

    fastpaths._said.clear()
    arrays = []
    for i in range(2):
        a = zarr.create_array(
            tmp_path / f"a{i}.zarr",
            shape=(8, 8),
            chunks=(4, 4),
            dtype="u2",
            zarr_format=2,
            filters=[Delta(dtype="u2")],
            compressors=None,
        )
        a[:] = np.arange(64, dtype="u2").reshape(8, 8)
        arrays.append(a)
    with caplog.at_level(logging.INFO, logger="napari_ozx.ngff.fastpaths"):
        assert [fast_reader(a) for a in arrays] == [None, None]
    said = [r.getMessage() for r in caplog.records if "direct chunk reads" in r.getMessage()]
    assert len(said) == 1 and "filters" in said[0], said


def test_under_query_planning_levels_are_our_arrays_with_the_same_pixels():
    """dask's array query planning swaps ``dask.array.Array`` for a class whose arrays do
    not convert to numpy (``np.asarray`` gives an object array; dask issue #11922), so
    napari could show none. Under it our levels are :class:`LevelArray`: napari reads
    them directly, with the same pixels as without query planning, and it is said in the
    log. (Run in a child: the switch is read when dask.array is imported.)"""
    import os
    import subprocess
    import sys

    sample = Path(__file__).resolve().parents[1] / "resources" / "cells.ozx"
    want = [np.asarray(lv) for lv in _levels(sample)]
    code = (
        "import logging, sys, pickle, numpy as np\n"
        "logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
        "from napari_ozx.layers.reading import read_layer_data\n"
        "from napari_ozx.ngff.lazy import LevelArray\n"
        f"lds = [ld for ld in read_layer_data({str(sample)!r}) if ld[2] == 'image']\n"
        "levels = lds[0][0]\n"
        "assert all(isinstance(lv, LevelArray) for lv in levels), [type(x) for x in levels]\n"
        "lv = levels[0]\n"
        "view = lv[..., 3:20, 5:40]\n"
        "assert isinstance(view, LevelArray) and view.shape == lv.shape[:-2] + (17, 35)\n"
        "fancy = lv[..., [1, 3], :]\n"
        "full = np.asarray(lv)\n"
        "assert np.array_equal(np.asarray(view), full[..., 3:20, 5:40])\n"
        "assert np.array_equal(fancy, full[..., [1, 3], :])\n"
        "assert np.array_equal(np.asarray(lv.to_dask().compute()), full)\n"
        "sys.stdout.buffer.write(pickle.dumps([np.asarray(x) for x in levels]))\n"
    )
    env = {**os.environ, "DASK_ARRAY__QUERY_PLANNING": "True"}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300)
    assert res.returncode == 0, res.stderr.decode()
    assert b"query planning is on" in res.stderr, res.stderr.decode()
    import pickle

    got = pickle.loads(res.stdout)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)


def test_dask_views_made_fast_equal_dask_s_own_constructor():
    """``new_dask_view`` skips ``Array.__new__`` for speed where dask's slots are as
    checked; the array it makes must be the one the public constructor makes."""
    import dask.array as da

    from napari_ozx import _compat

    if _compat.dask_query_planning():
        pytest.skip("dask's query planning has no classic Array to make views of")
    assert _compat.fast_dask_views(), "dask's Array slots changed: re-check new_dask_view"
    chunks = ((2, 2, 1), (3,))  # those of the source below
    meta = np.empty((0, 0), dtype="u2")
    fast = _compat.new_dask_view(da.Array, "view-x", chunks, meta)
    slow = da.Array.__new__(da.Array, {}, "view-x", chunks, meta=meta)
    src = da.from_array(np.arange(15, dtype="u2").reshape(5, 3), chunks=(2, 3), name="view-x")
    for a in (fast, slow):
        a.dask = src.dask
    assert (fast.name, fast.chunks, fast.shape, fast.dtype, fast.numblocks) == (
        slow.name,
        slow.chunks,
        slow.shape,
        slow.dtype,
        slow.numblocks,
    )
    assert fast.__dask_keys__() == slow.__dask_keys__()
    np.testing.assert_array_equal(fast.compute(), slow.compute())


@pytest.mark.parametrize(
    ("key", "want"),
    [
        # a list and integers: the list keeps its own axis (numpy would move it first)
        ((0, slice(None), [3, 40], 5), lambda a: np.take(a[0, :, :, 5], [3, 40], axis=1)),
        ((1, [2, 0]), lambda a: a[1][[2, 0]]),
        ((Ellipsis, 3), lambda a: a[..., 3]),
        ((0, [1], slice(2, 9, 3), 2), lambda a: a[0][[1]][:, 2:9:3, 2]),
        ((np.array([True, False]), 0), lambda a: a[[0], 0]),
    ],
)
def test_other_indexes_are_dask_s_orthogonal_ones(key, want):
    """What LevelArray (our levels under dask's query planning) does with a list: as a
    dask array (LazyArray) does, so a key means the same with query planning on or off."""
    from napari_ozx.ngff.indexing import orthogonal

    a = np.arange(2 * 3 * 50 * 7).reshape(2, 3, 50, 7)
    np.testing.assert_array_equal(orthogonal(a, key), want(a))
    if not dask_query_planning():  # dask itself, where its lists work
        import dask.array as da

        np.testing.assert_array_equal(
            orthogonal(a, key), da.from_array(a, chunks=(1, 1, 25, 7))[key]
        )
