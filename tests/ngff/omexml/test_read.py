"""bioformats2raw's OME-XML read: bounded, filling what the
multiscales lack, series told apart, bad and hostile XML refused with one message.

The fixtures in ``data/`` were written by ome-types, yaozarrs and ome-zarr-py
(``make_fixtures.py``); the hostile and huge XML are made here by hand, on purpose.
"""

from __future__ import annotations

import logging
import shutil
import socket
import threading
from pathlib import Path

import pytest

from napari_ozx.ngff.model.omexml import (
    length_unit,
    parse_ome_xml,
    rgba_color,
    scan_annotations,
    time_unit,
)
from napari_ozx.ngff.read import omexml as read_omexml
from napari_ozx.ngff.read.open import open_ome_zarr
from tests.ngff.omexml import DATA, b2r_copy, big_annotations

LOGGER = "napari_ozx.ngff.read.omexml"


def _layers(path: Path) -> list:
    from napari_ozx.layers.reading import read_layer_data

    return read_layer_data(str(path))


# ------------------------------------------ what the XML fills in the multiscales


def test_xml_fills_what_a_04_image_lacks() -> None:
    """ome-zarr-py's 0.4 image has no units and scale 1: the XML's 0.65 µm, 500 ms,
    channel names and colours (-1 is white) fill them."""
    ((_, kw, kind),) = _layers(DATA / "b2r_04.zarr")
    assert kind == "image"
    assert kw["scale"] == pytest.approx((500.0, 0.65, 0.65))
    assert kw["units"] == ("millisecond", "micrometer", "micrometer")
    assert kw["name"] == ["DAPI", "GFP"]  # one image in the file: no series prefix
    assert kw["colormap"] == ["gray", "green"]
    with open_ome_zarr(DATA / "b2r_04.zarr") as root:
        (image,) = root.images()
        assert image.ome_xml.sources["scale x"] == "OME-XML"
        assert image.ome_xml.sources["channel names"] == "OME-XML"
        # the lower level keeps its factor, in the filled unit
        assert image.multiscale.datasets[1].scale == pytest.approx((500.0, 1, 1.3, 1.3))


def test_ome_zarr_wins_where_both_speak() -> None:
    """Series 0 says 0.5 micrometer itself; the XML's 0.65 µm does not replace it.
    Series 1 says nothing: the XML's 200 nm becomes 200 nanometer."""
    with open_ome_zarr(DATA / "b2r_two.zarr") as root:
        first, second = root.images()
    assert first.multiscale.datasets[0].scale[-1] == 0.5
    assert first.multiscale.axes[-1].unit == "micrometer"
    assert first.ome_xml.sources["scale x"] == "OME-Zarr"
    assert second.multiscale.datasets[0].scale[-1] == 200.0
    assert second.multiscale.axes[-1].unit == "nanometer"
    assert second.ome_xml.sources["unit x"] == "OME-XML"


def test_units_and_colours_map_to_ome_zarr() -> None:
    assert length_unit("\u00b5m") == "micrometer"  # MICRO SIGN, the schema's spelling
    assert length_unit("\u03bcm") == "micrometer"
    assert length_unit("nm") == "nanometer"
    assert length_unit("\u00c5") == "angstrom"
    assert length_unit(None) == "micrometer"  # the schema's default
    assert length_unit("pixel") is None
    assert time_unit("ms") == "millisecond" and time_unit(None) == "second"
    assert rgba_color(-1) == "FFFFFF"
    assert rgba_color(-16776961) == "FF0000"  # 0xFF0000FF as a signed int32
    assert rgba_color(0x00FF00FF) == "00FF00"


# ------------------------------------------------------- series told apart


def test_series_are_told_apart_by_their_xml_names() -> None:
    names = [kw["name"] for _, kw, _ in _layers(DATA / "b2r_two.zarr")]
    assert names == [["Embryo 1: DAPI", "Embryo 1: GFP"], ["Embryo 2: DAPI", "Embryo 2: GFP"]]


def test_series_of_one_name_are_told_apart_by_their_paths(tmp_path: Path) -> None:
    path = tmp_path / "two.zarr"
    shutil.copytree(DATA / "b2r_two.zarr", path)
    xml = path / "OME" / "METADATA.ome.xml"
    xml.write_bytes(xml.read_bytes().replace(b'Name="Embryo 2"', b'Name="Embryo 1"'))
    names = [kw["name"][0] for _, kw, _ in _layers(path)]
    assert names == ["Embryo 1 (0): DAPI", "Embryo 1 (1): DAPI"]


def test_series_without_xml_are_named_by_their_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "two.zarr"
    shutil.copytree(DATA / "b2r_two.zarr", path)
    (path / "OME" / "METADATA.ome.xml").unlink()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        names = [kw["name"][0] for _, kw, _ in _layers(path)]
    assert names[0].startswith("0: ") and names[1].startswith("1: ")
    assert not [r for r in caplog.records if r.name == LOGGER]  # no XML: nothing to say


# ------------------------------------------------------ bounded reads


def test_a_huge_xml_is_read_only_to_its_last_image(tmp_path: Path) -> None:
    """20 MB of original metadata after the images: the open reads the first chunks
    only, still fills from the XML, and ``annotations_of`` finds the image's map
    annotation placed after all of it."""
    path = b2r_copy(tmp_path, big_annotations(20 << 20))
    read: list[int] = []
    real = read_omexml.member_chunks

    def counting(store, key, chunk=read_omexml.CHUNK_BYTES):  # type: ignore[no-untyped-def]
        for data in real(store, key, chunk):
            read.append(len(data))
            yield data

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(read_omexml, "member_chunks", counting)
        with open_ome_zarr(path) as root:
            (image,) = root.images()
            assert image.multiscale.axes[-1].unit == "micrometer"
            assert sum(read) <= 2 * read_omexml.CHUNK_BYTES  # not the 20 MB
            read.clear()
            xml = read_omexml.ome_xml(root)
            found = read_omexml.annotations_of(root.store, xml, image.ome_xml.image.annotation_refs)
    assert found["Annotation:0"].value == [["Genotype", "wild type"], ["Stage", "E12.5"]]
    assert found["Annotation:1"].value == "imaged twice"


def test_scan_finds_ids_across_chunk_boundaries() -> None:
    doc = (
        b'<StructuredAnnotations><XMLAnnotation ID="Annotation:5"><Value/></XMLAnnotation>'
        b'<MapAnnotation ID="Annotation:7"><Value><M K="k">v</M></Value></MapAnnotation>'
        b"</StructuredAnnotations>"
    )
    for cut in range(1, len(doc)):
        found = scan_annotations([doc[:cut], doc[cut:]], ["Annotation:7"], {})
        assert found["Annotation:7"].value == [["k", "v"]], cut


def test_no_xml_costs_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that is not a bioformats2raw layout is never asked for an XML."""

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("read an XML")

    monkeypatch.setattr(read_omexml, "member_chunks", refuse)
    path = tmp_path / "plain.ome.zarr"
    shutil.copytree(DATA / "b2r_two.zarr" / "1", path)  # a series alone: a plain image
    with open_ome_zarr(path) as root:
        root.images()
        assert read_omexml.ome_xml(root) is None


def test_xml_read_from_an_ozx_member(tmp_path: Path) -> None:
    from tests._support.omegen import zip_dir

    for deflate in (False, True):
        ozx = zip_dir(DATA / "b2r_two.zarr", tmp_path / f"two{deflate}.ozx", deflate=deflate)
        with open_ome_zarr(ozx) as root:
            assert [im.ome_xml.image.name for im in root.images()] == ["Embryo 1", "Embryo 2"]


# ------------------------------------------------------ bad and hostile XML


def _xml() -> bytes:
    return (DATA / "b2r_04.zarr" / "OME" / "METADATA.ome.xml").read_bytes()


class _Listener:
    """A TCP port that records whether anything connected (an external entity must not)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.sock.settimeout(0.2)
        self.connected = False
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connected = True
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


def _hostile(kind: str, secret: Path, port: int) -> tuple[bytes, str]:
    xml = _xml()
    body = xml.split(b"?>", 1)[1] if xml.startswith(b"<?xml") else xml
    if kind == "invalid":
        return xml.replace(b"</Image>", b"</Imag>"), "invalid XML"
    if kind == "truncated":
        return xml[: xml.index(b"<Pixels") + 40], "invalid XML"
    if kind == "not-utf8":
        return xml.replace(b"Embryo 1", b"Embryo \xe9\xff"), "invalid XML"
    if kind == "no-metadata-only":
        return xml.replace(b"<MetadataOnly/>", b""), "MetadataOnly"
    if kind == "billion-laughs":
        ents = b'<!ENTITY lol "lol">' + b"".join(
            b'<!ENTITY lol%d "%s">'
            % (i, b"".join([b"&lol%s;" % (b"" if i == 1 else b"%d" % (i - 1))] * 10))
            for i in range(1, 10)
        )
        return b"<?xml version='1.0'?><!DOCTYPE OME [" + ents + b"]>" + body.replace(
            b"Embryo 1", b"&lol9;"
        ), "DTD"
    if kind == "external-file":
        return (
            b'<?xml version="1.0"?><!DOCTYPE OME [<!ENTITY x SYSTEM "'
            + secret.as_uri().encode()
            + b'">]>'
            + body.replace(b"Embryo 1", b"&x;")
        ), "DTD"
    if kind == "external-http":
        return (
            b'<?xml version="1.0"?><!DOCTYPE OME SYSTEM "http://127.0.0.1:%d/ome.dtd">' % port
            + body
        ), "DTD"
    raise AssertionError(kind)


@pytest.mark.parametrize(
    "kind",
    [
        "invalid",
        "truncated",
        "not-utf8",
        "no-metadata-only",
        "billion-laughs",
        "external-file",
        "external-http",
    ],
)
def test_bad_and_hostile_xml_still_open_with_one_message(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    listener = _Listener()
    try:
        xml, reason = _hostile(kind, secret, listener.port)
        path = b2r_copy(tmp_path, xml)
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            layers = _layers(path)
            with open_ome_zarr(path) as root:  # a second open, the same single message
                images = root.images()
    finally:
        listener.close()
    assert len(layers) == 1 and layers[0][0][0].shape == (2, 2, 16, 16)
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(messages) == 2, messages  # once per opened file
    assert messages[0] == messages[1]
    assert reason in messages[0] and "METADATA.ome.xml" in messages[0]
    assert not listener.connected
    fds = Path("/proc/self/fd")
    if fds.is_dir():  # nothing left open on the XML (Linux)
        open_files = [str(p.resolve()) for p in fds.iterdir() if p.is_symlink()]
        assert not [f for f in open_files if f.endswith("METADATA.ome.xml")]
    assert all("TOP-SECRET" not in str(kw) for _, kw, _ in layers)
    if kind == "no-metadata-only":  # still read: the rule's breach is named, once
        assert images[0].ome_xml.image.name == "Embryo 1"
    else:
        assert images[0].ome_xml is None


@pytest.mark.parametrize("schema", ["2013-06", "2015-01"])
def test_older_schema_namespaces_are_read(
    schema: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    xml = _xml().replace(b"OME/2016-06", f"OME/{schema}".encode())
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        ((_, kw, _),) = _layers(b2r_copy(tmp_path, xml))
    assert kw["name"] == ["DAPI", "GFP"]
    assert kw["scale"][-1] == pytest.approx(0.65)
    (message,) = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert schema in message


def test_parse_stops_before_the_annotations() -> None:
    xml = _xml()
    parsed = parse_ome_xml([xml[i : i + 64] for i in range(0, len(xml), 64)])
    assert parsed.complete and len(parsed.images) == 1
    assert parsed.images[0].objective is not None
    assert parsed.images[0].objective.lens_na == 1.4
    assert parsed.images[0].channels[0].excitation.value == 405.0
