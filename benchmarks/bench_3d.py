"""Turning a remote multiscale stack 3D in napari: what is shown when, how long napari freezes.

Usage::

    python benchmarks/bench_3d.py [--repeats 3] [--latency-ms 50] [--cases ozx,dir,local]
        [--modes refine,direct] [--budget-mb 1200] [--baseline-src ../main/src]

(``xvfb-run -a`` in front, or nothing: an Xvfb is started when there is no display.)

The data is ``bench_browse.py``'s (made once in benchmarks/_data/): a 2 x 40 x 1536 x 1536
uint16 (c, z, y, x) z-stack, 3 levels, as a directory and an ``.ozx``, served from
127.0.0.1 by the tests' ``FastServer`` answering every request after ``--latency-ms``
(a distant server; its threads niced as in bench_browse). Each case runs in a fresh
process (nothing cached carries over), the cases and modes interleaved over the repeats:

* ``refine``: napari-ozx as it is: the coarsest level (40 x 384 x 384), read ahead while
  2D is shown, at once; the level that fits the budget (level 0, 40 x 1536 x 1536 =
  180 MiB a channel, 540 MiB in its three copies: the default 1200 MiB for the two layers
  fits it) read off the GUI thread, then shown;
* ``direct``: the level that fits locked at once, as napari-ozx did before refining:
  napari reads it on the GUI thread when the view turns 3D;
* ``baseline`` (with ``--baseline-src``): ``refine`` as another source tree does it (e.g.
  main's, to measure a change in the same run).

In the child, a napari window (1200 x 900) opens the image (two channel layers), waits
until the 2D view is drawn, then sets ``viewer.dims.ndisplay = 3``. A 10 ms timer measures
every stall of the event loop. Per case:

* **first 3D**: from the switch until a frame has been drawn with every layer in 3D
  (holding a 3D slice, at whatever level);
* **budget level**: from the switch until every layer shows the budget level and a frame
  with it has been drawn;
* **max freeze**: the longest stall of the event loop from the switch until then;
* **RSS**: the process's resident memory after the 2D view, and its peak (sampled every
  10 ms) from the switch until the budget level is shown;
* **pixels exact**: each layer's 3D volume against zarr-python reading the local directory.

Prints medians over the repeats and the ratios direct / refine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_browse as bb  # noqa: E402  (the same data, display and server set-up)
from _napari_window import open_window, run_until  # noqa: E402

MARK = "BENCH_3D_RESULT "
TICK_MS = 10


def child_main(spec: dict) -> None:
    import warnings

    warnings.simplefilter("ignore")
    import napari
    import numpy as np
    from qtpy.QtCore import Qt, QTimer

    from napari_ozx import _refine3d

    perf = time.perf_counter
    res: dict = {"case": spec["case"], "mode": spec["mode"]}
    chosen: dict[int, int] = {}  # id(layer) -> the level napari-ozx chose for 3D
    real_refine = _refine3d.refine

    def direct(viewer, layer, level):  # as before refining: the chosen level locked at once
        from napari_ozx.layers.provenance import LOCKED_3D_KEY

        layer.metadata[LOCKED_3D_KEY] = True
        layer.locked_data_level = level

    def recording(viewer, layer, level):
        chosen[id(layer)] = level
        (direct if spec["mode"] == "direct" else real_refine)(viewer, layer, level)

    _refine3d.refine = recording
    viewer, scene_canvas = open_window(napari)

    stalls: list[tuple[float, float]] = []  # (start, seconds) of every event-loop stall
    last = [perf()]

    def tick() -> None:
        now = perf()
        if now - last[0] - TICK_MS / 1000 > 0.001:
            stalls.append((last[0], now - last[0] - TICK_MS / 1000))
        last[0] = now

    ticker = QTimer()
    ticker.setTimerType(Qt.TimerType.PreciseTimer)
    ticker.setInterval(TICK_MS)
    ticker.timeout.connect(tick)
    ticker.start()
    swaps = [0]
    swapped = getattr(scene_canvas.native, "frameSwapped", None)
    if swapped is not None:
        swapped.connect(lambda: swaps.__setitem__(0, swaps[0] + 1))
    else:
        scene_canvas.events.draw.connect(lambda _e: swaps.__setitem__(0, swaps[0] + 1))

    layers = viewer.open(spec["target"], plugin="napari-ozx")

    def slice_of(layer):
        return layer._slicing_state._slice

    def shown_ndim() -> list[int]:
        return [np.asarray(slice_of(ly).image.raw).ndim for ly in layers]

    def frame_after(pred, limit: float) -> float | None:
        """Seconds from now until *pred* holds and a frame has been swapped after that."""
        t = perf()
        if not run_until(pred, limit):
            return None
        n = swaps[0]
        if not run_until(lambda: swaps[0] > n, limit):
            return None
        return perf() - t

    frame_after(lambda: all(d == 2 for d in shown_ndim()), 120)
    run_until(lambda: False, 1.0)
    rss_2d = bb._rss_mib()
    rss_peak = [rss_2d]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            rss_peak[0] = max(rss_peak[0], bb._rss_mib())
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stalls.clear()
    prof = None
    if os.environ.get("BENCH_3D_PROFILE"):  # where the switch's time goes (GUI thread)
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    t0 = perf()
    viewer.dims.ndisplay = 3
    first = frame_after(lambda: all(d == 3 for d in shown_ndim()), spec["timeout"])
    if prof is not None:
        prof.disable()
        prof.dump_stats(os.environ["BENCH_3D_PROFILE"])
    res["first_3d"] = None if first is None else perf() - t0
    res["first_level"] = [ly.data_level for ly in layers]
    if os.environ.get("BENCH_3D_PROFILE_REFINE"):  # ... and the refined level's swap
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    got = frame_after(
        lambda: all(ly.data_level == chosen.get(id(ly), -1) for ly in layers), spec["timeout"]
    )
    res["budget_level"] = None if got is None else perf() - t0
    if os.environ.get("BENCH_3D_PROFILE_REFINE") and prof is not None:
        prof.disable()
        prof.dump_stats(os.environ["BENCH_3D_PROFILE_REFINE"])
    t_end = perf()
    stop.set()
    sampler.join()
    res["max_freeze"] = max((s for a, s in stalls if t0 - 0.02 <= a <= t_end), default=0.0)
    res["freezes"] = sorted((round(s, 3) for a, s in stalls if s > 0.1), reverse=True)[:6]
    # the floor: a redraw of the same 3D view without new data (software OpenGL is slow)
    run_until(lambda: False, 0.5)
    stalls.clear()
    n = swaps[0]
    scene_canvas.native.update()
    run_until(lambda: swaps[0] > n, 60)
    run_until(lambda: False, 0.2)
    res["redraw"] = max((s for _a, s in stalls), default=0.0)
    res["rss_2d"] = rss_2d
    res["rss_peak"] = rss_peak[0]
    res["levels"] = [ly.data_level for ly in layers]
    import zarr

    ok = True
    for c, lay in enumerate(layers):
        path = f"{spec['local']}/{lay.data_level}"
        want = np.asarray(zarr.open_array(path, mode="r")[c])
        ok = ok and np.array_equal(np.asarray(slice_of(lay).image.raw), want)
    res["pixels_exact"] = bool(ok)
    sys.stdout.write(MARK + json.dumps(res) + "\n")
    sys.stdout.flush()
    ticker.stop()
    viewer.close()


def run_child(spec: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env.update(
            NAPARI_CONFIG=str(Path(tmp) / "settings.yaml"),
            NAPARI_OZX_CONFIG_DIR=str(Path(tmp) / "ozx"),
            HOME=tmp,
            NAPARI_OZX_3D_BUDGET_MB=str(spec["budget_mb"]),
        )
        if spec.get("src"):  # another source tree of napari-ozx (``--baseline-src``)
            env["PYTHONPATH"] = os.pathsep.join([spec["src"], str(ROOT)])
        p = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(spec)],
            env=env,
            capture_output=True,
            text=True,
            timeout=spec["timeout"] + 240,
        )
    for line in p.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    raise RuntimeError(f"child failed ({p.returncode}): {p.stderr[-3000:]}")


def _med(xs: list) -> float:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="ozx,dir,local")
    ap.add_argument("--modes", default="refine,direct")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument("--budget-mb", type=float, default=1200)
    ap.add_argument(
        "--baseline-src",
        default="",
        help="a napari-ozx src/ folder (e.g. a checkout of main): adds mode 'baseline', "
        "refine as that tree does it",
    )
    ap.add_argument("--timeout", type=float, default=180.0)
    ap.add_argument("--server-nice", type=int, default=19)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child_main(json.loads(args.child))
        return
    display = bb.ensure_display()
    src, ozx = bb.generate(False)
    from tests._support.httpserver import FastServer

    srv = FastServer(bb.DATA)
    srv.latency = args.latency_ms / 1000
    cases = [c for c in args.cases.split(",") if c]
    modes = [m for m in args.modes.split(",") if m]
    if args.baseline_src and "baseline" not in modes:
        modes.append("baseline")
    results: dict[tuple[str, str], list[dict]] = {}
    try:
        with bb._serving(srv, args.server_nice):
            targets = {
                "local": str(src),
                "dir": f"{srv.url}/{src.name}",
                "ozx": f"{srv.url}/{ozx.name}",
            }
            for r in range(args.repeats):
                for case in cases:
                    for mode in modes if r % 2 == 0 else modes[::-1]:
                        spec = {
                            "case": case,
                            "mode": mode,
                            "target": targets[case],
                            "local": str(src),
                            "timeout": args.timeout,
                            "budget_mb": args.budget_mb,
                            "src": args.baseline_src if mode == "baseline" else "",
                        }
                        out = run_child(spec)
                        results.setdefault((case, mode), []).append(out)
                        print(f"  repeat {r + 1} {case:5} {mode:6}: {json.dumps(out)}", flush=True)
    finally:
        if display is not None:
            display.terminate()
    print(
        f"\n3D switch, {args.latency_ms:.0f} ms per request, budget {args.budget_mb:.0f} MiB, "
        f"medians of {args.repeats}"
    )
    head = f"{'case':6} {'mode':8} {'level':>5} {'first 3D s':>10} {'budget s':>9}"
    head += f" {'max freeze ms':>14} {'redraw ms':>10} {'RSS 2D MiB':>11} {'peak MiB':>9}"
    print(head + f" {'peak-2D MiB':>12} {'exact':>6}")
    for (case, mode), runs in results.items():
        print(
            f"{case:6} {mode:8} {max(max(x['levels']) for x in runs):5d} "
            f"{_med([x['first_3d'] for x in runs]):10.2f} "
            f"{_med([x['budget_level'] for x in runs]):9.2f} "
            f"{1000 * _med([x['max_freeze'] for x in runs]):14.0f} "
            f"{1000 * _med([x['redraw'] for x in runs]):10.0f} "
            f"{_med([x['rss_2d'] for x in runs]):11.0f} {_med([x['rss_peak'] for x in runs]):9.0f}"
            f" {_med([x['rss_peak'] - x['rss_2d'] for x in runs]):12.0f}"
            f" {all(x['pixels_exact'] for x in runs)!s:>6}"
        )
    print(f"(3D budget {args.budget_mb:.0f} MiB for all the layers together)")
    for case in cases:
        a = results.get((case, "refine"))
        for other in ("direct", "baseline"):
            b = results.get((case, other))
            if a and b:
                fr = _med([x["max_freeze"] for x in b]) / _med([x["max_freeze"] for x in a])
                f3 = _med([x["first_3d"] for x in b]) / _med([x["first_3d"] for x in a])
                print(f"{case}: {other} / refine: max freeze {fr:.1f}x, first 3D {f3:.1f}x")


if __name__ == "__main__":
    main()
