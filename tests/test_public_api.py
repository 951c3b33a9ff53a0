"""The public API in ``napari_ozx/__init__.py``: every name resolves, importing is free."""

from __future__ import annotations

import subprocess
import sys

import napari_ozx


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
