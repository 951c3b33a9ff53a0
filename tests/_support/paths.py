"""Where things are, for every test wherever it lives under ``tests/``."""

from __future__ import annotations

from pathlib import Path

#: the checkout (pyproject.toml, src/, resources/)
ROOT = Path(__file__).resolve().parents[2]
#: the tests/ folder
TESTS = ROOT / "tests"
#: the hand-made corpus (tests/corpus/make_corpus.py writes tests/corpus/files/)
CORPUS = TESTS / "corpus"
#: ../shared beside the checkout: specs, conformance hierarchies, the real-world corpus;
#: developers and CI have it, a user's clone does not (tests using it skip, saying so)
SHARED = ROOT.parent / "shared"


def open_fds_to(path: Path | str) -> list[str]:
    """The targets of this process's open file descriptors that are *path* or under it
    (Linux: ``/proc/self/fd``)."""
    import os

    target = str(Path(path).resolve())
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith(target):
            out.append(link)
    return out
