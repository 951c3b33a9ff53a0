"""Regenerate the bioformats2raw fixtures of ``tests/ngff/omexml/data/``.

Written by real tools, never by napari-ozx: the OME-XML by ome-types 0.7, the
bioformats2raw collections and the plate by yaozarrs 0.3 (``Bf2RawBuilder``,
``write_plate``), the 0.4 image by ome-zarr-py 0.18. Run it in a virtual environment of
its own (never the project's)::

    python3.12 -m venv /tmp/venv-omexml
    /tmp/venv-omexml/bin/pip install "ome-types==0.7.*" "yaozarrs==0.3.*" "ome-zarr==0.18.*"
    /tmp/venv-omexml/bin/python tests/ngff/omexml/make_fixtures.py

Fixtures (a few KB each, uncompressed 16x16 planes):

* ``b2r_04.zarr``: one series, a 0.4 image (t, c, y, x) written by ome-zarr-py with no
  units and scale 1; its XML says 0.65 µm, 500 ms, names and colours the channels, the
  objective, wavelengths, a map and a comment annotation.
* ``b2r_two.zarr``: two series (yaozarrs ``Bf2RawBuilder``, 0.5), ``Embryo 1`` with its own
  scale and unit (OME-Zarr wins), ``Embryo 2`` without (the XML fills 200 nm).
* ``b2r_plate.zarr``: a plate (yaozarrs ``write_plate``) with one well of two fields and
  the bioformats2raw layout; the XML's ``WellSample`` positions place the fields.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
from ome_types import model as m
from ome_types import to_xml

HERE = Path(__file__).parent / "data"


def _annotations() -> m.StructuredAnnotations:
    return m.StructuredAnnotations(
        map_annotations=[
            m.MapAnnotation(
                id="Annotation:0",
                namespace="openmicroscopy.org/omero/client/mapAnnotation",
                value=m.Map(
                    ms=[m.Map.M(k="Genotype", value="wild type"), m.Map.M(k="Stage", value="E12.5")]
                ),
            )
        ],
        comment_annotations=[m.CommentAnnotation(id="Annotation:1", value="imaged twice")],
    )


def _instrument() -> m.Instrument:
    return m.Instrument(
        id="Instrument:0",
        objectives=[
            m.Objective(
                id="Objective:0:0",
                nominal_magnification=60.0,
                lens_na=1.4,
                immersion=m.Objective_Immersion.OIL,
                model="Plan Apo 60x",
            )
        ],
    )


def _channels(n: int, names: list[str]) -> list[m.Channel]:
    colors = [m.Color(-1), m.Color("#00ff00")]  # white (-1) and green
    waves = [(405.0, 450.0, "DAPI"), (488.0, 520.0, "GFP")]
    return [
        m.Channel(
            id=f"Channel:{n}:{i}",
            name=names[i],
            color=colors[i],
            excitation_wavelength=waves[i][0],
            emission_wavelength=waves[i][1],
            fluor=waves[i][2],
            samples_per_pixel=1,
        )
        for i in range(len(names))
    ]


def _image(
    n: int,
    name: str,
    sizes: dict[str, int],
    *,
    physical: float | None = 0.65,
    unit: str = "µm",
    names: list[str] | None = None,
    order: str = "XYCZT",
    refs: bool = False,
) -> m.Image:
    names = names or ["DAPI", "GFP"][: sizes.get("c", 1)]
    pixels = m.Pixels(
        id=f"Pixels:{n}",
        dimension_order=order,
        type="uint8",
        size_x=sizes["x"],
        size_y=sizes["y"],
        size_z=sizes.get("z", 1),
        size_c=sizes.get("c", 1),
        size_t=sizes.get("t", 1),
        physical_size_x=physical,
        physical_size_x_unit=unit,
        physical_size_y=physical,
        physical_size_y_unit=unit,
        time_increment=500.0 if sizes.get("t", 1) > 1 else None,
        time_increment_unit="ms",
        channels=_channels(n, names),
        metadata_only=m.MetadataOnly(),
    )
    return m.Image(
        id=f"Image:{n}",
        name=name,
        acquisition_date="2024-03-05T10:20:30",
        description=f"{name}, lateral view",
        instrument_ref=m.InstrumentRef(id="Instrument:0"),
        objective_settings=m.ObjectiveSettings(id="Objective:0:0"),
        pixels=pixels,
        annotation_refs=[m.AnnotationRef(id="Annotation:0"), m.AnnotationRef(id="Annotation:1")]
        if refs
        else [],
    )


def _b2r_root_v2(root: Path, series: list[str], xml: str) -> None:
    (root / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    (root / ".zattrs").write_text(json.dumps({"bioformats2raw.layout": 3}))
    ome = root / "OME"
    ome.mkdir()
    (ome / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    (ome / ".zattrs").write_text(json.dumps({"series": series}))
    (ome / "METADATA.ome.xml").write_text(xml, encoding="utf-8")


def make_b2r_04(dest: Path) -> None:
    """ome-zarr-py 0.18 writes the 0.4 image (no units, scale 1) as series 0."""
    import zarr
    from ome_zarr.io import parse_url
    from ome_zarr.writer import write_image

    dest.mkdir()
    data = np.arange(2 * 2 * 16 * 16, dtype=np.uint8).reshape(2, 2, 16, 16)
    store = parse_url(str(dest / "0"), mode="w", fmt=_format04()).store
    group = zarr.group(store=store, zarr_format=2)
    write_image(
        data,
        group,
        axes="tcyx",
        fmt=_format04(),
        scale_factors=[2],
        storage_options={"compressor": None},
    )
    ome = m.OME(
        creator="ome-types (napari-ozx fixture)",
        instruments=[_instrument()],
        images=[_image(0, "Embryo 1", {"x": 16, "y": 16, "c": 2, "t": 2}, refs=True)],
        structured_annotations=_annotations(),
    )
    _b2r_root_v2(dest, ["0"], to_xml(ome))


def _format04():  # type: ignore[no-untyped-def]
    from ome_zarr.format import FormatV04

    return FormatV04()


def _v05_image(unit: str | None, scale: float):  # type: ignore[no-untyped-def]
    from yaozarrs import v05

    def ax(name: str):  # type: ignore[no-untyped-def]
        return v05.SpaceAxis(name=name, unit=unit) if unit else v05.SpaceAxis(name=name)

    return v05.Image(
        multiscales=[
            v05.Multiscale(
                axes=[v05.ChannelAxis(name="c"), ax("y"), ax("x")],
                datasets=[
                    v05.Dataset(
                        path="0",
                        coordinateTransformations=[
                            v05.ScaleTransformation(scale=[1.0, scale, scale])
                        ],
                    )
                ],
            )
        ]
    )


def make_b2r_two(dest: Path) -> None:
    """Two series by yaozarrs' Bf2RawBuilder (0.5); the XML names them."""
    from yaozarrs.write.v05 import Bf2RawBuilder

    ome = m.OME(
        creator="ome-types (napari-ozx fixture)",
        instruments=[_instrument()],
        images=[
            _image(0, "Embryo 1", {"x": 16, "y": 16, "c": 2}),
            _image(1, "Embryo 2", {"x": 16, "y": 16, "c": 2}, physical=200.0, unit="nm"),
        ],
    )
    b = Bf2RawBuilder(dest, ome_xml=to_xml(ome), compression="none", chunks=None)
    data = np.zeros((2, 16, 16), dtype=np.uint8)
    b.write_image("0", _v05_image("micrometer", 0.5), data)
    b.write_image("1", _v05_image(None, 1.0), data + 1)


def make_b2r_plate(dest: Path) -> None:
    """A plate (yaozarrs) with one well of two fields and the bioformats2raw layout."""
    from yaozarrs.write.v05 import write_plate

    data = np.zeros((2, 16, 16), dtype=np.uint8)
    images = {
        ("A", "1", "0"): (_v05_image(None, 1.0), data),
        ("A", "1", "1"): (_v05_image(None, 1.0), data + 7),
    }
    write_plate(
        dest,
        images,
        extra_attributes={"bioformats2raw.layout": 3},
        compression="none",
        chunks=None,
    )
    plate = m.Plate(
        id="Plate:0",
        name="Screen 1",
        wells=[
            m.Well(
                id="Well:0",
                row=0,
                column=0,
                well_samples=[
                    m.WellSample(
                        id=f"WellSample:0:{i}",
                        index=i,
                        position_x=pos[0],
                        position_x_unit="µm",
                        position_y=pos[1],
                        position_y_unit="µm",
                        image_ref=m.ImageRef(id=f"Image:{i}"),
                    )
                    for i, pos in enumerate([(0.0, 0.0), (13.0, 6.5)])
                ],
            )
        ],
    )
    ome = m.OME(
        creator="ome-types (napari-ozx fixture)",
        instruments=[_instrument()],
        plates=[plate],
        images=[_image(i, f"A1 field {i}", {"x": 16, "y": 16, "c": 2}) for i in range(2)],
    )
    (dest / "OME").mkdir()
    (dest / "OME" / "zarr.json").write_text(
        json.dumps(
            {
                "zarr_format": 3,
                "node_type": "group",
                "attributes": {"ome": {"version": "0.5", "series": ["A/1/0", "A/1/1"]}},
            },
            indent=2,
        )
    )
    (dest / "OME" / "METADATA.ome.xml").write_text(to_xml(ome), encoding="utf-8")


def main() -> int:
    HERE.mkdir(exist_ok=True)
    for name, make in (
        ("b2r_04.zarr", make_b2r_04),
        ("b2r_two.zarr", make_b2r_two),
        ("b2r_plate.zarr", make_b2r_plate),
    ):
        dest = HERE / name
        if dest.exists():
            shutil.rmtree(dest)
        make(dest)
        print("wrote", dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
