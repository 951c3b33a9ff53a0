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
import os
import shutil
import tempfile

_SESSION_CONFIG = tempfile.mkdtemp(prefix="napari-ozx-test-config-")
atexit.register(shutil.rmtree, _SESSION_CONFIG, ignore_errors=True)
# napari's settings file (napari.settings._napari_settings._CFG_PATH)
os.environ["NAPARI_CONFIG"] = os.path.join(_SESSION_CONFIG, "napari", "settings.yaml")
# File > Save and the export panel remember options in our config directory
os.environ["NAPARI_OZX_CONFIG_DIR"] = os.path.join(_SESSION_CONFIG, "napari-ozx")


import pytest  # noqa: E402


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
