"""Style and types are enforced by the same test command CI runs: ruff (lint and format)
on src/ and tests/, mypy on src/."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support.paths import ROOT

ROOT = ROOT


def _tool(name: str) -> list[str]:
    if name == "mypy":
        return [sys.executable, "-m", "mypy"]
    # the environment's own ruff (the venv's bin is not always on PATH)
    here = Path(sys.executable).parent / name
    if here.exists():
        return [str(here)]
    if shutil.which(name) is None:  # pragma: no cover - installed by the testing extra
        pytest.fail(f"{name} is not installed (pip install -e '.[testing]')")
    return [name]


@pytest.mark.parametrize(
    "args",
    [("ruff", "check", "src", "tests"), ("ruff", "format", "--check", "src", "tests")],
    ids=["ruff-check", "ruff-format"],
)
def test_ruff_is_clean(args: tuple[str, ...]) -> None:
    out = subprocess.run(
        [*_tool(args[0]), *args[1:]], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


@pytest.mark.slow  # the whole source, with a cold cache in a fresh clone (63 s under load)
def test_mypy_is_clean() -> None:
    out = subprocess.run(_tool("mypy"), cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]


#: an issue's number, or one of its item numbers: history, not behaviour
_HISTORY = re.compile(r"\bissues?[ -]?\d+|\(items? \d+|\bitems? \d+:|-{3,} item \d+", re.I)


def test_tests_say_what_they_check_not_which_issue_asked():
    """Test names, docstrings and comments describe behaviour; an issue number tells a
    newcomer nothing (the commit log keeps the history)."""
    bad = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if not any(part.startswith(".") for part in path.relative_to(ROOT).parts)  # caches
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if _HISTORY.search(line)
    ]
    assert not bad, "\n".join(bad)
    n, i = 43, 7  # (the examples are built, so this file's own lines do not match)
    for history in (f"CI (issue {n}, item {i})", f"Issue {n} item {i}: x", f"issue-{n} fixes"):
        assert _HISTORY.search(history), history
    assert not _HISTORY.search("dask issue #11922; 4 items 5 px wide")
