"""File > Save: which options a napari writer uses.

napari lists one entry per writer by its display name ("OME-Zarr 0.5 (.ozx or
directory)", "OME-Zarr 0.4 directory"). Whatever the export panel remembered (chunking,
codec, pyramid), the *version* written is the one the chosen entry promises; only
tuning options are taken from the remembered ones.
"""

from __future__ import annotations

import dataclasses
import os

from napari_ozx.errors import OzxError
from napari_ozx.ngff.write.options import WriteOptions

__all__ = ["with_version"]


def with_version(
    options: WriteOptions, version: str, target: str | os.PathLike[str]
) -> WriteOptions:
    """*options* with *version* and the format the target's name asks for.

    Raises :class:`OzxError` for OME-Zarr 0.4 into a ``.ozx`` (RFC-9 is Zarr v3 only).
    """
    if version not in ("auto", "0.4", "0.5", "0.6"):
        raise OzxError(f"unknown OME-Zarr version {version!r} for {os.fspath(target)}")
    opts = dataclasses.replace(options, version=version, format="auto")  # type: ignore[arg-type]
    if version == "0.4" and opts.resolved_format(target) == "ozx":
        raise OzxError(
            f"OME-Zarr 0.4 cannot be stored as a single .ozx file (RFC-9 needs Zarr v3): "
            f"{os.fspath(target)}; choose a directory name (.zarr) or OME-Zarr 0.5"
        )
    return opts
