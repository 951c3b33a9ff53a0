"""One rule for the y and x axes (napari_ozx.ngff.model.axes), used by reader and writer:
exact names, never a substring."""

from __future__ import annotations

from napari_ozx.ngff.model.axes import spatial_yx, yx_axes
from napari_ozx.ngff.model.metadata import Axis
from napari_ozx.ngff.write.options import WriteOptions
from napari_ozx.ngff.write.plan import chunk_and_shard, pyramid_shapes


def test_typed_space_axes_are_y_and_x() -> None:
    axes = [Axis("t", "time"), Axis("c", "channel"), Axis("z", "space"), Axis("a", "space")]
    axes.append(Axis("b", "space"))
    assert yx_axes(axes) == (3, 4)
    assert spatial_yx(axes) == (3, 4)


def test_untyped_names_match_exactly_not_as_substrings() -> None:
    # "" and "yx" are substrings of "zyx": they are not spatial axes
    axes = [Axis(""), Axis("yx"), Axis("zy"), Axis("y"), Axis("x")]
    assert spatial_yx(axes) == (3, 4)
    assert yx_axes(axes) == (3, 4)
    axes = [Axis("y"), Axis("x"), Axis(""), Axis("yx")]
    assert spatial_yx(axes) == (0, 1)
    assert yx_axes(axes) == (0, 1)


def test_fewer_than_two_spatial_axes() -> None:
    axes = [Axis("c", "channel"), Axis(""), Axis("x")]
    assert spatial_yx(axes) == (2,)
    assert yx_axes(axes) == (1, 2)  # the plate's fallback: the last two axes
    assert spatial_yx([Axis("yx"), Axis("")]) == ()


def test_writer_halves_only_exactly_named_axes() -> None:
    opts = WriteOptions(pyramid_levels=2, chunk_yx=4, shard_yx=8)
    axes = [Axis(""), Axis("y"), Axis("x")]
    assert pyramid_shapes((6, 16, 16), axes, opts) == [(6, 16, 16), (6, 8, 8)]
    chunks, shards = chunk_and_shard((6, 16, 16), axes, opts)
    assert chunks == (1, 4, 4)
    assert shards is None or shards[0] == 1
    # the substring test took "" for a spatial axis: [""] and "yx" are neither y nor x
    assert pyramid_shapes((16, 6), [Axis("y"), Axis("yx")], opts) == [(16, 6), (8, 6)]
