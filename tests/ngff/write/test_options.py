"""WriteOptions as the single source of truth: field metadata, validation, tolerant
loading, the container/version rule and the generated command-line options."""

from __future__ import annotations

import argparse
import dataclasses
import logging

import pytest

from napari_ozx.errors import InvalidOptionError, OzxError
from napari_ozx.ngff.write import writer as write
from napari_ozx.ngff.write.options import (
    OZX_VERSION,
    WriteOptions,
    add_cli_arguments,
    format_for_path,
    level_range,
    option_spec,
    option_specs,
    options_from_cli,
    versions_for_format,
)


def test_every_field_has_a_spec():
    specs = option_specs()
    assert [s.name for s in specs] == [f.name for f in dataclasses.fields(WriteOptions)]
    for s in specs:
        assert s.help and s.flag.startswith("--") and s.label
        assert s.default == getattr(WriteOptions(), s.name)
        assert s.check(s.default) is None, s.name  # the defaults are valid
        if s.type is bool:  # a switch: no range, never "auto"
            assert s.min is None and s.max is None and not s.optional
            assert s.check(1) == "must be true or false"
        elif s.choices is None:
            assert s.type is int and s.min is not None and s.max is not None
            assert s.min <= (s.default if s.default is not None else s.min) <= s.max
    assert option_spec("codec").choices == ("zstd", "blosc-lz4", "blosc-zstd", "gzip", "none")
    assert option_spec("chunk_yx").unit == "px"
    assert option_spec("pyramid_levels").optional and not option_spec("chunk_yx").optional
    assert option_spec("downsample").flag == "--downsample"
    with pytest.raises(KeyError):
        option_spec("nope")


def test_write_reexports_the_one_class():
    assert write.WriteOptions is WriteOptions


@pytest.mark.parametrize(
    ("kwargs", "option", "text"),
    [
        ({"chunk_yx": 0}, "chunk_yx", "between 1 and 65536"),
        ({"shard_z": 1 << 17}, "shard_z", "between 1 and 65536"),
        ({"workers": 0}, "workers", "between 1 and 1024"),
        ({"pyramid_levels": 0}, "pyramid_levels", "between 1 and 64"),
        ({"codec": "lzma"}, "codec", "one of zstd"),
        ({"chunk_yx": True}, "chunk_yx", "integer"),
        ({"chunk_yx": None}, "chunk_yx", "required"),
        ({"codec": "gzip", "level": 15}, "level", "between 0 and 9 for gzip"),
        ({"codec": "zstd", "level": 23}, "level", "between -7 and 22"),
        ({"format": "ozx", "version": "0.4"}, "version", "must be auto or 0.6 or 0.5 for format"),
    ],
)
def test_validate_names_the_option_and_the_range(kwargs, option, text):
    opts = WriteOptions(**kwargs)
    with pytest.raises(InvalidOptionError, match=text) as exc:
        opts.validate()
    assert exc.value.option == option and option in str(exc.value)
    assert isinstance(exc.value, OzxError) and isinstance(exc.value, ValueError)


def test_valid_combinations_pass():
    assert WriteOptions().validate() == WriteOptions()
    WriteOptions(codec="none", level=3).validate()
    WriteOptions(codec="zstd", level=-7, pyramid_levels=1, workers=1).validate()
    WriteOptions(format="directory", version="0.4").validate()
    # auto format: the target decides
    WriteOptions(version="0.4").validate("x.ome.zarr")
    with pytest.raises(InvalidOptionError, match="version"):
        WriteOptions(version="0.4").validate("x.ozx")


def test_container_rule_has_one_home():
    assert format_for_path("a/B.OZX") == "ozx" and format_for_path("b.zip") == "ozx"
    assert format_for_path("c.ome.zarr") == "directory"
    # RFC-9: an .ozx is Zarr v3, so OME-Zarr 0.5 or 0.6; "auto" picks 0.5 unless 0.6 is needed
    assert versions_for_format("ozx") == ("auto", "0.6", OZX_VERSION) == ("auto", "0.6", "0.5")
    assert versions_for_format("directory") == ("auto", "0.6", "0.5", "0.4")
    opts = WriteOptions(format="directory", version="0.4", chunk_yx=64)
    assert opts.for_target("x.ozx") == WriteOptions(version="0.5", chunk_yx=64)
    assert opts.for_target("x.zarr") == WriteOptions(version="0.4", chunk_yx=64)
    assert level_range("none") is None and level_range("gzip") == (0, 9)


def test_writer_refuses_invalid_options_before_touching_the_target(tmp_path):
    import numpy as np

    from napari_ozx.ngff.model.metadata import Axis

    img = write.ImageSpec(np.zeros((4, 4), "uint8"), [Axis("y", "space"), Axis("x", "space")])
    with pytest.raises(InvalidOptionError, match="version"):
        write.write_ome_zarr(tmp_path / "a.ozx", img, options=WriteOptions(version="0.4"))
    with pytest.raises(InvalidOptionError, match="chunk_yx"):
        write.write_ome_zarr(tmp_path / "a.zarr", img, options=WriteOptions(chunk_yx=0))
    assert list(tmp_path.iterdir()) == []


def test_dict_round_trip_and_tolerant_loading(caplog):
    opts = WriteOptions(
        format="directory", version="0.4", codec="gzip", level=6, pyramid_levels=2, workers=3
    )
    assert WriteOptions.from_dict(opts.to_dict()) == opts
    assert WriteOptions.from_dict({}) == WriteOptions()
    with caplog.at_level(logging.WARNING):
        assert WriteOptions.from_dict([1]) == WriteOptions()
        got = WriteOptions.from_dict(
            {
                "chunk_yx": "big",
                "shard_yx": 0,
                "codec": "gzip",
                "level": 15,  # valid for zstd, not for gzip: back to the default
                "downsample": "mode",
                "workers": None,
                "colour": "red",
            }
        )
    assert got == WriteOptions(codec="gzip", downsample="mode")
    for word in ("chunk_yx", "shard_yx", "level", "colour"):
        assert word in caplog.text
    # a remembered .ozx with 0.4 becomes 0.5 instead of failing every save
    assert WriteOptions.from_dict({"format": "ozx", "version": "0.4"}).version == "0.5"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t", exit_on_error=False)
    add_cli_arguments(p)
    return p


def test_cli_defaults_are_the_option_defaults():
    assert options_from_cli(_parser().parse_args([])) == WriteOptions()


def test_cli_parses_every_option_including_downsample():
    args = _parser().parse_args(
        [
            "--format",
            "directory",
            "--version",
            "0.4",
            "--chunk",
            "64",
            "--shard",
            "512",
            "--shard-z",
            "4",
            "--codec",
            "gzip",
            "--level",
            "6",
            "--levels",
            "3",
            "--downsample",
            "nearest",
            "--workers",
            "2",
        ]
    )
    assert options_from_cli(args) == WriteOptions(
        format="directory",
        version="0.4",
        chunk_yx=64,
        shard_yx=512,
        shard_z=4,
        codec="gzip",
        level=6,
        pyramid_levels=3,
        downsample="nearest",
        workers=2,
    )
    assert options_from_cli(_parser().parse_args(["--levels", "auto"])).pyramid_levels is None
    assert not options_from_cli(_parser().parse_args([])).rebuild_pyramid
    assert options_from_cli(_parser().parse_args(["--rebuild-pyramid"])).rebuild_pyramid


@pytest.mark.parametrize(
    "argv",
    [["--chunk", "0"], ["--chunk", "x"], ["--codec", "lzma"], ["--downsample", "max"]],
)
def test_cli_rejects_out_of_range_values(argv, capsys):
    with pytest.raises((SystemExit, argparse.ArgumentError)):
        _parser().parse_args(argv)


def test_cli_cross_checks_raise_the_option_error():
    args = _parser().parse_args(["--format", "ozx", "--version", "0.4"])
    with pytest.raises(InvalidOptionError, match="version"):
        options_from_cli(args)
    with pytest.raises(InvalidOptionError, match="level"):
        options_from_cli(_parser().parse_args(["--codec", "gzip", "--level", "12"]))


def test_cli_help_shows_ranges_units_and_defaults():
    text = _parser().format_help()
    assert "--downsample {auto,mean,nearest,mode}" in text
    assert "1..65536" in text and "[px]" in text and "(default: 256)" in text
    assert "(default: auto)" in text


def test_cli_convert_flags_are_generated_from_write_options() -> None:
    """The CLI offers exactly the WriteOptions fields, with their ranges (one source)."""
    from napari_ozx.__main__ import build_parser
    from napari_ozx.ngff.write.options import option_specs, options_from_cli

    parser = build_parser()
    args = parser.parse_args(["convert", "a.ome.zarr", "b.ozx", "--downsample", "nearest"])
    opts = options_from_cli(args)
    assert opts.downsample == "nearest"
    sub = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "convert")
    flags = {o for act in sub[1]._actions for o in act.option_strings}
    assert {s.flag for s in option_specs()} <= flags
    with pytest.raises(SystemExit):  # outside the one declared range
        parser.parse_args(["convert", "a", "b", "--chunk", "0"])
