"""Make napari-ozx napari's reader for OME-Zarr folders, in one step.

napari asks which plugin should open a folder ending in ``.zarr`` when several claim it,
with its builtin reader (which cannot read OME-Zarr groups) preselected; it resolves that
from the user's reader preferences (``settings.plugins.extension2reader``). Setting ours
for OME-Zarr patterns (:func:`make_default_reader`) makes ``napari image.ome.zarr`` and
drag-and-drop open with napari-ozx without a dialog: ``napari-ozx set-default-reader``,
the *File > IO Utilities* command and ``scripts/quickstart.sh`` use it. napari saves its
settings file on every change (``NAPARI_CONFIG`` points it elsewhere, as the tests do).

Also the URLs the *Open URL* dock opened last (:func:`recent_urls`, :func:`remember_url`;
never one carrying a credential, :func:`carries_secret`), in napari-ozx's own config
directory (``NAPARI_OZX_CONFIG_DIR``): napari's settings have no section for plugins.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from napari_ozx.errors import OzxError

__all__ = [
    "PLUGIN",
    "READER_PATTERNS",
    "carries_secret",
    "is_default_reader",
    "make_default_reader",
    "make_default_reader_command",
    "recent_urls",
    "recent_urls_path",
    "remember_url",
]

log = logging.getLogger(__name__)

PLUGIN = "napari-ozx"
#: folders (napari matches a directory as ``path/``), URLs, and single-file archives
READER_PATTERNS: tuple[str, ...] = ("*.zarr/", "*.ome.zarr/", "*.zarr", "*.ozx")


class PreferenceError(OzxError, OSError):
    """napari's settings could not be read or written."""


def _settings() -> object:
    try:
        from napari.settings import get_settings

        return get_settings()
    except Exception as e:  # napari missing or its settings file unreadable
        raise PreferenceError(
            f"napari's settings cannot be opened ({type(e).__name__}: {e})"
        ) from e


def current_preferences() -> dict[str, str]:
    """napari's pattern -> reader-plugin preferences."""
    return dict(_settings().plugins.extension2reader)  # type: ignore[attr-defined]


def is_default_reader(prefs: Mapping[str, str] | None = None) -> bool:
    """Whether napari-ozx is the preferred reader for every pattern we claim."""
    prefs = current_preferences() if prefs is None else prefs
    return all(prefs.get(p) == PLUGIN for p in READER_PATTERNS)


def make_default_reader(undo: bool = False) -> dict[str, str | None]:
    """Set (or with ``undo`` remove) napari-ozx as napari's reader for OME-Zarr.

    Returns what changed: pattern -> the plugin it pointed to before (None if unset).
    Other patterns and other plugins' preferences are left alone; ``undo`` removes only
    the patterns that point to napari-ozx.
    """
    settings = _settings()
    prefs = dict(settings.plugins.extension2reader)  # type: ignore[attr-defined]
    changed: dict[str, str | None] = {}
    for pattern in READER_PATTERNS:
        before = prefs.get(pattern)
        if undo:
            if before == PLUGIN:
                del prefs[pattern]
                changed[pattern] = before
        elif before != PLUGIN:
            prefs[pattern] = PLUGIN
            changed[pattern] = before
    if changed:
        try:  # assigning a new dict emits napari's change event, which saves the file
            settings.plugins.extension2reader = prefs  # type: ignore[attr-defined]
        except Exception as e:
            raise PreferenceError(
                f"napari's reader preferences could not be saved ({type(e).__name__}: {e})"
            ) from e
    log.info("napari reader preferences changed: %s", changed)
    return changed


def make_default_reader_command() -> None:
    """The *File > IO Utilities* menu command: set the preference and say so."""
    from napari.utils.notifications import show_error, show_info

    try:
        changed = make_default_reader()
    except OzxError as e:
        show_error(f"Could not make napari-ozx the OME-Zarr reader: {e}")
        return
    if changed:
        show_info(
            "napari-ozx now opens OME-Zarr folders (*.zarr, *.ome.zarr) and .ozx files "
            "without asking. Undo: napari-ozx set-default-reader --undo"
        )
    else:
        show_info("napari-ozx already opens OME-Zarr folders without asking.")


# ------------------------------------------------------------------ recent URLs

#: how many URLs the *Open URL* dock remembers and offers
RECENT_URLS_MAX = 12
_RECENT_FILE = "recent_urls.json"
#: query parameters that make a URL a credential (signed S3 / GCS / Azure URLs, tokens)
_SECRET_QUERY = ("signature", "credential", "token", "sig", "key", "password", "secret")


def recent_urls_path() -> Path:
    """Where the recent URLs live (``recent_urls.json`` in napari-ozx's config folder)."""
    from napari_ozx.layers.export import config_dir

    return config_dir() / _RECENT_FILE


def carries_secret(url: str) -> bool:
    """Whether *url* holds a credential: a password (``https://user:pw@host``) or a
    signed or token query (``?X-Amz-Signature=…``, ``?sig=…``, ``?access_token=…``).
    Such URLs are not written to the recent list (a plain-text file)."""
    from urllib.parse import parse_qsl, urlsplit

    try:
        parts = urlsplit(url)
        if parts.password:
            return True
        keys = [k.lower() for k, _ in parse_qsl(parts.query, keep_blank_values=True)]
    except ValueError:  # a malformed URL (e.g. a bad port): keep nothing of it
        return True
    return any(any(s in k for s in _SECRET_QUERY) for k in keys)


def recent_urls() -> list[str]:
    """The URLs opened last, newest first; empty when none were kept or the file is
    unreadable (a damaged file never blocks opening)."""
    p = recent_urls_path()
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        log.warning("cannot read the recent URLs %s: %s", p, e)
        return []
    urls = data.get("urls") if isinstance(data, dict) else None
    if not isinstance(urls, list):
        return []
    return [u for u in urls if isinstance(u, str) and u.strip()][:RECENT_URLS_MAX]


def remember_url(url: str) -> list[str]:
    """Put *url* first in the recent list (once; at most :data:`RECENT_URLS_MAX` kept)
    and return the list. A URL that carries a credential (:func:`carries_secret`) is not
    written. Raises :class:`PreferenceError` when the file cannot be written."""
    from napari_ozx.ozx.atomic import replace_files

    url = url.strip()
    urls = recent_urls()
    if not url or carries_secret(url):
        return urls
    urls = [url, *(u for u in urls if u != url)][:RECENT_URLS_MAX]
    p = recent_urls_path()
    try:
        replace_files({p: (json.dumps({"urls": urls}, indent=2) + "\n").encode("utf-8")})
    except OSError as e:
        raise PreferenceError(
            f"the recent URLs could not be saved to {p} ({type(e).__name__}: {e})"
        ) from e
    return urls
