"""Versions in development: ngff-zarr 0.50's ``0.9.dev1`` (0.6 + RFC-3 +
RFC-4) and bioformats2raw's ``1.0-DEV`` for the same line open as the newest release,
0.6, with one warning that names the version and what the development series adds that
napari-ozx does not implement; 0.6 release candidates open as 0.6. The validator says
the same as a warning ("OME-Zarr 0.6 §metadata": "The value of the `version` key MUST be
a string specifying the version of the OME-Zarr specification").
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from napari_ozx.errors import MetadataError
from napari_ozx.layers.reading import read_layer_data
from napari_ozx.ngff.model.versions import (
    DEVELOPMENT_RFCS,
    is_development,
    normalise_version,
    read_as,
)
from napari_ozx.ngff.validate.walk import validate
from tests.ngff.rfc.ngffzarr import SCALE, pixels, root_ome, set_version, write_ngff_zarr

pytest.importorskip("ngff_zarr")


@pytest.fixture(scope="module")
def dev1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An image ngff-zarr 0.50 writes as ``0.9.dev1`` (its opt-in development version)."""
    p = write_ngff_zarr(tmp_path_factory.mktemp("dev") / "dev1.ome.zarr", "0.9.dev1")
    assert root_ome(p)["version"] == "0.9.dev1"  # what the tool wrote, not what we assume
    return p


def _version_warnings(caplog: pytest.LogCaptureFixture, declared: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and repr(declared) in r.getMessage()
    ]


@pytest.mark.parametrize("declared", ["0.9.dev1", "1.0-DEV"])
def test_development_version_opens_as_06_with_one_warning(
    dev1: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture, declared: str
) -> None:
    src = dev1
    if declared != "0.9.dev1":  # bioformats2raw's name for the same development line
        src = tmp_path / "b2r.ome.zarr"
        shutil.copytree(dev1, src)
        set_version(src, declared)
    with caplog.at_level(logging.WARNING):
        (ld,) = read_layer_data(str(src))
    data, kwargs, kind = ld
    assert kind == "image"
    np.testing.assert_array_equal(np.asarray(data[0]), pixels())
    assert tuple(kwargs["scale"]) == tuple(SCALE.values())
    assert kwargs["metadata"]["napari_ozx"]["version"] == "0.6"  # read as the newest release
    (msg,) = _version_warnings(caplog, declared)  # one warning, naming the version
    assert "read as OME-Zarr 0.6" in msg
    # what the development series adds and napari-ozx does not implement is named
    for rfc, _what, gap in DEVELOPMENT_RFCS:
        if gap:
            assert f"{rfc} (" in msg and gap in msg


def test_release_candidate_opens_as_06_without_a_development_warning(
    dev1: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    src = tmp_path / "rc.ome.zarr"
    shutil.copytree(dev1, src)
    set_version(src, "0.6rc1")
    with caplog.at_level(logging.WARNING):
        (ld,) = read_layer_data(str(src))
    assert ld[1]["metadata"]["napari_ozx"]["version"] == "0.6"
    assert not [r for r in caplog.records if "development" in r.getMessage()]


def test_validate_reports_a_development_version_as_a_warning(dev1: Path) -> None:
    report = validate(str(dev1))
    findings = {f.code: f for f in report.findings}
    assert "version-unknown" not in findings
    dev = findings["version-development"]
    assert dev.severity == "warning" and "'0.9.dev1'" in dev.message
    assert not [f for f in report.findings if f.severity == "error"], report.findings


def test_which_versions_are_development_versions() -> None:
    for v in ("0.9.dev1", "0.9.dev3", "0.9.dev", "1.0-DEV", "1.0.dev2", "0.7dev"):
        assert is_development(v) and read_as(v) == "0.6", v
    # released numbers we do not know, drafts of 0.6 and older drafts are not
    for v in ("0.7", "1.0", "0.6.dev4", "0.5.dev1", "0.9.dev1x", "dev"):
        assert not is_development(v), v
    with pytest.raises(MetadataError, match=r"unsupported OME-Zarr version '1\.0'"):
        normalise_version("1.0")


def test_development_version_without_06_shape_is_refused(dev1: Path, tmp_path: Path) -> None:
    """0.9.devN is the 0.6 line: multiscales without coordinateSystems are not it."""
    import json

    src = tmp_path / "flat.ome.zarr"
    shutil.copytree(dev1, src)
    doc = json.loads((src / "zarr.json").read_text())
    ms = doc["attributes"]["ome"]["multiscales"][0]
    ms["axes"] = ms.pop("coordinateSystems")[0]["axes"]
    (src / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match=r"'0\.9\.dev1': a development version whose"):
        read_layer_data(str(src))
