"""First-open timing shared by the benchmarks: a fresh interpreter per measurement, napari
already imported, optionally ``dask.array`` too (its scipy imports cost ~0.5 s here and
every dask-backed reader pays them on first use)."""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

OPEN = """
import time, json, sys, warnings
warnings.simplefilter("ignore")
import napari
if {pre_dask}:
    import dask.array
t = time.perf_counter()
{reader_import}
p = {path!r}
ld = get(p)(p)
first = time.perf_counter() - t
again = []
for _ in range(3):
    t = time.perf_counter(); get(p)(p); again.append(time.perf_counter() - t)
print(json.dumps([first, sorted(again)[1], len(ld)]))
"""
OURS = "from napari_ozx._reader import get_reader as get"
PEER = "from napari_ome_zarr._reader import napari_get_reader as get"


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def run_open(
    python: str, reader: str, path: Path, repeats: int, pre_dask: bool
) -> tuple[float, float]:
    firsts, agains = [], []
    code = OPEN.format(pre_dask=pre_dask, reader_import=reader, path=str(path))
    for _ in range(repeats):
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
        first, again, _n = json.loads(out.stdout.strip().splitlines()[-1])
        firsts.append(first)
        agains.append(again)
    return med(firsts), med(agains)
