"""Write OME-Zarr 0.6 or 0.5 (``.ozx`` or directory) or 0.4 (directory) with a pyramid.

:func:`write_ome_zarr` writes an ``ImageSpec``, a ``SceneSpec`` or a ``PlateWriteSpec``
(:func:`write_with` is the same frame with a pluggable data writer): every group and array
document first (so an ``.ozx`` starts with them), then level 0 shard by shard from the
source (each shard encoded and stored once), then each lower level copied from the
source's stored pyramid or computed from the level above as written; all under a temporary
name renamed onto the target when complete. An image placed by more than scale and
translation (``to_world``) is written as 0.6 (its transformation the simplest equivalent,
:func:`~napari_ozx.ngff.model.transforms.simplest`), refused for 0.4 / 0.5;
``version="auto"`` writes 0.5 unless the data needs 0.6. :func:`summarize_write` says what
was stored; :func:`prepare_labels` plans a labels image for ``layers.add_labels``.

How it streams, step by step: ``docs/design/saving.md``.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

# Literal: export_options resolves WriteOptions' type hints in this module's namespace
# until it calls WriteOptions.from_dict (then this import can go)
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from napari_ozx.errors import OzxError
from napari_ozx.ngff.model.axes import spatial_yx
from napari_ozx.ngff.model.metadata import (
    Dataset,
    ImageLabel,
    Multiscale,
    NodeMetadata,
    zarr_format_for,
)
from napari_ozx.ngff.model.versions import version_key
from napari_ozx.ngff.write.hierarchy import create_hierarchy
from napari_ozx.ngff.write.options import WriteOptions
from napari_ozx.ngff.write.plan import (
    DataWriter,
    ExtraMembers,
    LevelPlan,
    WriteJob,
    array_kwargs,
    chunk_and_shard,
    downsample2,
    level_factors,
    level_method,
    plan_levels,
    pyramid_notes,
    pyramid_shapes,
    write_regions,
    write_step,
)
from napari_ozx.ngff.write.specs import (
    ArrayData,
    Compute,
    ImageSpec,
    LabelsSpec,
    PlateWriteSpec,
    Progress,
    SaveError,
    SceneSpec,
    WriteCancelled,
    WriteSummary,
    all_specs,
    check_version_holds,
    needed_by,
    table_sources,
)

if TYPE_CHECKING:
    import dask.array as da
    import zarr
    from zarr.abc.store import Store

logger = logging.getLogger(__name__)

__all__ = [
    "DataWriter",
    "ImageSpec",  # the specs write_ome_zarr takes and what it raises / returns, from .specs
    "LabelLevel",
    "LabelsSpec",
    "LevelPlan",
    "PreparedLabels",
    "WriteCancelled",
    "WriteJob",
    "WriteOptions",  # re-exported from .options, its home
    "WriteSummary",
    "chunk_and_shard",
    "downsample2",
    "plan_levels",
    "prepare_labels",
    "pyramid_notes",
    "pyramid_shapes",
    "summarize_write",
    "write_ome_zarr",
    "write_regions",
    "write_step",
    "write_with",
]


def write_ome_zarr(
    target: str | os.PathLike[str],
    image: ImageSpec | SceneSpec | PlateWriteSpec | None = None,
    labels: Sequence[LabelsSpec] = (),
    options: WriteOptions | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    compute: Compute | None = None,
    extra: ExtraMembers | None = None,
) -> Path:
    """Write *image* (with its labels) or standalone *labels* to *target*, with a pyramid.

    Parameters
    ----------
    target : str or os.PathLike
        The ``.ozx`` file or directory to write; an existing one is replaced atomically.
    image : ImageSpec, SceneSpec or PlateWriteSpec, optional
        What to write: an image (its labels in ``ImageSpec.labels``), a 0.6 scene of images,
        or a plate.
    labels : sequence of LabelsSpec, default ()
        Label images written on their own, when *image* is None.
    options : WriteOptions, optional
        Format, version, chunking, sharding, codec and pyramid (default: ``WriteOptions()``).
    progress : callable, optional
        Called as ``progress(shards_done, shards_total)``.
    cancel : threading.Event, optional
        Set it to stop the write; *target* is then untouched.
    compute : callable, optional
        Evaluates one shard-sized region of a lazy source (default: dask's synchronous
        scheduler in the writer's threads); e.g. ``lambda x: client.compute(x).result()``
        evaluates it on a dask.distributed cluster (:mod:`.cluster` moves the encoding too).
    extra : ExtraMembers, optional
        What the write keeps beside the hierarchy (:class:`.plan.ExtraMembers`:
        bioformats2raw's ``OME`` group and XML), in the same store and atomic swap.

    Returns
    -------
    pathlib.Path
        The target written.

    Raises
    ------
    WriteCancelled
        *cancel* was set; the previous content of *target* is untouched.
    InvalidOptionError
        *options* are not a valid combination (e.g. an ``.ozx`` of OME-Zarr 0.4).
    SaveError
        The file system refused the write (disk full, read-only, permission).
    OzxError
        The data cannot be written as asked (nothing to write, a rotation asked for as
        0.4 / 0.5, a scene before 0.6, a missing folder), naming the reason.
    """
    opts = options or WriteOptions()

    def write_data(jobs: list[WriteJob], store: Store, tmp_dir: Path | None) -> None:
        _write_data(jobs, opts, progress, cancel, compute or _compute)

    return write_with(target, image, labels, opts, write_data, extra)


def write_with(
    target: str | os.PathLike[str],
    image: ImageSpec | SceneSpec | PlateWriteSpec | None,
    labels: Sequence[LabelsSpec],
    options: WriteOptions | None,
    write_data: DataWriter,
    extra: ExtraMembers | None = None,
) -> Path:
    """:func:`write_ome_zarr` with the data written by *write_data*: the checks, the
    metadata (created before any data), the temporary target and the atomic swap or
    clean-up are the same for every way of writing the pixels.

    *write_data* gets the jobs (one per multiscale, its zarr arrays already created),
    the store (an ``OzxWriteStore`` for ``.ozx``) and the partial directory the arrays
    live in (``None`` for ``.ozx``); it returns once every region is stored.
    """
    opts = options or WriteOptions()
    target = Path(target)
    opts.validate(target)
    fmt = opts.resolved_format(target)
    if image is None and not labels:
        raise OzxError("nothing to write")
    scene = isinstance(image, SceneSpec)
    specs = all_specs(image, labels)
    opts = opts.with_resolved_version(needed_by(image, specs))  # as summarize_write
    if scene and version_key(opts.version) < (0, 6):
        raise OzxError(
            f"OME-Zarr {opts.version} has no scenes: layers placed differently (scale, "
            "translate, rotate, shear, affine) are saved together as an OME-Zarr 0.6 scene "
            "(or save them one at a time)"
        )
    check_version_holds(specs, opts.version)
    if image is None and len(labels) > 1:
        raise OzxError("several label layers need an image to belong to (or save them one by one)")
    if isinstance(image, ImageSpec) and labels:
        image = replace(image, labels=[*image.labels, *labels])
    if not target.parent.is_dir():
        # the same for both formats: a missing folder is more often a typo than a wish
        raise OzxError(
            f"cannot save: the folder {str(target.parent)!r} does not exist "
            f"(create it first): {target}"
        )

    if fmt == "ozx":
        from napari_ozx.ozx.write_store import OzxWriteStore

        store: Any = OzxWriteStore(
            target, comment=json.dumps({"ome": {"version": opts.version}}, separators=(",", ":"))
        )
        tmp_dir = None
    else:
        from zarr.storage import LocalStore

        from napari_ozx.ozx import atomic

        atomic.recover_directory(target)
        atomic.remove_stale_partials(target)
        tmp_dir, lock_fd = atomic.create_partial(target, directory=True)  # swept only if we die
        store = LocalStore(tmp_dir)
    try:
        jobs = create_hierarchy(store, image, labels if image is None else (), opts)
        if extra is not None:
            extra.write_documents(store, opts.version)
        _carry_tables(store, image, opts)  # its documents, then its data
        if extra is not None:
            extra.write_files(store)
        write_data(jobs, store, tmp_dir)
    except BaseException as e:
        if tmp_dir is None:
            store.abort()
        else:
            shutil.rmtree(tmp_dir, ignore_errors=True)
            atomic.release(lock_fd)
        if isinstance(e, OSError) and not isinstance(e, OzxError):
            # disk full, read-only, permission: say so about the target, not the hidden
            # temporary name beside it
            reason = e.strerror or str(e)
            raise SaveError(f"cannot save {str(target)!r}: {reason}", errno=e.errno) from e
        raise
    if tmp_dir is None:
        return store.commit()
    try:
        _swap_directory(tmp_dir, target)
    finally:
        atomic.release(lock_fd)
    return target


def summarize_write(
    target: str | os.PathLike[str],
    image: ImageSpec | SceneSpec | PlateWriteSpec | None = None,
    labels: Sequence[LabelsSpec] = (),
    options: WriteOptions | None = None,
) -> WriteSummary:
    """What :func:`write_ome_zarr` / :func:`write_with` store for these arguments (the
    version ``"auto"`` resolves to by the same rule they use); no checks, and no I/O
    but for a source's tables a write has not planned yet (:mod:`napari_ozx.ngff.tables.write`)."""
    specs = all_specs(image, labels)
    version = (options or WriteOptions()).resolved_version(needed_by(image, specs))
    n_labels = sum(isinstance(s, LabelsSpec) for s in specs)
    n_images = len(specs) - n_labels
    channels = None
    if isinstance(image, ImageSpec):
        c = next((i for i, a in enumerate(image.axes) if a.type == "channel"), None)
        channels = int(image.data.shape[c]) if c is not None else 1
    kind = ""
    if isinstance(image, SceneSpec | PlateWriteSpec):
        kind = "scene" if isinstance(image, SceneSpec) else "plate"
    notes = pyramid_notes(image, labels, options or WriteOptions())
    n_tables = 0
    for _, tables in table_sources(image):
        carried, table_notes = tables.planned(zarr_format_for(version))
        n_tables += len(carried)
        notes.extend(table_notes)
    return WriteSummary(
        Path(target), version, n_images, n_labels, channels, kind, tuple(notes), n_tables
    )


def _carry_tables(
    store: Store, image: ImageSpec | SceneSpec | PlateWriteSpec | None, opts: WriteOptions
) -> None:
    """The source's ``tables/`` groups into *store* (:mod:`napari_ozx.ngff.tables.write`): every
    document now, with the hierarchy's (an ``.ozx`` gets every ``zarr.json`` before any
    data, RFC-9), then their chunks and files, before the pixels."""
    sources = table_sources(image)
    if not sources:
        return
    from napari_ozx.ngff.tables.write import TableCopy

    zf = zarr_format_for(opts.version)
    copies = [TableCopy(tables, prefix, zf) for prefix, tables in sources]
    for c in copies:
        c.write_documents(store)
    for c in copies:
        c.write_data(store)


def _swap_directory(tmp_dir: Path, target: Path) -> None:
    from napari_ozx.ngff.read.live import adopt_old_tree, retain_for_readers
    from napari_ozx.ozx import atomic

    # open layers reading the tree being replaced keep a stable copy (see ngff/read/live.py)
    cloned = True
    if target.is_dir():
        try:
            retain_for_readers(target)
        except OSError:  # no hard links here: keep the old tree itself for them
            cloned = False

    def dispose(old: Path) -> None:
        # after the exchange *old* (our partial's name) holds the previous tree, unlocked:
        # a concurrent save's stale-partial sweep may delete it first, which is fine
        if not cloned and old.is_dir():
            # under a name no stale-partial cleanup matches, while readers use it
            kept = old.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.retained")
            try:
                os.rename(old, kept)
            except FileNotFoundError:
                return
            if adopt_old_tree(kept, target):
                return
            old = kept
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)

    atomic.swap_directory(tmp_dir, target, dispose=dispose)


@dataclass(frozen=True)
class LabelLevel:
    """One level of a label image laid out like its image's level (channel axis dropped):
    shape, storage chunks / shards and the level's coordinate transformations."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    shards: tuple[int, ...] | None
    scale: tuple[float, ...]
    translation: tuple[float, ...]


@dataclass
class PreparedLabels:
    """A label image ready to go under an existing image's ``labels/`` group (see
    :func:`prepare_labels`): its metadata documents, then its data."""

    documents: dict[str, bytes]  #: key relative to the label image -> document bytes
    spec: LabelsSpec
    levels: list[LabelLevel]
    method: str
    options: WriteOptions
    array_metadata: list[Any]

    def write_data(
        self,
        store: Store,
        prefix: str,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        compute: Compute | None = None,
    ) -> None:
        """Write every level's chunks to *store* under *prefix* (the label image's path
        in that store; its documents must be there or follow). Level *n* is computed from
        level *n-1* as written, shard by shard, like :func:`write_ome_zarr`."""
        import zarr
        from zarr import AsyncArray
        from zarr.storage import StorePath

        arrays = [
            zarr.Array(
                AsyncArray(
                    metadata=m, store_path=StorePath(store, f"{prefix}/{i}" if prefix else str(i))
                )
            )
            for i, m in enumerate(self.array_metadata)
        ]
        shapes = [lvl.shape for lvl in self.levels]
        job = WriteJob(
            prefix,
            self.spec.data,
            self.spec.axes,
            shapes,
            self.method,
            arrays,
            level_factors(shapes),
        )
        _write_data([job], self.options, progress, cancel, compute or _compute)


def prepare_labels(
    spec: LabelsSpec,
    levels: Sequence[LabelLevel],
    options: WriteOptions,
    separator: Literal["/", "."] = "/",
) -> PreparedLabels:
    """The documents of *spec* as a label image of an existing image: one level per
    *levels* (the image's pyramid, so the labels overlay every level), ``image-label``
    with its colours, properties and ``source.image: "../../"``, the version and Zarr
    format of *options*. Built from the models (``to_attributes``) and zarr's own
    metadata serialiser, never hand-written JSON. ``separator``: Zarr v2 chunk keys."""
    import zarr
    from zarr.storage import MemoryStore

    opts = options
    zf = zarr_format_for(opts.version)
    if not spec.name or "/" in spec.name or spec.name.startswith("."):
        raise OzxError(f"invalid label name {spec.name!r}")
    if len(levels) < 1 or any(len(lvl.shape) != len(spec.axes) for lvl in levels):
        raise OzxError(f"{spec.name}: every level needs one size per axis")
    method = level_method(opts, labels=True)
    datasets = tuple(
        Dataset(str(i), tuple(lvl.scale), tuple(lvl.translation)) for i, lvl in enumerate(levels)
    )
    ms = Multiscale(opts.version, tuple(spec.axes), datasets, name=spec.name, type=method)
    il = ImageLabel(tuple(spec.colors), tuple(dict(p) for p in spec.properties), "../../")
    attrs = NodeMetadata(multiscales=(ms,), image_label=il).to_attributes(opts.version)
    docs: dict[str, Any] = {}
    grp = zarr.create_group(store=MemoryStore(docs), zarr_format=zf, attributes=attrs)
    dtype = np.dtype(spec.data.dtype)
    metas = []
    for i, lvl in enumerate(levels):
        kw = array_kwargs(lvl.chunks, lvl.shards, dtype, spec.axes, opts, separator)
        metas.append(grp.create_array(str(i), shape=lvl.shape, dtype=dtype, **kw).metadata)
    return PreparedLabels(
        {k: v.to_bytes() for k, v in docs.items()}, spec, list(levels), method, opts, metas
    )


def _write_data(
    jobs: list[WriteJob],
    opts: WriteOptions,
    progress: Progress | None,
    cancel: threading.Event | None,
    compute: Compute,
) -> None:
    plan = []  # (array, region, source-callable) in dependency order, level by level
    for job in jobs:
        ds_axes = spatial_yx(job.axes)
        for lvl, arr in enumerate(job.arrays):
            step = arr.shards or write_step(arr.shape, arr.chunks, arr.dtype.itemsize)
            plan.append([(job, lvl, arr, r, ds_axes) for r in write_regions(arr.shape, step)])
    total = sum(len(p) for p in plan)
    done = 0
    lock = threading.Lock()
    failed = threading.Event()  # set on the first error so queued shards stop early

    def check() -> None:
        """Between planes of a shard: a cancel takes effect within one plane's work, not
        after the shards already running."""
        if cancel is not None and cancel.is_set():
            raise WriteCancelled("save cancelled")

    def one(
        job: WriteJob,
        lvl: int,
        arr: zarr.Array,
        region: tuple[slice, ...],
        ds_axes: tuple[int, ...],
    ) -> None:
        nonlocal done
        check()
        if failed.is_set():
            return
        src = job.source(lvl)
        if src is not None:
            block = _source_region(src, region, ds_axes, arr.dtype, compute, check)
        elif job.factors is not None and any(f > 2 for f in job.factors[lvl]):
            block = _strided_region(job.arrays[lvl - 1], region, job.factors[lvl], arr.dtype)
        else:
            axes = (
                ds_axes
                if job.factors is None
                else tuple(i for i, f in enumerate(job.factors[lvl]) if f == 2)
            )
            block = _downsampled_region(
                job.arrays[lvl - 1], region, axes, job.method, arr.dtype, check
            )
        check()
        if block.dtype != arr.dtype:
            block = block.astype(arr.dtype)
        arr[region] = block
        with lock:
            done += 1
            d = done
        if progress is not None:
            progress(d, total)

    workers = opts.workers or os.cpu_count() or 2
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ozx-write") as pool:
        # one level at a time: level n reads what level n-1 wrote
        for tasks in plan:
            futures = [pool.submit(one, *t) for t in tasks]
            finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
            errors = [e for f in finished if (e := f.exception()) is not None]
            if errors:
                failed.set()
                for f in futures:
                    f.cancel()
                wait(futures)
                raise errors[0]


def _source_region(
    data: ArrayData,
    region: tuple[slice, ...],
    ds_axes: tuple[int, ...],
    dtype: np.dtype,
    compute: Compute,
    check: Callable[[], None],
) -> np.ndarray:
    """One shard of the source, computed plane by plane (y/x slabs) for a lazy source so a
    cancel is seen between planes; numpy sources are sliced at once (no work to split)."""
    from dask import is_dask_collection

    sliced = data[region]
    if not is_dask_collection(sliced):
        return np.asarray(sliced)
    region_data = cast("da.Array", sliced)
    outer = [i for i in range(len(region)) if i not in ds_axes]
    if not outer or any(max(region_data.chunks[i]) > 1 for i in outer):
        # planes share source chunks: computing plane by plane would recompute them
        return np.asarray(compute(region_data))
    out = np.empty([s.stop - s.start for s in region], dtype=region_data.dtype)
    for idx in itertools.product(*(range(region[i].stop - region[i].start) for i in outer)):
        check()
        sel: list[Any] = [slice(None)] * len(region)
        for i, k in zip(outer, idx, strict=True):
            sel[i] = slice(k, k + 1)
        out[tuple(sel)] = np.asarray(compute(region_data[tuple(sel)]))
    return out


def _downsampled_region(
    src: zarr.Array,
    region: tuple[slice, ...],
    ds_axes: tuple[int, ...],
    method: str,
    dtype: np.dtype,
    check: Callable[[], None] | None = None,
) -> np.ndarray:
    """One output shard of level n from level n-1, one plane (y/x slab) at a time, so
    memory stays at one output shard plus one input plane instead of 4 shards."""
    out = np.empty([s.stop - s.start for s in region], dtype=dtype)
    up = [
        slice(s.start * 2, min(s.stop * 2, src.shape[i])) if i in ds_axes else s
        for i, s in enumerate(region)
    ]
    outer = [i for i in range(len(region)) if i not in ds_axes]
    for idx in itertools.product(*(range(region[i].stop - region[i].start) for i in outer)):
        if check is not None:
            check()
        sel = list(up)
        dst: list[Any] = [slice(None)] * len(region)
        for i, k in zip(outer, idx, strict=True):
            sel[i] = slice(region[i].start + k, region[i].start + k + 1)
            dst[i] = slice(k, k + 1)
        out[tuple(dst)] = downsample2(np.asarray(src[tuple(sel)]), ds_axes, method)
    return out


def _strided_region(
    src: zarr.Array, region: tuple[slice, ...], factors: Sequence[int], dtype: np.dtype
) -> np.ndarray:
    """One region of a level whose factors from *src* are not all 1 or 2 (another tool's
    pyramid): pixel ``i`` is pixel ``i * f`` above it (nearest; clipped at the edge, so a
    level rounded either way is filled)."""
    lo = [min(s.start * f, n - 1) for s, f, n in zip(region, factors, src.shape, strict=True)]
    hi = [
        min((s.stop - 1) * f, n - 1) + 1 if s.stop > s.start else lo_
        for s, f, n, lo_ in zip(region, factors, src.shape, lo, strict=True)
    ]
    block = np.asarray(src[tuple(slice(a, b) for a, b in zip(lo, hi, strict=True))])
    idx = [
        np.minimum(np.arange(s.start, s.stop) * f, n - 1) - a
        for s, f, n, a in zip(region, factors, src.shape, lo, strict=True)
    ]
    return np.asarray(block[np.ix_(*idx)], dtype=dtype)


def _compute(x: object) -> object:
    """One region of a lazy source, on this thread, with a private (empty) callback set.

    ``callbacks=()`` matters: with the default (``None``) dask's scheduler *swaps out the
    process-global* ``Callback.active`` for the duration of the compute, so a background
    export would switch off napari's dask cache while the user moves a slider (and
    napari's callbacks would see half of the export's tasks). An empty tuple leaves the
    global set alone and keeps the export's tasks out of napari's cache.
    """
    from dask import is_dask_collection

    if is_dask_collection(x):
        return cast("da.Array", x).compute(scheduler="synchronous", callbacks=())
    return x
