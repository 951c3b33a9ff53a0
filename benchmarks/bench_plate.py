"""HCS plates: first open (to layer data) and click on a well (to its layers added).

Usage::

    python benchmarks/bench_plate.py [--repeats 5] [--regenerate] [--peer-python PATH]

Generates once (under benchmarks/_data/, gitignored; ~40 s) a 96-well and a 384-well
OME-Zarr 0.5 plate: every well 2 fields of 2 x 128 x 128 uint16 (cells-like blobs), each
field written by our writer (sharded, zstd, 2 levels), plate / well ``zarr.json`` by hand;
and each plate as ``.ozx`` (STORED, ``zarr.json`` entries first). Then, page cache warm,
medians of repeats:

* **first open** in a fresh process with napari imported: the reader call to layer data
  (ours via ``get_reader``; napari-ome-zarr's ``napari_get_reader`` when ``--peer-python``
  points at an interpreter that has it; it is kept out of the project's environment).
  Any dask-based reader pays ``import dask.array`` (~0.4-0.8 s here, it pulls in scipy) on
  its first open, so each is timed twice: as is ("incl. dask import"), and with
  ``dask.array`` imported before the clock starts ("excl."). A repeated open in the same
  process is printed too;
* **click to layers added** for one well in a real napari window (Xvfb when there is no
  display): the plate is opened, the navigator docked; a click on a well on the plate map
  is timed until its layers are in the viewer (napari has sliced them then: the visible
  chunks are read inside this time). The chunk reading part is timed alone (the data of
  the displayed level of every new layer), so the overhead is ``click - reads``. First
  click (layers created) and next clicks (layers reused) separately.

Prints times and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
from _open_timing import OURS, PEER, med, run_open

DATA = Path(__file__).resolve().parent / "_data"
PLATES = {96: (8, 12), 384: (16, 24)}
FIELDS, CHANNELS, SIZE = 2, 2, 128


# ------------------------------------------------------------------ data


def _cells(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32)
    img = np.zeros((CHANNELS, SIZE, SIZE), np.float32)
    for _ in range(3 + seed % 7):
        cy, cx = rng.uniform(12, SIZE - 12, 2)
        d2 = ((yy - cy) ** 2 + (xx - cx) ** 2) / 12.0**2
        img[0] += 3000 * np.exp(-1.5 * d2)
        img[1] += 1500 * np.exp(-0.4 * d2)
    img += rng.normal(100, 15, img.shape)
    return np.clip(img, 0, 65535).astype(np.uint16)


def _zarr_json(path: Path, attrs: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "zarr.json").write_text(
        json.dumps({"zarr_format": 3, "node_type": "group", "attributes": attrs})
    )


def _zip(src: Path, dst: Path) -> None:
    """.ozx: STORED members, zarr.json documents first (breadth first), OME comment."""
    files = sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file())
    order = sorted(
        files,
        key=lambda n: (
            not n.endswith("zarr.json"),
            n.count("/") if n.endswith("zarr.json") else 0,
            n,
        ),
    )
    tmp = dst.with_suffix(".partial")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for n in order:
            zf.write(src / n, n)
        zf.comment = b'{"ome":{"version":"0.5"}}'
    os.replace(tmp, dst)


def generate(force: bool) -> dict[int, tuple[Path, Path]]:
    from napari_ozx.ngff.model.metadata import Axis, Channel, Window
    from napari_ozx.ngff.write.writer import ImageSpec, WriteOptions, write_ome_zarr

    out = {}
    axes = [
        Axis("c", "channel"),
        Axis("y", "space", "micrometer"),
        Axis("x", "space", "micrometer"),
    ]
    channels = [
        Channel("DAPI", "0000FF", Window(0, 3000)),
        Channel("GFP", "00FF00", Window(0, 2000)),
    ]
    opts = WriteOptions(format="directory", pyramid_levels=2, workers=1)
    for n, (nr, nc) in PLATES.items():
        d, z = DATA / f"plate{n}.ome.zarr", DATA / f"plate{n}.ozx"
        out[n] = (d, z)
        if d.exists() and z.exists() and not force:
            continue
        t = time.perf_counter()
        shutil.rmtree(d, ignore_errors=True)
        rows = [chr(65 + i) for i in range(nr)]
        cols = [str(i + 1) for i in range(nc)]
        wells = [
            {"path": f"{r}/{c}", "rowIndex": i, "columnIndex": j}
            for i, r in enumerate(rows)
            for j, c in enumerate(cols)
        ]
        plate = {
            "name": f"bench {n}",
            "rows": [{"name": r} for r in rows],
            "columns": [{"name": c} for c in cols],
            "wells": wells,
            "field_count": FIELDS,
        }
        _zarr_json(d, {"ome": {"version": "0.5", "plate": plate}})
        for i, r in enumerate(rows):
            _zarr_json(d / r, {})
            for j, c in enumerate(cols):
                _zarr_json(
                    d / r / c,
                    {
                        "ome": {
                            "version": "0.5",
                            "well": {"images": [{"path": str(f)} for f in range(FIELDS)]},
                        }
                    },
                )
                for f in range(FIELDS):
                    spec = ImageSpec(
                        _cells((i * nc + j) * FIELDS + f),
                        axes,
                        [1, 0.5, 0.5],
                        None,
                        channels,
                        f"{r}{c} f{f}",
                    )
                    write_ome_zarr(d / r / c / str(f), spec, options=opts)
        _zip(d, z)
        print(f"generated {d.name} and {z.name} in {time.perf_counter() - t:.1f} s")
    return out


# ------------------------------------------------------------------ first open


def bench_open(plates: dict[int, tuple[Path, Path]], peer: str | None, repeats: int) -> None:
    print(f"\nfirst open, fresh process with napari imported, median of {repeats} (ms)")
    print(f"{'':28s} {'incl. dask import':>18s} {'excl.':>8s} {'repeated':>9s}")
    for n, (d, z) in plates.items():
        res: dict[str, tuple[float, float, float]] = {}
        for name, python, reader, path in (
            ("ours dir", sys.executable, OURS, d),
            ("ours ozx", sys.executable, OURS, z),
            ("napari-ome-zarr dir", peer, PEER, d),
        ):
            if python is None:
                continue
            try:
                incl, again = run_open(python, reader, path, repeats, False)
                excl, _ = run_open(python, reader, path, repeats, True)
            except subprocess.CalledProcessError as e:
                print(f"{n}-well {name}: failed: {e.stderr.strip().splitlines()[-1:]}")
                continue
            res[name] = (incl, excl, again)
            print(f"{n}-well {name:20s} {incl * 1e3:18.0f} {excl * 1e3:8.0f} {again * 1e3:9.0f}")
        if "ours dir" in res and "ours ozx" in res:
            (a, b, c), (x, y, w) = res["ours dir"], res["ours ozx"]
            print(
                f"{n}-well ozx/dir: incl. {x / a:4.2f}x  excl. {y / b:4.2f}x  repeated {w / c:4.2f}x"
            )
        if "napari-ome-zarr dir" in res:
            p = res["napari-ome-zarr dir"]
            for k in ("ours dir", "ours ozx"):
                if k in res:
                    o = res[k]
                    print(
                        f"{n}-well napari-ome-zarr / {k}: incl. {p[0] / o[0]:5.1f}x  excl. {p[1] / o[1]:5.1f}x  "
                        f"repeated {p[2] / o[2]:5.1f}x faster"
                    )


# ------------------------------------------------------------------ click

CLICK = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
import napari
from qtpy.QtCore import QPoint, Qt
from qtpy.QtTest import QTest
from qtpy.QtWidgets import QApplication

path, wells = sys.argv[1], json.loads(sys.argv[2])
viewer = napari.Viewer(show=True)
viewer.window._qt_window.resize(1400, 900)
app = QApplication.instance()
viewer.open(path, plugin="napari-ozx")
for _ in range(20):
    app.processEvents()
nav = [d.inner_widget() for k, d in viewer.window._wrapped_dock_widgets.items() if k.startswith("Plate navigator")][0]
done = []
nav.wellLoaded.connect(done.append)
out = []
for r, c in wells:
    done.clear()
    t = time.perf_counter()
    QTest.mouseClick(nav.map, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, nav.map.well_center(r, c))
    while not done:
        app.processEvents()
        time.sleep(0.0005)
    click = time.perf_counter() - t
    # what napari had to read: the displayed level of every layer of the well, again
    t = time.perf_counter()
    for lyr in nav.well_layers:
        np.asarray(lyr.data[lyr.data_level] if lyr.multiscale else lyr.data)
    reads = time.perf_counter() - t
    out.append([click, reads])
    for _ in range(5):
        app.processEvents()
viewer.close()
print(json.dumps(out))
"""


def bench_click(plates: dict[int, tuple[Path, Path]], repeats: int) -> None:
    cmd = [sys.executable, "-c", CLICK]
    if not os.environ.get("DISPLAY") and shutil.which("xvfb-run"):
        cmd = ["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", *cmd]
    wells = [[1, 2], [3, 4], [5, 6], [2, 9], [6, 1], [4, 10]]
    print(f"\nclick on a well -> its layers added (napari window), median of {repeats} runs (ms)")
    for n, (d, z) in plates.items():
        for form, path in (("dir", d), ("ozx", z)):
            firsts, nexts = [], []
            for _ in range(repeats):
                out = subprocess.run(
                    [*cmd, str(path), json.dumps(wells)], capture_output=True, text=True, check=True
                )
                res = json.loads(out.stdout.strip().splitlines()[-1])
                firsts.append(res[0])
                nexts.extend(res[1:])
            f_click, f_reads = med([a for a, _ in firsts]), med([b for _, b in firsts])
            n_click, n_reads = med([a for a, _ in nexts]), med([b for _, b in nexts])
            print(
                f"{n}-well {form}: first click {f_click * 1e3:6.1f} (visible chunks {f_reads * 1e3:5.1f}, "
                f"rest {(f_click - f_reads) * 1e3:6.1f})   next clicks {n_click * 1e3:6.1f} "
                f"(chunks {n_reads * 1e3:5.1f}, rest {(n_click - n_reads) * 1e3:6.1f})"
            )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--peer-python", default=None, help="python with napari-ome-zarr installed")
    ap.add_argument("--skip-click", action="store_true")
    args = ap.parse_args()
    plates = generate(args.regenerate)
    bench_open(plates, args.peer_python, args.repeats)
    if not args.skip_click:
        bench_click(plates, max(1, args.repeats // 2))


if __name__ == "__main__":
    main()
