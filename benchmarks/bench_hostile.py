"""Time and memory of every hostile-corpus case against the 2 s / 100 MiB budget.

Usage::

    python benchmarks/bench_hostile.py [--repeats 3]

Runs each file of ``tests/corpus/files`` through the same child-process worker the tests
use (``tests/corpus/_worker.py``: ``get_reader``, open, level-0 compute, ``read``) and
prints, per case, the median over ``--repeats`` runs of the open + compute time, the
``get_reader`` time, the peak RSS growth and tracemalloc's peak, then the cases over the
budget. The tests assert only the outcome and tracemalloc's allocation bound; wall time
and RSS depend on machine load and are reported here instead.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.test_corpus import NAMES, CorpusWorker  # noqa: E402

BUDGET_SECONDS = 2.0
BUDGET_MIB = 100.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {n: [] for n in NAMES}
    for _ in range(args.repeats):  # interleaved: every case once per round
        worker = CorpusWorker()
        try:
            for name in NAMES:
                res = worker.result(name)
                if any(k in res for k in ("hang", "killed", "died")):
                    runs[name].append({"seconds": float("inf"), "reader": float("inf")})
                    continue
                runs[name].append(
                    {
                        "seconds": float(res.get("seconds", 0.0)),
                        "reader": float(res.get("get_reader_seconds", 0.0)),
                        "rss": res.get("rss_growth", 0) / 2**20,
                        "alloc": res.get("tracemalloc_peak", 0) / 2**20,
                    }
                )
        finally:
            worker.close()
    over = []
    print(f"{'case':48s} {'open s':>8s} {'reader s':>8s} {'RSS MiB':>8s} {'alloc MiB':>9s}")
    for name, rs in runs.items():
        med = {k: statistics.median(r.get(k, 0.0) for r in rs) for k in rs[0]}
        print(
            f"{name[:48]:48s} {med['seconds']:8.3f} {med['reader']:8.3f} "
            f"{med.get('rss', 0.0):8.1f} {med.get('alloc', 0.0):9.1f}"
        )
        if (
            max(med["seconds"], med["reader"]) > BUDGET_SECONDS
            or max(med.get("rss", 0.0), med.get("alloc", 0.0)) > BUDGET_MIB
        ):
            over.append(name)
    worst = max(statistics.median(r["seconds"] for r in rs) for rs in runs.values())
    print(f"\n{len(NAMES)} cases, slowest median open {worst:.3f} s (budget {BUDGET_SECONDS} s)")
    print(f"over the {BUDGET_SECONDS} s / {BUDGET_MIB:.0f} MiB budget: {over or 'none'}")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
