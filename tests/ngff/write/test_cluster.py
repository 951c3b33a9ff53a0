"""Converting on a dask.distributed cluster (``ngff/write/cluster.py``).

One 2-worker ``LocalCluster`` of separate processes serves the module, so every graph
really is pickled to other processes and the workers read the source themselves. Each
cluster conversion is compared with the local conversion of the same source, key for key
and byte for byte (pixels at every level and metadata), and validated.
"""

from __future__ import annotations

import gc
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from napari_ozx.__main__ import main, validate_path
from napari_ozx.ngff.read.open import open_ome_zarr, open_store
from napari_ozx.ngff.write.convert import convert, source_options
from napari_ozx.ngff.write.writer import WriteCancelled, WriteOptions
from tests._support.omegen import write_image

distributed = pytest.importorskip(
    "distributed", reason="dask.distributed is not installed (extra napari-ozx[cluster])"
)

from napari_ozx.ngff.write.cluster import (  # noqa: E402
    ClusterWriteError,
    SchedulerUnreachableError,
    connect,
    write_ome_zarr_on_cluster,
)

# small shards: many regions per level, levels whose shards are smaller than the array
OPTS = WriteOptions(chunk_yx=32, shard_yx=64, shard_z=3)


@pytest.fixture(scope="module")
def client():
    import os

    psutil = pytest.importorskip("psutil")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        # not the default client: the code under test must use the one it is given
        distributed.Client(cluster, set_as_default=False) as c,
    ):
        pids = set(c.run(os.getpid).values())
        assert len(pids) == 2 and os.getpid() not in pids  # really separate processes
        yield c
        pids |= set(c.run(os.getpid).values())  # and those restarted after a worker loss
    # the worker processes end with the cluster
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(psutil.pid_exists(p) for p in pids):
        time.sleep(0.2)
    left = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).is_running()]
    assert not left, f"worker processes left running: {left}"
    # the closed cluster's sockets and pipes go now, not during a later test that
    # counts this process's file descriptors (test_concurrency)
    gc.collect()


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> tuple[Path, np.ndarray, np.ndarray]:
    """A 0.5 directory: 2 channels x 3 planes x 128 x 160 uint16, sharded, 2 levels,
    with a uint8 labels image (chunks of whole planes: few source tasks per region)."""
    tmp = tmp_path_factory.mktemp("cluster-src")
    rng = np.random.default_rng(17)
    data = rng.integers(0, 4000, (2, 3, 128, 160), dtype=np.uint16)
    cells = (data[0] // 1000).astype(np.uint8)
    write_image(tmp / "in.zarr", data, labels={"cells": cells}, chunks=(1, 1, 64, 80))
    return tmp / "in.zarr", data, cells


def stored(path: Path) -> dict[str, bytes]:
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    store = open_store(path)

    async def read() -> dict[str, bytes]:
        out = {}
        async for key in store.list():
            buf = await store.get(key, default_buffer_prototype())
            out[key] = buf.to_bytes()
        return out

    return sync(read())


def assert_same_as_local(src: Path, tmp: Path, name: str, opts: WriteOptions, client) -> Path:
    local, remote = tmp / f"local-{name}", tmp / f"cluster-{name}"
    convert(src, local, opts)
    calls: list[tuple[int, int]] = []
    out = convert(src, remote, opts, progress=lambda d, n: calls.append((d, n)), client=client)
    assert out == remote
    a, b = stored(local), stored(remote)
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []  # metadata and every shard, byte for byte
    assert len(a) > 10  # really many shards
    # progress: every region once, counted up to the total
    assert (
        calls
        and calls[-1][0] == calls[-1][1]
        and [d for d, _ in calls] == list(range(1, calls[-1][1] + 1))
    )
    code, report = validate_path(str(remote), deep=True)
    assert code == 0, report
    return remote


def _mean2(a: np.ndarray) -> np.ndarray:
    """The 2x2 mean of the top-left block of every plane (the writer's ``mean``)."""
    return np.rint(a[..., :2, :2].astype(np.float64).mean(axis=(-1, -2)))


@pytest.mark.parametrize("name", ["out.ozx", "out.ome.zarr"])
def test_cluster_convert_equals_local_and_source(client, source, tmp_path, name):
    """By default the source's two stored levels are copied, as stored, by the workers."""
    src, data, cells = source
    out = assert_same_as_local(src, tmp_path, name, OPTS, client)
    with open_ome_zarr(src) as oz:
        stored_levels = [np.asarray(a) for a in oz.images()[0].levels]
    with open_ome_zarr(out) as oz:
        (img,) = oz.images()
        assert len(img.levels) == len(stored_levels) == 2
        for got, want in zip(img.levels, stored_levels, strict=True):
            np.testing.assert_array_equal(np.asarray(got), want)
        np.testing.assert_array_equal(np.asarray(img.levels[0]), data)
        np.testing.assert_array_equal(np.asarray(img.labels[0].levels[0]), cells)
    assert main(["validate", str(out)]) == 0


@pytest.mark.parametrize(
    ("mode", "opts"),
    [
        ("more levels", replace(OPTS, pyramid_levels=4)),
        ("rebuilt", replace(OPTS, rebuild_pyramid=True, pyramid_levels=3)),
    ],
)
def test_cluster_convert_builds_levels_as_the_local_writer(client, source, tmp_path, mode, opts):
    """Levels beyond the stored ones are built on the workers from the coarsest stored
    level (a copied level feeds built ones); a rebuild makes every level from level 0.
    Byte for byte the local conversion either way."""
    src, data, _ = source
    out = assert_same_as_local(src, tmp_path, "out.ozx", opts, client)
    with open_ome_zarr(src) as oz:
        stored1 = np.asarray(oz.images()[0].levels[1])
    with open_ome_zarr(out) as oz:
        levels = [np.asarray(a) for a in oz.images()[0].levels]
    assert len(levels) == opts.pyramid_levels
    if mode == "more levels":
        np.testing.assert_array_equal(levels[1], stored1)
        np.testing.assert_array_equal(levels[2][..., 0, 0], _mean2(stored1))
    else:
        np.testing.assert_array_equal(levels[1][..., 0, 0], _mean2(data))


def test_cluster_convert_directory_0_4_unsharded(client, source, tmp_path):
    """Zarr v2 chunks: the local writer's multi-chunk regions, written by the workers."""
    src, *_ = source
    assert_same_as_local(
        src, tmp_path, "v2.ome.zarr", WriteOptions(version="0.4", chunk_yx=32), client
    )


@pytest.mark.parametrize("edge", [(45, 45), (32, 64)])
def test_cluster_convert_float_mean_odd_and_even_regions(client, tmp_path, edge):
    """Float means must equal the local writer's to the bit, whether each region is
    halved on its own worker (even edges) or, with odd shard edges (45 px) where a
    region halved alone would straddle 2x2 blocks, the region itself is sent and the next
    level halves the window it needs."""
    data = np.random.default_rng(3).random((3, 133, 181), dtype=np.float32)
    write_image(tmp_path / "f.zarr", data, axes="zyx", levels=1)
    # one stored level: the pyramid is built on the workers (asked for)
    opts = WriteOptions(chunk_yx=edge[0], shard_yx=edge[1], shard_z=2, pyramid_levels=4)
    out = assert_same_as_local(tmp_path / "f.zarr", tmp_path, "f.ozx", opts, client)
    with open_ome_zarr(out) as oz:
        levels = oz.images()[0].levels
        assert len(levels) >= 3
        np.testing.assert_array_equal(np.asarray(levels[0]), data)


def test_cluster_convert_labels_only_mode(client, source, tmp_path):
    src, *_ = source
    assert_same_as_local(
        src / "labels" / "cells",
        tmp_path,
        "l.ozx",
        WriteOptions(downsample="mode", **_small()),
        client,
    )


def _small() -> dict:
    return {"chunk_yx": 32, "shard_yx": 64, "shard_z": 3}


@pytest.mark.network
@pytest.mark.parametrize("where", ["file", "http"])
def test_ozx_source_local_or_over_http_is_reopened_by_the_workers(client, source, tmp_path, where):
    """An ``.ozx`` source (OzxStore, or HTTP range reads) pickles as its path or URL: the
    workers reopen it and read their regions themselves."""
    from tests._support.omegen import zip_dir

    src, *_ = source
    www = tmp_path / "www"
    www.mkdir()
    packed = zip_dir(src, www / "in.ozx")
    local = tmp_path / "local.ome.zarr"
    convert(src, local, OPTS)
    out = tmp_path / "c.ome.zarr"
    if where == "file":
        convert(packed, out, OPTS, client=client)
    else:
        pytest.importorskip("aiohttp")
        from tests._support.httpserver import Server

        with Server(www) as srv:
            convert(f"{srv.url}/in.ozx", out, OPTS, client=client)
            assert any(r[0] == "GET" for r in srv.requests)
    assert stored(out) == stored(local)


@pytest.mark.network
def test_a_source_the_workers_cannot_reopen_fails_its_tasks_not_the_workers(
    client, source, tmp_path
):
    """A remote source gone before the workers reopen it (its server stopped): the write
    fails with the reason, the region and the source, and the same workers live on
    (reopening happens in the task, not while a worker reads the scheduler's messages:
    there it broke the worker's connection and both workers shut down)."""
    pytest.importorskip("aiohttp")
    from napari_ozx.ngff.write.convert import image_spec
    from tests._support.httpserver import Server
    from tests._support.omegen import zip_dir

    src, *_ = source
    www = tmp_path / "www"
    www.mkdir()
    zip_dir(src, www / "in.ozx")
    client.wait_for_workers(2, timeout=60)
    workers = set(client.nthreads())
    with Server(www) as srv:
        url = f"{srv.url}/in.ozx"
        oz = open_ome_zarr(url)
        spec = image_spec(oz.images()[0], with_labels=False)
    target = tmp_path / "out.ozx"
    try:
        with pytest.raises(ClusterWriteError) as err:
            write_ome_zarr_on_cluster(target, spec, options=OPTS, client=client, source_name=url)
    finally:
        oz.close()
    msg = str(err.value)
    assert msg.startswith(f"{url}: ") and "failed" in msg.split("(on a dask worker")[0], msg
    assert "region [" in msg and str(target) in msg
    assert set(client.nthreads()) == workers  # none died or was restarted
    assert not target.exists()


def test_a_lazy_source_region_travels_as_its_recipe_not_its_pixels(tmp_path):
    """What a level-0 task carries for an opened OME-Zarr: the region's dask expression
    (reader + path), a few KiB however big the region; the worker reads the pixels."""
    import pickle

    from napari_ozx.ngff.write.cluster import _Lazy, _source_arg

    data = np.random.default_rng(5).integers(0, 60000, (1, 4, 512, 512), dtype=np.uint16)
    write_image(tmp_path / "big.zarr", data, levels=1)
    with open_ome_zarr(tmp_path / "big.zarr") as oz:
        level0 = oz.images()[0].levels[0]
        region = (slice(0, 1), slice(0, 4), slice(0, 512), slice(0, 512))
        arg = _source_arg(level0, region)
        assert isinstance(arg, _Lazy)
        blob = pickle.dumps(arg)
    assert len(blob) < data.nbytes // 50  # 2 MiB of pixels, not shipped
    back = pickle.loads(blob)  # as a worker: reopens the source by path and reads
    np.testing.assert_array_equal(back.array.compute(scheduler="synchronous"), data[region])


def test_in_memory_source_on_cluster(client, tmp_path):
    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import ImageSpec, write_ome_zarr

    data = np.arange(4 * 100 * 90, dtype=np.int32).reshape(4, 100, 90)
    axes = [Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]
    spec = ImageSpec(data, axes)
    write_ome_zarr(tmp_path / "a.ozx", spec, options=OPTS)
    write_ome_zarr_on_cluster(tmp_path / "b.ozx", spec, options=OPTS, client=client)
    a, b = stored(tmp_path / "a.ozx"), stored(tmp_path / "b.ozx")
    assert a == b


@pytest.mark.parametrize("name", ["out.ozx", "out.ome.zarr"])
def test_cancel_leaves_target_untouched(client, source, tmp_path, name):
    src, *_ = source
    target = tmp_path / name
    convert(src, target, OPTS)  # an existing target that must survive
    before = stored(target)
    listing = sorted(p.name for p in tmp_path.iterdir())
    cancel = threading.Event()
    seen: list[int] = []

    def progress(done: int, total: int) -> None:
        seen.append(done)
        if done == 2:
            cancel.set()

    with pytest.raises(WriteCancelled):
        convert(src, target, OPTS, progress=progress, cancel=cancel, client=client)
    assert seen and max(seen) < 10  # stopped early, not after the whole image
    assert stored(target) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no partial left behind
    if target.suffix != ".ozx":
        # a directory's partial copy goes only once no task of this write runs or waits
        # to run on a worker (one queued can start before it hears of the release)
        live = client.run(
            lambda dask_worker: [
                str(k)
                for k, ts in dask_worker.state.tasks.items()
                if ts.state not in ("memory", "error", "released", "forgotten")
            ]
        )
        assert not [k for keys in live.values() for k in keys if k.startswith("ozx-")]


def test_worker_lost_mid_run_is_retried(client, tmp_path):
    """A worker process dies while it reads a region: its nanny restarts it, the task is
    run again, and the output is the local writer's."""
    import dask.array as da

    from napari_ozx.ngff.model.metadata import Axis
    from napari_ozx.ngff.write.writer import ImageSpec, write_ome_zarr

    client.wait_for_workers(2, timeout=60)  # both there (an earlier test may restart one)
    marker = str(tmp_path / "died-once")

    def die_once(block: np.ndarray) -> np.ndarray:
        import os

        if block.flat[0] == 0 and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(1)  # the worker process is gone, mid-task
        return block

    data = np.arange(4 * 96 * 80, dtype=np.uint16).reshape(4, 96, 80)
    lazy = da.from_array(data, chunks=(1, 96, 80)).map_blocks(
        die_once, dtype=data.dtype, meta=np.empty((0, 0, 0), data.dtype)
    )
    axes = [Axis("z", "space"), Axis("y", "space"), Axis("x", "space")]
    write_ome_zarr(tmp_path / "local.ozx", ImageSpec(data, axes), options=OPTS)
    write_ome_zarr_on_cluster(
        tmp_path / "c.ozx", ImageSpec(lazy, axes), options=OPTS, client=client
    )
    assert Path(marker).exists()  # a worker really died
    assert stored(tmp_path / "c.ozx") == stored(tmp_path / "local.ozx")
    client.wait_for_workers(2, timeout=60)


@pytest.mark.parametrize("name", ["out.ozx", "out.ome.zarr"])
def test_worker_error_is_one_clear_message(client, source, tmp_path, name):
    """A corrupt source shard fails on a worker (retried, then reported): one OzxError
    naming the reason, the array region, the source and the target; nothing written."""
    import shutil

    src = tmp_path / "broken.zarr"
    shutil.copytree(source[0], src)
    shard = next(p for p in sorted((src / "0" / "c").rglob("*")) if p.is_file())
    shard.write_bytes(shard.read_bytes()[: len(shard.read_bytes()) // 2])
    target = tmp_path / name
    with pytest.raises(ClusterWriteError) as err:
        convert(src, target, OPTS, client=client)
    msg = str(err.value)
    assert "could not be decoded" in msg.split("(on a dask worker")[0]  # reason first
    assert str(src) in msg and str(target) in msg
    assert not target.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.zarr"]


@pytest.mark.parametrize("name", ["out.ozx", "out.ome.zarr"])
def test_a_cluster_without_workers_is_a_clear_error_not_a_hang(source, tmp_path, monkeypatch, name):
    """Every worker gone and none coming back (a scheduler with no workers at all here):
    the write stops after NO_WORKERS_TIMEOUT with one error saying so, nothing written."""
    from napari_ozx.ngff.write import cluster

    monkeypatch.setattr(cluster, "NO_WORKERS_TIMEOUT", 0.5)
    monkeypatch.setattr(cluster, "_WORKER_CHECK", 0.1)
    src, *_ = source
    target = tmp_path / name
    with (
        distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as lc,
        distributed.Client(lc, set_as_default=False) as c,
    ):
        with pytest.raises(ClusterWriteError) as err:
            convert(src, target, OPTS, client=c)
    msg = str(err.value)
    assert msg.startswith("the dask cluster has had no workers for 0.5 s")
    assert str(src) in msg and str(target) in msg
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_unreachable_scheduler_is_a_clear_error_after_the_timeout(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # it gives up after the timeout it was given (the time it takes is measured in the
    # closing note's CLI run, not asserted here) and says which address and timeout
    with pytest.raises(SchedulerUnreachableError) as err:
        connect(f"tcp://127.0.0.1:{port}", timeout=1.5)
    msg = str(err.value)
    assert msg.startswith(f"cannot reach the dask scheduler at tcp://127.0.0.1:{port} within 1.5 s")


def test_cli_scheduler_uses_the_workers(client, source, tmp_path):
    """`convert --scheduler`: the workers encode (their task counts grow), the output is
    the local conversion's."""
    src, *_ = source
    executed = lambda: sum(  # noqa: E731
        client.run(lambda dask_worker: dask_worker.state.executed_count).values()
    )
    before = executed()
    out = tmp_path / "cli.ozx"
    addr = client.scheduler.address
    assert (
        main(
            [
                "convert",
                str(src),
                str(out),
                "--scheduler",
                addr,
                "--chunk",
                "32",
                "--shard",
                "64",
                "--shard-z",
                "3",
            ]
        )
        == 0
    )
    assert executed() - before >= 20
    # the CLI keeps the source's codec, level and levels where no flag says otherwise
    kept = {**source_options(src, out), "chunk_yx": 32, "shard_yx": 64, "shard_z": 3}
    convert(src, tmp_path / "local.ozx", WriteOptions(**kept))
    assert stored(out) == stored(tmp_path / "local.ozx")


def test_cli_workers_local_starts_and_closes_its_own_cluster(source, tmp_path, capsys):
    psutil = pytest.importorskip("psutil")
    src, data, _ = source
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    out = tmp_path / "wl.ome.zarr"
    assert main(["convert", str(src), str(out), "--workers-local", "1", "--levels", "2"]) == 0
    with open_ome_zarr(out) as oz:
        np.testing.assert_array_equal(np.asarray(oz.images()[0].levels[0]), data)

    def started() -> list[str]:
        out = []
        for p in psutil.Process().children(recursive=True):
            try:
                cmd = " ".join(p.cmdline())
            except psutil.Error:  # ended meanwhile
                continue
            # multiprocessing's resource tracker lives as long as this interpreter
            if p.pid not in before and "resource_tracker" not in cmd:
                out.append(cmd)
        return out

    deadline = time.monotonic() + 30
    while started() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not started()  # its worker process ended with the command
    assert main(["convert", str(src), str(tmp_path / "x.ozx"), "--workers-local", "0"]) == 2
    assert "--workers-local must be at least 1" in capsys.readouterr().err
