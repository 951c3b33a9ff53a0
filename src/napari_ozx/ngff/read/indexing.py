"""Index normalising, once, for every array-like napari-ozx hands out or reads through:
the plate picture's levels (:mod:`.plate`), editable labels
(:mod:`napari_ozx.layers.editable`) and the direct chunk reader (:mod:`.fastread`).

numpy's basic indexing reduced to what a reader needs: a unit-step box ``(start, stop)``
per axis, and the index that turns the box read into the result (the steps, and 0 for
an axis an integer drops). Errors are numpy's: too many indices and out-of-range
integers raise ``IndexError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, SupportsInt

import numpy as np

__all__ = ["basic_box", "expand", "is_fancy", "orthogonal", "plain_box"]


def expand(key: object, ndim: int) -> tuple[Any, ...]:
    """*key* as a tuple of one index per axis (``Ellipsis`` and missing trailing axes
    become whole axes)."""
    if not isinstance(key, tuple):
        key = (key,)
    at = [i for i, k in enumerate(key) if k is Ellipsis]  # (`in` would compare arrays)
    if len(at) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if at:
        i = at[0]
        key = key[:i] + (slice(None),) * (ndim - len(key) + 1) + key[i + 1 :]
    if len(key) > ndim:
        raise IndexError(f"too many indices for a {ndim}-D array")
    return tuple(key) + (slice(None),) * (ndim - len(key))


def is_fancy(key: tuple[object, ...]) -> bool:
    """Lists or arrays among the indices (not basic indexing)."""
    return any(isinstance(k, np.ndarray | list) for k in key)


def orthogonal(a: np.ndarray, key: object) -> np.ndarray:
    """``a[key]`` as a dask array indexes: each list or 1-D array picks along its own
    axis (orthogonal), where numpy would broadcast several of them (and an integer)
    together. Keys with ``None`` or multi-dimensional index arrays are numpy's."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is None for k in key):
        return a[key]
    key = expand(key, a.ndim)
    picks = [np.asarray(k) if isinstance(k, list | np.ndarray) else None for k in key]
    n_picks = sum(p is not None for p in picks)
    n_ints = sum(isinstance(k, int | np.integer) for k in key)
    if not n_picks or n_picks + n_ints < 2 or any(p is not None and p.ndim != 1 for p in picks):
        return a[key]  # numpy and dask agree (or numpy's rules are the only ones)
    out = a
    for axis in range(len(key) - 1, -1, -1):  # last first: earlier axes keep their number
        out = out[(slice(None),) * axis + (key[axis],)]
    return out


def basic_box(
    key: tuple[slice | SupportsInt, ...], shape: Sequence[int]
) -> tuple[list[tuple[int, int]], tuple[Any, ...]]:
    """The unit-step box an expanded basic *key* touches, and the index that turns the
    box into the result. Negative steps are refused (``IndexError``)."""
    box: list[tuple[int, int]] = []
    post: list[Any] = []
    for k, n in zip(key, shape, strict=True):
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            if step < 0:
                raise IndexError("negative steps are not supported")
            box.append((start, max(start, stop)))
            post.append(slice(None, None, step))
        else:
            i = int(k)
            if i < -n or i >= n:
                raise IndexError(f"index {i} is out of bounds for axis with size {n}")
            i %= n
            box.append((i, i + 1))
            post.append(0)
    return box, tuple(post)


def plain_box(
    sel: tuple[object, ...], shape: Sequence[int]
) -> tuple[list[tuple[int, int]] | None, list[bool]]:
    """``(start, stop)`` per axis and which axes an integer drops, for a selection of
    exactly one in-range integer or unit-step slice per axis; ``(None, [])`` for anything
    else (steps, lists, arrays, Ellipsis, newaxis, out of range), which a fast path then
    leaves to the general one (and its errors)."""
    if len(sel) != len(shape):
        return None, []
    box: list[tuple[int, int]] = []
    drop: list[bool] = []
    for s, n in zip(sel, shape, strict=True):
        if isinstance(s, slice) and s.step in (None, 1):
            a, b, _ = s.indices(n)
            box.append((a, max(a, b)))
            drop.append(False)
        elif isinstance(s, int | np.integer) and not isinstance(s, bool):
            i = int(s) + n if s < 0 else int(s)
            if not 0 <= i < n:
                return None, []
            box.append((i, i + 1))
            drop.append(True)
        else:
            return None, []
    return box, drop
