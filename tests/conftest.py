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
