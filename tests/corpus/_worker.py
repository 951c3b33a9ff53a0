"""Run corpus cases in a child process, one at a time, and report what happened.

Used by ``tests/test_corpus.py``::

    python tests/corpus/_worker.py FILES_DIR

reads case names (one per line) on stdin and writes JSON objects on stdout (after a first
``{"ready": true}`` line): for each case, one line as each phase starts (``"phase"``:
``get_reader``, ``open``, ``read``: what is known so far) and a last one with
``"phase": "done"``, so the parent can time each phase out separately.

Running the cases in a child process lets the test suite kill a case that hangs or
allocates without bound (it then starts a new worker for the remaining cases) and measure
memory growth without pytest's own noise.

Per case it records:

* ``get_reader``: ``"callable"``, ``"none"`` or ``"raised: <Class>: <message>"``;
* ``error``: for ``napari_ozx.layers.reading.read_layer_data(path)`` followed by computing
  the level-0 pixels of every layer: ``null`` or ``{"stage", "type", "mro", "message"}``;
* ``tiles``: a few inner-chunk tiles read on their own first (ranged reads inside a
  shard): each either raised or equals the valid image's pixels (``equal``);
* ``pixels``: for each layer computed, whether it equals the valid image's level 0;
* ``seconds``: wall time of open + level-0 compute (``get_reader`` timed separately);
* ``tracemalloc_peak`` and ``rss_growth``: peak Python allocation (numpy included) and
  peak RSS growth (sampled every ms) during open + compute, in bytes;
* ``read``: for ``napari_ozx._reader.read(path)``: whether it returned the null sentinel,
  raised, and the napari notifications it showed.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
import tracemalloc
from pathlib import Path
from typing import Any

import psutil

#: the child kills itself (reporting it) when RSS grows by more than this during a case
RSS_KILL_BYTES = 1536 * 1024 * 1024

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


class Sampler:
    """Peak RSS growth during a block, sampled from a background thread every ms."""

    def __init__(self, name: str) -> None:
        self.proc = psutil.Process()
        self.name = name
        self.base = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.wait(0.001):
            rss = self.proc.memory_info().rss
            if rss > self.peak:
                self.peak = rss
            if rss - self.base > RSS_KILL_BYTES:
                emit({"name": self.name, "killed": f"RSS grew by {rss - self.base} bytes"})
                os._exit(3)

    def __enter__(self) -> Sampler:
        self.base = self.peak = self.proc.memory_info().rss
        self._thread = threading.Thread(target=self._run, name="corpus-rss-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)

    @property
    def growth(self) -> int:
        return max(0, self.peak - self.base)


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def describe(e: BaseException, stage: str) -> dict[str, Any]:
    tb = traceback.extract_tb(e.__traceback__)
    return {
        "stage": stage,
        "type": type(e).__name__,
        "mro": [c.__name__ for c in type(e).__mro__],
        "message": str(e)[:2000],
        "where": [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in tb[-4:]],
    }


def level0(data: Any) -> Any:
    return data[0] if isinstance(data, list) else data


class Runner:
    def __init__(self, files: Path) -> None:
        import make_corpus
        import numpy as np
        from napari.utils import notifications

        from napari_ozx import _reader
        from napari_ozx.layers.reading import read_layer_data

        self.np = np
        self.files = files
        self.reader = _reader
        self.read_layer_data = read_layer_data
        arrays = make_corpus.base_arrays()
        self.truth = {"image": arrays["0"], "labels": arrays["labels/cells/0"]}
        self.notes: list[str] = []

        def show_error(msg: str) -> None:  # napari's, counted instead of dispatched
            self.notes.append(str(msg))

        notifications.show_error = show_error

    #: inner-chunk-sized tiles read on their own (ranged reads inside one shard), before
    #: the whole level: (layer type, box)
    TILES = (
        ("image", (0, slice(0, 16), slice(0, 16))),
        ("image", (1, slice(16, 32), slice(48, 64))),
        ("labels", (slice(0, 16), slice(16, 32))),
    )

    def tiles(self, layers: list[Any]) -> list[dict[str, Any]]:
        """Read each tile of :data:`TILES`: it must raise or equal the truth."""
        out = []
        for kind, box in self.TILES:
            for data, _kw, ltype in layers:
                if (ltype == "image") != (kind == "image"):
                    continue
                rec: dict[str, Any] = {"layer": kind, "box": repr(box)}
                try:
                    got = self.np.asarray(level0(data)[box])
                    rec["equal"] = bool((got == self.truth[kind][box]).all())
                except BaseException as e:
                    rec["error"] = f"{type(e).__name__}: {e}"[:300]
                out.append(rec)
        return out

    def run(self, name: str, progress: Any = None) -> dict[str, Any]:
        """Run one case; ``progress(result, next_phase)`` is called between phases."""
        path = str(self.files / name)
        res: dict[str, Any] = {"name": name}
        progress = progress or (lambda res, phase: None)
        progress(res, "get_reader")

        t0 = time.perf_counter()
        try:
            r = self.reader.get_reader(path)
            res["get_reader"] = "callable" if callable(r) else "none" if r is None else repr(r)
        except BaseException as e:
            res["get_reader"] = f"raised: {type(e).__name__}: {e}"
        res["get_reader_seconds"] = time.perf_counter() - t0
        progress(res, "open")

        tracemalloc.reset_peak()
        t_base = tracemalloc.get_traced_memory()[0]
        layers = None
        res["error"] = None
        res["pixels"] = {}
        t0 = time.perf_counter()
        with Sampler(name) as sampler:
            try:
                layers = self.read_layer_data(path)
            except BaseException as e:
                res["error"] = describe(e, "open")
            if layers is not None:
                res["layers"] = [[lt, kw.get("name")] for _, kw, lt in layers]
                res["tiles"] = self.tiles(layers)
                try:
                    for data, _kw, ltype in layers:
                        arr = self.np.asarray(level0(data))
                        key = "image" if ltype == "image" else "labels"
                        truth = self.truth[key]
                        same = arr.shape == truth.shape and bool((arr == truth).all())
                        res["pixels"][key] = same
                except BaseException as e:
                    res["error"] = describe(e, "read")
        res["seconds"] = time.perf_counter() - t0
        res["tracemalloc_peak"] = tracemalloc.get_traced_memory()[1] - t_base
        res["rss_growth"] = sampler.growth
        del layers
        progress(res, "read")

        self.notes.clear()
        try:
            out = self.reader.read(path)
            res["read"] = {"null": out == [(None,)], "n_layers": len(out)}
        except BaseException as e:
            res["read"] = {"raised": describe(e, "read()")}
        res["read"]["notifications"] = list(self.notes)
        return res


def main() -> int:
    files = Path(sys.argv[1])
    runner = Runner(files)
    # warm up imports, zarr's codec registry and event loop, dask's pool: not timed
    runner.run("valid.ozx")
    tracemalloc.start()
    emit({"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        name = line.strip()
        if not name:
            continue
        try:
            res = runner.run(name, lambda res, phase: emit({**res, "phase": phase}))
            emit({**res, "phase": "done"})
        except BaseException as e:
            emit({"name": name, "harness_error": "".join(traceback.format_exception(e))})
    return 0


if __name__ == "__main__":
    sys.exit(main())
