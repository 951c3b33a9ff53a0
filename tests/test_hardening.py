"""Hardening from a fault campaign: every finding has a test here that fails without its fix.

Findings (issue "Never a wrong pixel, never a runaway allocation, nothing left behind"):
bounded sizes, checksummed chunks, pinned remote objects, paths under the root, fill
values only where the archive really has no member, stale partials, the directory swap,
OzxError-only failures on hostile metadata, bounded inflation, prompt cancellation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from napari_ozx.errors import OzxError
from napari_ozx.ngff.models import Axis
from napari_ozx.ngff.write import ImageSpec, WriteOptions, write_ome_zarr

AXES = [Axis("y", "space"), Axis("x", "space")]


def _image() -> np.ndarray:
    rng = np.random.default_rng(7)
    # structured but not constant: compressors keep literals a flipped bit lands in
    return (np.arange(64 * 64).reshape(64, 64) % 251 + rng.integers(0, 4, (64, 64))).astype(
        np.uint16
    )


# ------------------------------------------------------------- 2: checksummed chunks


@pytest.mark.parametrize("codec", ["none", "blosc-lz4", "blosc-zstd", "zstd", "gzip"])
@pytest.mark.parametrize("version", ["0.5", "0.4"])
def test_every_written_chunk_carries_a_checksum(tmp_path: Path, codec: str, version: str) -> None:
    """A flipped bit inside any chunk our writer produced is an error, never wrong pixels
    (a directory has no ZIP CRC: the codec pipeline is the only protection)."""
    import zarr

    data = _image()
    target = tmp_path / "img.zarr"
    opts = WriteOptions(
        chunk_yx=32, shard_yx=64, codec=codec, version=version, pyramid_levels=1, workers=1
    )  # type: ignore[arg-type]
    write_ome_zarr(target, ImageSpec(data, AXES), options=opts)
    chunk = target / "0" / ("c/0/0" if version == "0.5" else "0/0")
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 3] ^= 0x10  # inside the first inner chunk's payload
    chunk.write_bytes(bytes(raw))
    arr = zarr.open_array(target / "0", mode="r")
    with pytest.raises(Exception) as info:  # noqa: PT011 - zarr's codec errors vary
        got = arr[:]
        bad = int((got != data).sum())
        pytest.fail(f"{codec}/{version}: a flipped bit went unnoticed ({bad} wrong pixels)")
    assert not isinstance(info.value, pytest.fail.Exception), info.value
