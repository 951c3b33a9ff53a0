"""Browsing z in a napari window: how long the GUI freezes per step, local and remote.

Usage::

    python benchmarks/bench_browse.py [--repeats N] [--latency-ms 50] [--cases local,dir,ozx,peer]
        [--skip-async] [--skip-peer] [--peer-python PATH] [--long-steps 200] [--quick]
        [--full-res] [--ozx-src DIR] [--server fast|threaded] [--server-nice 19]
        [--no-keep-alive] [--regenerate]

(``xvfb-run -a`` in front, or nothing: an Xvfb is started when there is no display.)

Writes once (benchmarks/_data/, gitignored) a 2 x 40 x 1536 x 1536 uint16 (c, z, y, x) z-stack
with plain zarr-python as an OME-Zarr 0.4 directory (Zarr v2, chunks 1x1x256x256, blosc-zstd,
3 levels halving y and x, multiscales and omero metadata for 2 channels; smooth blobs plus
Poisson noise, fixed seed) and an ``.ozx`` copy of it made by ``napari-ozx convert`` with its
defaults. Both are served from 127.0.0.1 by a range-capable HTTP server of the tests'
(tests/_support/httpserver.py), which waits ``--latency-ms`` before answering every request
(a distant server), over HTTP/1.1 with persistent connections as cloud object stores
answer. A remote object store takes none of the client's CPU; a local server shares this
machine's 2 cores with napari, so it should take as little as it can, and only what napari
and the reader leave (its threads run at niceness 19, ``--server-nice``):

* ``--server fast`` (the default): ``FastServer``, one asyncio event loop, about 0.2 ms of
  CPU per request; a plane's 26 concurrent requests come back after 64-77 ms (one: 52 ms);
* ``--server threaded``: ``Server``, Python's ``http.server`` with a thread per connection,
  about 1 ms of CPU per request, all under its process's GIL: the 26 take 79-90 ms, and a
  jump to a plane not read ahead waits that much longer. ``--no-keep-alive`` (threaded
  only): HTTP/1.0, a connection per request, which also costs the client a connection
  set-up per request, ~0.5 ms of CPU here.

Cases, each in a fresh process (nothing cached carries over), interleaved over the repeats:

* napari-ozx on the local directory, on the remote directory (URL) and on the remote ``.ozx``;
* napari-ome-zarr on the remote directory. It is kept out of the project's environment (its
  reader would get in the way of the tests): ``--peer-python`` names an interpreter that has
  it, else a venv benchmarks/_data/peer-venv is made once with pip (same napari version).

each in napari's default (synchronous) slicing and in its experimental async slicing
(``NAPARI_ASYNC=1``). Every child uses a throw-away napari settings file and home directory.

In the child, a real napari window (1200 x 900) opens the URL or path with
``viewer.open(..., plugin=...)``. **First open** is from that call until every image layer
holds a slice at the level napari wants for the window and a frame with it has been swapped
to the screen. ``--full-res`` then zooms to one screen pixel per level-0 pixel (napari reads
level 0, as a user looking at full resolution). Then, like a user holding the arrow key, a
250 ms timer moves z one plane at a time (after one positioning move, not counted, so the run
goes one way over planes not seen yet), then jumps to random planes (fixed seed). A 10 ms
timer measures every stall of the event loop (the gap between two ticks minus 10 ms); a stall
in which a move started is that step's from the move on, any other the step's running when it
began. Per case:

* **freeze per step**: the longest stall of each sequential step, median over the steps;
  **max freeze**: over all steps, jumps included; **redraw**: the same measure for a canvas
  redraw without new data, the floor of any step on this display (software OpenGL under
  Xvfb is slow; the renderer is printed);
* **plane shown**: from the move until every layer holds the slice asked for by that move (or
  by a later one: a plane overtaken by the next move counts when the display catches up) and
  a frame with it has been swapped to the screen; median over the sequential steps, max over
  all. In async mode this is how far the picture lags behind the slider;
* **garbage collections**: every collection of 5 ms or more is recorded with the step it
  began in; a full (generation 2) collection of napari's heap stalls every thread for
  ~200 ms whatever the reader does, so the notes list them and the max freeze with their
  time taken out;
* **server floor** (printed first): one request, and a plane's 26 requests at once, with
  plain ``http.client``: what the server and this machine cost before any reader works
  (the local server shares the 2 cores, and in this measurement its process, with the
  client);
* **requests**: HTTP requests for the open, per sequential step (median) and in total (the
  server's log, split at the phase times the child reports), and MiB served;
* **pixels exact**: at the end, for each layer, the array napari holds for the current plane
  at the level it shows, against zarr-python reading the same box of the local directory;
* **RSS**: a longer default-mode browse (``--long-steps`` moves through z back and forth) per
  remote case in a separate child, RSS before and after.

Prints a table (medians over the repeats) and the ratios remote / local and napari-ome-zarr /
napari-ozx; the raw results go to benchmarks/_data/bench_browse_last.json. The napari-ozx
measured is whatever src/ holds (its commit and uncommitted changes are printed);
``--ozx-src DIR`` measures another copy of the package instead, e.g. an earlier commit's
(``git archive COMMIT src | tar -x -C DIR``, then ``--ozx-src DIR/src``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from _napari_window import open_window, run_until

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "_data"
NAME = "browse"
SHAPE = (2, 40, 1536, 1536)  # c, z, y, x
CHUNK = 256
LEVELS = 3
CHANNELS = [  # label, colour, window start, window end
    ("nuclei", "00FFFF", 100, 2500),
    ("membrane", "FF00FF", 100, 1500),
]
SEED = 0
JUMP_SEED = 1234
TICK_MS = 10
STEP_MS = 250
MARK = "BENCH_BROWSE_RESULT "
#: requests of one new plane in the default window: 2 channels x (3 x 3 tiles of level 1
#: + 2 x 2 of the thumbnail level)
PLANE_REQUESTS = 26

CASES = {  # key: (reader plugin, label, remote target)
    "local": ("napari-ozx", "napari-ozx local dir", None),
    "dir": ("napari-ozx", "napari-ozx remote dir", f"{NAME}.ome.zarr"),
    "ozx": ("napari-ozx", "napari-ozx remote .ozx", f"{NAME}.ozx"),
    "peer": ("napari-ome-zarr", "napari-ome-zarr remote dir", f"{NAME}.ome.zarr"),
}


# ------------------------------------------------------------------ data


def _blob_set(rng: np.random.Generator, c: int) -> dict[str, np.ndarray]:
    nz, ny, nx = SHAPE[1:]
    n, (s_lo, s_hi), (a_lo, a_hi) = [(160, (10, 24), (1200, 3500)), (420, (3, 8), (400, 1600))][c]
    return {
        "z": rng.uniform(-4, nz + 4, n),
        "y": rng.uniform(0, ny, n),
        "x": rng.uniform(0, nx, n),
        "s": rng.uniform(s_lo, s_hi, n),
        "sz": rng.uniform(2, 6, n),
        "a": rng.uniform(a_lo, a_hi, n),
    }


def _plane(b: dict[str, np.ndarray], gy: np.ndarray, gx: np.ndarray, z: int, bg: float):
    """Sum of 3-D gaussians at plane z: separable, so one (y, n) @ (n, x) product."""
    gz = b["a"] * np.exp(-0.5 * ((z - b["z"]) / b["sz"]) ** 2)
    return bg + (gy * gz) @ gx.T


def _halve(a: np.ndarray) -> np.ndarray:
    """2x2 mean in y and x, rounded half to even."""
    s = a.astype(np.uint32)
    s = s[0::2, 0::2] + s[1::2, 0::2] + s[0::2, 1::2] + s[1::2, 1::2]
    return np.rint(s / 4.0).astype(a.dtype)


def _write_dir(out: Path) -> None:
    import zarr
    from numcodecs import Blosc

    nc, nz, ny, nx = SHAPE
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    g = zarr.open_group(tmp, mode="w", zarr_format=2)
    shapes = [(nc, nz, ny >> lv, nx >> lv) for lv in range(LEVELS)]
    arrays = [
        g.create_array(
            str(lv),
            shape=shp,
            chunks=(1, 1, CHUNK, CHUNK),
            dtype="uint16",
            compressors=Blosc(cname="zstd", clevel=5, shuffle=Blosc.BITSHUFFLE),
            chunk_key_encoding={"name": "v2", "separator": "/"},
            fill_value=0,
        )
        for lv, shp in enumerate(shapes)
    ]
    axes = [
        {"name": "c", "type": "channel"},
        {"name": "z", "type": "space", "unit": "micrometer"},
        {"name": "y", "type": "space", "unit": "micrometer"},
        {"name": "x", "type": "space", "unit": "micrometer"},
    ]
    datasets = []
    for lv in range(LEVELS):
        tf = [{"type": "scale", "scale": [1.0, 1.0, 0.5 * 2**lv, 0.5 * 2**lv]}]
        if lv:  # a 2x2 mean's centre lies half a finer pixel further in, at every halving
            tf.append({"type": "translation", "translation": [0.0, 0.0, *[0.25 * (2**lv - 1)] * 2]})
        datasets.append({"path": str(lv), "coordinateTransformations": tf})
    omero = {
        "name": NAME,
        "version": "0.4",
        "rdefs": {"model": "color", "defaultZ": nz // 2, "defaultT": 0},
        "channels": [
            {
                "label": label,
                "color": color,
                "active": True,
                "coefficient": 1.0,
                "family": "linear",
                "inverted": False,
                "window": {"start": lo, "end": hi, "min": 0, "max": 65535},
            }
            for label, color, lo, hi in CHANNELS
        ],
    }
    g.attrs.update(
        {
            "multiscales": [
                {
                    "version": "0.4",
                    "name": NAME,
                    "axes": axes,
                    "datasets": datasets,
                    "type": "mean",
                    "metadata": {"description": "2x2 mean in y and x, rounded half to even"},
                }
            ],
            "omero": omero,
        }
    )
    yy, xx = np.arange(ny, dtype=np.float64), np.arange(nx, dtype=np.float64)
    for c in range(nc):
        b = _blob_set(np.random.default_rng([SEED, c]), c)
        gy = np.exp(-0.5 * ((yy[:, None] - b["y"]) / b["s"]) ** 2)
        gx = np.exp(-0.5 * ((xx[:, None] - b["x"]) / b["s"]) ** 2)
        for z in range(nz):
            rng = np.random.default_rng([SEED, c, z])
            lam = _plane(b, gy, gx, z, 100.0 + 40.0 * c)
            plane = np.minimum(rng.poisson(lam), 65535).astype(np.uint16)
            for a in arrays:
                a[c, z] = plane
                plane = _halve(plane)
    os.replace(tmp, out)


def generate(force: bool) -> tuple[Path, Path]:
    src, ozx = DATA / f"{NAME}.ome.zarr", DATA / f"{NAME}.ozx"
    if force:
        shutil.rmtree(src, ignore_errors=True)
        ozx.unlink(missing_ok=True)
    DATA.mkdir(parents=True, exist_ok=True)
    if not src.exists():
        t = time.perf_counter()
        ozx.unlink(missing_ok=True)
        _write_dir(src)
        print(f"generated {src.name} in {time.perf_counter() - t:.0f} s", flush=True)
    if not ozx.exists():
        t = time.perf_counter()
        cli = Path(sys.executable).with_name("napari-ozx")
        cmd = [str(cli)] if cli.exists() else [sys.executable, "-m", "napari_ozx"]
        p = subprocess.run([*cmd, "convert", str(src), str(ozx)], capture_output=True, text=True)
        if p.returncode:
            sys.exit(f"napari-ozx convert failed: {p.stderr.strip()[-2000:]}")
        print(
            f"converted to {ozx.name} ({ozx.stat().st_size / 2**20:.0f} MiB) "
            f"in {time.perf_counter() - t:.0f} s",
            flush=True,
        )
    return src, ozx


# ------------------------------------------------------------------ peer environment


def peer_python(given: str | None) -> tuple[str | None, str]:
    """An interpreter with napari-ome-zarr (and no napari-ozx), or None and why not."""
    from importlib.metadata import version

    if given:
        py = given
    else:
        venv = DATA / "peer-venv"
        py = str(venv / "bin" / "python")
        if not Path(py).exists():
            print("making benchmarks/_data/peer-venv (napari-ome-zarr; a few minutes)", flush=True)
            steps = [
                [sys.executable, "-m", "venv", str(venv)],
                [
                    py,
                    *["-m", "pip", "install", "-q", "--disable-pip-version-check"],
                    f"napari=={version('napari')}",
                    "napari-ome-zarr",
                    "PyQt6",
                    "fsspec[http]",
                    "aiohttp",
                    "psutil",
                ],
            ]
            for cmd in steps:
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode:
                    tail = (p.stderr or p.stdout).strip().splitlines()[-1:]
                    return None, f"making the peer venv failed ({' '.join(cmd[:4])}...): {tail}"
    probe = (
        "import importlib.metadata as m, napari_ome_zarr, napari, zarr, fsspec, aiohttp\n"
        "print(m.version('napari-ome-zarr'), napari.__version__)"
    )
    p = subprocess.run([py, "-c", probe], capture_output=True, text=True)
    if p.returncode:
        tail = p.stderr.strip().splitlines()[-1:]
        return None, f"{py} cannot import napari-ome-zarr / napari / fsspec: {tail}"
    peer, napari_v = p.stdout.split()
    return py, f"napari-ome-zarr {peer}, napari {napari_v}"


# ------------------------------------------------------------------ display


def ensure_display() -> subprocess.Popen | None:
    """Start an Xvfb of our own when there is no display; None when there is one."""
    if os.environ.get("DISPLAY"):
        return None
    if not shutil.which("Xvfb"):
        sys.exit("no DISPLAY and no Xvfb: run under xvfb-run -a or install Xvfb")
    r, w = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(w), "-screen", "0", "1600x1200x24", "-nolisten", "tcp"],
        pass_fds=(w,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(w)
    num = b""
    with os.fdopen(r, "rb") as fh:
        while not num.endswith(b"\n"):
            ch = fh.read(1)
            if not ch:
                break
            num += ch
    if not num.strip():
        proc.terminate()
        sys.exit("Xvfb did not start")
    os.environ["DISPLAY"] = f":{num.decode().strip()}"
    return proc


# ------------------------------------------------------------------ child (one napari window)


def _rss_mib() -> float:
    try:
        import psutil

        return psutil.Process().memory_info().rss / 2**20
    except ImportError:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    return float("nan")


def _charge_stalls(gaps, starts: list[float], end: float) -> list[float]:
    """Longest stall per step. A stall in which a step started is that step's from its
    start on (what came before it is the previous step's); any other stall belongs to
    the step running when it began (the last step runs until ``end``)."""
    worst = [0.0] * len(starts)
    for a, b, stall in gaps:
        if not starts or b <= starts[0] or a >= end:
            continue
        k = next((i for i, s in enumerate(starts) if a < s <= b), None)
        if k is None:
            k = max(i for i, s in enumerate(starts) if s <= a)
            worst[k] = max(worst[k], stall)
            continue
        worst[k] = max(worst[k], min(stall, b - starts[k]))
        if k > 0:
            worst[k - 1] = max(worst[k - 1], min(stall, starts[k] - a - TICK_MS / 1000))
    return worst


def child_main(spec: dict) -> None:
    import gc
    import warnings

    warnings.simplefilter("ignore")
    perf = time.perf_counter
    res: dict = {"notes": [], "case": spec["case"], "mode": spec["mode"], "kind": spec["kind"]}
    timeout = spec["step_timeout"]
    state = {"phase": "start", "progress": perf(), "done": False, "armed": False}
    gaps: list[tuple[float, float, float]] = []
    steps: list[dict] = []  # start, wall, z, kind, issued ids, shown
    # garbage collections of 5 ms or more (start, seconds, generation): a full collection
    # of napari's heap stalls every thread for ~200 ms whatever the reader is doing
    collections: list[tuple[float, float, int]] = []
    gc_start = [0.0]

    every: list[tuple[float, int]] = []  # (start, generation) of every collection

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            gc_start[0] = perf()
            every.append((gc_start[0], info["generation"]))
        elif (took := perf() - gc_start[0]) >= 0.005:
            collections.append((gc_start[0], took, info["generation"]))

    gc.callbacks.append(on_gc)
    emitted = threading.Lock()

    def emit() -> None:
        if not emitted.acquire(blocking=False):
            return
        plain = json.dumps(res, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
        sys.stdout.write(MARK + plain + "\n")
        sys.stdout.flush()

    def finish_steps(end: float) -> None:
        timed = [s for s in steps if s["kind"] != "position"]
        starts = [s["start"] for s in timed]
        worst = _charge_stalls(gaps, starts, end)
        bounds = [*starts[1:], end]
        moving = [g for t, g in every if starts and starts[0] <= t < end]
        res["collections"] = [moving.count(g) for g in range(3)]
        res["steps"] = [
            {
                "kind": s["kind"],
                "z": s["z"],
                "wall": s["wall"],
                "freeze": w,
                "shown": s["shown"],
                # collection pauses that began during this step (seconds, generation)
                "gc": [(t, g) for a, t, g in collections if s["start"] <= a < b],
            }
            for s, w, b in zip(timed, worst, bounds)
        ]

    def watchdog() -> None:
        while not state["done"]:
            time.sleep(0.5)
            blocked = perf() - state["progress"]
            if state["armed"] and blocked > timeout and not state["done"]:
                res["notes"].append(
                    f"gave up: the event loop was blocked for more than {timeout:.0f} s "
                    f"(phase: {state['phase']})"
                )
                res["gave_up"] = True
                if steps and state["phase"] == "browse":
                    gaps.append((state["progress"], perf(), blocked))
                    finish_steps(perf())
                emit()
                os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()

    import napari
    from napari.layers import Image
    from napari.settings import get_settings
    from qtpy.QtCore import QEventLoop, Qt, QTimer

    res["napari"] = napari.__version__
    if spec["reader"] == "napari-ozx":
        import napari_ozx

        res["plugin_from"] = str(Path(napari_ozx.__file__).parent)
    res["async_setting"] = bool(get_settings().experimental.async_)
    if res["async_setting"] != (spec["mode"] == "async"):
        res["notes"].append(
            f"napari async slicing is {res['async_setting']} in {spec['mode']} mode "
            f"(NAPARI_ASYNC={os.environ.get('NAPARI_ASYNC')!r})"
        )
    viewer, scene_canvas = open_window(napari)

    def run_for(seconds: float) -> None:
        end = perf() + seconds
        run_until(lambda: perf() >= end, seconds + 1)

    last_tick = [None]

    def tick() -> None:
        now = perf()
        if last_tick[0] is not None:
            stall = now - last_tick[0] - TICK_MS / 1000
            if stall > 0.001:
                gaps.append((last_tick[0], now, stall))
        last_tick[0] = now
        state["progress"] = now

    ticker = QTimer()
    ticker.setTimerType(Qt.TimerType.PreciseTimer)
    ticker.setInterval(TICK_MS)
    ticker.timeout.connect(tick)
    state["progress"], state["armed"] = perf(), True
    ticker.start()
    run_for(1.0)  # window shown and drawn once

    def image_layers() -> list:
        return [ly for ly in viewer.layers if isinstance(ly, Image)]

    def slice_of(layer):
        return layer._slicing_state._slice

    def shown_ids() -> list[int]:
        return [slice_of(ly).request_id for ly in image_layers()]

    def asked_ids() -> list[int]:
        return [
            max(ly._slicing_state._last_slice_id, slice_of(ly).request_id) for ly in image_layers()
        ]

    def slice_level(layer) -> int:
        if not layer.multiscale:
            return 0
        sl = slice_of(layer)
        disp = list(sl.slice_input.displayed)
        scale = np.asarray(sl.tile_to_data.scale)[disp]
        for lv, f in enumerate(np.asarray(layer.downsample_factors)):
            if np.allclose(f[disp], scale):
                return lv
        return -1

    def open_ready() -> bool:
        lys = image_layers()
        return bool(lys) and all(
            ly.loaded and not slice_of(ly).empty and slice_level(ly) == ly.data_level for ly in lys
        )

    opened: dict = {}

    # a plane is on screen once a frame drawn with it has been swapped (QOpenGLWidget's
    # frameSwapped, after composition); without that signal, when it is drawn
    swapped = getattr(scene_canvas.native, "frameSwapped", None)

    def on_draw(event=None) -> None:
        now = perf()
        state["progress"] = now
        if "gl" not in res:
            try:
                from vispy.gloo import gl

                res["gl"] = f"{gl.glGetParameter(gl.GL_RENDERER)}"
            except Exception as e:
                res["gl"] = f"unknown ({type(e).__name__})"
        if "t0" in opened and "drawn" not in opened and open_ready():
            opened["drawn"] = now
        pending = [s for s in steps if s["shown"] is None and "drawn" not in s]
        if pending:
            ids = shown_ids()
            for s in pending:
                if all(i >= a for i, a in zip(ids, s["asked"])):
                    s["drawn"] = now
        if swapped is None:
            on_swapped()

    def on_swapped() -> None:
        now = perf()
        if "drawn" in opened and "done" not in opened:
            opened["done"] = now
        for s in steps:
            if s["shown"] is None and "drawn" in s:
                s["shown"] = now - s["start"]

    scene_canvas.events.draw.connect(on_draw, position="last")
    if swapped is not None:
        swapped.connect(on_swapped)

    # ---- first open
    state["phase"] = "open"
    res["wall_open"] = time.time()
    opened["t0"] = perf()
    try:
        viewer.open(spec["target"], plugin=spec["reader"])
    except Exception as e:
        res["error"] = f"viewer.open failed: {type(e).__name__}: {e}"
        state["done"] = True
        emit()
        os._exit(0)
    if not run_until(lambda: "done" in opened, timeout):
        res["notes"].append(f"first plane not drawn within {timeout:.0f} s")
    res["open_s"] = opened.get("done", perf()) - opened["t0"]
    run_for(1.0)
    res["wall_open_end"] = time.time()
    lys = image_layers()
    if not lys:
        res["error"] = "no image layers"
        state["done"] = True
        emit()
        os._exit(0)
    if spec.get("full_res"):  # one screen pixel per level-0 pixel: napari reads level 0
        state["phase"] = "zoom"
        viewer.camera.zoom = 1 / abs(float(lys[0].scale[-1]))
        run_for(0.2)
        if not run_until(lambda: open_ready() and lys[0].data_level == 0, timeout):
            res["notes"].append(f"full-resolution view not drawn within {timeout:.0f} s")
        run_for(1.0)
    labels = list(viewer.dims.axis_labels)
    zax = labels.index("z") if "z" in labels else viewer.dims.ndim - 3
    nz = int(viewer.dims.nsteps[zax])
    res["layers"] = [
        {"name": ly.name, "level": ly.data_level, "shape": list(ly.level_shapes[ly.data_level])}
        for ly in lys
    ]

    def move(z: int, kind: str) -> None:
        start, wall = perf(), time.time()
        viewer.dims.set_current_step(zax, z)
        steps.append(
            {
                "start": start,
                "wall": wall,
                "z": z,
                "kind": kind,
                "asked": asked_ids(),
                "shown": None,
            }
        )

    def all_shown() -> bool:
        return all(s["shown"] is not None for s in steps)

    def drive(plan: list[tuple[int, str]]) -> None:
        """Moves 250 ms apart from a timer, the event loop running in between."""
        loop = QEventLoop()
        todo = list(plan)
        t = QTimer()
        t.setTimerType(Qt.TimerType.PreciseTimer)
        t.setInterval(STEP_MS)

        def next_move() -> None:
            if not todo:
                t.stop()
                loop.quit()
                return
            move(*todo.pop(0))

        t.timeout.connect(next_move)
        next_move()
        t.start()
        loop.exec()

    rng = np.random.default_rng(JUMP_SEED)
    if spec["kind"] == "browse":
        n_seq, n_jump = spec["steps"], spec["jumps"]
        z0 = max(0, min(nz - 1 - n_seq, nz // 2 - n_seq // 2))
        state["phase"] = "position"
        res["wall_position"] = time.time()
        move(z0, "position")
        if not run_until(all_shown, timeout):
            res["notes"].append(f"positioning plane not shown within {timeout:.0f} s")
        run_for(0.5)
        # the floor: a redraw of the canvas with no new data (rendering, composition)
        floor = []
        for _ in range(4):
            n = len(gaps)
            scene_canvas.update()
            run_for(STEP_MS / 1000)
            floor.append(max((g[2] for g in gaps[n:]), default=0.0))
        res["idle_redraw_s"] = statistics.median(floor)
        plan = [(min(z0 + 1 + i, nz - 1), "step") for i in range(n_seq)]
        z = plan[-1][0] if plan else z0
        for _ in range(n_jump):
            nxt = int(rng.integers(nz))
            while nxt == z:
                nxt = int(rng.integers(nz))
            plan.append((nxt, "jump"))
            z = nxt
    else:  # long: back and forth through z
        state["phase"] = "settle"
        run_for(0.5)
        gc.collect()
        res["rss_before_mib"] = _rss_mib()
        run_for(0.3)
        z, d, plan = int(viewer.dims.current_step[zax]), 1, []
        for _ in range(spec["steps"]):
            if not 0 <= z + d < nz:
                d = -d
            z += d
            plan.append((z, "step"))
    state["phase"] = "browse"
    res["wall_browse"] = time.time()
    drive(plan)
    if not run_until(all_shown, timeout):
        res["notes"].append(f"last plane not shown within {timeout:.0f} s of the last move")
    run_for(0.3)
    finish_steps(perf())
    res["wall_browse_end"] = time.time()
    state["phase"] = "check"

    # ---- pixels napari holds vs zarr-python on the local directory
    import zarr

    group = zarr.open_group(spec["local"], mode="r")
    names = [label for label, *_ in CHANNELS]
    checks = []
    for i, ly in enumerate(image_layers()):
        sl = slice_of(ly)
        raw = np.asarray(sl.image.raw)
        lv = slice_level(ly)
        disp = list(sl.slice_input.displayed)
        t2d = sl.tile_to_data
        scale, trans = np.asarray(t2d.scale), np.asarray(t2d.translate)
        point = np.asarray(ly.world_to_data(viewer.dims.point))
        factors = np.asarray(ly.downsample_factors)[lv] if ly.multiscale else np.ones(ly.ndim)
        idx: list = []
        for d in range(ly.ndim):
            if d in disp:
                o = round(trans[d] / scale[d])
                idx.append(slice(o, o + raw.shape[disp.index(d)]))
            else:
                idx.append(round(point[d] / factors[d]))
        if ly.ndim == len(SHAPE) - 1:  # one layer per channel
            c = next((k for k, n in enumerate(names) if n in ly.name), i)
            idx.insert(0, c)
        want = np.asarray(group[str(lv)][tuple(idx)])
        exact = raw.shape == want.shape and bool(np.array_equal(raw, want))
        checks.append(
            {
                "layer": ly.name,
                "level": lv,
                "data_level": ly.data_level,
                "index": [str(x) for x in idx],
                "shape": list(raw.shape),
                "exact": exact,
            }
        )
    res["pixels"] = checks
    res["pixels_exact"] = bool(checks) and all(c["exact"] for c in checks)
    if spec["kind"] == "long":
        gc.collect()
        run_for(0.5)
        res["rss_after_mib"] = _rss_mib()
    state["done"] = True
    ticker.stop()
    emit()
    os._exit(0)  # napari / fsspec shutdown is not what is measured


# ------------------------------------------------------------------ parent


class _TimedList(list):
    """Server.requests that also keeps when each request was logged (after the latency)."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def append(self, item) -> None:
        self.times.append(time.time())
        super().append(item)

    def clear(self) -> None:
        self.times.clear()
        super().clear()


def _child_env(tmp: Path, mode: str, pythonpath: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NAPARI_ASYNC", "PYTHONPATH")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    home = tmp / "home"
    for d in ("home", "config", "cache", "data", "runtime"):
        (tmp / d).mkdir(mode=0o700)
    env |= {
        "NAPARI_CONFIG": str(tmp / "config" / "napari-settings.yaml"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(tmp / "config"),
        "XDG_CACHE_HOME": str(tmp / "cache"),
        "XDG_DATA_HOME": str(tmp / "data"),
        "XDG_RUNTIME_DIR": str(tmp / "runtime"),
    }
    if mode == "async":
        env["NAPARI_ASYNC"] = "1"
    return env


def run_child(python: str, spec: dict, srv, latency: float, pythonpath: str | None) -> dict:
    n_moves = spec["steps"] + spec.get("jumps", 0)
    limit = 180 + (n_moves + 4) * spec["step_timeout"]
    srv.reset()
    with tempfile.TemporaryDirectory(prefix="bench-browse-") as tmp:
        cmd = [python, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
        try:
            p = subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                env=_child_env(Path(tmp), spec["mode"], pythonpath),
                timeout=limit,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"no result within {limit:.0f} s"}
    line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith(MARK)), None)
    if line is None:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        return {"error": f"child exited {p.returncode} without a result: {tail}"}
    res = json.loads(line[len(MARK) :])
    # the server's log, split at the child's phase times (a request is logged after the latency)
    arrived = [t - latency for t in srv.requests.times]
    res["requests_total"] = len(arrived)
    res["mib"] = srv.body_bytes / 2**20

    def count(a: float, b: float) -> int:
        return sum(a <= t < b for t in arrived)

    if "wall_open" in res:
        res["requests_open"] = count(res["wall_open"], res.get("wall_open_end", float("inf")))
    walls = [s["wall"] for s in res.get("steps", [])]
    ends = [*walls[1:], res.get("wall_browse_end", float("inf"))]
    for s, a, b in zip(res.get("steps", []), walls, ends):
        s["requests"] = count(a, b)
    return res


def _med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _full_gc(step: dict) -> float:
    """Seconds of full (generation 2) garbage collection that began during ``step``."""
    return sum(t for t, g in step.get("gc", []) if g == 2)


def summarise(res: dict) -> dict:
    """One child's numbers for the table (times in ms, open in s)."""
    if "error" in res:
        return {"error": res["error"]}
    steps = res.get("steps", [])
    seq = [s for s in steps if s["kind"] == "step"]
    out = {
        "freeze": _med([s["freeze"] * 1e3 for s in seq]),
        "max_freeze": max((s["freeze"] * 1e3 for s in steps), default=None),
        # the same with the time of full (generation 2) collections in the step taken out
        "max_freeze_nogc": max(
            (max(s["freeze"] - _full_gc(s), 0.0) * 1e3 for s in steps), default=None
        ),
        "full_gcs": [round(t * 1e3) for s in steps for t, g in s.get("gc", []) if g == 2],
        "collections": res.get("collections"),
        "open": res.get("open_s"),
        "req_open": res.get("requests_open"),
        "req_step": _med([s.get("requests") for s in seq]),
        "req_total": res.get("requests_total"),
        "mib": res.get("mib"),
        "shown": _med([s["shown"] * 1e3 if s["shown"] is not None else None for s in seq]),
        "shown_max": max((s["shown"] * 1e3 for s in steps if s["shown"] is not None), default=None),
        "not_shown": sum(s["shown"] is None for s in steps),
        "pixels": res.get("pixels_exact"),
        "gave_up": res.get("gave_up", False),
        "idle_redraw": res["idle_redraw_s"] * 1e3 if "idle_redraw_s" in res else None,
        "gl": res.get("gl"),
    }
    if "rss_before_mib" in res:
        out["rss_before"] = res["rss_before_mib"]
        out["rss_after"] = res.get("rss_after_mib")
    return out


def _yes(flag: bool | None) -> str:
    return "-" if flag is None else "yes" if flag else "no"


def _fmt(v, spec: str, unit: str = "") -> str:
    if v is None:  # as wide as a number when the spec has a width
        return "-".rjust(len(f"{0:{spec}}{unit}") if spec[:1].isdigit() else 1)
    return f"{v:{spec}}{unit}"


def print_table(results: dict, cases: list[str], modes: list[str]) -> None:
    head = (
        f"{'case':27s} {'mode':7s} {'freeze/step':>11s} {'max freeze':>10s} {'redraw':>7s}"
        f" {'first open':>10s}"
        f" {'requests open/step/total':>24s} {'MiB':>6s} {'plane shown med/max':>19s}"
        f" {'pixels exact':>12s}"
    )
    print("\n" + head)
    print("-" * len(head))
    notes: list[str] = []
    for case in cases:
        for mode in modes:
            runs = results.get((case, mode), [])
            if not runs:
                continue
            ok = [r for r in runs if "error" not in r]
            if not ok:
                print(f"{CASES[case][1]:27s} {mode:7s} failed: {runs[0]['error']}")
                continue

            def m(k, ok=ok):
                return _med([r.get(k) for r in ok])

            req = " / ".join(_fmt(m(k), ".0f") for k in ("req_open", "req_step", "req_total"))
            shown = f"{_fmt(m('shown'), '.0f')} / {_fmt(m('shown_max'), '.0f')} ms"
            checked = [r["pixels"] for r in ok if r.get("pixels") is not None]
            pix = "-" if not checked else "yes" if all(checked) else "no"
            if any(r.get("gave_up") for r in ok):
                notes.append(f"{CASES[case][1]} ({mode}): gave up (see the notes above)")
            lost = sum(r.get("not_shown") or 0 for r in ok)
            if lost:
                notes.append(f"{CASES[case][1]} ({mode}): {lost} move(s) never shown")
            if len(ok) < len(runs):
                pix += f" ({len(runs) - len(ok)} failed)"
            per_gen = [r["collections"] for r in ok if r.get("collections")]
            if per_gen:
                notes.append(
                    f"{CASES[case][1]} ({mode}): garbage collections during the moves, "
                    f"generation 0/1/2: {' / '.join(str(_med(list(g))) for g in zip(*per_gen))}"
                )
            gcs = [t for r in ok for t in r.get("full_gcs") or []]
            if gcs:
                notes.append(
                    f"{CASES[case][1]} ({mode}): {len(gcs)} full garbage collection(s) of "
                    f"napari's heap during the moves ({', '.join(f'{t} ms' for t in gcs)}); "
                    f"max freeze without them {_fmt(m('max_freeze_nogc'), '.0f', ' ms')}"
                )
            print(
                f"{CASES[case][1]:27s} {mode:7s} {_fmt(m('freeze'), '8.0f', ' ms')} "
                f"{_fmt(m('max_freeze'), '7.0f', ' ms')} {_fmt(m('idle_redraw'), '4.0f', ' ms')} "
                f"{_fmt(m('open'), '8.2f', ' s')} "
                f"{req:>24s} {_fmt(m('mib'), '6.1f')} {shown:>19s} {pix:>12s}"
            )
    for n in notes:
        print(f"  note: {n}")
    gl = next((r["gl"] for v in results.values() for r in v if r.get("gl")), None)
    print(
        "freeze/step: median over the sequential steps of the longest event-loop stall in "
        "each; redraw: the same for a canvas redraw without new data (the floor)"
        f"{'; OpenGL renderer: ' + gl if gl else ''}"
    )
    print("\nratios of the median freeze per step (and of the max freeze):")
    for mode in modes:

        def get(case, key, mode=mode):
            ok = [r for r in results.get((case, mode), []) if "error" not in r]
            return _med([r.get(key) for r in ok])

        for num, den, label in (
            ("ozx", "local", "remote .ozx / local"),
            ("dir", "local", "remote dir / local"),
            ("peer", "dir", "napari-ome-zarr / napari-ozx (remote dir)"),
            ("ozx", "dir", "remote .ozx / remote dir"),
        ):
            a, b = get(num, "freeze"), get(den, "freeze")
            am, bm = get(num, "max_freeze"), get(den, "max_freeze")
            if a is None or b is None:
                continue
            r = f"{a / b:7.1f}x" if b > 0 else "   inf"
            rm = f"{am / bm:.1f}x" if bm else "inf"
            print(f"  {mode:7s} {label:42s} {r}   (max {rm})")


@contextlib.contextmanager
def _serving(srv: Any, niceness: int) -> Iterator[Any]:
    """``srv`` running on threads with ``niceness``. The server shares this machine's cores
    with napari (about 0.2 ms of CPU per request for ``FastServer``, 1 ms for ``Server``); a
    remote server takes none of the client's CPU, so by default it gets the CPU only when
    napari and the reader leave some. Linux keeps a niceness per thread and new threads
    inherit it: the thread that starts the server is niced, and every thread it starts
    (the accept loop, one per connection) is too; the children napari runs in are not."""
    if niceness:

        def enter() -> None:
            os.nice(niceness)
            srv.__enter__()

        t = threading.Thread(target=enter, name="bench-server-start")
        t.start()
        t.join()
    else:
        srv.__enter__()
    try:
        yield srv
    finally:
        srv.__exit__(None, None, None)


def io_floor(url: str, n: int, keep_alive: bool, rounds: int = 5) -> tuple[float, float]:
    """Median ms of one GET and of ``n`` concurrent GETs (distinct level-1 chunks of the
    served directory, plain ``http.client``; with ``keep_alive`` each thread keeps its
    connection, opened in a first round not counted, else a connection per request): what
    the server and this machine cost for a plane's requests before any reader does
    anything. On a 2-core machine the local server shares the cores with the client."""
    import http.client
    from concurrent.futures import ThreadPoolExecutor
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    keys = [
        f"{parts.path}/browse.ome.zarr/1/0/{z}/{y}/{x}"
        for z in range(40)
        for y in range(3)
        for x in range(3)
    ]

    mine = threading.local()
    conns: list[http.client.HTTPConnection] = []

    def get(key: str) -> None:
        conn = getattr(mine, "conn", None) if keep_alive else None
        if conn is None:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
            if keep_alive:
                mine.conn = conn
                conns.append(conn)
        try:
            conn.request("GET", key)
            conn.getresponse().read()
        finally:
            if not keep_alive:
                conn.close()

    one, many = [], []
    with ThreadPoolExecutor(n) as pool:
        if keep_alive:  # every thread's connection opened
            barrier = threading.Barrier(n)
            list(pool.map(lambda k: (barrier.wait(30), get(k)), keys[-n:]))
            get(keys[-n - 1])
        for r in range(rounds):
            t = time.perf_counter()
            get(keys[r])
            one.append(time.perf_counter() - t)
            batch = keys[(r * n) % (len(keys) - n) :][:n]
            t = time.perf_counter()
            list(pool.map(get, batch))
            many.append(time.perf_counter() - t)
    for conn in conns:
        conn.close()
    return statistics.median(one) * 1e3, statistics.median(many) * 1e3


def _provenance(ozx_src: str | None) -> str:
    """Which napari_ozx the children import: the git state of src/, or the given directory."""
    if ozx_src:
        return f"from {ozx_src} (--ozx-src)"

    def git(*a: str) -> str:
        p = subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True)
        return p.stdout.strip() if p.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return "the installed package"
    dirty = git("status", "--porcelain", "--", "src")
    changed = len(dirty.splitlines())
    return f"src/ at {head}" + (f" plus {changed} uncommitted change(s) in src/" if dirty else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="local,dir,ozx,peer", help="comma-separated subset")
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--skip-async", action="store_true")
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--peer-python", default=None, help="python with napari-ome-zarr installed")
    ap.add_argument("--long-steps", type=int, default=200, help="moves of the RSS run; 0: none")
    ap.add_argument("--steps", type=int, default=24, help="sequential z steps")
    ap.add_argument("--jumps", type=int, default=8, help="jumps to random planes")
    ap.add_argument("--step-timeout", type=float, default=60.0, help="seconds before giving up")
    ap.add_argument("--quick", action="store_true", help="6 steps, 2 jumps, 20 long steps")
    ap.add_argument(
        "--full-res",
        action="store_true",
        help="after the open, zoom to one screen pixel per full-resolution pixel (level 0)",
    )
    ap.add_argument(
        "--ozx-src",
        default=None,
        help="a directory holding the napari_ozx package to measure instead of the installed "
        "one (e.g. an export of another commit's src/)",
    )
    ap.add_argument(
        "--server-nice",
        type=int,
        default=19,
        help="niceness of the server's threads (0: compete with napari for the CPU as an "
        "equal; a real remote server takes none of the client's CPU)",
    )
    ap.add_argument(
        "--server",
        choices=["fast", "threaded"],
        default="fast",
        help="the local server: one asyncio loop (~0.2 ms of CPU per request), or Python's "
        "http.server with a thread per connection (~1 ms)",
    )
    ap.add_argument(
        "--no-keep-alive",
        action="store_true",
        help="the threaded server answers HTTP/1.0, a connection per request (by default "
        "HTTP/1.1 keeping connections, as cloud object stores do)",
    )
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.no_keep_alive and args.server != "threaded":
        ap.error("--no-keep-alive needs --server threaded")
    if args.child is not None:
        child_main(json.loads(args.child))
        return
    t_start = time.perf_counter()
    if args.quick:
        args.steps, args.jumps, args.long_steps = 6, 2, min(args.long_steps, 20)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad:
        ap.error(f"unknown cases {bad}; known: {', '.join(CASES)}")
    modes = ["default"] if args.skip_async else ["default", "async"]
    src, _ozx = generate(args.regenerate)

    pythons = dict.fromkeys(CASES, sys.executable)
    if "peer" in cases:
        if args.skip_peer:
            cases.remove("peer")
            print("napari-ome-zarr: skipped (--skip-peer)")
        else:
            py, why = peer_python(args.peer_python)
            if py is None:
                cases.remove("peer")
                print(f"napari-ome-zarr: skipped: {why}")
            else:
                pythons["peer"] = py
                print(f"peer: {why}")
    ozx_path = str(Path(args.ozx_src).resolve()) if args.ozx_src else None
    paths = {c: (ozx_path if CASES[c][0] == "napari-ozx" else None) for c in CASES}
    print(f"napari-ozx: {_provenance(ozx_path)}")
    xvfb = ensure_display()
    latency = args.latency_ms / 1000
    sys.path.insert(0, str(ROOT))
    from tests._support.httpserver import FastServer, Server

    results: dict = {}
    raw: list = []
    try:
        if args.server == "fast":
            server: Any = FastServer(DATA)
        else:
            server = Server(DATA, keep_alive=not args.no_keep_alive)
        with _serving(server, args.server_nice) as srv:
            srv.latency = latency
            one, many = io_floor(srv.url, PLANE_REQUESTS, not args.no_keep_alive)
            print(
                f"server ({args.server}) floor: one request {one:.0f} ms, {PLANE_REQUESTS} "
                f"concurrent requests (a plane of both channels at the level shown, with their "
                f"thumbnails) {many:.0f} ms; the server's threads run at niceness "
                f"{args.server_nice}, "
                + ("a connection per request" if args.no_keep_alive else "keep-alive")
            )
            srv.requests = _TimedList()
            print(
                f"{SHAPE[0]} x {SHAPE[1]} x {SHAPE[2]} x {SHAPE[3]} uint16, {CHUNK}^2 chunks, "
                f"{LEVELS} levels; HTTP latency {args.latency_ms:.0f} ms per request; "
                f"{args.steps} z steps + {args.jumps} jumps, {STEP_MS} ms apart; "
                f"{args.repeats} repeat(s)",
                flush=True,
            )

            def spec_for(case: str, mode: str, kind: str) -> dict:
                reader, _label, remote = CASES[case]
                return {
                    "case": case,
                    "mode": mode,
                    "kind": kind,
                    "reader": reader,
                    "target": str(src) if remote is None else f"{srv.url}/{remote}",
                    "local": str(src),
                    "steps": args.steps if kind == "browse" else args.long_steps,
                    "jumps": args.jumps if kind == "browse" else 0,
                    "step_timeout": args.step_timeout,
                    "full_res": args.full_res,
                }

            for rep in range(args.repeats):
                for case in cases:
                    for mode in modes:
                        t = time.perf_counter()
                        res = run_child(
                            pythons[case], spec_for(case, mode, "browse"), srv, latency, paths[case]
                        )
                        raw.append(res)
                        s = summarise(res)
                        results.setdefault((case, mode), []).append(s)
                        took = time.perf_counter() - t
                        if "error" in s:
                            msg = f"failed: {s['error']}"
                        else:
                            msg = (
                                f"freeze/step {_fmt(s['freeze'], '.0f')} ms, "
                                f"max {_fmt(s['max_freeze'], '.0f')} ms, "
                                f"open {_fmt(s['open'], '.2f')} s, "
                                f"{s['req_total']} requests, pixels exact: "
                                f"{_yes(s['pixels'])}"
                            )
                        print(
                            f"[{rep + 1}/{args.repeats}] {CASES[case][1]} ({mode}): {msg} "
                            f"[{took:.0f} s]",
                            flush=True,
                        )
                        for note in res.get("notes", []):
                            print(f"    note: {note}", flush=True)
            long_res = {}
            if args.long_steps > 0:
                for case in [c for c in cases if CASES[c][2] is not None]:
                    t = time.perf_counter()
                    res = run_child(
                        pythons[case], spec_for(case, "default", "long"), srv, latency, paths[case]
                    )
                    raw.append(res)
                    long_res[case] = s = summarise(res)
                    print(
                        f"[long] {CASES[case][1]}: {s.get('error') or 'done'} "
                        f"[{time.perf_counter() - t:.0f} s]",
                        flush=True,
                    )
                    for note in res.get("notes", []):
                        print(f"    note: {note}", flush=True)
    finally:
        if xvfb is not None:
            xvfb.terminate()
            xvfb.wait(10)

    (DATA / "bench_browse_last.json").write_text(json.dumps(raw, indent=1))
    print_table(results, cases, modes)
    if long_res:
        print(f"\nRSS over a longer browse ({args.long_steps} moves back and forth, default mode):")
        for case, s in long_res.items():
            if "error" in s:
                print(f"  {CASES[case][1]:27s} failed: {s['error']}")
                continue
            a, b = s.get("rss_before"), s.get("rss_after")
            grow = b - a if a is not None and b is not None else None
            print(
                f"  {CASES[case][1]:27s} {_fmt(a, '7.0f', ' MiB')} -> {_fmt(b, '7.0f', ' MiB')}"
                f"  ({_fmt(grow, '+.0f', ' MiB')}; freeze/step {_fmt(s['freeze'], '.0f', ' ms')},"
                f" {_fmt(s['req_total'], '.0f')} requests, pixels exact: "
                f"{_yes(s['pixels'])})"
            )
    print(f"\ntotal {(time.perf_counter() - t_start) / 60:.1f} min")


if __name__ == "__main__":
    main()
