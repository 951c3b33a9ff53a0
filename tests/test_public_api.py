"""The public API in ``napari_ozx/__init__.py``: every name resolves, importing is free."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import napari_ozx
from tests._support.paths import ROOT


def test_every_public_name_resolves_to_its_own_module() -> None:
    for name in napari_ozx.__all__:
        obj = getattr(napari_ozx, name)
        assert obj is not None, name
        if name != "__version__":
            assert getattr(obj, "__module__", "").startswith("napari_ozx."), name


def test_all_is_sorted_unique_and_matches_the_lazy_table() -> None:
    names = [n for n in napari_ozx.__all__ if n != "__version__"]
    assert names == sorted(set(names))
    assert set(names) == set(napari_ozx._EXPORTS)
    assert set(dir(napari_ozx)) >= set(napari_ozx.__all__)


def _type_checking_imports(source: str) -> set[tuple[str, str, str | None]]:
    """(module, name, alias) of every import under ``if TYPE_CHECKING:`` in *source*."""
    tree = ast.parse(source)
    block = [
        n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
    ]
    assert len(block) == 1, "one `if TYPE_CHECKING:` block"
    found: set[tuple[str, str, str | None]] = set()
    for node in block[0].body:
        assert isinstance(node, ast.ImportFrom) and node.module, ast.unparse(node)
        found.update((node.module, a.name, a.asname) for a in node.names)
    return found


def test_type_checkers_see_exactly_the_public_names() -> None:
    """``_EXPORTS`` is the one list of the public API; the ``TYPE_CHECKING`` imports exist
    for mypy and IDEs only (at run time names resolve lazily). They must say the same,
    each as ``X as X`` (an explicit re-export); the message gives the block to paste."""
    want = {(m, n, n) for n, m in napari_ozx._EXPORTS.items()}
    got = _type_checking_imports(Path(napari_ozx.__file__).read_text(encoding="utf-8"))
    block = "\n".join(f"    from {m} import {n} as {n}" for m, n, _ in sorted(want))
    assert got == want, f"the TYPE_CHECKING block of napari_ozx/__init__.py should be:\n{block}"


def test_the_type_checking_check_sees_a_missing_or_unaliased_name() -> None:
    source = Path(napari_ozx.__file__).read_text(encoding="utf-8")
    line = "    from napari_ozx.ngff.read.open import open_ome_zarr as open_ome_zarr\n"
    assert line in source
    full = _type_checking_imports(source)
    assert ("napari_ozx.ngff.read.open", "open_ome_zarr", "open_ome_zarr") in full
    missing = _type_checking_imports(source.replace(line, ""))
    assert full - missing == {("napari_ozx.ngff.read.open", "open_ome_zarr", "open_ome_zarr")}
    plain = _type_checking_imports(source.replace(line, line.replace(" as open_ome_zarr", "")))
    assert ("napari_ozx.ngff.read.open", "open_ome_zarr", None) in plain


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        napari_ozx.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("expected AttributeError")


def test_import_is_free() -> None:
    code = (
        "import sys, napari_ozx\n"
        "heavy = ('zarr', 'dask', 'numpy', 'napari', 'qtpy', 'PyQt6')\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_package_ships_py_typed() -> None:
    from importlib.resources import files

    assert files("napari_ozx").joinpath("py.typed").is_file()


def _image(tmp_path):
    import numpy as np

    from tests._support.omegen import write_image

    p = tmp_path / "img.zarr"
    write_image(p, np.arange(2 * 32 * 32, dtype=np.uint16).reshape(2, 32, 32), "cyx", "0.5")
    return p


def _drop_axes(image) -> None:
    import json

    doc = json.loads((image / "zarr.json").read_text())
    del doc["attributes"]["ome"]["multiscales"][0]["axes"]
    (image / "zarr.json").write_text(json.dumps(doc))


def test_validate_checks_the_ome_zarr_rules_of_a_directory(tmp_path) -> None:
    """``napari_ozx.validate`` is ``napari-ozx validate``: the OME-Zarr rules of a
    directory (not "is not a regular file"), clean on a good one."""
    image = _image(tmp_path)
    good = napari_ozx.validate(image)
    assert isinstance(good, napari_ozx.ValidationReport)
    assert good.ok and not good.errors, str(good)
    _drop_axes(image)
    bad = napari_ozx.validate(image)
    assert not bad.ok
    assert all(isinstance(f, napari_ozx.Finding) for f in bad.findings)
    assert any(f.severity == "error" and "axes" in f.code for f in bad.findings), str(bad)


def test_validate_checks_an_ozx_archive_and_its_ome_zarr_rules(tmp_path) -> None:
    from tests._support.omegen import zip_dir

    image = _image(tmp_path)
    ozx = zip_dir(image, tmp_path / "good.ozx")
    assert napari_ozx.validate(ozx, deep=True).ok
    assert napari_ozx.validate_rfc9(ozx).ok
    _drop_axes(image)
    bad = zip_dir(image, tmp_path / "bad.ozx")
    assert napari_ozx.validate_rfc9(bad).ok  # a sound archive ...
    report = napari_ozx.validate(bad)  # ... of a broken image
    assert not report.ok and any("axes" in f.code for f in report.errors), str(report)


def test_validate_of_a_missing_path_raises(tmp_path) -> None:
    import pytest

    with pytest.raises(FileNotFoundError):
        napari_ozx.validate(tmp_path / "nothing.zarr")


def test_validate_of_a_real_world_broken_directory(tmp_path) -> None:
    """A broken case of the shared real-world corpus (``../shared`` beside the checkout)."""
    import shutil

    import pytest

    case = ROOT.parent / "shared/realworld/cases"
    case = case / "suite04_bad_missing_axes.zarr"
    if not case.is_dir():
        pytest.skip("the shared real-world corpus is not beside this checkout")
    copy = shutil.copytree(case, tmp_path / case.name)
    assert not napari_ozx.validate(copy).ok
