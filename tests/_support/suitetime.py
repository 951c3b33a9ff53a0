"""Three pytest plugins that keep CI inside its time budget.

``LongestFirst``: the heaviest test modules (GUI, slow) are collected first, so that
pytest-xdist's ``loadfile`` does not leave them to the end of a run.

``SlowCheck``: a test that takes more than :data:`SLOW_LIMIT_S` (its setup, call and
teardown together) without the ``slow`` mark fails the run, naming it. CI has 90 minutes
for three environments on two cores, and a new test of a minute or more that nobody
marked is how a suite silently outgrows that: the mark lets ``-m 'not slow'`` skip it and
makes its cost visible (``NAPARI_OZX_SLOW_LIMIT_S`` sets the limit: the check's own
test lowers it). The limit is two minutes, about twice what the longest unmarked tests
take on a loaded machine (load 7: mypy's cold run took 63 s), so that load alone does not
fail a run. Under pytest-xdist the check runs in the controller, which sees
every worker's reports.

``DaskRecord``: with ``NAPARI_OZX_RECORD_DASK_MODULES=<folder>``, every test module in
which a test made a dask array (``dask.array.Array.__new__``, which every level, view
base, ``from_array``, ``map_blocks`` and slice goes through) is written to
``<folder>/<worker>.txt``. ``scripts/test-newest.sh`` records them in its classic run and
runs only those modules again under dask's array query planning: a module that never
makes a dask array cannot depend on which dask array implementation is on. A whole module
is recorded, not a test, because module-scoped fixtures make their arrays once for all
of a module's tests.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

SLOW_LIMIT_S = float(os.environ.get("NAPARI_OZX_SLOW_LIMIT_S", "120"))
RECORD_ENV = "NAPARI_OZX_RECORD_DASK_MODULES"


def over_the_limit(durations: dict[str, float], slow: set[str]) -> list[tuple[str, float]]:
    """The tests (node id → seconds) over :data:`SLOW_LIMIT_S` without the slow mark,
    longest first."""
    out = [(n, s) for n, s in durations.items() if s > SLOW_LIMIT_S and n not in slow]
    return sorted(out, key=lambda x: -x[1])


class SlowCheck:
    def __init__(self) -> None:
        self.durations: dict[str, float] = {}
        self.slow: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if "slow" in report.keywords:
            self.slow.add(report.nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput"):
            return  # an xdist worker: its controller sees the reports and checks
        late = over_the_limit(self.durations, self.slow)
        if not late:
            return
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = [
            f"{len(late)} test(s) took over {SLOW_LIMIT_S:.0f} s without "
            "@pytest.mark.slow (mark them, or make them faster):"
        ] + [f"  {s:7.1f} s  {n}" for n, s in late]
        if tr is not None:
            tr.write_sep("=", "unmarked slow tests", red=True)
            for line in lines:
                tr.write_line(line)
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


class DaskRecord:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.made = 0
        self.modules: set[str] = set()
        import dask.array as da

        original = da.Array.__new__

        def counting_new(cls: Any, *args: Any, **kwargs: Any) -> Any:
            self.made += 1
            return original(cls, *args, **kwargs)

        da.Array.__new__ = counting_new  # type: ignore[method-assign]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Any:
        before = self.made
        yield
        if self.made != before:
            self.modules.add(item.nodeid.split("::", 1)[0])

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        worker = getattr(session.config, "workerinput", {}).get("workerid", "main")
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / f"{worker}.txt").write_text("".join(f"{m}\n" for m in sorted(self.modules)))


GUI_WEIGHT = 12.0  # a napari window: setup, draws and teardown (~5 s; a plain test ~0.4 s)
SLOW_WEIGHT = 100.0  # the slow mark: tens of seconds


def expected_weight(item: pytest.Item) -> float:
    """How long *item* is expected to take, in units of a plain test."""
    fixtures = getattr(item, "fixturenames", ())
    gui = item.get_closest_marker("gui") is not None or "qtbot" in fixtures
    slow = item.get_closest_marker("slow") is not None
    return 1.0 + GUI_WEIGHT * gui + SLOW_WEIGHT * slow


def longest_modules_first(items: list[pytest.Item]) -> None:
    """Reorder *items* in place, heaviest module first (:func:`expected_weight` summed),
    each module's tests together and in their own order. pytest-xdist's ``loadfile``
    hands modules to workers in this order: when the longest came last, one core ran
    them alone for minutes while the other was idle."""
    weight: dict[str, float] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        weight[module] = weight.get(module, 0.0) + expected_weight(item)
    items.sort(key=lambda it: -weight[it.nodeid.split("::", 1)[0]])  # stable


class LongestFirst:
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        longest_modules_first(items)


def register(config: pytest.Config) -> None:
    config.pluginmanager.register(SlowCheck(), "napari-ozx-slow-check")
    config.pluginmanager.register(LongestFirst(), "napari-ozx-longest-first")
    folder = os.environ.get(RECORD_ENV)
    if folder:
        config.pluginmanager.register(DaskRecord(Path(folder)), "napari-ozx-dask-record")
