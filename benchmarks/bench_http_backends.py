"""Remote first open and first plane: obstore vs fsspec (the two HTTP backends), vs local.

Usage::

    python benchmarks/bench_http_backends.py [--repeats 7] [--latency-ms 50]

The data is bench_browse.py's (2 x 40 x 1536 x 1536 uint16, 256² chunks, 3 levels, an
OME-Zarr 0.4 directory written by zarr-python and its ``.ozx``; generated under
benchmarks/_data/ on first use). This process serves it over HTTP on 127.0.0.1 with
``--latency-ms`` added to every request; each measurement is a fresh Python process that
imports napari first (as napari has when it calls our reader), then times the reader
call (``read_layer_data``: imports, metadata, layer data) and the first full-resolution
plane of both channels. Cases are interleaved; medians of the repeats, and ratios to the
local open of the same file, are printed.

The issue's bar: a remote first open costs no more than the local one plus a few round
trips.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

CHILD = """
import json, sys, time
import napari  # what napari has imported when it calls the reader
import numpy as np
t = time.perf_counter()
from napari_ozx.layers.reading import read_layer_data
layers = read_layer_data(sys.argv[1])
t_open = time.perf_counter() - t
t = time.perf_counter()
for data, kw, kind in layers:
    if kind == "image":
        level = data[0] if isinstance(data, list) else data
        np.asarray(level[(20,) + (slice(None),) * 2] if level.ndim == 3 else level[:, 20])
t_plane = time.perf_counter() - t
mods = sorted(m for m in ("aiohttp", "fsspec.implementations.http", "obstore") if m in sys.modules)
print(json.dumps({"open": t_open, "plane": t_plane, "modules": mods}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    args = ap.parse_args()

    from bench_browse import DATA, generate

    from tests._support.httpserver import Server

    d, z = generate(False)
    cases = {
        "local .ozx": (str(z), None),
        "local dir": (str(d), None),
        "remote .ozx, obstore": (z.name, "obstore"),
        "remote .ozx, fsspec": (z.name, "fsspec"),
        "remote dir, obstore": (d.name, "obstore"),
        "remote dir, fsspec": (d.name, "fsspec"),
    }
    res: dict[str, list[dict]] = {k: [] for k in cases}
    with Server(DATA) as srv:
        srv.latency = args.latency_ms / 1000
        for _ in range(args.repeats):
            for name, (where, backend) in cases.items():
                target = f"{srv.url}/{where}" if backend else where
                env = dict(os.environ)
                env.pop("NAPARI_OZX_HTTP_BACKEND", None)
                if backend:
                    env["NAPARI_OZX_HTTP_BACKEND"] = backend
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, target],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=ROOT,
                    timeout=600,
                )
                if out.returncode:
                    sys.exit(out.stderr[-3000:])
                res[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    rtt = args.latency_ms
    print(f"{args.repeats} interleaved repeats, {rtt:g} ms per request; medians")
    local = {
        "ozx": statistics.median(r["open"] for r in res["local .ozx"]),
        "dir": statistics.median(r["open"] for r in res["local dir"]),
    }
    for name, runs in res.items():
        o = statistics.median(r["open"] for r in runs)
        p = statistics.median(r["plane"] for r in runs)
        ref = local["ozx" if ".ozx" in name else "dir"]
        extra = (o - ref) * 1000
        print(
            f"{name:22s} open {o * 1e3:7.1f} ms ({extra:+6.0f} ms = {extra / rtt:+5.1f} RTT vs "
            f"local)  first plane {p * 1e3:6.1f} ms  imports {runs[-1]['modules']}"
        )


if __name__ == "__main__":
    main()
