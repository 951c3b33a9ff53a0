"""Our OME-Zarr models against maintained libraries: yaozarrs and ome-zarr-models.

Usage::

    python benchmarks/bench_models.py [--repeats 7] [--corpus PATH/cases.json]

Neither library is a project dependency; ``pip install yaozarrs ome-zarr-models`` into
the environment to compare (a library that is not installed is skipped). Prints:

* **import cost at first open**, each in a fresh interpreter, runs interleaved, median of
  repeats: ``import`` alone, and import plus parsing one OME-Zarr 0.5 image document
  (what the first open pays). "after zarr": the same with ``zarr`` and ``numpy`` imported
  before the clock starts, as they are on a first open anyway (the marginal cost).
* **leniency on the real-world corpus** (``../shared/realworld/cases.json``): for every
  case expected to ``open`` (valid) or to be shown ``lenient``-ly (violates a MUST but
  can be displayed), does each library accept the metadata of the case's entry node?
  All three are asked about the same document: ours ``parse_node_attributes``, yaozarrs
  ``validate_ome_json`` (zarr.json / .zattrs bytes), ome-zarr-models each ``*Attrs``
  model of the version (image, labels, image-label, plate, well, bioformats2raw).
* **0.1-0.3 support**: the same, on the corpus cases of those versions.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT / ".." / "shared" / "realworld" / "cases.json"

DOC_05 = {
    "ome": {
        "version": "0.5",
        "multiscales": [
            {
                "name": "img",
                "axes": [
                    {"name": "c", "type": "channel"},
                    {"name": "y", "type": "space", "unit": "micrometer"},
                    {"name": "x", "type": "space", "unit": "micrometer"},
                ],
                "datasets": [
                    {
                        "path": str(i),
                        "coordinateTransformations": [
                            {"type": "scale", "scale": [1.0, 2.0**i, 2.0**i]}
                        ],
                    }
                    for i in range(3)
                ],
            }
        ],
        "omero": {
            "channels": [
                {
                    "color": "FF0000",
                    "window": {"start": 0, "end": 100, "min": 0, "max": 255},
                    "active": True,
                }
            ],
            "rdefs": {"model": "color"},
        },
    }
}

IMPORTS = {
    "napari_ozx": ("import napari_ozx.ngff.model.metadata as m", "m.parse_node_attributes(DOC, 3)"),
    "yaozarrs": ("import yaozarrs", "yaozarrs.validate_ome_object(DOC)"),
    "ome-zarr-models": (
        "import ome_zarr_models.v05.image as m",
        "m.ImageAttrs.model_validate(DOC['ome'])",
    ),
}
MODULES = {"napari_ozx": "napari_ozx", "yaozarrs": "yaozarrs", "ome-zarr-models": "ome_zarr_models"}


def installed(lib: str) -> bool:
    return importlib.util.find_spec(MODULES[lib]) is not None


# ------------------------------------------------------------------ import cost


def _timed_child(lib: str, parse: bool, after_zarr: bool) -> float:
    imp, call = IMPORTS[lib]
    pre = "import zarr, numpy\n" if after_zarr else ""
    body = imp + ("\n" + call if parse else "")
    code = (
        f"import json, time\n{pre}DOC = json.loads({json.dumps(json.dumps(DOC_05))})\n"
        f"t = time.perf_counter()\n{body}\nprint(time.perf_counter() - t)\n"
    )
    env_path = str(ROOT / "src")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**__import__("os").environ, "PYTHONPATH": env_path},
    )
    return float(out.stdout.strip().splitlines()[-1])


def import_costs(libs: list[str], repeats: int) -> dict[tuple[str, str], float]:
    modes = [(p, z) for z in (False, True) for p in (False, True)]
    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeats):  # interleaved: every library and mode once per round
        for lib in libs:
            for parse, after_zarr in modes:
                key = (
                    lib,
                    f"{'import+parse' if parse else 'import'}{' after zarr' if after_zarr else ''}",
                )
                samples.setdefault(key, []).append(_timed_child(lib, parse, after_zarr))
    return {k: statistics.median(v) for k, v in samples.items()}


# -------------------------------------------------------------------- leniency


def entry_document(case_root: Path) -> tuple[bytes, int] | None:
    """The raw metadata document of a case's entry node and its Zarr format."""
    if case_root.is_dir():
        if (case_root / "zarr.json").is_file():
            return (case_root / "zarr.json").read_bytes(), 3
        if (case_root / ".zattrs").is_file():
            return (case_root / ".zattrs").read_bytes(), 2
        return None
    if zipfile.is_zipfile(case_root):
        with zipfile.ZipFile(case_root) as z:
            names = set(z.namelist())
            for name, zf in (("zarr.json", 3), (".zattrs", 2)):
                if name in names:
                    return z.read(name), zf
    return None


def _attributes(raw: bytes, zf: int) -> Any:
    doc = json.loads(raw)
    return doc.get("attributes", {}) if zf == 3 else doc


def ndim_hint(case_root: Path, attrs: Any) -> int | None:
    ome = attrs.get("ome", attrs) if isinstance(attrs, dict) else {}
    try:
        path = ome["multiscales"][0]["datasets"][0]["path"]
    except (KeyError, IndexError, TypeError):
        return None
    for name in (".zarray", "zarr.json"):
        try:
            return len(json.loads((case_root / path / name).read_text())["shape"])
        except (KeyError, TypeError, OSError, ValueError):
            continue
    return None


def ours(raw: bytes, zf: int, case_root: Path) -> bool:
    from napari_ozx.errors import MetadataError
    from napari_ozx.ngff.model.metadata import parse_node_attributes

    attrs = _attributes(raw, zf)
    try:
        meta = parse_node_attributes(attrs, zf, "", ndim_hint(case_root, attrs))
    except MetadataError:
        return False
    return meta.is_ome


def yao(raw: bytes, zf: int, case_root: Path) -> bool:
    import yaozarrs

    try:
        yaozarrs.validate_ome_json(raw)
    except Exception:  # pydantic.ValidationError and anything else it raises
        return False
    return True


def ozm(raw: bytes, zf: int, case_root: Path) -> bool:
    import importlib

    attrs = _attributes(raw, zf)
    version = "v05" if zf == 3 else "v04"
    if zf == 3:
        attrs = attrs.get("ome", attrs)
    for mod, cls in (
        ("image", "ImageAttrs"),
        ("image_label", "ImageLabelAttrs"),
        ("labels", "LabelsAttrs"),
        ("hcs", "HCSAttrs"),
        ("well", "WellAttrs"),
        ("bioformats2raw", "BioFormats2RawAttrs"),
    ):
        model = getattr(importlib.import_module(f"ome_zarr_models.{version}.{mod}"), cls)
        try:
            model.model_validate(attrs)
        except Exception:  # pydantic.ValidationError and anything else it raises
            continue
        return True
    return False


CHECKS: dict[str, Callable[[bytes, int, Path], bool]] = {
    "napari_ozx": ours,
    "yaozarrs": yao,
    "ome-zarr-models": ozm,
}


def leniency(libs: list[str], corpus: Path) -> None:
    import logging
    import warnings

    logging.disable(logging.WARNING)  # our parser warns about lenient files
    warnings.simplefilter("ignore")  # so do the pydantic-based libraries
    cases = json.loads(corpus.read_text())["cases"]
    groups = {
        "open (0.4/0.5)": lambda c: c["expect"] == "open" and c["version"] in ("0.4", "0.5"),
        "lenient (0.4/0.5)": lambda c: c["expect"] == "lenient" and c["version"] in ("0.4", "0.5"),
        "0.1-0.3 (open+lenient)": lambda c: (
            c["expect"] in ("open", "lenient") and c["version"] in ("0.1", "0.2", "0.3")
        ),
    }
    print("\nLeniency: entry-node metadata accepted / cases (real-world corpus)")
    print(f"{'group':26s}" + "".join(f"{lib:>18s}" for lib in libs))
    misses: dict[str, list[str]] = {lib: [] for lib in libs}
    for title, pred in groups.items():
        chosen = [c for c in cases if pred(c)]
        counts = dict.fromkeys(libs, 0)
        total = 0
        for c in chosen:
            root = corpus.parent / c["path"]
            doc = entry_document(root)
            if doc is None:
                continue
            total += 1
            for lib in libs:
                if CHECKS[lib](doc[0], doc[1], root):
                    counts[lib] += 1
                elif not title.startswith("0.1"):
                    misses[lib].append(c["name"])
        print(f"{title:26s}" + "".join(f"{f'{counts[lib]}/{total}':>18s}" for lib in libs))
    for lib in libs:
        if misses[lib]:
            print(f"  {lib} refuses: {', '.join(misses[lib])}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = ap.parse_args()
    libs = [lib for lib in IMPORTS if installed(lib)]
    for lib in IMPORTS:
        if lib not in libs:
            print(f"{lib}: not installed, skipped (pip install {lib})")
    print(f"Import cost in a fresh interpreter, median of {args.repeats} interleaved runs (ms)")
    costs = import_costs(libs, args.repeats)
    modes = ["import", "import+parse", "import after zarr", "import+parse after zarr"]
    print(f"{'library':18s}" + "".join(f"{m:>26s}" for m in modes))
    for lib in libs:
        print(f"{lib:18s}" + "".join(f"{costs[(lib, m)] * 1e3:26.1f}" for m in modes))
    for lib in libs[1:]:
        ratio = (
            costs[(lib, "import+parse after zarr")]
            / costs[("napari_ozx", "import+parse after zarr")]
        )
        print(f"  {lib} / napari_ozx (import+parse after zarr): {ratio:.1f}x")
    if args.corpus.exists():
        leniency(libs, args.corpus)
    else:
        print(f"\nreal-world corpus not found at {args.corpus}: leniency skipped")


if __name__ == "__main__":
    main()
