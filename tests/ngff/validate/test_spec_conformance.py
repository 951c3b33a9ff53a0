"""ngff-spec's own OME-Zarr 0.6 conformance hierarchies through ``napari-ozx validate``.

The ome/ngff-spec repository publishes metadata-only hierarchies under
``tests/zarr/{spec,strict}/{valid,invalid}/<kind>/<case>.ome.zarr``, each root
``zarr.json`` saying ``"_conformance": {"valid": ...}``. Every case must agree:
``validate --metadata-only`` (``--strict`` too for the ``strict`` ones) exits 0 for a valid
case and 1 for an invalid one. The cases are not committed: NAPARI_OZX_NGFF_SPEC_DIR
names a checkout (or its ``tests/zarr``), else a git mirror of the repository at
NAPARI_OZX_NGFF_SPEC_GIT (default: this workplace's mirror) is extracted into a temporary
folder; without either the test is skipped, saying so.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from napari_ozx.__main__ import validate_path
from tests._support.paths import ROOT

#: optional: a git directory of ome/ngff-spec to take tests/zarr from
MIRROR = os.environ.get("NAPARI_OZX_NGFF_SPEC_GIT", "")
#: the copy beside the checkout (../shared, present for developers and in CI)
SHARED = ROOT.parent / "shared" / "conformance" / "ngff-spec-0.6"


def _cases_root() -> Path | None:
    env = os.environ.get("NAPARI_OZX_NGFF_SPEC_DIR")
    if env:
        p = Path(env)
        return p / "tests" / "zarr" if (p / "tests" / "zarr").is_dir() else p
    if SHARED.is_dir():
        return SHARED
    if not MIRROR or not Path(MIRROR).is_dir():
        return None
    out = Path(tempfile.mkdtemp(prefix="ngff-spec-"))
    atexit.register(shutil.rmtree, out, ignore_errors=True)
    try:
        tar = subprocess.run(
            ["git", "--git-dir", MIRROR, "archive", "HEAD", "tests/zarr"],
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    tar_path = out / "cases.tar"
    tar_path.write_bytes(tar.stdout)
    with tarfile.open(tar_path) as t:
        t.extractall(out, filter="data")
    return out / "tests" / "zarr"


ROOT = _cases_root()
pytestmark = pytest.mark.skipif(
    ROOT is None,
    reason="ngff-spec's conformance hierarchies are not available (no "
    "../shared/conformance/ngff-spec-0.6; set NAPARI_OZX_NGFF_SPEC_DIR to a checkout of "
    "ome/ngff-spec)",
)
CASES = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*/*/*/*.ome.zarr")) if ROOT else []


def _expected_valid(case: Path) -> bool:
    try:
        attrs = json.loads((case / "zarr.json").read_text())["attributes"]
    except (ValueError, KeyError):
        return False  # a document that is no JSON is an invalid case
    return bool(attrs.get("_conformance", {}).get("valid", True))


def test_the_suite_is_there():
    assert len(CASES) >= 80


@pytest.mark.parametrize("case", CASES)
def test_agrees_with_ngff_spec(case):
    path = ROOT / case
    strict = case.startswith("strict/")
    code, report = validate_path(str(path), deep=False, metadata_only=True, strict=strict)
    want = 0 if _expected_valid(path) else 1
    assert code == want, report["findings"]
