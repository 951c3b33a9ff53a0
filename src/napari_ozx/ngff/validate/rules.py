"""The OME-Zarr metadata rules (0.1 to 0.6), quoted, and the checks that apply them.

:data:`RULES` maps a finding code to its severity (``error`` for a MUST, ``warning`` for a
SHOULD), the rule's text as the specification (or, for the ``omero`` channel fields, the
schema) states it and its section. The ``check_*`` functions look at raw JSON and report
through a :class:`Reporter`, never raising on bad input, so one broken key does not hide
the others; they also check what no schema can (dimensionality against axes, level order,
label pyramids, well paths, missing nodes, ZEP 10). :data:`STRICT_CODES` are the SHOULDs
the strict schemas require, :data:`CROSS_REFERENCE_CODES` what ``--metadata-only`` leaves
out. Walking a hierarchy is :mod:`.walk`'s job. Why not the JSON schemas:
``docs/design/validation.md``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from napari_ozx.ngff.model.graph import TransformGraph
from napari_ozx.ngff.model.metadata import OME_KEYS, SPACE_UNITS, TIME_UNITS
from napari_ozx.ngff.model.orientation import orientation_problems
from napari_ozx.ngff.model.scale_translation import (
    is_scale_translation,
    plain_scale_translation,
)
from napari_ozx.ngff.model.transforms import Identity, SystemRef, system_ref
from napari_ozx.ngff.model.versions import (
    KNOWN_VERSIONS,
    SPATIALDATA_05,
    development_note,
    is_development,
    needs_06_shape,
    read_as,
    version_key,
)
from napari_ozx.ngff.tables.read import BACKENDS as TABLE_BACKENDS
from napari_ozx.ngff.tables.read import ROI_COLUMNS, TABLE_TYPES
from napari_ozx.ozx.findings import Finding, Severity

__all__ = [
    "CROSS_REFERENCE_CODES",
    "MAX_PER_CODE",
    "RULES",
    "STRICT_CODES",
    "Finding",
    "ImageFacts",
    "Reporter",
    "Rule",
]


#: At most this many findings per code; one summary finding counts the rest.
MAX_PER_CODE = 20


@dataclass(frozen=True, slots=True)
class Rule:
    severity: Severity
    text: str  #: quoted from the specification (or schema) named by ``section``
    section: str


_S04 = "OME-Zarr 0.4/0.5"
_AXES = f"{_S04} §axes-md"
_MS = f"{_S04} §multiscale-md"
_TRAFO = f"{_S04} §trafo-md"
_LABELS = f"{_S04} §labels-md / §label-md"
_PLATE = f"{_S04} §plate-md"
_WELL = f"{_S04} §well-md"
_HCS = f"{_S04} §hcs-layout"
_BF2RAW = f"{_S04} §bf2raw"
_OMERO = "OME-Zarr 0.4/0.5 JSON schema image.schema, omero"
_RFC4 = "RFC-4 (axis orientation) §Proposal"
_TABLES = "Fractal / ngio table specification V1"

RULES: dict[str, Rule] = {
    # ---- versions and where the metadata lives
    "version-unknown": Rule(
        "error",
        f"OME-Zarr defines the metadata versions {', '.join(KNOWN_VERSIONS[:-1])} and "
        f"{KNOWN_VERSIONS[-1]}; a document declaring any other version cannot be checked "
        "(or read) as one of them.",
        "OME-Zarr versions",
    ),
    "version-missing": Rule(
        "error",
        "The version of the OME-Zarr Metadata is denoted as a string in the `version` "
        "attribute within the `ome` namespace.",
        "OME-Zarr 0.5 §metadata",
    ),
    "version-inconsistent": Rule(
        "error",
        "The OME-Zarr Metadata version MUST be consistent within a hierarchy.",
        "OME-Zarr 0.5 §metadata",
    ),
    "version-draft": Rule(
        "warning",
        "The value of the `version` key MUST be a string specifying the version of the "
        "OME-Zarr specification (a pre-release tag such as 0.6.dev4 is no released version; "
        "read as 0.6 where the metadata has its shape).",
        "OME-Zarr 0.6 §metadata",
    ),
    "version-development": Rule(
        "warning",
        "The value of the `version` key MUST be a string specifying the version of the "
        "OME-Zarr specification (a development tag after the newest release, such as "
        "ngff-zarr's 0.9.dev1 or bioformats2raw's 1.0-DEV, is no released version: checked "
        "and read as the newest release, plus the RFCs the development series adds).",
        "OME-Zarr 0.6 §metadata",
    ),
    "version-deviation": Rule(
        "warning",
        "The value of the `version` key MUST be a string specifying the version of the "
        "OME-Zarr specification (SpatialData's '0.5-dev-spatialdata' is 0.5 with "
        "multiscale transformations in the 0.6-draft form, input / output with axes).",
        "OME-Zarr 0.5 §metadata",
    ),
    "cs-missing": Rule(
        "error",
        "`coordinateSystems`: JSON array of objects, required: Coordinate system metadata "
        "for the multiscale image.",
        "OME-Zarr 0.6 §multiscales-md",
    ),
    "cs-name": Rule(
        "error",
        "Every coordinate system MUST contain the field `name`. The value MUST be a "
        "non-empty string that is unique among all entries in a `coordinateSystems` array.",
        "OME-Zarr 0.6 §coordinate-systems-md",
    ),
    "cs-axes": Rule(
        "error",
        "Every coordinate system MUST contain the field `axes`, whose value is an array of "
        "valid `axes`.",
        "OME-Zarr 0.6 §coordinate-systems-md",
    ),
    "ds-transform-06": Rule(
        "error",
        "The transformation MUST be one of the following: A single scale or identity "
        "transformation; A sequence transformation containing one scale and one "
        "translation transformation.",
        "OME-Zarr 0.6 §multiscales-md",
    ),
    "ds-transform-input": Rule(
        "error",
        "The `input` object MUST specify a `path` field matching the `path` field of the dataset.",
        "OME-Zarr 0.6 §multiscales-md",
    ),
    "ds-transform-output": Rule(
        "error",
        "The `name` field of `output` MUST be the `name` of a coordinate system. It MUST be "
        "the same value for every resolution level in a single multiscales.",
        "OME-Zarr 0.6 §multiscales-md",
    ),
    "ms-transform-io": Rule(
        "error",
        'One of `input` or `output` MUST reference the "intrinsic" coordinate system by '
        "`name`. The other of `input` or `output` MUST reference either: A named coordinate "
        "system in the same multiscales group, or a named coordinate system in a child "
        "labels group (by `name` and `path`); then the transformation MUST be one of "
        "identity, scale, or translation.",
        "OME-Zarr 0.6 §multiscales-md",
    ),
    "transform-params": Rule(
        "error",
        "The parameter values (e.g., `scale` for a scale transformation) MUST be compatible "
        "with input and output space dimensionality (see details).",
        "OME-Zarr 0.6 §coord-trafo-md",
    ),
    "graph-connected": Rule(
        "error",
        "The graph MUST be connected (but need not be complete): any two coordinate systems "
        "in the metadata MUST be linked by a path of one or more coordinate transformations.",
        "OME-Zarr 0.6 §coord-trafo-md, Graph connectedness",
    ),
    "scene-transforms": Rule(
        "error",
        "The `scene` object MUST contain the field `coordinateTransformations`, whose value "
        "MUST be an array of valid transformations. If used inside `scene` metadata, the "
        "`input` and `output` fields of `coordinateTransformations` MUST contain a json "
        "object, which MUST contain the field `name` and MAY contain the field `path`.",
        "OME-Zarr 0.6 §scene-md",
    ),
    "labels-group-version": Rule(
        "error",
        "The group `attributes` MUST contain a key `ome`. The value of the `ome` key MUST be "
        "a JSON object that MUST contain a `version` key (0.6, for the `labels` group too; in "
        "0.5 only a warning: its schemas have no labels-group schema).",
        "OME-Zarr 0.6 §metadata",
    ),
    "dataset-padded": Rule(
        "warning",
        "The `path`s MUST be ordered from largest (i.e. highest resolution) to smallest: "
        "a level ordered by its scale but stored larger than the level before (padded "
        "beyond the data, as webknossos writes) is read cropped to level 0's extent.",
        f"{_S04} §multiscale-md",
    ),
    "multiscales-metadata": Rule(
        "warning",
        "Each `multiscales` object SHOULD contain the field `metadata`, which contains a "
        "object with additional information about the downscaling method.",
        "OME-Zarr 0.6 §multiscales-md",
    ),
    "label-colors-missing": Rule(
        "warning",
        "That `image-label` object SHOULD contain a `colors` key, whose value MUST be a list "
        "of JSON objects describing the unique label values.",
        "OME-Zarr 0.6 §labels-md",
    ),
    "axis-untyped": Rule(
        "warning", "Each axis SHOULD contain the field `type`.", "OME-Zarr 0.6 §axes-md"
    ),
    "plate-name": Rule(
        "warning", "The `plate` object SHOULD contain a `name` key.", "OME-Zarr 0.6 §plate-md"
    ),
    "ome-namespace": Rule(
        "error",
        "The OME-Zarr Metadata is stored in the various `zarr.json` files throughout the "
        "above array hierarchy. In this file, the metadata is stored under the namespaced "
        "key `ome` in `attributes`.",
        "OME-Zarr 0.5 §metadata",
    ),
    "zarr-format": Rule(
        "error",
        "0.4: Arrays MUST be defined and stored in a hierarchical organization as defined by "
        "the version 2 of the Zarr specification. 0.5 (RFC-2): OME-Zarr 0.5 is stored in "
        "Zarr v3 (`zarr.json`).",
        "OME-Zarr 0.4 §on-disk; OME-Zarr 0.5 §on-disk",
    ),
    "multiscales-version": Rule(
        "warning",
        'It SHOULD contain the field "version", which indicates the version of the '
        "multiscale metadata of this image.",
        "OME-Zarr 0.2-0.4 §multiscale-md",
    ),
    "node-unreadable": Rule(
        "error",
        "OME-NGFF metadata MUST be stored as attributes in the corresponding Zarr groups "
        "(a node's metadata document must be readable JSON).",
        "OME-Zarr 0.4 §on-disk",
    ),
    "not-ome": Rule(
        "error",
        "OME-NGFF metadata MUST be stored as attributes in the corresponding Zarr groups.",
        "OME-Zarr 0.4 §on-disk",
    ),
    "zarr-extension": Rule(
        "error",
        "ZEP 10: an extension (or unknown metadata key) whose must_understand is true (the "
        "default) MUST be understood by an implementation that opens the node; otherwise "
        "it must fail to open it.",
        "ZEP 10 §extensions",
    ),
    # ---- axes
    "axes-missing": Rule(
        "error", 'Each "multiscales" dictionary MUST contain the field "axes".', _MS
    ),
    "axes-list": Rule(
        "error",
        '"axes" describes the dimensions of a physical coordinate space. It MUST be a list of '
        "dictionaries, where each dictionary describes a dimension (axis).",
        _AXES,
    ),
    "axes-count": Rule(
        "error",
        'The length of "axes" must be between 2 and 5 and MUST be equal to the '
        'dimensionality of the zarr arrays storing the image data (see "datasets:path").',
        _MS,
    ),
    "axis-name": Rule(
        "error",
        'MUST contain the field "name" that gives the name for this dimension. The values '
        'MUST be unique across all "name" fields.',
        _AXES,
    ),
    "axes-03": Rule(
        "error",
        '0.3: "axes" is a list of names; the values MUST be unique and one of '
        '{"t", "c", "z", "y", "x"}.',
        "OME-Zarr 0.3 §multiscale-md",
    ),
    "space-axes": Rule(
        "error",
        'The "axes" MUST contain 2 or 3 entries of "type:space" and MAY contain one '
        'additional entry of "type:time" and MAY contain one additional entry of '
        '"type:channel" or a null / custom type.',
        _MS,
    ),
    "axes-types": Rule(
        "error",
        'The "axes" MUST contain 2 or 3 entries of "type:space" and MAY contain one '
        'additional entry of "type:time" and MAY contain one additional entry of '
        '"type:channel" or a null / custom type.',
        _MS,
    ),
    "axes-order": Rule(
        "error",
        'The entries MUST be ordered by "type" where the "time" axis must come first (if '
        'present), followed by the "channel" or custom axis (if present) and the axes of '
        'type "space".',
        _MS,
    ),
    # ---- RFC-4 axis orientation (napari_ozx.ngff.model.orientation)
    "orientation-space": Rule(
        "error",
        "The `orientation` field MUST only be used on spatial axes (axes with `type` field "
        'set to "space"). It MUST NOT be used on non-spatial axes such as channel, time, '
        "or other axis types.",
        _RFC4,
    ),
    "orientation-object": Rule(
        "error",
        "The `orientation` field is structured as an object and MUST have a `type` field "
        'that specifies the orientation domain (e.g., "anatomical") and MUST have a '
        "`value` field that specifies the specific orientation within that domain.",
        _RFC4,
    ),
    "orientation-type": Rule(
        "error",
        'Valid `type` strings are defined in this document -- currently only "anatomical".',
        _RFC4,
    ),
    "orientation-value": Rule(
        "error",
        "For anatomical orientation, the controlled vocabulary for the `orientation` "
        "field's `value` will include: left-to-right, right-to-left, ... (24 values with "
        "ome/ngff#528's superficial/deep, apical/basal and apex/base).",
        f"{_RFC4} / Controlled Vocabulary",
    ),
    "orientation-family": Rule(
        "error",
        'A set of NGFF `axes` MUST only have one of the set { "left-to-right", '
        '"right-to-left" } or { "anterior-to-posterior", "posterior-to-anterior" } or '
        "the remaining values.",
        f"{_RFC4} / Controlled Vocabulary",
    ),
    "axis-type": Rule(
        "warning",
        'SHOULD contain the field "type". It SHOULD be one of "space", "time" or "channel", '
        "but MAY take other values for custom axis types.",
        _AXES,
    ),
    "axis-unit": Rule(
        "warning",
        'SHOULD contain the field "unit" to specify the physical unit of this dimension. The '
        "value SHOULD be one of the following strings, which are valid units according to "
        "UDUNITS-2.",
        _AXES,
    ),
    # ---- multiscales and datasets
    "multiscales-list": Rule(
        "error",
        '"multiscales" contains a list of dictionaries where each entry describes a '
        "multiscale image.",
        _MS,
    ),
    "multiscales-name": Rule(
        "warning", 'Each "multiscales" dictionary SHOULD contain the field "name".', _MS
    ),
    "multiscales-type": Rule(
        "warning",
        'Each "multiscales" dictionary SHOULD contain the field "type", which gives the type '
        "of downscaling method used to generate the multiscale image pyramid.",
        _MS,
    ),
    "datasets-list": Rule(
        "error",
        'Each "multiscales" dictionary MUST contain the field "datasets", which is a list of '
        "dictionaries describing the arrays storing the individual resolution levels.",
        _MS,
    ),
    "dataset-path": Rule(
        "error",
        'Each dictionary in "datasets" MUST contain the field "path", whose value contains '
        "the path to the array for this resolution relative to the current zarr group.",
        _MS,
    ),
    "dataset-missing": Rule(
        "error",
        'Each dictionary in "datasets" MUST contain the field "path", whose value contains '
        "the path to the array for this resolution relative to the current zarr group.",
        _MS,
    ),
    "dataset-ndim": Rule(
        "error",
        'Each "datasets" dictionary MUST have the same number of dimensions and MUST NOT '
        "have more than 5 dimensions. The number of dimensions and order MUST correspond to "
        'number and order of "axes".',
        _MS,
    ),
    "dataset-order": Rule(
        "error",
        'The "path"s MUST be ordered from largest (i.e. highest resolution) to smallest.',
        _MS,
    ),
    "dimension-names": Rule(
        "error",
        'The "dimension_names" attribute in the `zarr.json` of the Zarr array of a '
        'multiscale level MUST match the names in the "axes" metadata.',
        "OME-Zarr 0.5 §axes-md",
    ),
    "dataset-transforms": Rule(
        "error",
        'Each dictionary in "datasets" MUST contain the field "coordinateTransformations", '
        "which contains a list of transformations that map the data coordinates to the "
        'physical coordinates (as specified by "axes") for this resolution level.',
        _MS,
    ),
    "transform-type": Rule(
        "error",
        'Each entry describes a single transformation and MUST contain the field "type". The '
        "transformation MUST only be of type `translation` or `scale`.",
        f"{_TRAFO}; {_MS}",
    ),
    "transform-scale": Rule(
        "error",
        "They MUST contain exactly one `scale` transformation that specifies the pixel size "
        "in physical units or time duration.",
        _MS,
    ),
    "transform-translation": Rule(
        "error",
        "It MAY contain exactly one `translation` that specifies the offset from the origin "
        "in physical units. If `translation` is given it MUST be listed after `scale` to "
        "ensure that it is given in physical coordinates.",
        _MS,
    ),
    "transform-length": Rule(
        "error",
        "The length of the `scale` and `translation` array MUST be the same as the length "
        'of "axes".',
        _MS,
    ),
    "transform-values": Rule(
        "error",
        'translation / scale: one of `"translation":List[float]`, `"path":str` '
        '(`"scale":List[float]`, `"path":str`).',
        _TRAFO,
    ),
    # ---- omero (transitional; rules from the JSON schema)
    "omero-object": Rule(
        "error",
        "Information specific to the channels of an image and how to render it can be found "
        'under the "omero" key: an object whose "channels" list is required.',
        _OMERO,
    ),
    "omero-color": Rule(
        "error", 'Each omero channel requires "color", a string (e.g. "0000FF").', _OMERO
    ),
    "omero-window": Rule(
        "error",
        'Each omero channel requires "window", an object whose "start", "min", "end" and '
        '"max" are all required numbers.',
        _OMERO,
    ),
    "omero-channel-count": Rule(
        "warning",
        '"channels": Array matching the c dimension size.',
        f"{_S04} §omero-md",
    ),
    # ---- labels
    "labels-list": Rule(
        "error",
        'The OME-Zarr Metadata in the `zarr.json` file associated with the "labels" group '
        "MUST contain a JSON object with the key `labels`, whose value is a JSON array of "
        "paths to the labeled multiscale image(s).",
        _LABELS,
    ),
    "label-missing": Rule(
        "error",
        'The special group "labels" found under an image Zarr contains the key `labels` '
        "containing the paths to label objects which can be found underneath the group.",
        _LABELS,
    ),
    "label-multiscales": Rule(
        "error",
        "`image-label` groups MUST also contain `multiscales` metadata and the two "
        '"datasets" series MUST have the same number of entries.',
        _LABELS,
    ),
    "label-levels": Rule(
        "error",
        "Within the `multiscales` object, the JSON array associated with the `datasets` key "
        "MUST have the same number of entries (scale levels) as the original unlabeled image.",
        _LABELS,
    ),
    "label-dtype": Rule(
        "error",
        "The pixels of the label images MUST be integer data types, i.e. one of [`uint8`, "
        "`int8`, `uint16`, `int16`, `uint32`, `int32`, `uint64`, `int64`].",
        _LABELS,
    ),
    "label-image-label": Rule(
        "warning",
        "In addition to the `multiscales` key, the OME-Zarr Metadata in this image-level "
        "`zarr.json` file SHOULD contain another key, `image-label`, whose value is also a "
        "JSON object.",
        _LABELS,
    ),
    "label-colors": Rule(
        "error",
        "That `image-label` object SHOULD contain the following keys: first, a `colors` key, "
        "whose value MUST be a JSON array describing color information for the unique label "
        "values.",
        _LABELS,
    ),
    "label-version": Rule(
        "error",
        "Second, a `version` key, whose value MUST be a string specifying the version of the "
        "OME-Zarr `image-label` schema.",
        _LABELS,
    ),
    "label-value": Rule(
        "error",
        "Each of these objects MUST contain the `label-value` key, whose value MUST be the "
        "integer corresponding to a particular label.",
        _LABELS,
    ),
    "label-value-unique": Rule(
        "error", "All `label-value`s must be unique.", "OME-Zarr 0.4 §label-md"
    ),
    "label-rgba": Rule(
        "error",
        "The objects in this array MAY contain an `rgba` key whose value MUST be an array of "
        "four integers between 0 and 255, inclusive.",
        _LABELS,
    ),
    "label-properties": Rule(
        "error",
        "Each object in the `properties` array MUST contain the `label-value` key, whose "
        "value again MUST be an integer specifying the pixel value for that label.",
        _LABELS,
    ),
    # ---- plates and wells
    "plate-object": Rule(
        "error",
        "For high-content screening datasets, the plate layout can be found under the custom "
        "attributes of the plate group under the `plate` key.",
        _PLATE,
    ),
    "plate-rows-columns": Rule(
        "error",
        "Each row (column) in the physical plate MUST be defined, even if no wells in the row "
        "are defined. Each defined row MUST contain a `name` key specifying the row name.",
        _PLATE,
    ),
    "plate-name-chars": Rule(
        "error",
        "The `name` MUST contain only alphanumeric characters, MUST be case-sensitive, and "
        "MUST NOT be a duplicate of any other `name` in the `rows` list.",
        _PLATE,
    ),
    "plate-wells": Rule(
        "error",
        "A list of JSON objects defining the wells of the plate. Each well object MUST "
        "contain a `path` key identifying the path to the well subgroup.",
        _PLATE,
    ),
    "well-path": Rule(
        "error",
        "The `path` MUST consist of a `name` in the `rows` list, a file separator (`/`), and "
        "a `name` from the `columns` list, in that order. The `path` MUST NOT contain "
        "additional leading or trailing directories.",
        _PLATE,
    ),
    "well-index": Rule(
        "error",
        "Each well object MUST contain both a `rowIndex` key identifying the index into the "
        "`rows` list and a `columnIndex` key indentifying the index into the `columns` list. "
        "`rowIndex` and `columnIndex` MUST be 0-based.",
        _PLATE,
    ),
    "well-index-mismatch": Rule(
        "error",
        "The `rowIndex`, `columnIndex`, and `path` MUST all refer to the same row/column pair.",
        _PLATE,
    ),
    "acquisition-values": Rule(
        "error",
        "The `maximumfieldcount` value MUST be a positive integer; `starttime` and `endtime` "
        "MUST be non-negative integers (epoch timestamps).",
        _PLATE,
    ),
    "acquisition-id": Rule(
        "error",
        "Each acquisition object MUST contain an `id` key providing an unique identifier "
        "within the context of the plate to which fields of view can refer to.",
        _PLATE,
    ),
    "acquisition-name": Rule(
        "warning",
        "It SHOULD contain a `name` key identifying the name of the acquisition. It SHOULD "
        "contain a `maximumfieldcount` key indicating the maximum number of fields of view "
        "for the acquisition.",
        _PLATE,
    ),
    "well-missing": Rule(
        "error",
        "Each well object MUST contain a `path` key identifying the path to the well "
        "subgroup; the group above the images defines the well and MUST implement the well "
        "specification.",
        f"{_PLATE}; {_HCS}",
    ),
    "well-images": Rule(
        "error",
        '"well": images: a list of JSON objects defining the fields of views for a given '
        "well. Each object MUST contain a `path` key identifying the path to the field of "
        "view.",
        _WELL,
    ),
    "field-missing": Rule(
        "error",
        "Each object MUST contain a `path` key identifying the path to the field of view "
        '(a group implementing "multiscales").',
        f"{_WELL}; {_HCS}",
    ),
    "well-acquisition": Rule(
        "error",
        "If multiple acquisitions were performed in the plate, it MUST contain an "
        "`acquisition` key identifying the id of the acquisition which must match one of "
        "acquisition JSON objects defined in the plate metadata.",
        _WELL,
    ),
    "well-acquisition-03": Rule(
        "warning",
        "If multiple acquisitions were performed in the plate, it SHOULD contain an "
        "acquisition key identifying the id of the acquisition.",
        "OME-Zarr 0.2/0.3 §well-md",
    ),
    "label-intermediate": Rule(
        "error",
        'Intermediate groups between "labels" and the images within it are allowed, but '
        "these MUST NOT contain metadata.",
        "OME-Zarr 0.5 §labels-md",
    ),
    "well-acquisition-unlisted": Rule(
        "warning",
        "The `acquisition` key identifies the id of the acquisition which must match one of "
        "acquisition JSON objects defined in the plate metadata (lower-case must; only a MUST "
        "when multiple acquisitions were performed).",
        _WELL,
    ),
    # ---- bioformats2raw
    "bf2raw-layout": Rule(
        "error",
        'Conforming groups MUST have the value "3" for the "bioformats2raw.layout" key in '
        "their OME-Zarr Metadata at the top of the hierarchy.",
        _BF2RAW,
    ),
    "bf2raw-series": Rule(
        "error",
        '"series" MUST be a list of string objects, each of which is a path to an image group.',
        _BF2RAW,
    ),
    "bf2raw-images": Rule(
        "error",
        'If the "series" attribute does not exist and no "plate" is present: separate '
        '"multiscales" images MUST be stored in consecutively numbered groups starting from 0.',
        _BF2RAW,
    ),
    # ---- tables (Fractal / ngio table specification V1): not OME-Zarr, so warnings only
    "tables-list": Rule(
        "warning",
        "The tables group of an image contains a single `tables` attribute with the list of "
        "table names (or is empty); each table is a group under it.",
        _TABLES,
    ),
    "table-missing": Rule(
        "warning",
        "Each name listed in `tables` is a table group under the tables group.",
        _TABLES,
    ),
    "table-type": Rule(
        "warning",
        'A table must include the following metadata fields in the group attributes: "type" '
        '(e.g. "roi_table", "masking_roi_table", "feature_table", "condition_table"), '
        '"table_version": "1", "backend" (the backend used to store the table, e.g. '
        '"anndata", "parquet" ...).',
        _TABLES,
    ),
    "table-version": Rule(
        "warning",
        "A table must include the following metadata fields in the group attributes: ... "
        '"table_version": "1" (only version 1 of the specification exists).',
        _TABLES,
    ),
    "table-backend": Rule(
        "warning",
        '"backend": the backend used to store the table: "anndata_v1" (or "anndata"), '
        '"parquet", "csv" or "json", as ngio writes them.',
        _TABLES,
    ),
    "table-roi-columns": Rule(
        "warning",
        "Moreover the ROI table must include the following columns: x_micrometer, "
        "y_micrometer, z_micrometer: the top-left corner coordinates of the ROI in "
        "micrometers. len_x_micrometer, len_y_micrometer, len_z_micrometer: the size of the "
        "ROI in micrometers along each axis.",
        f"{_TABLES}, ROI table",
    ),
    "table-region": Rule(
        "warning",
        'A masking ROI table and a feature table must include "region": {"path": '
        '"../labels/<label>"}, the label image their rows describe, relative to the tables '
        "group.",
        f"{_TABLES}, masking ROI table / feature table",
    ),
    "table-instance-key": Rule(
        "warning",
        'A masking ROI table and a feature table must include "instance_key": the column '
        "(or index) holding the label value of each row.",
        f"{_TABLES}, masking ROI table / feature table",
    ),
    "table-unreadable": Rule(
        "warning",
        "napari-ozx: a table's data is read as its backend says (AnnData obs / X / var, "
        "table.parquet, table.csv, the json table group).",
        "napari-ozx",
    ),
    "findings-truncated": Rule(
        "info", f"napari-ozx: at most {MAX_PER_CODE} findings per code are listed.", "napari-ozx"
    ),
}


# ------------------------------------------------------------------------- findings


@dataclass
class Reporter:
    """Collects findings; at most :data:`MAX_PER_CODE` of one code are kept."""

    findings: list[Finding] = field(default_factory=list)
    _counts: Counter[str] = field(default_factory=Counter)
    _rules: dict[str, Rule] = field(default_factory=dict)

    def add(
        self,
        code: str,
        node: str,
        message: str,
        severity: Severity | None = None,
        rules: Mapping[str, Rule] | None = None,
    ) -> None:
        """Report rule *code* at *node*; *severity* overrides the rule's where a version
        makes the same text a SHOULD (e.g. the labels group's version in 0.5). *rules*:
        the table *code* is in, where not :data:`RULES` (the OME-XML, RFC-8 collection and
        SpatialData checks keep theirs beside their code)."""
        rule = (RULES if rules is None else rules)[code]
        self._rules[code] = rule
        self._counts[code] += 1
        if self._counts[code] <= MAX_PER_CODE:
            self.findings.append(
                Finding(
                    severity or rule.severity, code, message, node or "/", rule.text, rule.section
                )
            )

    def finish(self) -> list[Finding]:
        """The findings, with one summary per code that had more than the cap."""
        out = list(self.findings)
        for code, n in sorted(self._counts.items()):
            if n > MAX_PER_CODE:
                out.append(
                    Finding(
                        self._rules[code].severity,
                        "findings-truncated",
                        f"{n - MAX_PER_CODE} more {code!r} findings not listed",
                        "/",
                        RULES["findings-truncated"].text,
                        RULES["findings-truncated"].section,
                    )
                )
        return out


# ---------------------------------------------------------------------- helpers


#: the SHOULDs that the specification's strict schemas (strict_image, strict_label,
#: strict_plate, strict_axes) turn into requirements: what ``validate --strict`` fails on
#: besides every MUST. Other SHOULDs (units, ...) stay warnings there too.
STRICT_CODES = frozenset(
    [
        "multiscales-name",
        "multiscales-type",
        "multiscales-metadata",
        "label-colors-missing",
        "plate-name",
        "acquisition-name",
        "axis-type",
    ]
)

#: rules that relate one field to another (a transformation's coordinate systems and its
#: parameters' lengths against their axes, a well's path against its row and column,
#: image-label beside multiscales): ``validate --metadata-only`` checks each document as
#: the specification's JSON schemas do, on its own fields, and leaves these to a full
#: validate of the hierarchy.
CROSS_REFERENCE_CODES = frozenset(
    [
        "transform-length",
        "ms-transform-io",
        "ds-transform-output",
        "graph-connected",
        "well-path",
        "label-multiscales",
    ]
)


def short(value: object, limit: int = 80) -> str:
    """A JSON value as a short string for a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


_ALNUM = re.compile(r"^[A-Za-z0-9]+$")
_IMPLIED = ("t", "c", "z", "y", "x")
_LABEL_DTYPES = frozenset(
    ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64"]
)


# ------------------------------------------------------------------ node version


def check_node_version(
    r: Reporter,
    node: str,
    zarr_format: int,
    attrs: Mapping[str, object],
    ome: Mapping[str, object],
    version: str | None,
    hierarchy_version: str | None,
) -> str | None:
    """Version and namespace rules of one OME node; the version to check it against
    (``None`` when unknown: its other rules are not checked)."""
    declared = version
    version = read_as(declared)
    if declared is not None and version is None:
        r.add("version-unknown", node, f"version {declared!r}")
        return None
    if needs_06_shape(declared):
        ms = ome.get("multiscales")
        if isinstance(ms, list) and any(
            isinstance(m, Mapping) and "coordinateSystems" not in m for m in ms
        ):  # a draft without 0.6's shape: the reader refuses it too
            r.add("version-unknown", node, f"version {declared!r} without coordinateSystems")
            return None
        if is_development(declared):
            r.add("version-development", node, development_note(str(declared)))
        else:
            r.add("version-draft", node, f"version {declared!r}")
    if declared == SPATIALDATA_05:
        r.add("version-deviation", node, f"version {declared!r}")
    if zarr_format == 3:
        keys = sorted(k for k in attrs if k in OME_KEYS)
        namespace = attrs.get("ome")
        if not isinstance(namespace, Mapping):
            if keys:  # with no OME key at all, "not OME-Zarr" says it all
                r.add(
                    "ome-namespace",
                    node,
                    f"OME keys {keys} at the top of a zarr.json's attributes, no 'ome' object",
                )
        elif version is None:
            ome_keys_here = [k for k in namespace if k != "version"]
            if ome_keys_here == ["labels"] and version_key(hierarchy_version or "0.5") < (0, 6):
                # ome-zarr 0.21 writes {"ome": {"labels": [...]}}: no 0.5 schema or MUST
                # covers the labels container group; 0.6 makes it one
                r.add(
                    "labels-group-version",
                    node,
                    "'ome' of the labels group has no 'version'",
                    severity="warning",
                )
            elif ome_keys_here == ["labels"]:
                r.add("labels-group-version", node, "'ome' of the labels group has no 'version'")
            else:
                r.add("version-missing", node, "'ome' has no 'version'")
        v = version or hierarchy_version_as(hierarchy_version) or "0.5"
        if v not in ("0.5", "0.6"):
            r.add("zarr-format", node, f"OME-Zarr {v} metadata in a Zarr v3 zarr.json")
        if hierarchy_version and version and version != read_as(hierarchy_version):
            r.add(
                "version-inconsistent",
                node,
                f"version {version!r} in a {hierarchy_version!r} hierarchy",
            )
        return v
    v = version or "0.4"
    if v in ("0.5", "0.6"):
        r.add("zarr-format", node, f"OME-Zarr {v} metadata in Zarr v2 (.zattrs)")
    return v


def hierarchy_version_as(version: str | None) -> str | None:
    return read_as(version) if version else None


# ------------------------------------------------------------------------ axes


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """What the array checks need from one multiscale: level paths and axes."""

    paths: tuple[str, ...]
    axis_names: tuple[str, ...] | None  #: None: implied by the arrays (0.1 / 0.2)
    version: str
    channel_index: int | None = None  #: the channel axis, when the axes state one
    levels: int = 0  #: entries in "datasets" (valid paths or not)
    #: each level's scale where the metadata states a plain one (else empty)
    scales: tuple[tuple[float, ...] | None, ...] = ()


def _dataset_scale(d: object) -> tuple[float, ...] | None:
    """A dataset's scale (0.4-0.6: its scale / translation steps folded, a 0.6 sequence
    unwrapped), if they are plain numbers."""
    cts = d.get("coordinateTransformations") if isinstance(d, Mapping) else None
    folded = plain_scale_translation(cts)
    return None if folded is None else folded[0]


def _axis_kind(a: Mapping[str, object]) -> str:
    t = a.get("type")
    if t in ("space", "time", "channel"):
        return str(t)
    return "other"  # custom or null type: ranks with channel


def check_axes(r: Reporter, node: str, axes: object, version: str) -> tuple[str, ...] | None:
    """The axes rules; the axis names (None when unusable)."""
    if version == "0.3":
        if not isinstance(axes, list) or not all(isinstance(a, str) for a in axes):
            r.add("axes-03", node, f"axes {short(axes)}")
            return None
        if len(set(axes)) != len(axes) or any(a not in _IMPLIED for a in axes):
            r.add("axes-03", node, f"axes {axes}")
        if not 2 <= len(axes) <= 5:
            r.add("axes-count", node, f"{len(axes)} axes {axes}")
        return tuple(axes)
    if not isinstance(axes, list) or not axes:
        r.add("axes-list", node, f"axes {short(axes)}")
        return None
    names: list[str] = []
    entries: list[Mapping[str, Any]] = []
    for a in axes:
        if not isinstance(a, Mapping) or not isinstance(a.get("name"), str):
            r.add("axis-name", node, f"axis entry {short(a)} has no string 'name'")
            return None
        names.append(a["name"])
        entries.append(a)
    if len(set(names)) != len(names):
        r.add("axis-name", node, f"duplicate axis names {names}")
    if not 2 <= len(names) <= 5:
        r.add("axes-count", node, f"{len(names)} axes {names}")
    kinds = [_axis_kind(a) for a in entries]
    n_space = kinds.count("space")
    if n_space not in (2, 3):
        r.add("space-axes", node, f"{n_space} space axes in {names} (types {kinds})")
    if kinds.count("time") > 1 or kinds.count("channel") + kinds.count("other") > 1:
        r.add("axes-types", node, f"axis types {kinds}")
    rank = {"time": 0, "channel": 1, "other": 1, "space": 2}
    ranks = [rank[k] for k in kinds]
    if ranks != sorted(ranks):
        r.add("axes-order", node, f"axes {names} of types {kinds}")
    known: tuple[str, ...] = ("space", "time", "channel")
    if version_key(version) >= (0, 6):  # strict_axes.schema's enum
        known = (*known, "array", "displacement", "coordinate", "frequency")
    for a in entries:
        t = a.get("type")
        if (t is not None and t not in known) or (t is None and version_key(version) < (0, 6)):
            r.add("axis-type", node, f"axis {a['name']!r} has type {short(t)}")
        elif t is None:
            r.add("axis-untyped", node, f"axis {a['name']!r} has no type")
        if t in ("space", "time"):
            unit = a.get("unit")
            allowed = SPACE_UNITS if t == "space" else TIME_UNITS
            if unit not in allowed:
                r.add("axis-unit", node, f"{t} axis {a['name']!r} has unit {short(unit)}")
    for code, message in orientation_problems(entries):  # RFC-4
        r.add(code, node, message)
    return tuple(names)


# ------------------------------------------------------------------ transforms


def check_transforms(r: Reporter, node: str, raw: object, ndim: int | None, where: str) -> None:
    """coordinateTransformations of one dataset (or of the whole multiscale)."""
    if not isinstance(raw, list):
        r.add("dataset-transforms", node, f"{where}: coordinateTransformations {short(raw)}")
        return
    kinds: list[str] = []
    for t in raw:
        kind = t.get("type") if isinstance(t, Mapping) else None
        if kind not in ("scale", "translation"):
            r.add("transform-type", node, f"{where}: transformation {short(t)}")
            continue
        assert isinstance(t, Mapping)
        kinds.append(str(kind))
        values = t.get(kind)
        if values is None and isinstance(t.get("path"), str):
            continue
        if not isinstance(values, list) or not all(_is_num(v) for v in values):
            r.add("transform-values", node, f"{where}: {kind} {short(values)}")
        elif ndim is not None and len(values) != ndim:
            r.add("transform-length", node, f"{where}: {kind} {values} for {ndim} axes")
    if kinds.count("scale") != 1:
        r.add("transform-scale", node, f"{where}: {kinds.count('scale')} scale transformations")
    if kinds.count("translation") > 1 or (
        "translation" in kinds
        and "scale" in kinds
        and kinds.index("translation") < kinds.index("scale")
    ):
        r.add("transform-translation", node, f"{where}: transformations in order {kinds}")


# ------------------------------------------------------------------ multiscales


def check_multiscales(
    r: Reporter, node: str, ome: Mapping[str, object], version: str, zarr_format: int
) -> list[ImageFacts]:
    """Every rule of a ``multiscales`` list that the JSON alone can decide."""
    ms = ome.get("multiscales")
    if not isinstance(ms, list) or not ms:
        r.add("multiscales-list", node, f"multiscales {short(ms)}")
        return []
    out: list[ImageFacts] = []
    vk = version_key(version)
    for i, m in enumerate(ms):
        where = f"multiscales[{i}]"
        if not isinstance(m, Mapping):
            r.add("multiscales-list", node, f"{where} is {short(m)}")
            continue
        if vk >= (0, 6):
            out.append(_check_multiscale_06(r, node, m, where, version))
            continue
        names: tuple[str, ...] | None = None
        if vk >= (0, 3):
            if "axes" not in m:
                r.add("axes-missing", node, f"{where} has no 'axes'")
            else:
                names = check_axes(r, node, m["axes"], version)
        ndim = len(names) if names is not None else None
        datasets = m.get("datasets")
        paths: list[str] = []
        if not isinstance(datasets, list) or not datasets:
            r.add("datasets-list", node, f"{where}: datasets {short(datasets)}")
        else:
            for p, d in _datasets(r, node, where, datasets, paths):
                if vk >= (0, 4):
                    if "coordinateTransformations" not in d:
                        r.add(
                            "dataset-transforms",
                            node,
                            f"dataset {p!r} has no coordinateTransformations",
                        )
                    else:
                        check_transforms(
                            r, node, d["coordinateTransformations"], ndim, f"dataset {p!r}"
                        )
        if vk >= (0, 4) and "coordinateTransformations" in m:
            check_transforms(r, node, m["coordinateTransformations"], ndim, where)
        if not (isinstance(m.get("name"), str) and m.get("name")):
            r.add("multiscales-name", node, f"{where} has no 'name'")
        if vk >= (0, 2) and "type" not in m:
            r.add("multiscales-type", node, f"{where} has no 'type'")
        if zarr_format == 2 and vk >= (0, 2) and "version" not in m:
            r.add("multiscales-version", node, f"{where} has no 'version'")
        channel = None
        axes = m.get("axes")
        if names is not None and isinstance(axes, list):
            kinds = [a.get("type") if isinstance(a, Mapping) else None for a in axes]
            if "channel" in kinds:
                channel = kinds.index("channel")
            elif vk < (0, 4) and "c" in names:
                channel = names.index("c")
        n = len(datasets) if isinstance(datasets, list) else 0
        axis_names = names if vk >= (0, 3) else None
        scales = tuple(_dataset_scale(d) for d in datasets) if isinstance(datasets, list) else ()
        out.append(ImageFacts(tuple(paths), axis_names, version, channel, n, scales))
    return out


def _datasets(
    r: Reporter, node: str, where: str, datasets: list[object], paths: list[str]
) -> list[tuple[str, Mapping[str, Any]]]:
    """The datasets with a valid, new path (appended to *paths*); each other one is a
    "dataset-path" finding."""
    out = []
    for j, d in enumerate(datasets):
        p = d.get("path") if isinstance(d, Mapping) else None
        if not isinstance(p, str) or not p.strip("/") or p in paths or ".." in p.split("/"):
            r.add("dataset-path", node, f"{where}.datasets[{j}]: {short(d)}")
            continue
        assert isinstance(d, Mapping)
        paths.append(p)
        out.append((p, d))
    return out


def _parse_06(r: Reporter, node: str, raw: object, where: str) -> Any:
    """A 0.6 transformation parsed (parameters checked), or None after a finding."""
    from napari_ozx.errors import TransformError
    from napari_ozx.ngff.model.transforms import parse_transform

    try:
        return parse_transform(raw, where=where)
    except TransformError as e:
        r.add("transform-params", node, str(e))
        return None


def _check_systems(
    r: Reporter, node: str, raw: object, where: str, version: str
) -> dict[str, tuple[str, ...]]:
    """The ``coordinateSystems`` rules; name -> axis names of the valid ones."""
    out: dict[str, tuple[str, ...]] = {}
    if not isinstance(raw, list) or not raw:
        r.add("cs-missing", node, f"{where}: coordinateSystems {short(raw)}")
        return out
    for i, cs in enumerate(raw):
        w = f"{where}.coordinateSystems[{i}]"
        name = cs.get("name") if isinstance(cs, Mapping) else None
        if not isinstance(name, str) or not name:
            r.add("cs-name", node, f"{w}: name {short(name)}")
            continue
        if name in out:
            r.add("cs-name", node, f"{w}: name {name!r} used twice")
        assert isinstance(cs, Mapping)
        if "axes" not in cs:
            r.add("cs-axes", node, f"{w} ({name!r}) has no 'axes'")
            continue
        names = check_axes(r, node, cs["axes"], version)
        if names is not None:
            out[name] = names
    return out


def _ref_pair(ref: SystemRef | None) -> tuple[str | None, str | None] | None:
    """*ref* as ``(name, path)``, as the findings have always shown it."""
    return None if ref is None else (ref.name, ref.path)


def _dataset_transform_06(
    r: Reporter, node: str, p: str, d: Mapping[str, object]
) -> Mapping[str, object] | None:
    """The one transformation of dataset *p* (``None`` after a finding)."""
    cts = d.get("coordinateTransformations")
    if not isinstance(cts, list) or len(cts) != 1 or not isinstance(cts[0], Mapping):
        r.add(
            "ds-transform-06",
            node,
            f"dataset {p!r}: coordinateTransformations {short(cts)} (one transformation)",
        )
        return None
    t: Mapping[str, object] = cts[0]
    if not is_scale_translation(t, dataset=True):
        r.add("ds-transform-06", node, f"dataset {p!r}: {short(t)}")
    return t


def _check_dataset_io_06(
    r: Reporter, node: str, p: str, t: Mapping[str, object], systems: Mapping[str, tuple[str, ...]]
) -> str | None:
    """Input (the dataset's path) and output (a system of the multiscales) of dataset *p*'s
    transformation; the output's name where it is valid."""
    inp, outp = system_ref(t.get("input")), system_ref(t.get("output"))
    # the spec's {"path": ...}; the 0.6rc0 test hierarchies' bare string is that path
    bare = isinstance(t.get("input"), str)
    in_path = inp.path if inp and inp.path else (inp.name if bare and inp else None)
    if in_path != p:
        r.add("ds-transform-input", node, f"dataset {p!r}: input {short(t.get('input'))}")
    out_name = outp.name if outp else None
    if out_name is None or out_name not in systems:
        r.add(
            "ds-transform-output",
            node,
            f"dataset {p!r}: output {short(t.get('output'))} is no coordinate system "
            f"of this multiscales ({sorted(systems)})",
        )
        return None
    return out_name


def _check_datasets_06(
    r: Reporter,
    node: str,
    where: str,
    datasets: list[object],
    systems: Mapping[str, tuple[str, ...]],
    paths: list[str],
) -> tuple[str | None, tuple[str, ...] | None]:
    """Every dataset's transformation to the intrinsic system: the intrinsic system's name
    and axis names (``None`` where no dataset names a valid one)."""
    outputs: list[str] = []
    intrinsic_names: tuple[str, ...] | None = None
    for p, d in _datasets(r, node, where, datasets, paths):
        t = _dataset_transform_06(r, node, p, d)
        if t is None:
            continue
        out_name = _check_dataset_io_06(r, node, p, t, systems)
        if out_name is not None:
            outputs.append(out_name)
            intrinsic_names = systems[out_name]
        parsed = _parse_06(r, node, t, f"dataset {p!r}")
        n = len(intrinsic_names) if intrinsic_names is not None else None
        if parsed is not None and n is not None and parsed.in_dim not in (None, n):
            r.add(
                "transform-length",
                node,
                f"dataset {p!r}: {parsed.type} of {parsed.in_dim} values for {n} axes",
            )
    if len(set(outputs)) > 1:
        r.add("ds-transform-output", node, f"{where}: levels output {sorted(set(outputs))}")
    return (outputs[0] if outputs else None), intrinsic_names


def _check_ms_transform_06(
    r: Reporter,
    node: str,
    w: str,
    t: object,
    systems: Mapping[str, tuple[str, ...]],
    intrinsic: str | None,
) -> None:
    """One multiscale-level transformation: its parameters, and its input / output (one
    the intrinsic system, the other a system here or in a labels image)."""
    parsed = _parse_06(r, node, t, w)
    if not isinstance(t, Mapping):
        return
    refs = [system_ref(t.get("input")), system_ref(t.get("output"))]
    if any(sd is None or sd.name is None for sd in refs):
        r.add(
            "ms-transform-io", node, f"{w}: input / output {short([_ref_pair(sd) for sd in refs])}"
        )
        return
    sides = [sd for sd in refs if sd is not None]
    local = [sd for sd in sides if not sd.path]
    if intrinsic is not None and not any(sd.name == intrinsic for sd in local):
        r.add("ms-transform-io", node, f"{w}: neither side is {intrinsic!r}")
    for sd in local:
        if sd.name not in systems:
            r.add("ms-transform-io", node, f"{w}: {sd.name!r} is no coordinate system here")
    for sd in sides:
        if not sd.path:
            continue
        if not sd.path.strip("/").startswith("labels/"):
            r.add("ms-transform-io", node, f"{w}: path {sd.path!r} is not a labels image")
        elif t.get("type") not in ("identity", "scale", "translation"):
            r.add("ms-transform-io", node, f"{w}: {t.get('type')!r} into labels")
    if parsed is not None and len(local) == 2:
        a, b = (systems.get(sd.name or "") for sd in local)
        for d, names in ((parsed.in_dim, a), (parsed.out_dim, b)):
            if d is not None and names is not None and d != len(names):
                r.add(
                    "transform-params",
                    node,
                    f"{w}: {parsed.label} has {d} dimensions where the system has {len(names)}",
                )


def _check_connected_06(
    r: Reporter,
    node: str,
    where: str,
    mts: list[object],
    systems: Mapping[str, tuple[str, ...]],
    intrinsic: str,
) -> None:
    """Graph connectedness: every system of the multiscales reaches the intrinsic one
    through its multiscale-level transformations (in either direction)."""
    g = TransformGraph()
    for t in mts:
        if not isinstance(t, Mapping):
            continue
        a, b = system_ref(t.get("input")), system_ref(t.get("output"))
        if a is None or b is None or a.path or b.path or not a.name or not b.name:
            continue  # into a labels image, or no system named: no link here
        # only the link matters here (parameters are checked above): no dimensions
        g.add_transform(Identity(), ("", a.name), ("", b.name))
    linked = {name for _, name in g.reachable(("", intrinsic))}
    for name in systems:
        if name not in linked:
            r.add("graph-connected", node, f"{where}: {name!r} is linked to no other system")


def _channel_06(m: Mapping[str, object], intrinsic: str | None) -> int | None:
    """The channel axis of the intrinsic system, if it has one."""
    if intrinsic is None:
        return None
    systems = m.get("coordinateSystems")
    cs = next(
        c
        for c in (systems if isinstance(systems, list) else [])
        if isinstance(c, Mapping) and c.get("name") == intrinsic
    )
    axes = cs.get("axes", [])
    kinds = [
        a.get("type") if isinstance(a, Mapping) else None
        for a in (axes if isinstance(axes, list) else [])
    ]
    return kinds.index("channel") if "channel" in kinds else None


def _check_multiscale_06(
    r: Reporter, node: str, m: Mapping[str, object], where: str, version: str
) -> ImageFacts:
    """One 0.6 multiscale: its coordinate systems, the datasets' transformations to the
    intrinsic system, the multiscale-level transformations and the parameters of all."""
    systems = _check_systems(r, node, m.get("coordinateSystems"), where, version)
    datasets = m.get("datasets")
    paths: list[str] = []
    if not isinstance(datasets, list) or not datasets:
        r.add("datasets-list", node, f"{where}: datasets {short(datasets)}")
        datasets = []
    intrinsic, intrinsic_names = _check_datasets_06(r, node, where, datasets, systems, paths)
    mts = m.get("coordinateTransformations")
    if mts is not None and not isinstance(mts, list):
        r.add("dataset-transforms", node, f"{where}: coordinateTransformations {short(mts)}")
    mts = mts if isinstance(mts, list) else []
    for k, t in enumerate(mts):
        _check_ms_transform_06(
            r, node, f"{where}.coordinateTransformations[{k}]", t, systems, intrinsic
        )
    if intrinsic is not None:
        _check_connected_06(r, node, where, mts, systems, intrinsic)
    if not (isinstance(m.get("name"), str) and m.get("name")):
        r.add("multiscales-name", node, f"{where} has no 'name'")
    if "type" not in m:
        r.add("multiscales-type", node, f"{where} has no 'type'")
    if "metadata" not in m:
        r.add("multiscales-metadata", node, f"{where} has no 'metadata'")
    channel = _channel_06(m, intrinsic)
    scales = tuple(_dataset_scale(d) for d in datasets if isinstance(d, Mapping))
    return ImageFacts(tuple(paths), intrinsic_names, version, channel, len(datasets), scales)


def check_scene(r: Reporter, node: str, scene: object) -> None:
    """The ``scene`` rules that its own document can decide (the graph across images is
    checked by the walker with the images)."""
    if not isinstance(scene, Mapping) or not isinstance(
        scene.get("coordinateTransformations"), list
    ):
        r.add("scene-transforms", node, f"scene {short(scene)}")
        return
    if "coordinateSystems" in scene:
        _check_systems(r, node, scene["coordinateSystems"], "scene", "0.6")
    for k, t in enumerate(scene["coordinateTransformations"]):
        w = f"scene.coordinateTransformations[{k}]"
        _parse_06(r, node, t, w)
        if not isinstance(t, Mapping):
            continue
        for side in ("input", "output"):
            ref = system_ref(t.get(side))
            if ref is None or ref.name is None:
                r.add("scene-transforms", node, f"{w}: {side} {short(t.get(side))} has no name")


def _dtype_name(doc: Mapping[str, object]) -> str | None:
    """The array's numpy data type name ('uint16') from a v3 or v2 document."""
    dt = doc.get("data_type", doc.get("dtype"))
    if not isinstance(dt, str):
        return None
    try:
        import numpy as np

        return str(np.dtype(dt).name) if doc.get("dtype") is not None else dt
    except TypeError:
        return dt


def check_levels(
    r: Reporter,
    node: str,
    facts: ImageFacts,
    docs: Sequence[Mapping[str, object] | None],
    is_label: bool,
) -> int | None:
    """Rules that need the arrays: existence, dimensionality, order, dimension_names,
    label data types. Returns the dimensionality (for implied axes and omero)."""
    ndim = len(facts.axis_names) if facts.axis_names is not None else None
    prev: tuple[int, ...] | None = None
    first_ndim: int | None = None
    for p, doc in zip(facts.paths, docs, strict=True):
        if doc is None:
            r.add("dataset-missing", node, f"level {p!r}: no array at {p!r}")
            continue
        shape = doc.get("shape")
        if not isinstance(shape, list) or not all(_is_int(s) for s in shape):
            r.add("dataset-missing", node, f"level {p!r}: array shape {short(shape)}")
            continue
        if first_ndim is None:
            first_ndim = len(shape)
        want = ndim if ndim is not None else first_ndim
        if len(shape) != want or len(shape) > 5:
            axes = f"{len(facts.axis_names)} axes" if facts.axis_names else f"level 0's {want}"
            r.add("dataset-ndim", node, f"level {p!r} has {len(shape)} dimensions for {axes}")
        elif prev is not None and any(s > q for s, q in zip(shape, prev, strict=True)):
            sc = facts.scales
            k = facts.paths.index(p) if p in facts.paths else -1
            before_s = sc[k - 1] if 0 < k < len(sc) else None
            this_s = sc[k] if 0 < k < len(sc) else None
            coarser = (
                before_s is not None
                and this_s is not None
                and all(b >= a for a, b in zip(before_s, this_s))
                and any(b > a for a, b in zip(before_s, this_s))
            )
            if coarser:  # ordered by resolution, padded beyond the data (webknossos)
                r.add("dataset-padded", node, f"level {p!r} {tuple(shape)} exceeds {prev}")
            else:
                r.add("dataset-order", node, f"level {p!r} {tuple(shape)} is larger than {prev}")
        if len(shape) == want:
            prev = tuple(shape)
        dn = doc.get("dimension_names")
        if (
            facts.version == "0.5"
            and facts.axis_names is not None
            and isinstance(dn, list)
            and any(n is not None for n in dn)
            and list(dn) != list(facts.axis_names)
        ):
            r.add(
                "dimension-names",
                node,
                f"level {p!r} dimension_names {dn} vs axes {list(facts.axis_names)}",
            )
        if is_label:
            dt = _dtype_name(doc)
            if dt is not None and dt not in _LABEL_DTYPES:
                r.add("label-dtype", node, f"level {p!r} has data type {dt}")
    return ndim if ndim is not None else first_ndim


# ------------------------------------------------------------------------ omero


def check_omero(
    r: Reporter, node: str, omero: object, channel_count: int | None, version: str
) -> None:
    """omero (0.4 / 0.5 schema): channels with a colour string and a complete window."""
    if version_key(version) < (0, 4):
        return
    if not isinstance(omero, Mapping) or not isinstance(omero.get("channels"), list):
        r.add("omero-object", node, f"omero {short(omero)}")
        return
    channels = omero["channels"]
    for i, c in enumerate(channels):
        if not isinstance(c, Mapping):
            r.add("omero-object", node, f"omero channel {i} is {short(c)}")
            continue
        color = c.get("color")
        if not isinstance(color, str):
            r.add("omero-color", node, f"channel {i} color {short(color)}")
        w = c.get("window")
        if not isinstance(w, Mapping):
            r.add("omero-window", node, f"channel {i} window {short(w)}")
        else:
            bad = [k for k in ("start", "min", "end", "max") if not _is_num(w.get(k))]
            if bad:
                r.add(
                    "omero-window",
                    node,
                    f"channel {i} window {short(dict(w))}: {', '.join(bad)} missing or not numbers",
                )
    if channel_count is not None and len(channels) != channel_count:
        r.add(
            "omero-channel-count",
            node,
            f"{len(channels)} omero channels for a channel axis of size {channel_count}",
        )


# ----------------------------------------------------------------------- tables

#: what :func:`check_table` knows of the V1 specification
_TABLE_TYPES = TABLE_TYPES
_TABLE_BACKENDS = tuple(TABLE_BACKENDS)
_ROI_COLUMNS = ROI_COLUMNS


def check_tables_group(r: Reporter, node: str, attrs: Mapping[str, object]) -> list[str]:
    """The table names an image's ``tables`` group lists (reported when malformed)."""
    names = attrs.get("tables")
    if names is None and not attrs:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        r.add("tables-list", node, f"tables {short(names)}")
        return [n for n in names if isinstance(n, str) and n] if isinstance(names, list) else []
    return list(dict.fromkeys(names))


def check_table(
    r: Reporter, node: str, attrs: Mapping[str, object], columns: Sequence[str] | None = None
) -> None:
    """One table group's attributes (and its *columns* when known) against the V1
    specification."""
    ttype = attrs.get("type", attrs.get("table_type"))
    if ttype is None:
        r.add("table-type", node, "no 'type' attribute")
    elif ttype not in _TABLE_TYPES:
        r.add("table-type", node, f"type {short(ttype)} is none of {', '.join(_TABLE_TYPES)}")
    version = attrs.get("table_version", attrs.get("fractal_table_version"))
    if version != "1":
        what = "no 'table_version'" if version is None else f"table_version {short(version)}"
        r.add("table-version", node, what)
    backend = attrs.get("backend")
    if backend is None and attrs.get("encoding-type") != "anndata":
        r.add("table-backend", node, "no 'backend' attribute and no AnnData encoding")
    elif backend is not None and backend not in _TABLE_BACKENDS:
        r.add("table-backend", node, f"backend {short(backend)}")
    if ttype in ("masking_roi_table", "feature_table"):
        region = attrs.get("region")
        if not isinstance(region, Mapping) or not isinstance(region.get("path"), str):
            r.add("table-region", node, f"region {short(region)}")
        if not isinstance(attrs.get("instance_key"), str):
            r.add("table-instance-key", node, f"instance_key {short(attrs.get('instance_key'))}")
    if ttype in ("roi_table", "masking_roi_table") and columns is not None:
        missing = [c for c in _ROI_COLUMNS if c not in columns]
        if missing:
            r.add("table-roi-columns", node, f"missing {', '.join(missing)}")


# ----------------------------------------------------------------------- labels


def check_labels_group(r: Reporter, node: str, ome: Mapping[str, object]) -> list[str]:
    labels = ome.get("labels")
    if not isinstance(labels, list) or not all(isinstance(x, str) and x for x in labels):
        r.add("labels-list", node, f"labels {short(labels)}")
        return [x for x in labels if isinstance(x, str) and x] if isinstance(labels, list) else []
    return list(dict.fromkeys(labels))


def check_image_label(
    r: Reporter, node: str, ome: Mapping[str, object], listed: bool, version: str | None = None
) -> None:
    if "image-label" not in ome:
        if listed and "multiscales" in ome:
            r.add("label-image-label", node, "label image without 'image-label'")
        return
    il = ome["image-label"]
    if "multiscales" not in ome:
        r.add("label-multiscales", node, "'image-label' without 'multiscales'")
    if not isinstance(il, Mapping):
        r.add("label-colors", node, f"image-label {short(il)}")
        return
    if "version" in il and not isinstance(il["version"], str):
        r.add("label-version", node, f"image-label version {short(il['version'])}")
    colors = il.get("colors")
    v06 = version_key(version) >= (0, 6)
    if colors is None and v06:
        r.add("label-colors-missing", node, "image-label has no 'colors'")
    if colors is not None:
        if not isinstance(colors, list) or (v06 and not colors):
            r.add("label-colors", node, f"colors {short(colors)}")
        else:
            seen: set[int] = set()
            for c in colors:
                v = c.get("label-value") if isinstance(c, Mapping) else None
                if not _is_int(v):
                    r.add("label-value", node, f"colour {short(c)}")
                    continue
                assert isinstance(c, Mapping) and isinstance(v, int)
                if v in seen:
                    r.add("label-value-unique", node, f"label-value {v} listed again")
                seen.add(v)
                rgba = c.get("rgba")
                if "rgba" in c and not (
                    isinstance(rgba, list)
                    and len(rgba) == 4
                    and all(_is_int(x) and 0 <= x <= 255 for x in rgba)
                ):
                    r.add("label-rgba", node, f"label-value {v}: rgba {short(rgba)}")
    props = il.get("properties")
    if props is not None:
        if not isinstance(props, list) or (v06 and not props):
            r.add("label-properties", node, f"properties {short(props)}")
        else:
            for p in props:
                if not (isinstance(p, Mapping) and _is_int(p.get("label-value"))):
                    r.add("label-properties", node, f"property {short(p)}")


# ------------------------------------------------------------------------ plate


@dataclass(frozen=True, slots=True)
class PlateFacts:
    wells: tuple[str, ...]
    acquisitions: tuple[int, ...]


def check_plate(r: Reporter, node: str, plate: object, version: str) -> PlateFacts:
    if not isinstance(plate, Mapping):
        r.add("plate-object", node, f"plate {short(plate)}")
        return PlateFacts((), ())
    if version_key(version) >= (0, 6) and not isinstance(plate.get("name"), str):
        r.add("plate-name", node, "plate has no 'name'")
    axes: dict[str, list[str]] = {}
    for key in ("rows", "columns"):
        raw = plate.get(key)
        names: list[str] = []
        if not isinstance(raw, list) or not raw:
            r.add("plate-rows-columns", node, f"plate {key} {short(raw)}")
        else:
            for e in raw:
                n = e.get("name") if isinstance(e, Mapping) else None
                if not isinstance(n, str):
                    r.add("plate-rows-columns", node, f"{key} entry {short(e)} has no name")
                    names.append("")
                    continue
                if version_key(version) < (0, 4):
                    pass  # 0.1-0.3 state no rule on the names
                elif not _ALNUM.match(n):
                    r.add("plate-name-chars", node, f"{key} name {n!r}")
                elif n in names:
                    r.add("plate-name-chars", node, f"{key} name {n!r} listed twice")
                names.append(n)
        axes[key] = names
    rows, cols = axes["rows"], axes["columns"]
    wells_raw = plate.get("wells")
    wells: list[str] = []
    if not isinstance(wells_raw, list):
        r.add("plate-wells", node, f"wells {short(wells_raw)}")
        wells_raw = []
    for w, path in _with_paths(r, node, wells_raw, "plate-wells", "well"):
        wells.append(path)
        parts = path.split("/")
        ok_path = len(parts) == 2 and parts[0] in rows and parts[1] in cols
        if version_key(version) < (0, 4):
            continue  # 0.1-0.3: "a path key identifying the path to the well subgroup"
        if not ok_path:
            r.add("well-path", node, f"well path {path!r} (rows {rows}, columns {cols})")
        ri, ci = w.get("rowIndex"), w.get("columnIndex")
        if not (_is_int(ri) and _is_int(ci)):
            r.add(
                "well-index", node, f"well {path!r}: rowIndex {short(ri)}, columnIndex {short(ci)}"
            )
            continue
        assert isinstance(ri, int) and isinstance(ci, int)
        if not (0 <= ri < len(rows) and 0 <= ci < len(cols)):
            r.add(
                "well-index",
                node,
                f"well {path!r}: rowIndex {ri}, columnIndex {ci} outside the plate",
            )
        elif ok_path and (rows[ri], cols[ci]) != (parts[0], parts[1]):
            r.add(
                "well-index-mismatch",
                node,
                f"well {path!r} has rowIndex {ri} ({rows[ri]!r}) and columnIndex {ci} "
                f"({cols[ci]!r})",
            )
    acqs: list[int] = []
    raw_acqs = plate.get("acquisitions")
    for a in raw_acqs if isinstance(raw_acqs, list) else []:
        aid = a.get("id") if isinstance(a, Mapping) else None
        if not _is_int(aid) or aid in acqs:
            r.add("acquisition-id", node, f"acquisition {short(a)}")
            continue
        assert isinstance(a, Mapping) and isinstance(aid, int)
        acqs.append(aid)
        if aid < 0:
            r.add("acquisition-id", node, f"acquisition id {aid} is negative")
        mfc = a.get("maximumfieldcount")
        if "maximumfieldcount" in a and not (isinstance(mfc, int) and _is_int(mfc) and mfc > 0):
            r.add("acquisition-values", node, f"acquisition {aid}: maximumfieldcount {short(mfc)}")
        for k in ("starttime", "endtime"):
            if k in a and not (_is_int(a[k]) and a[k] >= 0):
                r.add("acquisition-values", node, f"acquisition {aid}: {k} {short(a[k])}")
        missing = [k for k in ("name", "maximumfieldcount") if k not in a]
        if missing:
            r.add("acquisition-name", node, f"acquisition {aid} has no {' / '.join(missing)}")
    return PlateFacts(tuple(wells), tuple(acqs))


def _with_paths(
    r: Reporter, node: str, entries: list[object], code: str, what: str
) -> Iterator[tuple[Mapping[str, Any], str]]:
    """(entry, path) of each entry of a plate's ``wells`` or a well's ``images`` that has a
    path; each one without is reported (*code*) and skipped."""
    for e in entries:
        path = e.get("path") if isinstance(e, Mapping) else None
        if not isinstance(path, str) or not path:
            r.add(code, node, f"{what} {short(e)} has no path")
            continue
        assert isinstance(e, Mapping)
        yield e, path


def check_well(
    r: Reporter, node: str, well: object, version: str, plate: PlateFacts | None
) -> list[str]:
    """The well's rules (and its acquisitions against the plate's); its field paths."""
    images = well.get("images") if isinstance(well, Mapping) else None
    if not isinstance(images, list):
        r.add("well-images", node, f"well {short(well)}")
        return []
    paths: list[str] = []
    for im, p in _with_paths(r, node, images, "well-images", "well image"):
        paths.append(p)
        if plate is None:
            continue
        acq = im.get("acquisition")
        if acq is None:
            if len(plate.acquisitions) > 1:
                r.add(
                    "well-acquisition" if version_key(version) >= (0, 4) else "well-acquisition-03",
                    node,
                    f"field {p!r} names no acquisition; the plate has {len(plate.acquisitions)}",
                )
        elif plate.acquisitions and acq not in plate.acquisitions:
            code = (
                "well-acquisition"
                if len(plate.acquisitions) > 1 and version_key(version) >= (0, 4)
                else "well-acquisition-unlisted"
            )
            r.add(
                code,
                node,
                f"field {p!r} acquisition {short(acq)} is not one of {list(plate.acquisitions)}",
            )
    return paths


# -------------------------------------------------------------- bioformats2raw


def check_bf2raw(r: Reporter, node: str, layout: object) -> None:
    if layout != 3:
        r.add("bf2raw-layout", node, f"bioformats2raw.layout {short(layout)}")


def check_series(r: Reporter, node: str, series: object) -> list[str]:
    if not isinstance(series, list) or not all(isinstance(s, str) and s for s in series):
        r.add("bf2raw-series", node, f"series {short(series)}")
        return [s for s in series if isinstance(s, str) and s] if isinstance(series, list) else []
    return list(series)


def ome_keys(ome: Mapping[str, object]) -> list[str]:
    return sorted(k for k in ome if k in OME_KEYS)


def channel_count(facts: ImageFacts, shape: Sequence[int] | None) -> int | None:
    """The size of the channel axis (for omero's channel count): 1 without one, None
    when unknown."""
    if shape is None:
        return None
    index = facts.channel_index
    if facts.axis_names is None and 2 <= len(shape) <= 5:  # 0.1 / 0.2: implied t c z y x
        implied = _IMPLIED[5 - len(shape) :]
        index = implied.index("c") if "c" in implied else None
    if index is None:
        return 1  # no channel axis: one channel
    return int(shape[index]) if index < len(shape) else None
