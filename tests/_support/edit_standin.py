"""A stand-in for ``napari_ozx.layers.transaction.EditTransaction`` (directories only),
installed by the SpatialData save tests only while that module is not in the tree: the
same API (put / delete / delete_prefix / exists / get / commit), staged in memory and
applied on commit. Once the real module is present, the tests use it and this is unused."""

from __future__ import annotations

import os
import shutil
import sys
import types
from pathlib import Path


class StandInTransaction:
    def __init__(self, target: Path | str, *, action: str = "save", expect: object = None):
        self.target = Path(target)
        self.puts: dict[str, bytes] = {}
        self.deletes: list[str] = []
        self.prefixes: list[str] = []

    def __enter__(self) -> StandInTransaction:
        return self

    def __exit__(self, *exc: object) -> None:
        self.puts.clear()

    def put(self, key: str, data: bytes) -> None:
        self.puts[key] = bytes(data)

    def delete(self, key: str) -> None:
        self.deletes.append(key)

    def delete_prefix(self, prefix: str) -> None:
        self.prefixes.append(prefix.rstrip("/"))

    def exists(self, key: str) -> bool:
        return (self.target / key).is_file()

    def get(self, key: str) -> bytes | None:
        p = self.target / key
        return p.read_bytes() if p.is_file() else None

    def commit(self) -> None:
        for prefix in self.prefixes:
            shutil.rmtree(self.target / prefix, ignore_errors=True)
        for key in self.deletes:
            (self.target / key).unlink(missing_ok=True)
        for key, data in self.puts.items():
            p = self.target / key
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)


def install() -> bool:
    """Install the stand-in when the real module is missing; True when it did."""
    try:
        import napari_ozx.layers.transaction  # noqa: F401
    except ImportError:
        mod = types.ModuleType("napari_ozx.layers.transaction")
        mod.EditTransaction = StandInTransaction  # type: ignore[attr-defined]
        sys.modules["napari_ozx.layers.transaction"] = mod
        return True
    return False


__all__ = ["StandInTransaction", "install", "os"]
