"""A 1536-well plate's first open (issue 24): napari-ozx against napari-ome-zarr.

Usage::

    python benchmarks/bench_plate1536.py [--repeats 5] [--peer-path DIR]

Generates once (benchmarks/_data/, git-ignored; ~10 s) the plate the issue describes: a
32 x 48 OME-Zarr 0.4 directory, 2 fields per well, 2 channels, 128 x 128 fields, labels
(tests/_support/plategen.py; about 80,000 files). Then, interleaved, median of ``--repeats``, each
in a fresh process with napari, dask.array and zarr imported before the clock starts
(the issue's condition): the reader call to layer data, first and repeated in the same
process. napari-ome-zarr is not a project dependency: ``pip install --no-deps --target
DIR napari-ome-zarr`` and pass ``--peer-path DIR`` (it runs in this environment with DIR
on its path). Prints medians and the ratio (bar: napari-ozx >= 10x faster).

``--remote``: also the first open over HTTP from a local server (tests/_support/httpserver.py)
that waits 20 ms / 50 ms before every answer, with a large and with Python's default
listen backlog (5): time and requests (bars: <= 3 s at 20 ms; backlog 5 <= 2x).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "_data"

TIMER = """
import sys, time, json, warnings
warnings.simplefilter("ignore")
import napari, dask.array, zarr  # noqa: F401  (imported before the clock, as the issue says)
which, path = sys.argv[1], sys.argv[2]
if which == "ours":
    from napari_ozx._reader import get_reader as get
else:
    from napari_ome_zarr._reader import napari_get_reader as get
t = time.perf_counter(); ld = get(path)(path); first = time.perf_counter() - t
t = time.perf_counter(); get(path)(path); again = time.perf_counter() - t
print(json.dumps({"first": first, "again": again, "layers": len(ld)}))
"""


def generate() -> Path:
    sys.path.insert(0, str(ROOT))
    from tests._support.plategen import PlateSpec, write_plate

    path = DATA / "plate1536.ome.zarr"
    if not (path / ".zattrs").exists():
        DATA.mkdir(exist_ok=True)
        spec = PlateSpec(n_rows=32, n_cols=48, fields=2, channels=2, size=(128, 128))
        write_plate(path, spec, version="0.4")
    return path


def once(which: str, path: Path, peer_path: str | None) -> dict[str, float]:
    env = dict(os.environ)
    extra = [str(ROOT / "src")] + ([peer_path] if which == "peer" and peer_path else [])
    env["PYTHONPATH"] = os.pathsep.join([*extra, env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", TIMER, which, str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def remote(path: Path) -> None:
    import time

    sys.path.insert(0, str(ROOT / "src"))
    from tests._support.httpserver import Server

    from napari_ozx.layers.reading import read_layer_data

    for latency in (0.02, 0.05):
        for backlog in (128, 5):
            with Server(path.parent, backlog=backlog) as srv:
                srv.latency, srv.validators = latency, False
                t = time.perf_counter()
                ld = read_layer_data(f"{srv.url}/{path.name}")
                dt = time.perf_counter() - t
                n_open = len(srv.requests)
                # then the first picture: the smallest level, as napari draws it at first
                t = time.perf_counter()
                smallest = np.asarray(ld[0][0][-1])
                dt_draw = time.perf_counter() - t
                print(
                    f"remote {latency * 1000:.0f} ms/request, backlog {backlog:3d}: first open "
                    f"{dt:5.2f} s, {n_open} requests; whole plate drawn (smallest level) "
                    f"{dt_draw:5.2f} s more, {len(srv.requests) - n_open} requests, "
                    f"{_wells_with_content(smallest)} of 1536 wells with content"
                )


def _wells_with_content(level: np.ndarray) -> int:
    """Tiles of a 32 x 48 plate picture (y, x last) holding any non-zero pixel."""
    plane = level.reshape(-1, *level.shape[-2:]).max(axis=0)
    h, w = plane.shape[0] // 32, plane.shape[1] // 48
    return sum(
        bool(plane[r * h : (r + 1) * h, c * w : (c + 1) * w].any())
        for r in range(32)
        for c in range(48)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--peer-path", default=None, help="a folder holding napari_ome_zarr")
    ap.add_argument("--remote", action="store_true", help="also over HTTP (see above)")
    args = ap.parse_args()
    path = generate()
    if args.remote:
        remote(path)
    who = ["ours", *(["peer"] if args.peer_path else [])]
    runs: dict[str, list[dict[str, float]]] = {w: [] for w in who}
    for _ in range(args.repeats):
        for w in who:  # interleaved
            runs[w].append(once(w, path, args.peer_path))
    med = {
        w: {k: statistics.median(r[k] for r in runs[w]) for k in ("first", "again")} for w in who
    }
    for w in who:
        print(f"{w:5s} first open {med[w]['first']:6.3f} s   repeated {med[w]['again']:6.3f} s")
    if "peer" in med:
        ratio = med["peer"]["first"] / med["ours"]["first"]
        print(f"ratio napari-ome-zarr / napari-ozx, first open: {ratio:.1f}x (bar >= 10x)")


if __name__ == "__main__":
    main()
