"""The README's quick start is exactly two commands, and CI runs the same test command."""

from __future__ import annotations

import re

from tests._support.paths import ROOT

ROOT = ROOT


def _quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [
        line.split("#", 1)[0].strip()
        for line in block.splitlines()
        if line.split("#", 1)[0].strip()
    ]


def test_readme_quickstart_is_two_commands_that_exist():
    install_run, test = _quickstart_commands()
    assert install_run == "bash scripts/quickstart.sh"
    assert test == "bash scripts/test.sh"
    quick = (ROOT / "scripts/quickstart.sh").read_text()
    assert "resources/cells.ozx" in quick and (ROOT / "resources/cells.ozx").is_file()
    assert '".[all]"' in quick
    assert "pytest" in (ROOT / "scripts/test.sh").read_text()


def test_ci_runs_the_readme_test_command():
    _, test = _quickstart_commands()
    ci = [ln.strip() for ln in (ROOT / ".ci/run").read_text().splitlines()]
    assert test in ci


def test_no_qt_binding_is_a_hard_dependency():
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = " ".join(meta["dependencies"]).lower()
    for binding in ("pyqt5", "pyqt6", "pyside2", "pyside6"):
        assert binding not in deps
    assert "PyQt6" in meta["optional-dependencies"]["pyqt6"]
    assert "pyqt5" not in str(meta["optional-dependencies"]).lower()
