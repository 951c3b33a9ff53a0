"""Session-wide test settings.

Tests never read or change the user's own settings: napari's (its ``settings.yaml``,
where napari-ozx's reader preference, the theme and other plugins' choices live) and
ours (the export panel's remembered options). Both are pointed at a temporary folder for
the whole session here, at import, before anything imports napari: napari reads
``NAPARI_CONFIG`` once, when ``napari.settings`` is first imported. Subprocesses that
tests start inherit the same environment.
"""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

_SESSION_CONFIG = tempfile.mkdtemp(prefix="napari-ozx-test-config-")
atexit.register(shutil.rmtree, _SESSION_CONFIG, ignore_errors=True)
# napari's settings file (napari.settings._napari_settings._CFG_PATH)
os.environ["NAPARI_CONFIG"] = os.path.join(_SESSION_CONFIG, "napari", "settings.yaml")
# File > Save and the export panel remember options in our config directory
os.environ["NAPARI_OZX_CONFIG_DIR"] = os.path.join(_SESSION_CONFIG, "napari-ozx")


import pytest  # noqa: E402

from tests._support.suitetime import register as _register_suite_time  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    # an unmarked test over two minutes fails the run; NAPARI_OZX_RECORD_DASK_MODULES records
    # the modules that make dask arrays (tests/_support/suitetime.py)
    _register_suite_time(config)


@pytest.fixture
def store_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every key read from a store while the test runs: through zarr's ``LocalStore``,
    our ``OzxStore``, and the documents reader's direct reads of a local folder."""
    from zarr.storage import LocalStore

    from napari_ozx.ngff.read import documents
    from napari_ozx.ozx.store import OzxStore

    keys: list[str] = []
    for cls in (LocalStore, OzxStore):
        orig = cls.get

        async def get(self, key, *a, _orig=orig, **k):  # type: ignore[no-untyped-def]
            keys.append(key)
            return await _orig(self, key, *a, **k)

        monkeypatch.setattr(cls, "get", get)
    direct = documents._prefetch_local

    def prefetch(root: str, names: list[str]) -> object:
        keys.extend(names)
        return direct(root, names)

    monkeypatch.setattr(documents, "_prefetch_local", prefetch)
    return keys


@pytest.fixture
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, not yet created napari-ozx config directory for this test alone (File >
    Save and the export panel remember their options there)."""
    d = tmp_path / "config"
    monkeypatch.setenv("NAPARI_OZX_CONFIG_DIR", str(d))
    return d


@pytest.fixture(scope="session")
def plates(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``plates(name)``: the generated plate *name* of ``tests/_support/plategen.py``,
    built once per session."""
    from tests._support.plategen import built_plate

    return lambda name: built_plate(tmp_path_factory, name)


@pytest.fixture(scope="module", autouse=True)
def _collect_garbage_at_end() -> Iterator[None]:
    """Lazy layers keep their store (an open descriptor) in reference cycles; collect them
    at the end of each test module, so no descriptor is closed later inside another
    module's test (where a leak check would blame it)."""
    yield
    gc.collect()
