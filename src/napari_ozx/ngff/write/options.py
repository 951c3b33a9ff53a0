"""Write options: the single source of truth for every option's type, range and help.

:class:`WriteOptions` drives File > Save, the export panel, the remembered-options file and
``napari-ozx convert``. Each field's ``dataclasses.field`` metadata carries its range or
choices, unit, help, command-line flag and panel label; :func:`option_specs` turns it into
:class:`OptionSpec` records, from which :meth:`WriteOptions.validate` checks a combination
(:class:`InvalidOptionError` naming the option), :meth:`WriteOptions.from_dict` loads
remembered options tolerantly, :func:`add_cli_arguments` / :func:`options_from_cli` make
the ``argparse`` options and a panel builds its widgets. The container/version rule (an
``.ozx`` holds 0.5 or 0.6) lives here once: :func:`format_for_path`,
:func:`versions_for_format`. No zarr, numpy, napari or Qt: the CLI imports this to build
its parser.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from napari_ozx.errors import InvalidOptionError
from napari_ozx.ozx.rfc9 import ARCHIVE_SUFFIXES

if TYPE_CHECKING:
    import argparse

logger = logging.getLogger(__name__)

__all__ = [
    "CODECS",
    "DOWNSAMPLE",
    "FORMATS",
    "OZX_SUFFIXES",
    "OZX_VERSION",
    "VERSIONS",
    "InvalidOptionError",
    "OptionSpec",
    "WriteOptions",
    "add_cli_arguments",
    "format_for_path",
    "level_range",
    "option_specs",
    "options_from_cli",
    "versions_for_format",
]

#: file names that mean a single-file (zipped) OME-Zarr
OZX_SUFFIXES = ARCHIVE_SUFFIXES  # one definition, the container's (ozx.rfc9)
#: the OME-Zarr version ``version="auto"`` writes unless the data needs 0.6's coordinate
#: systems (a layer rotated, sheared or with an affine; an image placed in another system)
OZX_VERSION = "0.5"
FORMATS = ("auto", "ozx", "directory")
WRITE_VERSIONS = ("0.6", "0.5", "0.4")
#: OME-Zarr versions each container can hold ("auto" first: the default). An ``.ozx`` is
#: Zarr v3 (RFC-9), so 0.5 or 0.6; a directory any. A version a container cannot hold
#: becomes :data:`OZX_VERSION`, which every container holds
VERSIONS: Mapping[str, tuple[str, ...]] = {
    "ozx": ("auto", "0.6", "0.5"),
    "directory": ("auto", *WRITE_VERSIONS),
}
CODECS = ("zstd", "blosc-lz4", "blosc-zstd", "gzip", "none")
DOWNSAMPLE = ("auto", "mean", "nearest", "mode")
_LEVELS = {"zstd": (-7, 22), "gzip": (0, 9), "blosc-lz4": (0, 9), "blosc-zstd": (0, 9)}


def format_for_path(target: str | os.PathLike[str]) -> str:
    """``"ozx"`` for a name ending in ``.ozx`` / ``.zip``, ``"directory"`` otherwise."""
    return "ozx" if os.fspath(target).lower().endswith(OZX_SUFFIXES) else "directory"


def versions_for_format(fmt: str) -> tuple[str, ...]:
    """The OME-Zarr versions *fmt* (``"ozx"`` / ``"directory"``) can hold, preferred first."""
    return VERSIONS.get(fmt, WRITE_VERSIONS)


def level_range(codec: str) -> tuple[int, int] | None:
    """Valid compression levels of *codec* (None: the codec has no level)."""
    return _LEVELS.get(codec)


# ------------------------------------------------------------------------ specs


@dataclass(frozen=True)
class OptionSpec:
    """What one write option may be: everything a CLI, a panel or a loader needs."""

    name: str
    type: type  # int, str or bool (the value's type when not None)
    default: Any
    help: str
    flag: str  # command-line flag, e.g. "--chunk"
    label: str  # panel label
    choices: tuple[Any, ...] | None = None
    min: int | None = None
    max: int | None = None
    step: int = 1  # a panel's spin-box step
    unit: str = ""
    optional: bool = False  # None is allowed and means "automatic"

    def check(self, value: Any) -> str | None:
        """Why *value* is not allowed (None: it is)."""
        if value is None:
            return None if self.optional else "a value is required"
        if self.choices is not None:
            return None if value in self.choices else f"must be one of {', '.join(self.choices)}"
        if self.type is bool:
            return None if isinstance(value, bool) else "must be true or false"
        if self.type is int and (not isinstance(value, int) or isinstance(value, bool)):
            return "must be an integer"
        if self.type is str and not isinstance(value, str):
            return "must be a string"
        if (self.min is not None and value < self.min) or (
            self.max is not None and value > self.max
        ):
            return f"must be between {self.min} and {self.max}"
        return None

    @property
    def allowed(self) -> str:
        """The allowed values in words (for messages and help)."""
        if self.choices is not None:
            return ", ".join(self.choices)
        if self.type is bool:
            return "true or false"
        text = f"{self.min}..{self.max}"
        return f"{text} or auto" if self.optional else text


def _meta(
    help: str,
    flag: str,
    label: str,
    *,
    min: int | None = None,
    max: int | None = None,
    step: int = 1,
    unit: str = "",
) -> dict[str, Any]:
    return {
        "help": help,
        "flag": flag,
        "label": label,
        "min": min,
        "max": max,
        "step": step,
        "unit": unit,
    }


@dataclass(frozen=True)
class WriteOptions:
    """How to store the data. The same object drives File > Save, the export panel and
    the command line. Defaults are what benchmarks/bench_write.py chose.

    Ranges: an edge of 1 pixel is legal Zarr and kept legal; the upper bounds stop a typo
    from asking for a multi-gigabyte chunk. ``level`` is checked against the codec
    (:func:`level_range`); zstd's negative "fast" levels below -7 gain nothing measurable.
    """

    format: Literal["auto", "ozx", "directory"] = field(
        default="auto",
        metadata=_meta(
            "container: a single .ozx file or a directory (auto: from the file name)",
            "--format",
            "Container",
        ),
    )
    version: Literal["auto", "0.6", "0.5", "0.4"] = field(
        default="auto",
        metadata=_meta(
            "OME-Zarr version: auto writes 0.5, or 0.6 where a layer's transform needs "
            "coordinate systems (rotation, shear, affine) or the source is 0.6; "
            "an .ozx holds 0.5 or 0.6",
            "--version",
            "Version",
        ),
    )
    chunk_yx: int = field(
        default=256,
        metadata=_meta(
            "inner chunk edge in y and x: the unit a viewer reads and decodes "
            "(z, c and t chunks are 1)",
            "--chunk",
            "Chunk y/x",
            min=1,
            max=1 << 16,
            step=64,
            unit="px",
        ),
    )
    shard_yx: int = field(
        default=1024,
        metadata=_meta(
            "shard edge in y and x, rounded to a multiple of the chunk: one stored entry "
            "(0.5 only)",
            "--shard",
            "Shard y/x",
            min=1,
            max=1 << 20,
            step=256,
            unit="px",
        ),
    )
    shard_z: int = field(
        default=16,
        metadata=_meta(
            "planes (z) per shard (0.5 only)", "--shard-z", "Shard z", min=1, max=1 << 16
        ),
    )
    codec: Literal["zstd", "blosc-lz4", "blosc-zstd", "gzip", "none"] = field(
        default="zstd", metadata=_meta("compression codec", "--codec", "Codec")
    )
    level: int = field(
        default=3,
        metadata=_meta(
            "compression level (zstd -7..22, gzip and blosc 0..9)",
            "--level",
            "Compression level",
            min=-7,
            max=22,
        ),
    )
    pyramid_levels: int | None = field(
        default=None,
        metadata=_meta(
            "pyramid levels (auto: the levels the source or opened layer has as stored, "
            "else halve y/x until one chunk holds a plane; more than stored: the missing "
            "ones are built from the coarsest stored level, fewer: the finest are kept)",
            "--levels",
            "Pyramid levels",
            min=1,
            max=64,
        ),
    )
    downsample: Literal["auto", "mean", "nearest", "mode"] = field(
        default="auto",
        metadata=_meta(
            "downsampling (auto: mean for images, nearest for labels)",
            "--downsample",
            "Downsampling",
        ),
    )
    rebuild_pyramid: bool = field(
        default=False,
        metadata=_meta(
            "rebuild every lower pyramid level from level 0 with --downsample (default: "
            "copy the levels a source or an opened layer has as stored, with their pixels "
            "and placement)",
            "--rebuild-pyramid",
            "Rebuild pyramid",
        ),
    )
    workers: int | None = field(
        default=None,
        metadata=_meta(
            "writer threads (auto: the number of CPUs)", "--workers", "Workers", min=1, max=1024
        ),
    )

    # -- the version rule

    def resolved_version(self, needed: str | None = None) -> str:
        """The OME-Zarr version written: the explicit one, or for ``"auto"`` *needed* (the
        version the data needs or the source has) else :data:`OZX_VERSION`."""
        if self.version != "auto":
            return self.version
        return needed or OZX_VERSION

    def with_resolved_version(self, needed: str | None = None) -> WriteOptions:
        return dataclasses.replace(self, version=cast(Any, self.resolved_version(needed)))

    # -- the container rule

    def resolved_format(self, target: str | os.PathLike[str]) -> str:
        """``"ozx"`` or ``"directory"``: the explicit format, or the one *target*'s name says."""
        return self.format if self.format != "auto" else format_for_path(target)

    def for_target(self, target: str | os.PathLike[str]) -> WriteOptions:
        """These options for File > Save to *target*: the name decides the format, and a
        version the container cannot hold becomes the one it can."""
        opts = dataclasses.replace(self, format="auto")
        allowed = versions_for_format(opts.resolved_format(target))
        if opts.version in allowed:
            return opts
        return dataclasses.replace(opts, version=cast(Any, OZX_VERSION))

    # -- validation

    def problems(self, target: str | os.PathLike[str] | None = None) -> list[InvalidOptionError]:
        """Every invalid option (empty: all valid). *target* resolves ``format="auto"``."""
        out = []
        for spec in option_specs():
            value = getattr(self, spec.name)
            why = spec.check(value)
            if why is not None:
                out.append(InvalidOptionError(spec.name, value, why))
        rng = level_range(self.codec)
        if rng is not None and isinstance(self.level, int) and not rng[0] <= self.level <= rng[1]:
            out.append(
                InvalidOptionError(
                    "level", self.level, f"must be between {rng[0]} and {rng[1]} for {self.codec}"
                )
            )
        fmt = self.resolved_format(target) if target is not None else self.format
        if fmt != "auto" and self.version not in versions_for_format(fmt):
            allowed = " or ".join(versions_for_format(fmt))
            why = f"must be {allowed} for format {fmt} (RFC-9: an .ozx is Zarr v3)"
            out.append(InvalidOptionError("version", self.version, why))
        return out

    def validate(self, target: str | os.PathLike[str] | None = None) -> WriteOptions:
        """Return self, or raise :class:`InvalidOptionError` for the first invalid option."""
        problems = self.problems(target)
        if problems:
            raise problems[0]
        return self

    # -- persistence

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> WriteOptions:
        """Options from JSON data (a remembered-options file). Tolerant: an invalid or
        unknown value is dropped with a logged warning in favour of the default, and a
        version the container cannot hold becomes the one it can, so a damaged file
        never blocks saving."""
        if not isinstance(data, Mapping):
            logger.warning("remembered export options are not a JSON object; using the defaults")
            return cls()
        kwargs: dict[str, Any] = {}
        for spec in option_specs():
            if spec.name not in data:
                continue
            value = data[spec.name]
            why = spec.check(value)
            if why is None:
                kwargs[spec.name] = value
            else:
                logger.warning(
                    "ignoring remembered export option %s=%r (%s)", spec.name, value, why
                )
        for key in data:
            if key not in kwargs and not any(s.name == key for s in option_specs()):
                logger.warning("ignoring unknown remembered export option %r", key)
        opts = cls(**kwargs)
        rng = level_range(opts.codec)
        if rng is not None and not rng[0] <= opts.level <= rng[1]:
            logger.warning(
                "ignoring remembered export option level=%r (%s allows %d..%d)",
                opts.level,
                opts.codec,
                *rng,
            )
            opts = dataclasses.replace(opts, level=cls().level)
        if opts.format != "auto" and opts.version not in versions_for_format(opts.format):
            opts = dataclasses.replace(opts, version=cast(Any, OZX_VERSION))
        return opts


_SPECS: tuple[OptionSpec, ...] | None = None


def option_specs() -> tuple[OptionSpec, ...]:
    """One :class:`OptionSpec` per :class:`WriteOptions` field, in field order."""
    global _SPECS
    if _SPECS is None:
        import typing

        hints = typing.get_type_hints(WriteOptions)
        specs = []
        for f in dataclasses.fields(WriteOptions):
            hint = hints[f.name]
            args = typing.get_args(hint)
            optional = type(None) in args
            if optional:
                hint = next(a for a in args if a is not type(None))
            choices = None
            if typing.get_origin(hint) is Literal:
                choices = typing.get_args(hint)
                hint = type(choices[0])
            m = f.metadata
            specs.append(
                OptionSpec(
                    name=f.name,
                    type=hint,
                    default=f.default,
                    help=m["help"],
                    flag=m["flag"],
                    label=m["label"],
                    choices=choices,
                    min=m["min"],
                    max=m["max"],
                    step=m["step"],
                    unit=m["unit"],
                    optional=optional,
                )
            )
        _SPECS = tuple(specs)
    return _SPECS


def option_spec(name: str) -> OptionSpec:
    for spec in option_specs():
        if spec.name == name:
            return spec
    raise KeyError(name)


# ------------------------------------------------------------------------ CLI


def _cli_type(spec: OptionSpec) -> Any:
    import argparse

    def parse(text: str) -> Any:
        if spec.optional and text.lower() == "auto":
            return None
        try:
            value = spec.type(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        why = spec.check(value)
        if why is not None:
            raise argparse.ArgumentTypeError(f"{value} {why}")
        return value

    parse.__name__ = spec.type.__name__  # argparse names the type in its messages
    return parse


def add_cli_arguments(parser: argparse.ArgumentParser | Any, keep_default: bool = True) -> None:
    """Add one ``--flag`` per write option to *parser* (or an argument group), with its
    choices, range check, default and help, all from the field metadata.

    ``keep_default=False``: an option not given is left out of the namespace (``convert``
    then keeps the source's value for it)."""
    import argparse

    for spec in option_specs():
        dest = f"opt_{spec.name}"
        default = "auto" if spec.default is None else spec.default
        if keep_default:
            help_text = f"{spec.help} (default: {default})"
            value: Any = spec.default
        else:
            help_text = f"{spec.help} (default: the source's, else {default})"
            value = argparse.SUPPRESS
        if spec.choices is not None:
            parser.add_argument(
                spec.flag, dest=dest, choices=spec.choices, default=value, help=help_text
            )
        elif spec.type is bool:
            parser.add_argument(
                spec.flag, dest=dest, action="store_true", default=value, help=spec.help
            )
        else:
            unit = f" [{spec.unit}]" if spec.unit else ""
            parser.add_argument(
                spec.flag,
                dest=dest,
                type=_cli_type(spec),
                default=value,
                metavar="N" if not spec.optional else "N|auto",
                help=f"{help_text}; {spec.allowed}{unit}",
            )


def options_from_cli(args: argparse.Namespace) -> WriteOptions:
    """The :class:`WriteOptions` of a namespace parsed with :func:`add_cli_arguments`
    (validated: raises :class:`InvalidOptionError`, e.g. for ``--format ozx --version 0.4``)."""
    kwargs = {
        s.name: getattr(args, f"opt_{s.name}")
        for s in option_specs()
        if hasattr(args, f"opt_{s.name}")
    }
    return WriteOptions(**kwargs).validate()


def _parameters_doc(specs: tuple[OptionSpec, ...]) -> str:
    """A numpy-style Parameters section of *specs*, from their own help (written once)."""
    import textwrap

    lines = ["", "", "Parameters", "----------"]
    for s in specs:
        kind = "bool" if s.type is bool else ("str" if s.choices else s.type.__name__)
        unit = f" [{s.unit}]" if s.unit else ""
        lines.append(f"{s.name} : {kind}, default {s.default!r}")
        lines.append(textwrap.indent(textwrap.fill(f"{s.help}; {s.allowed}{unit}.", 84), " " * 4))
    return "\n".join(lines)


# cleaned first: Python 3.13 strips a docstring's indentation when compiling, older ones
# do not, and the section must be indented as the rest of the docstring is
WriteOptions.__doc__ = inspect.cleandoc(WriteOptions.__doc__ or "") + _parameters_doc(
    option_specs()
)
