"""Write OME-Zarr on a dask.distributed cluster: the workers read, downsample and encode.

:func:`write_ome_zarr_on_cluster` is :func:`.writer.write_ome_zarr` with the pixels moved
off the client, which keeps the metadata, the tables, the temporary target and the atomic
swap (:func:`.writer.write_with`). Every shard-sized region is one task: level 0 and stored
levels read from the source on the worker, other levels from the halved outputs of the
tasks above (:func:`.plan.downsample2`: byte-identical to a local write), encoded with
zarr's pipeline. An ``.ozx``'s shards come back to the client, which appends them; a
directory target's are written by the workers (a file system every worker sees at the same
path). Cancel and failures end in :class:`WriteCancelled` or a :class:`ClusterWriteError`
naming the region, source and target; :func:`connect` / :func:`local_cluster` make the
client. ``distributed`` (``napari-ozx[cluster]``) is imported only here, only when used.
How the task graph is built: ``docs/design/cluster-writes.md``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import operator
import os
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.ngff.model.axes import spatial_yx
from napari_ozx.ngff.read.lazy import LevelArray
from napari_ozx.ngff.write.options import WriteOptions
from napari_ozx.ngff.write.plan import WriteJob, downsample2, write_regions, write_step
from napari_ozx.ngff.write.specs import ImageSpec, LabelsSpec, Progress, WriteCancelled
from napari_ozx.ngff.write.writer import write_with

if TYPE_CHECKING:
    from distributed import Client, Future


logger = logging.getLogger(__name__)

__all__ = [
    "ClusterWriteError",
    "SchedulerUnreachableError",
    "connect",
    "local_cluster",
    "write_ome_zarr_on_cluster",
]

#: a task that fails (or whose worker dies) is run again this many times
RETRIES = 2
#: level-0 regions in flight per worker thread: enough to keep every thread busy while the
#: client stores finished shards, few enough that the client holds only a few encoded
#: shards. Higher levels are not counted: a level-n task waits for its inputs, and had it
#: taken a slot, the window held waiting tasks while threads idled (bench_cluster.py,
#: directory target, throughput cluster/local: 0.62x counting them, 0.82x not, on 2 busy
#: cores); the depth-first order bounds them instead (each is 1/4 of the level below).
WINDOW_PER_THREAD = 2
#: how often the client looks at *cancel* while it waits for results (seconds)
_POLL = 0.2
#: how long the client waits for cancelled tasks still running on workers to end
_DRAIN_TIMEOUT = 300.0
#: a write stops with :class:`ClusterWriteError` once the scheduler has had no worker for
#: this long (seconds): every worker died or left and none came back, and it would
#: otherwise wait for them for ever. Long enough for an adaptive cluster to start one.
NO_WORKERS_TIMEOUT = 120.0
#: how often the client asks the scheduler how many workers it has while it waits
_WORKER_CHECK = 5.0


class ClusterWriteError(OzxError, RuntimeError):
    """A task of a cluster write failed on a worker (or the cluster went away)."""


class SchedulerUnreachableError(OzxError, ConnectionError):
    """No dask scheduler answered at the address within the timeout."""


def _need_distributed() -> None:
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise OzxError(
            "writing on a dask cluster needs dask.distributed (pip install 'napari-ozx[cluster]')"
        ) from None


def connect(address: str, timeout: float = 30.0) -> Client:
    """A ``distributed.Client`` on the scheduler at *address* (``tcp://host:8786``).

    Raises :class:`SchedulerUnreachableError` shortly after *timeout* seconds when nothing
    answers there (distributed's own connect retries stop at the timeout)."""
    _need_distributed()
    from distributed import Client

    try:
        return Client(address, set_as_default=False, timeout=timeout)
    except (OSError, TimeoutError) as e:
        raise SchedulerUnreachableError(
            f"cannot reach the dask scheduler at {address} within {timeout:g} s: {e}"
        ) from None


def local_cluster(n_workers: int, threads_per_worker: int = 1) -> Any:
    """A ``LocalCluster`` of *n_workers* processes on this machine (close it after use)."""
    _need_distributed()
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=n_workers,
        threads_per_worker=threads_per_worker,
        processes=True,
        dashboard_address=":0",
    )


# ------------------------------------------------------------------ worker side


@dataclass(frozen=True)
class _Lazy:
    """A source region's dask graph, wrapped so distributed ships it to the task as an
    object (evaluated there) instead of computing it as a collection of its own.

    It travels as bytes and is unpickled only when the task runs (:attr:`array`).
    Unpickling reopens the source (a remote ``.ozx`` connects): done while a worker reads
    its messages from the scheduler, a source that cannot be reopened (a server gone)
    broke the worker's connection, and both workers of a cluster shut down when the
    scheduler moved such a task between them. Failing in the task, it is the task's
    error, reported with the region and the source."""

    recipe: bytes

    @classmethod
    def of(cls, array: Any) -> _Lazy:
        import cloudpickle  # type: ignore[import-untyped]  # distributed's own dependency

        return cls(cloudpickle.dumps(array))

    @property
    def array(self) -> Any:
        import pickle

        return pickle.loads(self.recipe)


@dataclass(frozen=True)
class _Task:
    """What a worker needs for one region of one target array (small: no pixels)."""

    metadata: dict[str, Any]  # the target array's zarr metadata (``to_dict()``)
    path: str  # the array's path in the hierarchy, e.g. "0", "labels/cells/1"
    dtype: str  # numpy's name of the target data type
    region: tuple[slice, ...]
    level: int
    #: the region is read from a source (level 0, or a level copied as stored)
    from_source: bool
    ds_axes: tuple[int, ...]
    method: str
    #: level > 0: (region in level n-1 coordinates, halved?) of each dependency, in order
    pieces: tuple[tuple[tuple[slice, ...], bool], ...]
    #: what the next level gets: "down" (this region halved), "raw" (the region) or ""
    emit: str
    root: str | None  # a directory target's partial directory; None: return the bytes
    where: str  # "<source> -> <target>", for messages


def _halve_planes(
    block: np.ndarray, ds_axes: tuple[int, ...], method: str, dtype: np.dtype
) -> np.ndarray:
    """:func:`downsample2` of *block*, one plane (y/x slab) at a time: the same calls on
    the same slabs as the local writer's ``_downsampled_region``."""
    outer = [i for i in range(block.ndim) if i not in ds_axes]
    shape = [math.ceil(s / 2) if i in ds_axes else s for i, s in enumerate(block.shape)]
    out = np.empty(shape, dtype=dtype)
    for idx in itertools.product(*(range(block.shape[i]) for i in outer)):
        sel: list[Any] = [slice(None)] * block.ndim
        for i, k in zip(outer, idx, strict=True):
            sel[i] = slice(k, k + 1)
        out[tuple(sel)] = downsample2(block[tuple(sel)], ds_axes, method)
    return out


def _halved(region: tuple[slice, ...], ds_axes: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(
        slice(s.start // 2, -(-s.stop // 2)) if i in ds_axes else s for i, s in enumerate(region)
    )


def _up(
    region: tuple[slice, ...], ds_axes: tuple[int, ...], below: Sequence[int]
) -> tuple[slice, ...]:
    """The level n-1 window that level-n *region* is computed from (*below*: its shape)."""
    return tuple(
        slice(s.start * 2, min(s.stop * 2, below[i])) if i in ds_axes else s
        for i, s in enumerate(region)
    )


def _paste(
    out: np.ndarray, at: tuple[slice, ...], piece: np.ndarray, where: tuple[slice, ...]
) -> None:
    """Copy the part of *piece* (covering *where*) that falls inside *at* into *out*."""
    dst, src = [], []
    for a, w in zip(at, where, strict=True):
        lo, hi = max(a.start, w.start), min(a.stop, w.stop)
        if lo >= hi:
            return
        dst.append(slice(lo - a.start, hi - a.start))
        src.append(slice(lo - w.start, hi - w.start))
    out[tuple(dst)] = piece[tuple(src)]


def _level_block(task: _Task, source: Any, pieces: Sequence[np.ndarray]) -> np.ndarray:
    dtype = np.dtype(task.dtype)
    shape = [s.stop - s.start for s in task.region]
    if task.from_source:
        if isinstance(source, _Lazy):
            block = np.asarray(source.array.compute(scheduler="synchronous", callbacks=()))
        else:
            block = np.asarray(source)
    elif task.pieces and all(halved for _, halved in task.pieces):
        block = np.empty(shape, dtype=dtype)
        for (reg, _), piece in zip(task.pieces, pieces, strict=True):
            _paste(block, task.region, piece, _halved(reg, task.ds_axes))
    else:  # odd region steps below: halve the window this region needs, as locally
        stops = [max(reg[i].stop for reg, _ in task.pieces) for i in range(len(shape))]
        window = _up(task.region, task.ds_axes, stops)
        raw = np.empty([s.stop - s.start for s in window], dtype=dtype)
        for (reg, _), piece in zip(task.pieces, pieces, strict=True):
            _paste(raw, window, piece, reg)
        block = _halve_planes(raw, task.ds_axes, task.method, dtype)
    if block.dtype != dtype:
        block = block.astype(dtype)
    if list(block.shape) != shape:
        raise ValueError(f"the source gave a {block.shape} block for a {tuple(shape)} region")
    return block


def _encode(task: _Task, block: np.ndarray) -> dict[str, bytes]:
    """The stored keys and bytes of *block* at the task's region: zarr's own encoding
    (codecs, sharding, checksums, empty chunks skipped) into an in-memory store."""
    import zarr
    from zarr import AsyncArray
    from zarr.storage import MemoryStore, StorePath

    stored: dict[str, Any] = {}
    aa: AsyncArray[Any] = AsyncArray(
        metadata=cast(Any, task.metadata),  # zarr parses the dict (v2 or v3)
        store_path=StorePath(MemoryStore(stored), task.path),
    )
    zarr.Array(aa)[task.region] = block
    return {k: v.to_bytes() for k, v in stored.items()}


def _store_files(root: str, encoded: dict[str, bytes]) -> None:
    """Write the encoded keys into a directory target's partial directory."""
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(
            f"the target's partial directory {root} is not visible on this worker: a "
            "directory target must be on a file system every worker sees at the same path"
        )
    for key, data in encoded.items():
        path = base.joinpath(*key.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:  # a retried task rewrites the whole key
            f.write(data)


def _run_region(task: _Task, source: Any, *pieces: np.ndarray) -> tuple[Any, Any]:
    """One task: this region's pixels, encoded (returned or written) and, for the next
    level, halved. Any failure becomes one :class:`ClusterWriteError`."""
    try:
        block = _level_block(task, source, pieces)
        encoded = _encode(task, block)
        if task.root is not None:
            _store_files(task.root, encoded)
            result: Any = len(encoded)
        else:
            result = encoded
        down: Any = None
        if task.emit == "down":
            down = _halve_planes(block, task.ds_axes, task.method, block.dtype)
        elif task.emit == "raw":
            down = block
        return result, down
    except ClusterWriteError:
        raise
    except Exception as e:
        reason = str(e) or type(e).__name__
        if not isinstance(e, OzxError):
            reason = f"{type(e).__name__}: {reason}"
        region = ", ".join(f"{s.start}:{s.stop}" for s in task.region)
        raise ClusterWriteError(
            f"{reason} (on a dask worker: array {task.path!r} region [{region}], {task.where})"
        ) from None


#: a worker's task states in which it will not run (again) unless the scheduler asks
_SETTLED = frozenset({"memory", "error", "released", "forgotten"})


async def _quiet(prefix: str, timeout: float, dask_worker: Any = None) -> int:
    """On a worker: wait until none of its tasks of this write runs or may still start
    (a cancelled task keeps its thread until its function returns, and one still queued
    there when the write stopped can start before the worker hears it was released:
    either could write a shard). Returns how many there still were at the timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        live = [
            key
            for key, ts in dask_worker.state.tasks.items()
            if str(key).startswith(prefix) and ts.state not in _SETTLED
        ]
        if not live or loop.time() > deadline:
            return len(live)
        await asyncio.sleep(0.05)


# ------------------------------------------------------------------ client side


@dataclass
class _Level:
    arr: Any  # the target zarr array (metadata only on the client)
    regions: list[tuple[slice, ...]]
    step: tuple[int, ...]
    deps: list[list[int]]  # per region: indices of the level-below regions it needs
    emit: str


def _grid_index(region: tuple[slice, ...], step: Sequence[int], shape: Sequence[int]) -> list[int]:
    """Indices (in :func:`write_regions` order) of the regions of a grid that *region* touches."""
    counts = [max(math.ceil(s / st), 1) for s, st in zip(shape, step, strict=True)]
    ranges = [
        range(r.start // st, (max(r.stop, r.start + 1) - 1) // st + 1)
        for r, st in zip(region, step, strict=True)
    ]
    return [int(np.ravel_multi_index(c, counts)) for c in itertools.product(*ranges)]


def _plan(job: WriteJob) -> list[_Level]:
    ds_axes = spatial_yx(job.axes)
    halving = tuple(2 if i in ds_axes else 1 for i in range(len(job.axes)))
    if job.factors is not None and any(
        job.source(lvl) is None and tuple(f) != halving for lvl, f in enumerate(job.factors)
    ):
        raise OzxError(
            f"{job.group_path or 'image'}: levels laid out like another pyramid than 2x in "
            "y and x are not built on a cluster yet (write it locally)"
        )
    levels: list[_Level] = []
    for lvl, arr in enumerate(job.arrays):
        step = tuple(arr.shards or write_step(arr.shape, arr.chunks, arr.dtype.itemsize))
        regions = write_regions(arr.shape, step)
        deps: list[list[int]] = [[] for _ in regions]  # level 0, a copied level: none
        if lvl and job.source(lvl) is None:
            below = levels[-1]
            deps = [
                _grid_index(_up(r, ds_axes, below.arr.shape), below.step, below.arr.shape)
                for r in regions
            ]
        levels.append(_Level(arr, regions, step, deps, ""))
    for lvl in range(len(levels) - 1):
        lv = levels[lvl]
        if job.source(lvl + 1) is not None:  # the next level is copied: nothing to hand on
            continue
        even = all(lv.step[i] % 2 == 0 or lv.step[i] >= lv.arr.shape[i] for i in ds_axes)
        lv.emit = "down" if even else "raw"
    return levels


def _post_order(levels: list[_Level]) -> Iterator[tuple[int, int]]:
    """(level, region) so that every region comes after the regions it depends on, and
    each top-level region's whole subtree comes before the next one: the halved outputs
    waiting for their siblings stay a few regions per level."""
    seen: set[tuple[int, int]] = set()

    def visit(lvl: int, i: int) -> Iterator[tuple[int, int]]:
        if (lvl, i) in seen:
            return
        if lvl:
            for d in levels[lvl].deps[i]:
                yield from visit(lvl - 1, d)
        seen.add((lvl, i))
        yield lvl, i

    # from the top down: a level copied as stored depends on nothing, so the levels
    # below it are reached on their own
    for lvl in reversed(range(len(levels))):
        for i in range(len(levels[lvl].regions)):
            yield from visit(lvl, i)


def _source_arg(data: Any, region: tuple[slice, ...]) -> Any:
    """The level-0 input of one task: a lazy source's region as a dask expression (a few
    KiB whatever the source's size: slicing and optimising happen on the worker); an
    in-memory source's pixels (they have nowhere else to come from)."""
    from dask import is_dask_collection

    if isinstance(data, LevelArray):  # an opened level under dask's query planning
        data = data.to_dask()
    if is_dask_collection(data):
        return _Lazy.of(data[region])
    return np.asarray(data[region])


def write_ome_zarr_on_cluster(
    target: str | os.PathLike[str],
    image: ImageSpec | None = None,
    labels: Sequence[LabelsSpec] = (),
    options: WriteOptions | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    *,
    client: Client,
    source_name: str | None = None,
) -> Path:
    """:func:`.writer.write_ome_zarr` with reading, downsampling and encoding on the
    workers of *client* (a ``distributed.Client``); see the module docstring.

    *source_name* names the source in error messages. The output is the same as the
    local writer's, key for key and byte for byte."""
    _need_distributed()
    opts = options or WriteOptions()
    where = f"{source_name or 'the source'} -> {target}"

    def write_data(jobs: list[WriteJob], store: Any, tmp_dir: Path | None) -> None:
        _Run(client, jobs, store, tmp_dir, progress, cancel, where).run()

    return write_with(target, image, labels, opts, write_data)


class _Run:
    """One cluster write: submits the regions' tasks through a window, stores what comes
    back (``.ozx``), reports progress, cancels and cleans up."""

    def __init__(
        self,
        client: Client,
        jobs: list[WriteJob],
        store: Any,
        tmp_dir: Path | None,
        progress: Progress | None,
        cancel: threading.Event | None,
        where: str,
    ) -> None:
        self.client = client
        self.jobs = jobs
        self.store = store
        self.root = None if tmp_dir is None else str(Path(tmp_dir).resolve())
        self.progress = progress
        self.cancel = cancel
        self.where = where
        self.prefix = f"ozx-{uuid.uuid4().hex[:12]}-"
        self.plans = [_plan(job) for job in jobs]
        self.total = sum(len(lv.regions) for plan in self.plans for lv in plan)
        self.done = 0
        self.reading = 0  # source-read regions submitted and not yet stored
        # enc future -> its region's own future (kept until the bytes are stored) and
        # whether it reads the source (counted in the window)
        self.pending: dict[Future, tuple[Future, bool]] = {}
        self.down: dict[tuple[int, int, int], Future] = {}  # (job, level, region)
        self.waiting: dict[tuple[int, int, int], int] = {}  # dependents not yet submitted
        self.checked = time.monotonic()  # when the workers were last counted
        self.workerless_since: float | None = None

    def run(self) -> None:
        import distributed

        nthreads = sum(self.client.nthreads().values()) or 1
        window = max(2, WINDOW_PER_THREAD * nthreads)
        order = ((j, lvl, i) for j, plan in enumerate(self.plans) for lvl, i in _post_order(plan))
        try:
            for j, plan in enumerate(self.plans):
                for lvl, lv in enumerate(plan[1:], 1):
                    for deps in lv.deps:
                        for d in deps:
                            key = (j, lvl - 1, d)
                            self.waiting[key] = self.waiting.get(key, 0) + 1
            exhausted = False
            while True:
                self._check_cancel()
                while not exhausted and self.reading < window:
                    nxt = next(order, None)
                    if nxt is None:
                        exhausted = True
                    else:
                        self._submit(*nxt)
                if not self.pending:
                    break
                try:
                    with self.client.as_current():  # wait() asks for the current client
                        finished = distributed.wait(
                            list(self.pending), timeout=_POLL, return_when="FIRST_COMPLETED"
                        ).done
                except TimeoutError:
                    self._check_workers()
                    continue
                except Exception as e:  # e.g. futures cancelled: their inputs were lost
                    raise ClusterWriteError(
                        f"{type(e).__name__}: {e} (cluster write {self.where})"
                    ) from e
                for fut in finished:
                    self._finish(fut)
        except BaseException:
            self._stop()
            raise

    def _check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise WriteCancelled("save cancelled")

    def _check_workers(self) -> None:
        """Raise once the scheduler has had no worker for :data:`NO_WORKERS_TIMEOUT`."""
        now = time.monotonic()
        if now - self.checked < _WORKER_CHECK:
            return
        self.checked = now
        try:
            workers = len(self.client.nthreads())
        except Exception as e:  # the scheduler itself is away: distributed's wait says so
            logger.debug("cluster write: cannot count the workers: %s", e)
            return
        if workers:
            self.workerless_since = None
        elif self.workerless_since is None:
            self.workerless_since = now
        elif now - self.workerless_since >= NO_WORKERS_TIMEOUT:
            raise ClusterWriteError(
                f"the dask cluster has had no workers for {NO_WORKERS_TIMEOUT:g} s (they "
                f"died or left and none came back) (cluster write {self.where})"
            )

    def _submit(self, j: int, lvl: int, i: int) -> None:
        job, plan = self.jobs[j], self.plans[j]
        lv = plan[lvl]
        region = lv.regions[i]
        ds_axes = spatial_yx(job.axes)
        deps = lv.deps[i] if lvl else []
        data = job.source(lvl)
        task = _Task(
            metadata=lv.arr.metadata.to_dict(),
            path=lv.arr.path,
            dtype=np.dtype(lv.arr.dtype).str,
            region=region,
            level=lvl,
            from_source=data is not None,
            ds_axes=ds_axes,
            method=job.method,
            pieces=tuple((plan[lvl - 1].regions[d], plan[lvl - 1].emit == "down") for d in deps),
            emit=lv.emit,
            root=self.root,
            where=self.where,
        )
        source = _source_arg(data, region) if data is not None else None
        pieces = [self.down[(j, lvl - 1, d)] for d in deps]
        name = f"{self.prefix}{j}-{lvl}-{i}"
        submit = self.client.submit
        main = submit(_run_region, task, source, *pieces, key=name, retries=RETRIES, pure=False)
        reads = data is not None
        self.reading += reads
        for d in deps:  # the dependents hold the scheduler's reference from now on
            key = (j, lvl - 1, d)
            self.waiting[key] -= 1
            if not self.waiting[key]:
                del self.down[key]
        if not lv.emit:  # nothing else in the result: the client takes it whole
            self.pending[main] = (main, reads)
            return
        # the bytes (or count) for the client and the halved block for the next level
        # are separate keys, so neither travels where the other is needed
        enc = submit(operator.getitem, main, 0, key=name + "-out", retries=RETRIES, pure=False)
        self.pending[enc] = (main, reads)
        self.down[(j, lvl, i)] = submit(
            operator.getitem, main, 1, key=name + "-down", retries=RETRIES, pure=False
        )

    def _finish(self, fut: Future) -> None:
        try:
            result = fut.result()
            if isinstance(result, tuple):  # a top-level region's (encoded, None)
                result = result[0]
        except ClusterWriteError:
            raise
        except OzxError as e:
            raise ClusterWriteError(f"{e} ({self.where})") from e
        except Exception as e:
            reason = str(e) or type(e).__name__
            if type(e).__name__ == "KilledWorker":
                reason = f"dask workers died running it, again and again ({reason})"
            else:
                reason = f"{type(e).__name__}: {reason}"
            raise ClusterWriteError(f"{reason} (cluster write {self.where})") from e
        _, reads = self.pending.pop(fut)
        self.reading -= reads
        if self.root is None:
            writer = self.store.writer
            for key, data in result.items():
                writer.add(key, data)
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total)

    def _stop(self) -> None:
        """Stop everything still outstanding; with a directory target, wait until no task
        of this write runs or is queued on a worker any more (it could still write a
        shard).

        The futures are released, not ``client.cancel``-ed: cancelling walks a key's
        dependents and asserts that someone wants each of them (distributed's
        ``Scheduler.stimulus_cancel``), which the pyramid's in-between tasks, held by
        their dependents only, are not. Released, every task of this write is wanted by
        no one, so the scheduler forgets it and its worker cancels it if it runs."""
        every = [*self.pending, *(m for m, _ in self.pending.values()), *self.down.values()]
        futures = list({f.key: f for f in every}.values())
        self.pending.clear()
        self.down.clear()
        try:
            for f in futures:
                f.release()
            del every, futures
            if self.root is not None:
                left = self.client.run(_quiet, self.prefix, _DRAIN_TIMEOUT)
                if any(left.values()):
                    logger.warning("cluster write: tasks of it still run on %s", left)
        except Exception as e:  # the cluster is gone: nothing of ours runs there either
            logger.debug("cluster write: cancelling on the cluster failed: %s", e)
