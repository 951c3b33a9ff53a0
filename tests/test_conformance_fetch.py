"""The conformance cases cannot race: fetched once before pytest, only looked for at collection.

pytest-xdist's workers each collect every module. When collecting
``tests/ngff/model/test_transform_conformance.py`` downloaded and extracted the cases into
one shared folder, two workers collided on a fresh clone (``FileExistsError``, then
"Different tests were collected between gw1 and gw0"). Here two fetches and then two
collections run at once, as two workers would, in a cache as empty as a fresh clone's.
The wheel is built from the cases already fetched, so this test itself downloads nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests._support.conformance import cases_dir
from tests._support.paths import ROOT

CASES = cases_dir()
pytestmark = pytest.mark.skipif(
    CASES is None, reason="no conformance cases here to build a local wheel from"
)
MODULE = "tests/ngff/model/test_transform_conformance.py"


def _env(cache: Path, wheel: Path | None = None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NAPARI_OZX_CONFORMANCE_DIR", "NAPARI_OZX_RECORD_DASK_MODULES")
        and not k.startswith("PYTEST_")
    }
    env["NAPARI_OZX_CONFORMANCE_CACHE"] = str(cache)
    if wheel is not None:
        env["NAPARI_OZX_CONFORMANCE_WHEEL"] = str(wheel)
    return env


def _at_once(cmd: list[str], env: dict[str, str], n: int = 2) -> list[tuple[int, str, str]]:
    procs = [
        subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(n)
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        out.append((p.returncode, stdout, stderr))
    return out


#: plugins the collection of that module does not need (each costs seconds to import)
_LEAN = [
    f"-pno:{p}"
    for p in ("cacheprovider", "xvfb", "napari", "napari-plugin-engine", "npe2", "pytest-qt")
]


def _collect_cmd() -> list[str]:
    return [sys.executable, "-m", "pytest", "--collect-only", "-q", *_LEAN, MODULE]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel-shaped zip of the cases (the package's layout: ``cases/<case>/...``)."""
    assert CASES is not None
    path = (
        tmp_path_factory.mktemp("wheel") / "ome_zarr_transformations_conformance-0-py3-none-any.whl"
    )
    with zipfile.ZipFile(path, "w") as z:
        for f in sorted(CASES.rglob("*")):
            if f.is_file():
                z.write(f, "cases/" + f.relative_to(CASES).as_posix())
    return path


def _case_count(root: Path) -> int:
    return len(list(root.glob("*/conformance.toml")))


def test_two_fetches_at_once_make_one_whole_folder_and_leave_nothing(wheel, tmp_path):
    cache = tmp_path / "fresh"  # as in a fresh clone: not even the folder exists
    runs = _at_once([sys.executable, "-m", "tests._support.conformance"], _env(cache, wheel))
    for rc, stdout, stderr in runs:
        assert rc == 0, stderr
        assert "not available" not in stderr, stderr
        assert "cases in" in stdout, stdout
    assert _case_count(cache / "cases") == _case_count(CASES) >= 24
    # the temporary download and extraction folders are gone; only the lock stays
    assert sorted(p.name for p in cache.iterdir()) == [".lock", "cases"]


def test_two_collections_at_once_in_a_fresh_cache_collect_the_same_cases(wheel, tmp_path):
    cache = tmp_path / "fresh"
    subprocess.run(
        [sys.executable, "-m", "tests._support.conformance"],
        cwd=ROOT,
        env=_env(cache, wheel),
        check=True,
        capture_output=True,
        timeout=300,
    )
    runs = _at_once(_collect_cmd(), _env(cache))
    ids = []
    for rc, stdout, stderr in runs:
        assert rc == 0, stdout + stderr
        ids.append(sorted(line for line in stdout.splitlines() if "::" in line))
    assert ids[0] == ids[1]
    cases = [i for i in ids[0] if "test_conformance_case[" in i]
    assert len(cases) == _case_count(CASES) >= 24


@pytest.mark.slow  # two child collections of the suite, at once
def test_collecting_never_downloads(tmp_path):
    """With no cases fetched, collection (twice, at once) writes nothing and the module's
    tests are skipped, saying how to fetch them."""
    cache = tmp_path / "empty"
    runs = _at_once(_collect_cmd(), _env(cache))
    for rc, stdout, stderr in runs:
        assert rc == 0, stdout + stderr
        # pytest's placeholder for an empty parametrisation, and no case
        assert [i for i in stdout.split() if "test_conformance_case[" in i] == [
            f"{MODULE}::test_conformance_case[NOTSET]"
        ], stdout
    assert not cache.exists()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", *_LEAN, MODULE],
        cwd=ROOT,
        env=_env(cache),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "scripts/test.sh fetches them before pytest" in run.stdout
    assert not cache.exists()
