"""Command line: ``napari-ozx info | validate | convert | transform`` (no Qt, no napari
import). The exit codes are in :data:`EXIT_CODES` and ``napari-ozx --help``.

``info`` prints the inspector's facts (:mod:`napari_ozx.inspection`); ``validate`` the
validators' findings; ``convert`` rewrites a hierarchy (keeping the source's layout unless
an option says otherwise); ``transform`` maps points between coordinate systems. A closed
pipe (``napari-ozx validate ... | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from napari_ozx.errors import OzxError

EXIT_CODES = """exit codes:
  0  done: the file is valid (validate), readable (info), written (convert), mapped (transform)
  1  validate: a MUST is violated; info: a node or the OME metadata cannot be read, or there
     is none; transform: unknown coordinate system or no computable path
  2  a file cannot be read at all, a target exists (convert without --overwrite), or the
     command line is wrong"""


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


# --------------------------------------------------------------------- info


def info(path: str) -> dict[str, Any]:
    """The facts the inspector dock shows, as a JSON-able report (metadata reads only)."""
    from napari_ozx.inspection import Inspection, info_report

    with Inspection(path) as insp:
        return info_report(insp)


# ----------------------------------------------------------------- validate


def validate_path(
    path: str, deep: bool, metadata_only: bool = False, strict: bool = False
) -> tuple[int, dict[str, Any]]:
    """(exit code, report dict) for one path: :func:`napari_ozx.ngff.validate.walk.validate`
    (RFC-9 for files, the OME-Zarr metadata rules for all, and whether the reader can
    open it): 0 conformant, 1 not, 2 not checked (no such path, not an archive).

    ``metadata_only``: the metadata documents only (nothing they name has to exist, the
    reader is not tried); ``strict``: a SHOULD broken (a warning) fails too."""
    from napari_ozx.ngff.validate.walk import validate

    report: dict[str, Any] = {"path": path, "findings": []}
    try:
        rep = validate(path, deep=deep, metadata_only=metadata_only, strict=strict)
    except FileNotFoundError:
        report["error"] = "no such file or directory"
        return 2, report
    except (OzxError, OSError) as e:
        report["error"] = str(e)
        return 2, report
    report["findings"] = [f.to_dict() for f in rep.findings]
    report["ok"] = rep.ok
    return (0 if rep.ok else 1), report


# ------------------------------------------------------------------ convert


def _progress_bar(desc: str) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=0, desc=desc, unit="shard", file=sys.stderr)


def _cluster(args: argparse.Namespace) -> tuple[Any, Any]:
    """(client, local cluster or None) for ``--scheduler`` / ``--workers-local``, or
    (None, None): the workers then read, downsample and encode every shard (and write
    them, for a directory target), see :mod:`napari_ozx.ngff.write.cluster`."""
    from napari_ozx.ngff.write import cluster

    if args.scheduler:
        return cluster.connect(args.scheduler, args.scheduler_timeout), None
    if args.workers_local:
        from distributed import Client

        local = cluster.local_cluster(args.workers_local)
        try:
            return Client(local, set_as_default=False), local
        except BaseException:
            local.close()
            raise
    return None, None


def _convert(args: argparse.Namespace) -> int:
    from napari_ozx.ngff.write.convert import convert_summary, source_options
    from napari_ozx.ngff.write.options import WriteOptions, option_specs

    if Path(args.dst).exists() and not args.overwrite:
        raise OzxError(f"{args.dst} exists: pass --overwrite to replace it (it is left as it is)")
    given = {
        s.name: getattr(args, f"opt_{s.name}")
        for s in option_specs()
        if hasattr(args, f"opt_{s.name}")
    }
    kept = {k: v for k, v in source_options(args.src, args.dst).items() if k not in given}
    opts = WriteOptions(**{**kept, **given}).validate(args.dst)
    if args.scheduler and args.workers_local:
        raise OzxError("--scheduler and --workers-local exclude each other: choose one")
    if args.workers_local is not None and args.workers_local < 1:
        raise OzxError(f"--workers-local must be at least 1, not {args.workers_local}")
    client, local = _cluster(args)
    bar = _progress_bar(f"{Path(args.src).name} -> {Path(args.dst).name}")

    def progress(done: int, total: int) -> None:
        if bar is not None:
            bar.total = total
            bar.n = done
            bar.refresh()

    try:
        written = convert_summary(args.src, args.dst, opts, progress=progress, client=client)
    finally:
        if bar is not None:
            bar.close()
        if client is not None:
            client.close()
        if local is not None:
            local.close()
    _out(written.message())  # as File > Save's and the export panel's notification
    return 0


# --------------------------------------------------------------------- main


class _Parser(argparse.ArgumentParser):
    """The parser of the CLI and, through ``add_subparsers``, of each subcommand: its help
    ends with :data:`EXIT_CODES`, laid out as written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("epilog", EXIT_CODES)
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)


class _Subcommands(Protocol):
    """What ``_Parser.add_subparsers()`` returns (it makes ``_Parser``s), as far as the CLI
    uses it."""

    def add_parser(
        self,
        name: str,
        *,
        help: str | None = ...,
        description: str | None = ...,
    ) -> argparse.ArgumentParser: ...


def build_parser() -> argparse.ArgumentParser:
    from napari_ozx import __version__

    ap = _Parser(
        prog="napari-ozx",
        description="OME-Zarr directories and .ozx files",
    )
    ap.add_argument("--version", action="version", version=f"napari-ozx {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    _add_info_parser(sub)
    _add_validate_parser(sub)
    _add_convert_parser(sub)
    _add_transform_parser(sub)
    _add_set_default_reader_parser(sub)
    return ap


# the subcommands, each adding its parser to the ``add_subparsers()`` action *sub*


def _add_info_parser(sub: _Subcommands) -> None:
    p = sub.add_parser(
        "info",
        help="hierarchy, shapes, dtypes, chunks/shards, codecs, sizes, versions, RFC-9 verdict "
        "(exit 1 if a node cannot be read or there is no OME metadata)",
    )
    p.add_argument("path", help="OME-Zarr directory, .ozx / .zip file or URL")
    p.add_argument("--json", action="store_true", help="print the report (or the error) as JSON")


def _add_validate_parser(sub: _Subcommands) -> None:
    p = sub.add_parser(
        "validate",
        help="RFC-9 conformance of .ozx files and OME metadata",
    )
    p.add_argument("paths", nargs="+", help="OME-Zarr directories or .ozx / .zip files")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--deep", action="store_true", help="also check the CRC-32 of every entry")
    p.add_argument(
        "--metadata-only",
        action="store_true",
        help="check the metadata documents only: the arrays, wells, fields and label images "
        "they name need not exist, and the reader is not tried",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="the SHOULDs the specification's strict schemas require (multiscales name, type "
        "and metadata, label colours, plate and acquisition names, known axis types) also "
        "fail (exit 1)",
    )


def _add_convert_parser(sub: _Subcommands) -> None:
    from napari_ozx.ngff.write.options import add_cli_arguments

    p = sub.add_parser(
        "convert",
        help="directory <-> .ozx, 0.4 -> 0.5 / 0.6, rechunk / reshard / recompress",
        description="Rewrite SRC to DST. The source's chunking, sharding, codec and level, "
        "number of pyramid levels and OME-Zarr version are kept unless an option below "
        "says otherwise (a version the target cannot hold becomes 0.5).",
    )
    p.add_argument("src", help="the OME-Zarr image to read (directory, .ozx or URL)")
    p.add_argument("dst", help="the target: NAME.ozx (one file) or a directory NAME.ome.zarr")
    p.add_argument("--overwrite", action="store_true", help="replace DST if it exists (atomically)")
    # every write option (flags, choices, ranges, defaults, help) from WriteOptions;
    # not given = keep the source's (argparse.SUPPRESS leaves them out of the namespace)
    add_cli_arguments(p.add_argument_group("write options"), keep_default=False)
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="convert on an existing dask.distributed cluster (tcp://host:8786): its workers "
        "read, downsample and encode every shard; they need napari-ozx and the source at "
        "the same path or URL, and a directory target on a file system they share",
    )
    p.add_argument(
        "--scheduler-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to try to reach the scheduler",
    )
    p.add_argument(
        "--workers-local",
        type=int,
        default=None,
        metavar="N",
        help="convert on a dask cluster of N worker processes started on this machine",
    )


def _add_transform_parser(sub: _Subcommands) -> None:
    p = sub.add_parser(
        "transform",
        help="map points between two coordinate systems of an OME-Zarr 0.6 hierarchy",
        description="Map points from coordinate system SOURCE to TARGET of the hierarchy at "
        "PATH (a scene's or an image's systems, through its coordinate transformations, "
        'inverted where their type allows). Prints {"coordinates": [...]}; on an unknown '
        'system or a path that cannot be computed prints {"message": ...} and exits 1 '
        "(2: PATH cannot be read).",
    )
    p.add_argument("path", help="OME-Zarr directory, .ozx or URL")
    p.add_argument(
        "source",
        help="coordinate system of the points: NAME (the root's: a scene's own, or the root "
        "image's) or GROUP_PATH:NAME (of the image at GROUP_PATH)",
    )
    p.add_argument("target", help="coordinate system to map them to (same form as SOURCE)")
    p.add_argument(
        "coordinates", help='JSON list of points, each a list of D numbers: "[[1, 2], [3, 4]]"'
    )


def _add_set_default_reader_parser(
    sub: _Subcommands,
) -> None:
    p = sub.add_parser(
        "set-default-reader",
        help="make napari open OME-Zarr folders (*.zarr, *.ome.zarr) and .ozx with napari-ozx",
    )
    p.add_argument("--undo", action="store_true", help="remove napari-ozx's preferences")


def _transform(args: argparse.Namespace) -> int:
    """``napari-ozx transform``: JSON out, for people and for conformance runners alike."""
    from napari_ozx.errors import TransformError
    from napari_ozx.ngff.read.open import transform_points

    try:
        points = json.loads(args.coordinates)
        if not isinstance(points, list) or not all(isinstance(p, list) for p in points):
            raise ValueError("COORDINATES must be a JSON list of lists of numbers")
        out = transform_points(args.path, args.source, args.target, points)
    except (TransformError, ValueError) as e:
        _out(json.dumps({"message": str(e)}))
        return 1
    except (OzxError, OSError) as e:
        _out(json.dumps({"message": f"cannot read {args.path}: {e}"}))
        return 2
    _out(json.dumps({"coordinates": out.tolist()}))
    return 0


def _set_default_reader(args: argparse.Namespace) -> int:
    from napari_ozx._preferences import make_default_reader

    changed = make_default_reader(undo=args.undo)
    verb = "removed" if args.undo else "set"
    if not changed:
        _out(
            "nothing to change: "
            + ("napari-ozx is not" if args.undo else "napari-ozx is already")
            + " napari's reader for OME-Zarr"
        )
    for pattern, before in changed.items():
        _out(
            f"{verb} {pattern} -> napari-ozx"
            + (f" (was {before})" if before and not args.undo else "")
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _main(args)
    except BrokenPipeError:
        # `napari-ozx validate ... | head`: the reader has gone; end quietly, and keep
        # Python from reporting the flush of the closed stdout at exit
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _main(args: argparse.Namespace) -> int:
    try:
        if args.cmd == "info":
            from napari_ozx.inspection import info_text

            try:
                d = info(args.path)
            except (OzxError, OSError) as e:
                if not args.json:
                    raise
                _out(json.dumps({"source": args.path, "error": str(e)}, indent=2))
                return 2
            _out(json.dumps(d, indent=2, default=str) if args.json else info_text(d))
            return 1 if d["problems"] else 0
        if args.cmd == "validate":
            worst, reports = 0, []
            for path in args.paths:
                code, rep = validate_path(path, args.deep, args.metadata_only, args.strict)
                worst = max(worst, code)
                reports.append(rep)
                if not args.json:
                    status = {0: "OK", 1: "INVALID", 2: "UNREADABLE"}[code]
                    _out(f"{status} {path}" + (f": {rep['error']}" if "error" in rep else ""))
                    for f in rep["findings"]:
                        where = f" [{f['member']}]" if f.get("member") else ""
                        sec = f" ({f['section']})" if f.get("section") else ""
                        _out(
                            f"  {f['severity'].upper():7s} {f['code']}{where}: {f['message']}{sec}"
                        )
            if args.json:
                _out(json.dumps(reports if len(reports) > 1 else reports[0], indent=2))
            return worst
        if args.cmd == "set-default-reader":
            return _set_default_reader(args)
        if args.cmd == "transform":
            return _transform(args)
        return _convert(args)
    except BrokenPipeError:
        raise
    except (OzxError, OSError) as e:
        sys.stderr.write(f"napari-ozx: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
