"""The reader and the validator against OME-Zarr written by other tools.

Parametrised over ``../shared/realworld/cases.json`` (outside the repository: the sources'
licences differ, see its README). Each case states what a conforming reader / validator
does with it:

* ``open``: reads, and ``napari-ozx validate`` reports no error;
* ``lenient``: breaks a MUST but reads; the validator reports an error naming that rule and
  a read logs one warning naming a rule;
* ``refuse``: the validator names the rule and opening raises our ``OzxError``;
* ``decline``: ``get_reader`` returns None;
* ``optional`` (needs an optional codec) and ``unsupported``: open, or a clear ``OzxError``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from napari_ozx.__main__ import validate_path
from napari_ozx._reader import get_reader, read_layer_data
from napari_ozx.errors import OzxError
from napari_ozx.ngff.validate.rules import RULES
from tests._support.paths import SHARED

REALWORLD = SHARED / "realworld"
_CASES_FILE = REALWORLD / "cases.json"


def _cases() -> list[Any]:
    if not _CASES_FILE.is_file():
        return [
            pytest.param(
                None,
                marks=pytest.mark.skip(reason=f"real-world corpus not present at {REALWORLD}"),
                id="no-corpus",
            )
        ]
    cases = json.loads(_CASES_FILE.read_text())["cases"]
    return [pytest.param(c, id=c["name"]) for c in cases]


#: the rule each lenient / refused case breaks (a case not listed needs some error)
BROKEN_RULE = {
    "bit_invalid_image02": "multiscales-list",
    "bit_invalid_image03": "dataset-missing",
    "bit_invalid_image04": "dataset-ndim",
    "bit_plate01": "well-index-mismatch",
    "yz_broken_plate_v05": "dataset-ndim",
    "suite04_bad_duplicate_axes": "axis-name",
    "suite04_bad_missing_space_axes": "space-axes",
    "suite04_bad_invalid_transformation_type": "transform-values",
    "suite04_bad_missing_scale": "transform-scale",
    "suite04_bad_too_many_axes": "axes-count",
    "suite04_bad_invalid_channels_color": "omero-color",
    "suite04_bad_one_space_axes": "space-axes",
    "suite04_bad_missing_transformations": "dataset-transforms",
    "suite04_bad_missing_axes": "axes-missing",
    "suite04_bad_invalid_axis_type": "space-axes",
    "suite04_bad_duplicate_scale": "transform-scale",
    "suite04_bad_too_many_space_axes": "space-axes",
    "suite04_bad_invalid_channels_window": "omero-window",
    "suite04_bad_empty_transformations": "transform-scale",
    "suite05_bad_missing_scale": "transform-scale",
    "suite05_bad_too_many_axes": "axes-count",
    "suite05_bad_missing_axes": "axes-missing",
    "suite05_bad_invalid_axis_type": "space-axes",
    "suite04_bad_label_colors_duplicate": "label-value-unique",
    "suite04_bad_label_colors_rgba_500": "label-rgba",
    "idr_v04_plate2551_partial": "well-missing",
    "challenge_v05_6001240_labels": "label-levels",
    "challenge_v05_plate_76-45_partial": "well-missing",
    "vld_missing_min": "omero-window",
    "vld_invalid_version": "version-unknown",
    "zip_stored_challenge_v05_6001240_labels": "label-levels",
    "zip_stored_spec04_translation_omero": "root-zarr-json-missing",  # RFC-9: 0.4 has no zarr.json
    "zip_deflated_ozp_v2_5d": "root-zarr-json-missing",
    "zip_stored_spec05_global_scale_from_parent": "root-zarr-json-missing",
}


#: cases the corpus marks "unsupported" that napari-ozx reads since, and why
READ_SINCE = {
    "models_v06_image": "an OME-Zarr 0.6.dev4 draft with 0.6's coordinateSystems",
}


def _errors(path: Path) -> tuple[int, list[dict[str, Any]]]:
    code, report = validate_path(str(path), deep=False)
    return code, [f for f in report["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("case", _cases())
def test_realworld_case(case: dict[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    path = REALWORLD / case["path"]
    expect = case["expect"]
    if expect == "decline":
        assert get_reader(str(path)) is None
        return
    assert get_reader(str(path)) is not None, "a readable (or clearly refused) case is claimed"
    code, errors = _errors(path)
    if expect == "open":
        assert errors == [] and code == 0, errors
        assert read_layer_data(str(path))
        return
    if expect in ("lenient", "refuse"):
        assert code == 1 and errors, "a MUST is broken: the validator must say which"
        rule = BROKEN_RULE.get(case["name"])
        if rule is not None:
            assert rule in {f["code"] for f in errors}, errors
            if rule in RULES:
                hit = next(f for f in errors if f["code"] == rule)
                assert hit["rule"] == RULES[rule].text and hit["section"]
    if expect == "refuse":
        with pytest.raises(OzxError):
            read_layer_data(str(path))
        return
    try:
        with caplog.at_level(logging.WARNING, logger="napari_ozx"):
            layers = read_layer_data(str(path))
    except OzxError as e:
        if expect == "unsupported":
            assert case["version"] in str(e)  # names the version it refuses
        return  # lenient (may refuse), optional and unsupported: a clear refusal is fine
    assert layers
    if case["name"] in READ_SINCE:
        # OME-Zarr 0.6 "Pre-release tags ... open when their metadata has the 0.6 shape,
        # with one warning naming the draft version": the corpus predates it
        assert any(case["version"] in r.getMessage() for r in caplog.records), READ_SINCE
        return
    if expect == "unsupported":
        pytest.fail("an unsupported version was read as something else")
    if expect == "lenient":
        rule_warnings = [
            r.getMessage() for r in caplog.records if "breaks an OME-Zarr rule" in r.getMessage()
        ]
        assert len(rule_warnings) == 1, rule_warnings
        from napari_ozx.ozx import rfc9

        texts = [r.text for r in RULES.values()] + [str(rfc9.ROOT)]
        assert any(t in rule_warnings[0] for t in texts), rule_warnings[0]
