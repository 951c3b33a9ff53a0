"""SpatialData points and polygons at the scale of real data (issue 42): open time and
memory, pan / zoom frame times, and napari-spatialdata on the same store where it installs.

    xvfb-run -a .venv/bin/python benchmarks/bench_spatialdata.py [--points 2000000]
        [--polygons 100000] [--repeats 3] [--peer /path/to/python]
        [--no-frames] [--only points|polygons|categories] [--zoom-in 16] [--baseline JSON]

The large store is generated with pyarrow and shapely in spatialdata's layout, the
layout taken from the small store spatialdata 0.7.3 wrote
(``tests/ngff/spatial/data/blobs.zarr``): the points element's and the shapes element's
group documents (attributes as spatialdata writes them), the points' parquet schema
(column types, dictionary-encoded genes, the dask index column, the pandas metadata) and
the shapes' GeoParquet metadata; the generator checks that its files have the small
store's schemas before anything is measured.

Every measurement runs in a child process of its own (a clean heap), ``--repeats`` times;
the medians are printed. Measured:

* **points**: ``read_layer_data`` (napari-ozx: parquet -> layer data), then napari's
  ``add_points`` (the layer napari builds), wall time and the growth of the process's
  resident memory (RSS) over the whole open;
* **polygons**: the same for the polygons element (shown as one Vectors layer of its
  edges above ``SHAPES_LAYER_MAX`` rings), and napari's own Shapes layer on the first
  2,000 polygons, as a per-polygon rate;
* **window** (skipped by ``--no-frames``), in a napari window (``show=True``) of its own:

  - the **freeze**: a 10 ms ``QTimer`` ticks in napari's GUI thread while
    ``viewer.open(store, plugin="napari-ozx")`` runs and until the first frame drawn after
    it has reached the window; the longest gap between ticks is the longest time napari's
    event loop was blocked, and the time to that frame is "open until drawn";
  - the **frames**: 5 pan steps (40 screen pixels) and 5 zoom steps (x1.25), each timed
    from the camera change until Qt has drawn and composed the frame (median and worst,
    and the process's CPU time, all threads: llvmpipe's, which the machine's load
    does not inflate), once with the whole element in view (zoomed out) and once zoomed
    in ``--zoom-in`` times;
  - ``--baseline JSON``: points layer kwargs that replace the reader's in alternate
    children (e.g. ``'{"antialiasing": 1}'``), so a change is compared in one run;
* **categories** (points): ``napari_ozx.color_by`` (the 300 genes; a numeric column)
  and ``napari_ozx.show_categories`` (one gene, half of them, all again) on every
  point, each call's median, in napari's Viewer without and with a window;
* **napari-spatialdata** (``--peer``: a Python with napari-spatialdata 0.7 installed,
  e.g. its own virtual environment): ``Interactive(sdata)`` on the same store, the time
  and memory until its layers are in the viewer.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SMALL = ROOT / "tests" / "ngff" / "spatial" / "data" / "blobs.zarr"
GENES = 300  # a Xenium panel's order of magnitude
PART_ROWS = 500_000  # rows per part.N.parquet (dask partitions)


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# ------------------------------------------------------------------ generator


def make_store(path: Path, n_points: int, n_polygons: int, seed: int = 0) -> None:
    """A SpatialData store: root, one points element, one polygons element, in the layout
    of the small store spatialdata wrote."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import shapely

    rng = np.random.default_rng(seed)
    if path.exists():
        shutil.rmtree(path)
    root_doc = json.loads((SMALL / "zarr.json").read_text())
    root_doc.pop("consolidated_metadata", None)
    path.mkdir(parents=True)
    (path / "zarr.json").write_text(json.dumps(root_doc))
    for kind in ("points", "shapes"):
        (path / kind).mkdir()
        shutil.copy(SMALL / kind / "zarr.json", path / kind / "zarr.json")
    # points: the small store's schema (types, dictionary genes, dask's index column)
    small_pts = SMALL / "points" / "transcripts"
    schema = pq.read_schema(small_pts / "points.parquet" / "part.0.parquet")
    el = path / "points" / "transcripts"
    (el / "points.parquet").mkdir(parents=True)
    shutil.copy(small_pts / "zarr.json", el / "zarr.json")
    names = pa.array([f"gene{i:03d}" for i in range(GENES)])
    extent = 10_000.0
    for part, start in enumerate(range(0, n_points, PART_ROWS)):
        n = min(PART_ROWS, n_points - start)
        codes = pa.array(rng.integers(0, GENES, n).astype(np.int16))
        cols = {
            "x": pa.array(rng.uniform(0, extent, n)),
            "y": pa.array(rng.uniform(0, extent, n)),
            "gene": pa.DictionaryArray.from_arrays(codes, names),
            "cell_id": pa.array(rng.integers(0, 50_000, n)),
            "quality": pa.array(rng.uniform(0, 40, n).astype(np.float32)),
            "__null_dask_index__": pa.array(np.arange(start, start + n)),
        }
        # the small store's types, but int16 codes: more genes than an int8 holds
        gene = schema.get_field_index("gene")
        target = schema.set(gene, pa.field("gene", pa.dictionary(pa.int16(), pa.string())))
        table = pa.table(cols).cast(target.remove_metadata())
        table = table.replace_schema_metadata(schema.metadata)
        pq.write_table(table, el / "points.parquet" / f"part.{part}.parquet")
    # polygons: GeoParquet, WKB, the small store's geo metadata
    small_shp = SMALL / "shapes" / "cells_poly"
    geo_schema = pq.read_schema(small_shp / "shapes.parquet")
    shp = path / "shapes" / "cells"
    shp.mkdir(parents=True)
    shutil.copy(small_shp / "zarr.json", shp / "zarr.json")
    k = 12
    ang = np.linspace(0, 2 * np.pi, k, endpoint=False)
    c = rng.uniform(0, extent, (n_polygons, 2))
    r = rng.uniform(3, 8, (n_polygons, 1)) * rng.uniform(0.7, 1.0, (n_polygons, k))
    ring = np.stack([c[:, None, 0] + r * np.cos(ang), c[:, None, 1] + r * np.sin(ang)], -1)
    ring = np.concatenate([ring, ring[:, :1]], axis=1)
    geoms = shapely.polygons(ring)
    geo = json.loads(geo_schema.metadata[b"geo"])
    geo["columns"]["geometry"]["geometry_types"] = ["Polygon"]
    geo["columns"]["geometry"]["bbox"] = [float(v) for v in shapely.total_bounds(geoms)]
    wkb_type = geo_schema.field("geometry").type
    table = pa.table(
        {
            "area_um2": pa.array(shapely.area(geoms)),
            "label": pa.array([f"cell{i}" for i in range(n_polygons)]),
            "geometry": pa.array(shapely.to_wkb(geoms), type=wkb_type),
        }
    ).replace_schema_metadata({b"geo": json.dumps(geo).encode()})
    pq.write_table(table, shp / "shapes.parquet")
    check_layout(path)


def check_layout(path: Path) -> None:
    """The generated files have the small store's schemas and attributes."""
    import pyarrow.parquet as pq

    small = pq.read_schema(SMALL / "points" / "transcripts" / "points.parquet" / "part.0.parquet")
    big = pq.read_schema(path / "points" / "transcripts" / "points.parquet" / "part.0.parquet")
    assert big.names == small.names, (big.names, small.names)
    for f in small:
        if f.name != "gene":
            assert big.field(f.name).type == f.type, f.name
    assert str(big.field("gene").type).startswith("dictionary<values=string")
    s_geo = pq.read_schema(SMALL / "shapes" / "cells_poly" / "shapes.parquet")
    b_geo = pq.read_schema(path / "shapes" / "cells" / "shapes.parquet")
    assert b_geo.field("geometry").type == s_geo.field("geometry").type
    assert json.loads(b_geo.metadata[b"geo"])["columns"]["geometry"]["encoding"] == "WKB"
    for rel in ("points/transcripts/zarr.json", "shapes/cells/zarr.json"):
        a = json.loads((path / rel).read_text())["attributes"]
        b = json.loads((SMALL / rel.replace("cells", "cells_poly")).read_text())["attributes"]
        assert a == b, rel


def split_store(big: Path, kind: str, out: Path) -> Path:
    """A copy of *big* holding only its *kind* ("points" or "shapes") element."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(big, out)
    shutil.rmtree(out / ("shapes" if kind == "points" else "points"))
    return out


# ------------------------------------------------------------------ children

CHILD_OPEN = r"""
import json, os, sys, time
def anon():
    for line in open('/proc/self/status'):
        if line.startswith('RssAnon'):
            return int(line.split()[1]) / 1024
import napari, pyarrow, shapely, pandas
from napari.components import ViewerModel
from napari_ozx.layers.reading import read_layer_data
vm = ViewerModel()
read_layer_data(sys.argv[2], report=lambda w, e: None)  # imports and caches warmed
vm.add_points([[0.0, 0.0]]); vm.add_vectors([[[0.0, 0.0], [1.0, 1.0]]]); vm.layers.clear()
a0 = anon(); t0 = time.perf_counter()
lds = read_layer_data(sys.argv[1], report=lambda w, e: None)
t1 = time.perf_counter(); a1 = anon()
shown = 0
for data, kw, kind in lds:
    layer = getattr(vm, f"add_{kind}")(data, **kw)
    shown += len(layer.data[1]) if kind == "surface" else len(layer.data)  # (faces: edges)
del lds, data, kw, layer  # what stays is what napari holds
import gc; gc.collect()
t2 = time.perf_counter()
print(json.dumps({"read_s": t1 - t0, "layer_s": t2 - t1, "total_s": t2 - t0,
                  "read_mib": a1 - a0, "total_mib": anon() - a0, "shown": shown}))
"""

CHILD_SHAPES_RATE = r"""
import json, sys, time
import numpy as np
from napari.components import ViewerModel
from napari_ozx.layers.reading import read_layer_data
import napari_ozx.layers.spatial.elements as el
el.SHAPES_LAYER_MAX = 10**9
lds = read_layer_data(sys.argv[1], report=lambda w, e: None)
data, kw, kind = lds[0]
n = int(sys.argv[2])
vm = ViewerModel()
vm.add_shapes([data[0]], shape_type="polygon")
t = time.perf_counter()
vm.add_shapes(data[:n], shape_type=kw["shape_type"][:n], face_color=kw["face_color"],
              edge_color=kw["edge_color"], edge_width=0)
print(json.dumps({"shapes": n, "seconds": time.perf_counter() - t}))
"""

CHILD_WINDOW = r"""
import json, statistics, sys, time
import numpy as np
import napari
from qtpy.QtCore import QTimer
from qtpy.QtWidgets import QApplication
override = json.loads(sys.argv[2])
if override:  # the baseline: the reader's points kwargs as they were
    import napari_ozx.layers.spatial.elements as el
    made = el.points_layer_data
    def patched(*a, **k):
        data, kw, kind = made(*a, **k)
        return data, {**kw, **override}, kind
    el.points_layer_data = patched
viewer = napari.Viewer(show=True)
viewer.window.resize(1200, 900)
app = QApplication.instance()
canvas = viewer.window._qt_viewer.canvas._scene_canvas  # the canvas's draw event
drawn = []
canvas.events.draw.connect(lambda e: drawn.append(time.perf_counter()), position="last")
ticks = []  # the GUI thread's timer: a gap between ticks is a freeze
timer = QTimer()
timer.setInterval(10)
timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
timer.start()
viewer.open(sys.argv[4], plugin="napari-ozx")  # imports, plugin discovery, shaders warmed
for _ in range(20):
    app.processEvents(); time.sleep(0.02)
viewer.layers.clear()
for _ in range(20):
    app.processEvents(); time.sleep(0.02)
# freeze: viewer.open until the first frame drawn with the layer has reached the window
inserted = []
viewer.layers.events.inserted.connect(lambda e: inserted.append(time.perf_counter()))
def first_draw():
    return next((d for d in drawn if inserted and d > inserted[0]), None)
t0 = time.perf_counter(); ticks.append(t0)
layers = viewer.open(sys.argv[1], plugin="napari-ozx")
t_open = time.perf_counter()
while time.perf_counter() - t_open < 600:  # (napari may have drawn it inside viewer.open)
    d = first_draw()
    if d is not None and ticks[-1] > d:
        break  # the loop ticked again: the frame is composed, napari is free
    app.processEvents()
t_end = ticks[-1]
gaps = np.diff([t for t in ticks if t >= t0])
freeze = {"open_s": t_open - t0, "drawn_s": t_end - t0, "max_freeze_s": float(gaps.max())}
timer.stop()
# frames: camera change -> processEvents until the frame is drawn and composed
viewer.reset_view()
for _ in range(5):
    app.processEvents(); time.sleep(0.05)
cam = viewer.camera
c0, z0 = np.array(cam.center), cam.zoom
def frame(center, zoom):
    n = len(drawn)
    t, c = time.perf_counter(), time.process_time()
    cam.zoom = zoom
    cam.center = tuple(c0[:-2]) + tuple(center)
    canvas.update()
    while len(drawn) == n and time.perf_counter() - t < 120:
        app.processEvents()
    return time.perf_counter() - t, time.process_time() - c
frames = {}
for view, zin in (("out", 1.0), ("in", float(sys.argv[3]))):
    z = z0 * zin
    y, x = c0[-2], c0[-1]
    frame((y, x), z)  # the jump to this view, not counted
    steps = [((y, x + 40 * i / z), z) for i in range(1, 6)]  # pan 40 screen px a step
    steps += [((y, x), z * 1.25 ** i) for i in (1, 2, 1, 0, -1)]  # zoom in and back out
    fr = [frame(c, zz) for c, zz in steps]
    frames[view] = {"ms": [round(1000 * w, 1) for w, _ in fr],
                    "cpu_ms": [round(1000 * p, 1) for _, p in fr]}
print(json.dumps({**freeze, "frames": frames}))
viewer.close()
"""

CHILD_CATEGORIES = r"""
import json, statistics, sys, time
import numpy as np
import napari
from qtpy.QtWidgets import QApplication
from napari_ozx import color_by, show_categories
if sys.argv[2] == "window":
    viewer = napari.Viewer(show=True)
    (layer,) = viewer.open(sys.argv[1], plugin="napari-ozx")
else:  # napari's model alone: no vispy layer to update
    from napari.components import ViewerModel
    from napari_ozx.layers.reading import read_layer_data
    viewer = ViewerModel()
    ((data, kw, _kind),) = read_layer_data(sys.argv[1], report=lambda w, e: None)
    layer = viewer.add_points(data, **kw)
app = QApplication.instance() or QApplication([])
genes = list(layer.features["gene"].cat.categories)
def timed(fn, *a, **k):
    t = time.perf_counter(); fn(*a, **k); d = time.perf_counter() - t
    app.processEvents()  # (the canvas draws after: not napari-ozx's work)
    return d
out = {"points": len(layer.data), "genes": len(genes)}
steps = {
    "show_categories one gene": lambda: show_categories(layer, "gene", genes[:1]),
    "show_categories half the genes": lambda: show_categories(layer, "gene", genes[::2]),
    "show_categories all (None)": lambda: show_categories(layer, "gene", None),
    "color_by gene (categorical)": lambda: color_by(layer, "gene"),
    "color_by quality (continuous)": lambda: color_by(layer, "quality"),
    # napari's own cost of the same colour update: the floor of the calls above
    "napari face_color set alone": lambda: setattr(layer, "face_color", layer.face_color),
}
for name, fn in steps.items():
    out[name] = statistics.median(timed(fn) for _ in range(int(sys.argv[3])))
show_categories(layer, "gene", genes[:1])
drawn = int(np.count_nonzero(np.asarray(layer.face_color)[:, 3] > 0))
out["drawn after one gene"] = drawn
print(json.dumps(out))
"""

CHILD_PEER = r"""
import json, sys, time
def anon():
    for line in open('/proc/self/status'):
        if line.startswith('RssAnon'):
            return int(line.split()[1]) / 1024
import napari, spatialdata
from napari_spatialdata import Interactive
viewer = napari.Viewer(show=False)  # the window is not what is timed
a0 = anon(); t0 = time.perf_counter()
sdata = spatialdata.read_zarr(sys.argv[1])
inter = Interactive(sdata, headless=True)
names = sys.argv[2].split(",")
for name in names:
    inter.add_element(element=name, element_coordinate_system="global")
from qtpy.QtWidgets import QApplication
app = QApplication.instance()
while len(viewer.layers) < len(names) and time.perf_counter() - t0 < 900:
    app.processEvents()  # it adds its layers from a worker thread
    time.sleep(0.01)
shown = sum(len(getattr(ly, "data", [])) for ly in viewer.layers)
print(json.dumps({"total_s": time.perf_counter() - t0, "total_mib": anon() - a0,
                  "shown": shown}))
"""


def _child(python: str, code: str, *args: str, timeout: float = 900) -> dict | str:
    p = subprocess.run(
        [python, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if not lines:  # (napari-spatialdata's worker threads abort its exit: the line counts)
        return (p.stderr.strip().splitlines() or ["no output"])[-1]
    return json.loads(lines[-1])


def _median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def _categories(py: str, store: str, args: argparse.Namespace) -> None:
    """color_by / show_categories on every point (each call: median of --repeats), on
    napari's ViewerModel (no vispy layer) and, unless --no-frames, in a window (napari's
    vispy layer updated in the call); beside napari's own face_color update (the floor)."""
    for where in ("model", *(() if args.no_frames else ("window",))):
        r = _child(py, CHILD_CATEGORIES, store, where, str(args.repeats))
        if not isinstance(r, dict):
            print(f"  categories ({where}): failed ({r})")
            continue
        timings = ", ".join(
            f"{k} {v:.2f} s" for k, v in r.items() if k.startswith(("show_", "color_", "napari"))
        )
        print(
            f"  categories on {r['points']:,} points, {r['genes']} genes "
            f"({'in a window' if where == 'window' else 'ViewerModel, no window'}): {timings}; "
            f"one gene shown: {r['drawn after one gene']:,} points drawn"
        )


def _window(py: str, store: str, kind: str, args: argparse.Namespace) -> None:
    """The window measurements (freeze, frames), interleaved with the baseline's."""
    configs = [("", "{}")]
    if args.baseline and kind == "points":
        configs = [("baseline " + args.baseline + ": ", args.baseline), ("now: ", "{}")]
    runs: dict[str, list[dict]] = {label: [] for label, _ in configs}
    for _ in range(args.window_repeats):
        for label, override in configs:
            r = _child(
                py,
                CHILD_WINDOW,
                store,
                override,
                str(args.zoom_in),
                str(SMALL.parent / "points_only.zarr"),
                timeout=1800,
            )
            if isinstance(r, dict):
                runs[label].append(r)
            else:
                print(f"  {label}window: not measured ({r})")
    for label, ok in runs.items():
        if not ok:
            continue
        print(
            f"  {label}window: open until drawn {_median(ok, 'drawn_s'):.2f} s "
            f"(viewer.open {_median(ok, 'open_s'):.2f} s), longest freeze of napari's "
            f"event loop {_median(ok, 'max_freeze_s'):.2f} s (median of {len(ok)})"
        )
        for view, what in (
            ("out", "zoomed out (whole element)"),
            ("in", f"zoomed in x{args.zoom_in:g}"),
        ):
            ms = [m for r in ok for m in r["frames"][view]["ms"]]
            cpu = [m for r in ok for m in r["frames"][view]["cpu_ms"]]
            print(
                f"  {label}pan / zoom, {what}: {len(ms)} steps, frame median "
                f"{statistics.median(ms):.0f} ms, worst {max(ms):.0f} ms "
                f"(process CPU per frame, median {statistics.median(cpu):.0f} ms)"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=2_000_000)
    ap.add_argument("--polygons", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peer", help="a Python with napari-spatialdata 0.7 installed")
    ap.add_argument("--no-frames", action="store_true", help="skip the napari window")
    ap.add_argument(
        "--only",
        choices=("points", "polygons", "categories"),
        help="measure one kind (categories: color_by / show_categories on the points only)",
    )
    ap.add_argument(
        "--zoom-in", type=float, default=16.0, help="the zoomed-in view: x the whole element's zoom"
    )
    ap.add_argument(
        "--window-repeats", type=int, default=1, help="window children per configuration"
    )
    ap.add_argument(
        "--baseline",
        help="points layer kwargs to compare with, e.g. '{\"antialiasing\": 1}': the window "
        "measurements alternate between them and the reader's own",
    )
    args = ap.parse_args()
    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="bench-sd-"))
    try:
        big = tmp / "big.zarr"
        t = time.perf_counter()
        make_store(big, args.points, args.polygons)
        print(
            f"store: {args.points:,} points, {args.polygons:,} polygons in spatialdata's "
            f"layout (checked against {SMALL.name}), {time.perf_counter() - t:.1f} s"
        )
        small = str(SMALL.parent / "points_only.zarr")
        kinds = (("points", "points", args.points), ("shapes", "polygons", args.polygons))
        if args.only == "categories":
            _categories(py, str(split_store(big, "points", tmp / "points.zarr")), args)
            return
        for kind, label, n in [k for k in kinds if args.only in (None, k[1])]:
            store = split_store(big, kind, tmp / f"{kind}.zarr")
            runs = [_child(py, CHILD_OPEN, str(store), small) for _ in range(args.repeats)]
            ok = [r for r in runs if isinstance(r, dict)]
            if not ok:
                print(f"{label}: failed: {runs[0]}")
                continue
            print(
                f"napari-ozx {n:,} {label}: open {_median(ok, 'total_s'):.2f} s "
                f"(read {_median(ok, 'read_s'):.2f} s + napari's layer "
                f"{_median(ok, 'layer_s'):.2f} s), memory +{_median(ok, 'total_mib'):.0f} MiB "
                f"(read +{_median(ok, 'read_mib'):.0f} MiB); shown {ok[0]['shown']:,} "
                f"{'points' if kind == 'points' else 'edges'} (median of {len(ok)})"
            )
            if kind == "shapes":
                rate = _child(py, CHILD_SHAPES_RATE, str(store), "2000")
                if isinstance(rate, dict):
                    per = rate["seconds"] / rate["shapes"]
                    print(
                        f"  napari's Shapes layer: {rate['shapes']:,} polygons in "
                        f"{rate['seconds']:.2f} s ({1000 * per:.2f} ms each: "
                        f"{per * n:.0f} s for {n:,})"
                    )
            if kind == "points":
                _categories(py, str(store), args)
            if not args.no_frames:
                _window(py, str(store), kind, args)
            if args.peer:
                element = "transcripts" if kind == "points" else "cells"
                peer = _child(args.peer, CHILD_PEER, str(store), element)
                if isinstance(peer, dict):
                    print(
                        f"  napari-spatialdata: {peer['total_s']:.2f} s, "
                        f"+{peer['total_mib']:.0f} MiB, shown {peer['shown']:,}"
                    )
                else:
                    print(f"  napari-spatialdata: failed ({peer})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
