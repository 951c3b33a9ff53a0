"""Session-wide test settings."""

from __future__ import annotations

import os
import tempfile


def pytest_configure(config: object) -> None:
    # File > Save and the export panel remember options in the user's config directory:
    # tests must neither read nor change the real one.
    os.environ.setdefault(
        "NAPARI_OZX_CONFIG_DIR", tempfile.mkdtemp(prefix="napari-ozx-test-config-")
    )


import pytest  # noqa: E402


@pytest.fixture
def store_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every key read from a store while the test runs: through zarr's ``LocalStore``,
    our ``OzxStore``, and the documents reader's direct reads of a local folder."""
    from zarr.storage import LocalStore

    from napari_ozx.ngff import documents
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
