"""Missing keys: really missing, or a corrupted central-directory name?

A missing key reads as the fill value. A corrupted central-directory name ("0/c/0/0/0"
stored as "0/c/0/0/p") would make that shard read as zeros without an error. So, once
per missing key, :meth:`MissingKeys.check` looks at the members whose names are
near-identical (same length, at most two characters differ): if the local header of one
of them names the key, or disagrees with its own central-directory name, the archive is
corrupt there and :class:`~napari_ozx.errors.ZipFormatError` is raised instead of
returning fill. Checked look-alikes are few (same-length names; their local headers are
read once, 30 bytes + name).
"""

from __future__ import annotations

from collections.abc import Callable

from napari_ozx.errors import ZipFormatError
from napari_ozx.ozx._zip import RangeReader, ZipEntry, local_header_name
from napari_ozx.ozx.members import METADATA_NAMES

__all__ = ["MAX_LOOKALIKE_SCAN", "MissingKeys"]

#: above this many same-length member names, look-alikes of a missing key are sought
#: among its siblings only
MAX_LOOKALIKE_SCAN = 20_000


class MissingKeys:
    """The look-alike check of one parsed archive's missing keys (shared by its stores).

    ``keys`` gives the sorted file-member names (called on the first scan only),
    ``entry`` the central record of one of them.
    """

    def __init__(self, keys: Callable[[], list[str]], entry: Callable[[str], ZipEntry]) -> None:
        self._keys = keys
        self._entry = entry
        #: missing keys already found to have no corrupted look-alike member
        self.ok: set[str] = set()
        self._by_len: dict[int, list[str]] | None = None

    def same_length(self, n: int) -> list[str]:
        """The member names of ``n`` characters, sorted."""
        by_len = self._by_len
        if by_len is None:
            by_len = {}
            for key in self._keys():
                by_len.setdefault(len(key), []).append(key)
            self._by_len = by_len
        return by_len.get(n, [])

    def check(self, key: str, reader: RangeReader, label: Callable[[], str]) -> None:
        """Raise :class:`ZipFormatError` if a near-identical member shows that the missing
        ``key`` is a corrupted name (see the module docstring); ``label`` names the archive."""
        if key in self.ok:
            return
        if key.endswith(METADATA_NAMES):
            self.ok.add(key)  # metadata probes miss all the time (v2/v3 guesses)
            return
        names = self.same_length(len(key))
        if len(names) > MAX_LOOKALIKE_SCAN:
            parent = key.rpartition("/")[0]
            names = [n for n in names if n.rpartition("/")[0] == parent]
        for name in names:
            diff = 0
            for a, b in zip(name, key, strict=True):
                if a != b:
                    diff += 1
                    if diff > 2:
                        break
            if diff > 2 or diff == 0:
                continue
            entry = self._entry(name)
            try:
                local = local_header_name(reader, entry)
            except ZipFormatError:
                local = b""
            if local != name.encode("utf-8") and local != name.encode("cp437", "replace"):
                said = local.decode("utf-8", "replace")
                raise ZipFormatError(
                    f"{label()}: member {key!r} is missing, and the near-identical "
                    f"member {name!r} has a local header naming {said!r} (corrupt central "
                    "directory); refusing to read it as fill value"
                )
        self.ok.add(key)
