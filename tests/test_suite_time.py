"""CI's time budget: an unmarked test over the limit fails the run, and
the query-planning pass takes the modules that make dask arrays
(``tests/_support/suitetime.py``). Each case runs a tiny suite in a child pytest, with and
without pytest-xdist, as ``.ci/run`` does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support.paths import ROOT

CONFTEST = """
from tests._support.suitetime import register


def pytest_configure(config):
    register(config)
"""

SLEEPY = """
import time

import pytest


def test_quick():
    pass


def test_unmarked_and_long():
    time.sleep(0.6)


@pytest.mark.slow
def test_marked_and_long():
    time.sleep(0.6)
"""

DASKY = """
import dask.array as da


def test_makes_an_array():
    assert da.zeros((4, 4), chunks=2).sum().compute() == 0
"""

PLAIN = """
def test_makes_no_array():
    assert [0] * 2 == [0, 0]
"""


def _suite(tmp_path: Path, files: dict[str, str]) -> Path:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(CONFTEST)
    for name, text in files.items():
        (suite / name).write_text(text)
    return suite


def _pytest(suite: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # no plugin from the environment (napari's, pytest-qt's: each would import Qt in every
    # worker), but pytest-xdist where the case asks for it
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    environ.pop("NAPARI_OZX_RECORD_DASK_MODULES", None)
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=suite,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["in-process", "xdist"])
def test_an_unmarked_test_over_the_limit_fails_the_run(tmp_path, workers):
    suite = _suite(tmp_path, {"test_sleepy.py": SLEEPY})
    run = _pytest(suite, *workers, NAPARI_OZX_SLOW_LIMIT_S="0.3")
    out = run.stdout + run.stderr
    assert run.returncode == 1, out
    assert "3 passed" in out  # every test passed: the run fails for the time alone
    assert "test_sleepy.py::test_unmarked_and_long" in out
    assert "test_marked_and_long" not in out.split("unmarked slow tests", 1)[1]

    within = _pytest(suite, *workers, NAPARI_OZX_SLOW_LIMIT_S="30")
    assert within.returncode == 0, within.stdout + within.stderr


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["in-process", "xdist"])
def test_the_modules_that_make_dask_arrays_are_recorded(tmp_path, workers):
    suite = _suite(tmp_path, {"test_dasky.py": DASKY, "test_plain.py": PLAIN})
    record = tmp_path / "record"
    run = _pytest(suite, *workers, NAPARI_OZX_RECORD_DASK_MODULES=str(record))
    assert run.returncode == 0, run.stdout + run.stderr
    recorded = {line for f in record.glob("*.txt") for line in f.read_text().splitlines() if line}
    assert recorded == {"test_dasky.py"}


def test_ci_selects_the_query_planning_modules_from_the_record():
    newest = (ROOT / "scripts/test-newest.sh").read_text()
    assert "NAPARI_OZX_RECORD_DASK_MODULES=" in newest
    assert "DASK_ARRAY__QUERY_PLANNING=True" in newest
    # an empty record is an error, never a query-planning pass over nothing
    assert "no module recorded a dask array" in newest


def test_the_heaviest_modules_are_collected_first_each_kept_together(tmp_path):
    """pytest-xdist's loadfile hands out modules in collection order: slow and GUI
    modules first, so that they are not left to one worker at the end of the run."""
    plain = "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n"
    marked = "import pytest\n\n\n@pytest.mark.slow\ndef test_long():\n    pass\n\n\n"
    marked += "def test_after():\n    pass\n"
    suite = _suite(tmp_path, {"test_a.py": plain, "test_b.py": marked, "test_c.py": plain})
    run = _pytest(suite, "--collect-only")
    ids = [line for line in run.stdout.splitlines() if "::" in line]
    assert ids == [
        "test_b.py::test_long",
        "test_b.py::test_after",
        "test_a.py::test_one",
        "test_a.py::test_two",
        "test_c.py::test_one",
        "test_c.py::test_two",
    ], run.stdout + run.stderr
