"""A whole Xenium-like section in napari: tens of millions of transcripts through level of
detail (issue 49's table), and napari-spatialdata on the same store.

    xvfb-run -a .venv/bin/python benchmarks/bench_xenium.py [--points 40000000]
        [--polygons 150000] [--store /tmp/xenium.zarr] [--pans 8] [--peer /path/to/python]

The store (too big to commit: generated here, kept with ``--store`` between runs) is
spatialdata's layout as :mod:`bench_spatialdata` writes it (its polygons, 12-vertex cells),
with a points element like Xenium's ``transcripts``: ``x``, ``y``, ``z`` (axes),
``feature_name`` (300 genes, dictionary-encoded, ``EPCAM`` among them, skewed frequencies),
``cell_id``, ``qv``, dask's index column, in files of 500,000 rows; and a morphology
image (2 channels, 1024 x 1024 pixels over the section).

Measured in a napari window of its own (``show=True``, software OpenGL under Xvfb),
in a child process:

* ``viewer.open`` until the layers are in, and the growth of the process's anonymous
  resident memory (RssAnon) from before the open to after it (and its peak);
* zoomed in on a window of about 150,000 transcripts: from the camera's move until the
  Points layer holds the view's points, and that they are exactly the store's there;
* ``--pans`` pans to the next window (its width to the right), each until its points
  are shown: the median and the worst;
* the largest gap between the ticks of a 10 ms timer in napari's GUI thread during all
  that (the longest freeze), and the most points held by the Points layer;
* ``--peer``: a Python with napari-spatialdata installed: ``Interactive(sdata)`` on the
  same store (time until its layers are in, memory, points shown).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_spatialdata import PART_ROWS, SMALL, make_store  # noqa: E402

GENES = 300
EXTENT = 10_000.0  # µm, a section's order of magnitude


def make_xenium(path: Path, n_points: int, n_polygons: int, seed: int = 0) -> None:
    """The store described in the module's docstring."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    make_store(path, 1000, n_polygons, seed)  # layout, polygons; its points replaced
    _cells_in_place(path)
    el = path / "points" / "transcripts"
    schema = pq.read_schema(el / "points.parquet" / "part.0.parquet")
    shutil.rmtree(el / "points.parquet")
    (el / "points.parquet").mkdir()
    doc = json.loads((el / "zarr.json").read_text())
    attrs = doc["attributes"]
    attrs["axes"] = ["x", "y", "z"]
    attrs["spatialdata_attrs"].update(feature_key="feature_name", instance_key="cell_id")
    (el / "zarr.json").write_text(json.dumps(doc, indent=2))
    rng = np.random.default_rng(seed)
    names = pa.array(["EPCAM"] + [f"gene{i:03d}" for i in range(1, GENES)])
    weights = 1.0 / np.arange(1, GENES + 1) ** 0.8  # a few genes common, most rare
    weights /= weights.sum()
    meta = dict(schema.metadata or {})
    pandas_meta = json.loads(meta[b"pandas"])
    pandas_meta["columns"] = [
        c for c in pandas_meta.get("columns", []) if c.get("name") == "__null_dask_index__"
    ]
    meta[b"pandas"] = json.dumps(pandas_meta).encode()
    for part, start in enumerate(range(0, n_points, PART_ROWS)):
        n = min(PART_ROWS, n_points - start)
        # tissue-like: denser in a few blobs than elsewhere
        x = rng.uniform(0, EXTENT, n)
        y = rng.uniform(0, EXTENT, n)
        table = pa.table(
            {
                "x": pa.array(x),
                "y": pa.array(y),
                "z": pa.array(rng.normal(15.0, 3.0, n)),
                "feature_name": pa.DictionaryArray.from_arrays(
                    pa.array(rng.choice(GENES, n, p=weights).astype(np.int16)), names
                ),
                "cell_id": pa.array(rng.integers(0, n_polygons, n)),
                "qv": pa.array(rng.uniform(20, 40, n).astype(np.float32)),
                "__null_dask_index__": pa.array(np.arange(start, start + n)),
            }
        ).replace_schema_metadata(meta)
        pq.write_table(table, el / "points.parquet" / f"part.{part}.parquet")
    # the morphology image: the small store's, stretched over the section
    images = path / "images"
    if images.exists():
        shutil.rmtree(images)
    shutil.copytree(SMALL / "images", images)
    shutil.move(images / "raw", images / "morphology_focus")
    _morphology(images / "morphology_focus", rng)
    root = json.loads((path / "zarr.json").read_text())
    (path / "zarr.json").write_text(json.dumps(root))


def _cells_in_place(path: Path) -> None:
    """The cells placed where they were generated (over the section): the small store's
    shapes are scaled by 2 into ``global``, these by 1."""
    doc_path = path / "shapes" / "cells" / "zarr.json"
    doc = json.loads(doc_path.read_text())
    for t in doc["attributes"]["coordinateTransformations"]:
        if t.get("type") == "scale":
            t["scale"] = [1.0 for _ in t["scale"]]
    doc_path.write_text(json.dumps(doc, indent=2))


def _morphology(group: Path, rng: np.random.Generator) -> None:
    """A 2 x 1024 x 1024 uint16 image in the image group *group* (the small store's
    metadata), placed over the whole section."""
    import zarr

    doc = json.loads((group / "zarr.json").read_text())
    ms = doc["attributes"]["ome"]["multiscales"][0]
    ms["name"] = "/images/morphology_focus"
    size = 1024
    ms["coordinateTransformations"][0]["scale"] = [1.0, EXTENT / size, EXTENT / size]
    (group / "zarr.json").write_text(json.dumps(doc))
    shutil.rmtree(group / "s0")
    arr = zarr.create_array(
        str(group / "s0"), shape=(2, size, size), chunks=(1, 512, 512), dtype="uint16"
    )
    yy, xx = np.mgrid[0:size, 0:size]
    base = (np.sin(yy / 40.0) * np.cos(xx / 55.0) + 1) * 2000
    arr[:] = np.stack([base, base[::-1]]).astype(np.uint16) + rng.integers(
        0, 300, (2, size, size), dtype=np.uint16
    )


# ------------------------------------------------------------------ the window

CHILD = r"""
import json, statistics, sys, time
import numpy as np
def anon():
    for line in open('/proc/self/status'):
        if line.startswith('RssAnon'):
            return int(line.split()[1]) / 1024
import napari
from qtpy.QtCore import QTimer
from qtpy.QtWidgets import QApplication
import napari_ozx.layers.spatial.lod as lodmod
viewer = napari.Viewer(show=True)
viewer.window.resize(1200, 900)
app = QApplication.instance()
ticks = []
timer = QTimer(); timer.setInterval(10)
timer.timeout.connect(lambda: ticks.append(time.perf_counter())); timer.start()
def spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        app.processEvents(); time.sleep(0.005)
viewer.open(sys.argv[4], plugin="napari-ozx")  # imports, plugin discovery, shaders warmed
spin(0.5)
viewer.layers.clear()
spin(0.5)
a0 = anon(); t0 = time.perf_counter()
layers = viewer.open(sys.argv[1], plugin="napari-ozx")
t_open = time.perf_counter() - t0
a_in = anon()
pts = next(l for l in viewer.layers
           if lodmod.lod_of(l) is not None and l.__class__.__name__ == "Points")
lod = lodmod.lod_of(pts)
ov = lod.overview_layer
while not (lod.ready and ov is not None and float(ov.data[-1].max()) > 0):
    app.processEvents(); time.sleep(0.005)
    ov = lod.overview_layer
t_ready = time.perf_counter() - t0
spin(1.0)
a1 = anon()
open_gaps = np.diff(ticks[ticks.index(next(t for t in ticks if t >= t0)) - 1:])
ix = lod.index
held = [0]
pts.events.data.connect(lambda e: held.append(len(pts.data)))
def visible_rect():
    from napari_ozx._lod import view_rect
    return view_rect(viewer, pts)
def wait_shown(rect, timeout=30):
    t = time.perf_counter()
    while time.perf_counter() - t < timeout:
        app.processEvents(); time.sleep(0.002)
        s = lod.shown
        if s is None or s.positions is None or len(pts.data) != len(s.positions):
            continue
        if all(a <= b for a, b in zip(s.rect[:2], rect[:2])) and all(
                a >= b for a, b in zip(s.rect[2:], rect[2:])):
            return time.perf_counter()
    return None
# zoom so that about 150,000 transcripts are in view
y0, x0, y1, x1 = ix.extent
frac = (150_000 / len(ix)) ** 0.5
h, w = viewer.canvas.size
zoom = min(h, w) / ((y1 - y0) * frac)
gaps_from = len(ticks)
t = time.perf_counter()
# at the section's left edge: the pans go right, inside the section
viewer.scene.camera.center = ((y0 + y1) / 2, x0 + 0.6 * w / zoom)
viewer.scene.camera.zoom = zoom
rect = visible_rect()
done = wait_shown(rect)
t_in = None if done is None else done - t
inview = ix.query(*rect)
shot = sys.argv[3]
if shot:
    spin(1.0)
    viewer.screenshot(shot + '_in.png', canvas_only=False)
s = lod.shown
exact = bool(s is not None and np.isin(inview, s.positions).all())
def pan_run(n):
    global rect
    times = []
    start = len(ticks)
    for i in range(n):
        cy, cx = viewer.scene.camera.center[-2:]
        t = time.perf_counter()
        viewer.scene.camera.center = (cy, cx + (rect[3] - rect[1]))
        rect = visible_rect()
        done = wait_shown(rect)
        times.append(None if done is None else done - t)
    return times, start
pans, pans_from = pan_run(int(sys.argv[2]))
# the same pans with the cells hidden: what the points cost (llvmpipe draws the cells'
# 1,800,000 triangles in every frame)
cells = next((l for l in viewer.layers if l.name == "cells"), None)
if cells is not None:
    cells.visible = False
    spin(1.0)
pans_nc, nc_from = pan_run(int(sys.argv[2]))
gaps_nc = np.diff(ticks[nc_from:]) if len(ticks) > nc_from + 1 else np.zeros(1)
gaps_pan = np.diff(ticks[pans_from:nc_from]) if nc_from > pans_from + 1 else np.zeros(1)
if cells is not None:
    cells.visible = True
gaps = np.diff(ticks[gaps_from:]) if len(ticks) > gaps_from + 1 else np.zeros(1)
out = {"open_s": t_open, "indexed_s": t_ready, "rss_in_mib": a_in - a0,
       "rss_growth_mib": a1 - a0, "points": len(ix),
       "open_freeze_ms": float(open_gaps.max() * 1000),
       "index_mib": ix.nbytes / 2**20, "in_view": int(len(inview)),
       "exact_in_view_s": t_in, "exact": exact,
       "pan_median_s": statistics.median([p for p in pans if p is not None] or [-1]),
       "pan_worst_s": max([p for p in pans if p is not None] or [-1]),
       "pans_missed": sum(p is None for p in pans),
       "largest_freeze_ms": float(gaps.max() * 1000), "max_points_held": max(held),
       "pan_freeze_ms": float(gaps_pan.max() * 1000),
       "no_cells_pan_median_s": statistics.median([p for p in pans_nc if p is not None] or [-1]),
       "no_cells_pan_worst_s": max([p for p in pans_nc if p is not None] or [-1]),
       "no_cells_pan_freeze_ms": float(gaps_nc.max() * 1000),
       "layers": [type(l).__name__ + ':' + l.name for l in viewer.layers]}
if shot:
    viewer.reset_view()
    t = time.perf_counter()
    while (len(pts.data) or not lod.overview_layer.visible) and time.perf_counter() - t < 60:
        spin(0.1)
    spin(1.0)
    out["zoom_out_s"] = time.perf_counter() - t
    viewer.screenshot(shot + '_out.png', canvas_only=False)
print(json.dumps(out))
"""
SMALL_POINTS = HERE.parent / "tests" / "ngff" / "spatial" / "data" / "points_only.zarr"

CHILD_PEER = r"""
import json, sys, time
def anon():
    for line in open('/proc/self/status'):
        if line.startswith('RssAnon'):
            return int(line.split()[1]) / 1024
import spatialdata, napari
from qtpy.QtWidgets import QApplication
from napari_spatialdata import Interactive
a0 = anon(); t0 = time.perf_counter()
sdata = spatialdata.read_zarr(sys.argv[1])
inter = Interactive(sdata, headless=True)
viewer = inter._viewer
app = QApplication.instance()
peak = 0
each = {}
for el in ("morphology_focus", "cells", "transcripts"):
    t = time.perf_counter(); n = len(viewer.layers)
    inter.add_element(el, element_coordinate_system="global")  # loaded on a thread
    while len(viewer.layers) == n and time.perf_counter() - t < 900:
        app.processEvents(); time.sleep(0.01); peak = max(peak, anon())
    each[el] = time.perf_counter() - t
t1 = time.perf_counter(); a1 = anon()
shown = {l.name: (len(l.data) if l.__class__.__name__ in ("Points", "Shapes") else None)
         for l in viewer.layers}
print(json.dumps({"open_s": t1 - t0, "each_s": each, "rss_growth_mib": a1 - a0,
                  "rss_peak_mib": peak - a0, "layers": shown}))
"""


def _child(python: str, code: str, *args: str, timeout: float = 1800) -> dict | str:
    env = {**os.environ, "PYTHONPATH": f"{HERE.parent / 'src'}:{os.environ.get('PYTHONPATH', '')}"}
    p = subprocess.run(
        [python, "-c", code, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return (p.stderr or p.stdout)[-2000:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, default=40_000_000)
    ap.add_argument("--polygons", type=int, default=150_000)
    ap.add_argument("--store", type=Path, default=Path("/tmp/bench_xenium.zarr"))
    ap.add_argument("--pans", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--peer", default=None)
    ap.add_argument("--screenshots", default="")
    args = ap.parse_args()
    marker = args.store / ".bench_xenium.json"
    want = {"points": args.points, "polygons": args.polygons}
    if not (marker.exists() and json.loads(marker.read_text()) == want):
        t = time.perf_counter()
        make_xenium(args.store, args.points, args.polygons)
        marker.write_text(json.dumps(want))
        print(f"store generated in {time.perf_counter() - t:.0f} s: {args.store}")
    for r in range(args.repeats):
        shot = args.screenshots if r == 0 else ""
        warm = str(SMALL_POINTS)
        got = _child(sys.executable, CHILD, str(args.store), str(args.pans), shot, warm)
        print("napari-ozx:", json.dumps(got))
        if args.peer:
            print("napari-spatialdata:", json.dumps(_child(args.peer, CHILD_PEER, str(args.store))))


if __name__ == "__main__":
    main()
