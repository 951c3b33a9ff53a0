"""bioformats2raw's OME-XML: a 200 MB XML opened, ``info`` on it, and the cost for a
file without an XML.

Usage::

    python benchmarks/bench_omexml.py [--mb 200] [--repeats 5]

Builds (under benchmarks/_data/, gitignored) a copy of the ome-zarr-py 0.4 fixture
``tests/ngff/omexml/data/b2r_04.zarr`` whose XML carries *--mb* MB of original-metadata
annotations (as bioformats2raw writes a vendor's key/value pairs) before the image's own
map annotation, and a copy without any XML. Then, page cache warm, in fresh processes
(napari-ozx imported before the clock starts), medians of repeats:

* **open**: ``open_ome_zarr(...).images()`` (the XML read up to its last ``Image``, its
  units, names and colours used); the resident memory it added (peak RSS, VmHWM, after -
  RSS before), against the same open of the file without an XML;
* **info**: ``info_report`` (``napari-ozx info --json``), which finds the image's
  referenced annotations at the end of the XML;
* **no XML**: the open of the file without an XML with the XML hook as shipped against the
  same open with the hook replaced by the identity (the code before the XML was read),
  alternating 40 times in one process: the ratio is what a file without an XML pays.

Prints times, memory and ratios.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT / "benchmarks" / "_data" / "omexml"
WARM = ROOT / "tests" / "ngff" / "omexml" / "data" / "b2r_two.zarr"

_CHILD = r"""
import json, sys, time
from napari_ozx.ngff.read.open import open_ome_zarr
from napari_ozx.inspection.render import info_report
from napari_ozx.inspection.source import Inspection
import napari_ozx.ngff.read.omexml as omx

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    return 0

path, what, warm = sys.argv[1], sys.argv[2], sys.argv[3]
# imports and first-use costs (zarr, dask, the event loop) outside the clock: open and
# inspect another copy of the fixture first
with open_ome_zarr(warm) as root:
    root.images()
with Inspection(warm) as insp:
    info_report(insp)
if what == "alternate":  # the same open, XML hook on and off in turn, in this process
    import gc
    import statistics
    shipped = omx.with_ome_xml
    times = {True: [], False: []}
    for i in range(40):
        on = i % 2 == 0
        omx.with_ome_xml = shipped if on else (lambda root, images, indices: images)
        gc.collect()  # each open's garbage collected outside the clock, not in the next
        t0 = time.perf_counter()
        with open_ome_zarr(path) as root:
            root.images()
        times[on].append(time.perf_counter() - t0)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(json.dumps({"s": on, "rss_added": 0, "off": off}))
    sys.exit(0)
rss0 = status("VmRSS:")
t0 = time.perf_counter()
if what.startswith("open"):
    with open_ome_zarr(path) as root:
        images = root.images()
        unit = images[0].multiscale.axes[-1].unit
    extra = {"unit": unit}
else:
    with Inspection(path) as insp:
        report = info_report(insp)
    extra = {"annotations": len(report["images"][0].get("ome_xml", {}).get("annotations", []))}
dt = time.perf_counter() - t0
print(json.dumps({"s": dt, "rss_added": status("VmHWM:") - rss0, **extra}))
"""


def build(mb: int) -> tuple[Path, Path]:
    from tests.ngff.omexml import DATA as FIX
    from tests.ngff.omexml import XML, big_annotations

    DATA.mkdir(parents=True, exist_ok=True)
    big = DATA / f"b2r_{mb}mb.zarr"
    if not big.exists():
        shutil.copytree(FIX / "b2r_04.zarr", big)
        (big / XML).write_bytes(big_annotations(mb << 20))
    bare = DATA / "b2r_noxml.zarr"
    if not bare.exists():
        shutil.copytree(FIX / "b2r_04.zarr", bare)
        (bare / XML).unlink()
    return big, bare


def run(path: Path, what: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), what, str(WARM)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def median(path: Path, what: str, repeats: int) -> dict:
    runs = [run(path, what) for _ in range(repeats)]
    return {
        "s": statistics.median(r["s"] for r in runs),
        "rss_added": statistics.median(r["rss_added"] for r in runs),
        **{k: v for k, v in runs[0].items() if k not in ("s", "rss_added")},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    big, bare = build(args.mb)
    size = (big / "OME" / "METADATA.ome.xml").stat().st_size
    run(big, "open")  # page cache warm
    o_big = median(big, "open", args.repeats)
    o_bare = median(bare, "open", args.repeats)
    hook = median(bare, "alternate", args.repeats)
    info = median(big, "info", args.repeats)
    mib = 1 << 20
    print(f"XML {size / mib:.0f} MiB, median of {args.repeats} fresh processes")
    print(
        f"open with the {size / mib:.0f} MiB XML: {o_big['s'] * 1e3:.0f} ms, "
        f"+{o_big['rss_added'] / mib:.1f} MiB RSS (unit from the XML: {o_big['unit']})"
    )
    print(
        f"open without an XML:   {o_bare['s'] * 1e3:.0f} ms, "
        f"+{o_bare['rss_added'] / mib:.1f} MiB RSS"
    )
    print(
        f"  ratio (200 MB XML / none): time {o_big['s'] / o_bare['s']:.2f}, "
        f"memory +{(o_big['rss_added'] - o_bare['rss_added']) / mib:.1f} MiB"
    )
    print(
        f"info --json on it: {info['s'] * 1e3:.0f} ms, {info['annotations']} referenced "
        f"annotations found, +{info['rss_added'] / mib:.1f} MiB RSS"
    )
    print(
        f"no XML, XML hook on / off (the code before), alternating in one process: "
        f"{hook['s'] * 1e3:.2f} / {hook['off'] * 1e3:.2f} ms = {hook['s'] / hook['off']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
