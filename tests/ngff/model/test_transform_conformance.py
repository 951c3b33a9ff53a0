"""The public RFC-5 transformation conformance suite through ``napari-ozx transform``.

The suite is the PyPI package ome-zarr-transformations-conformance: OME-Zarr 0.6 scenes,
each with a ``conformance.toml`` (source system and points, target system and expected
points or ``should_error``, tolerances), and a runner that calls a "dingus" command as
``DINGUS PATH SOURCE TARGET COORDINATES`` reading ``{"coordinates": ...}`` or, on a non-zero
exit, ``{"message": ...}``. Its runner needs Python >= 3.12; its cases are plain data, so
they are read here and every case is run through our command (its ``main``, and one case
as a real process). Never committed and never downloaded here: ``scripts/test.sh`` fetches
them before pytest starts (``tests/_support/conformance.py``); without them (no network)
the test is skipped, saying so.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tomllib
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from napari_ozx.__main__ import main
from tests._support.conformance import PACKAGE, cases_dir

CASES = cases_dir()
pytestmark = pytest.mark.skipif(
    CASES is None,
    reason=f"the {PACKAGE} cases are not here: scripts/test.sh fetches them before pytest "
    "(python -m tests._support.conformance; it needs the package index), or set "
    "NAPARI_OZX_CONFORMANCE_DIR",
)


def _case_names() -> list[str]:
    return sorted(p.parent.name for p in CASES.glob("*/conformance.toml")) if CASES else []


def _close(got: list[list[float]], want: list[list[float]], atol: float, rtol: float) -> bool:
    """The suite's own comparison: both absolute and relative tolerance per value."""
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if len(g) != len(w):
            return False
        for a, b in zip(g, w):
            d = abs(a - b)
            if d > atol or d > rtol * max(abs(a), abs(b)):
                return False
    return True


def _run(path: Path, conf: dict) -> tuple[int, dict]:
    args = [
        "transform",
        str(path),
        conf["source"]["name"],
        conf["target"]["name"],
        json.dumps(conf["source"]["coordinates"]),
    ]
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main(args)
    return code, json.loads(buf.getvalue())


def test_the_suite_has_its_cases():
    assert len(_case_names()) >= 24


@pytest.mark.parametrize("case", _case_names())
def test_conformance_case(case):
    path = CASES / case
    conf = tomllib.loads((path / "conformance.toml").read_text())
    code, out = _run(path, conf)
    if conf.get("should_error"):
        assert code != 0 and out.get("message"), out
        return
    assert code == 0, out
    want = conf["target"].get("coordinates")
    if want is not None:
        assert _close(
            out["coordinates"], want, conf["absolute_tolerance"], conf["relative_tolerance"]
        ), (out["coordinates"], want)


def test_the_command_as_a_process():
    """The runner calls the dingus as a process: JSON on stdout, the exit code."""
    path = CASES / "translation.ome.zarr"
    conf = tomllib.loads((path / "conformance.toml").read_text())
    exe = [sys.executable, "-m", "napari_ozx"]
    ok = subprocess.run(
        [
            *exe,
            "transform",
            str(path),
            conf["source"]["name"],
            conf["target"]["name"],
            json.dumps(conf["source"]["coordinates"]),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["coordinates"] == conf["target"]["coordinates"]
    bad = subprocess.run(
        [*exe, "transform", str(path), conf["source"]["name"], "potato", "[[1, 2]]"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1 and "potato" in json.loads(bad.stdout)["message"]
