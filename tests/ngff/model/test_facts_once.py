"""Each OME-Zarr fact is interpreted once: versions (:mod:`napari_ozx.ngff.model.versions`),
``input`` / ``output`` references (:func:`~napari_ozx.ngff.model.transforms.system_ref`),
scale / translation folding and sequence unwrapping
(:mod:`napari_ozx.ngff.model.scale_translation`) and the OME keys
(:data:`napari_ozx.ngff.model.metadata.OME_KEYS`). Unit tests of each shared function, and
property tests that the reader's (model's) view and the validator's view of the same
generated document agree."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from napari_ozx.errors import MetadataError, TransformError
from napari_ozx.ngff.model.metadata import (
    OME_KEYS,
    has_ome_keys,
    ome_section,
    parse_node_attributes,
)
from napari_ozx.ngff.model.scale_translation import (
    fold_scale_translation,
    is_scale_translation,
    plain_scale_translation,
    unwrap_sequences,
)
from napari_ozx.ngff.model.transforms import SystemRef, parse_transform, system_name, system_ref
from napari_ozx.ngff.model.versions import (
    KNOWN_VERSIONS,
    is_06_draft,
    normalise_version,
    read_as,
    version_key,
)
from napari_ozx.ngff.validate import rules
from napari_ozx.ngff.validate.rules import Reporter

# ------------------------------------------------------------------ versions


def test_version_key_orders_numerically():
    """Versions compare as numbers, not strings (a string "0.10" would sort before "0.6")."""
    assert version_key("0.4") == (0, 4)
    assert version_key("0.6") > version_key("0.5") > version_key("0.4")
    assert version_key("0.6rc2") == version_key("0.6.dev4") == (0, 6)
    assert version_key("0.5-dev-spatialdata") == (0, 5)
    assert version_key(None) == version_key("9.9") == version_key("banana") == (0,)


def test_read_as():
    """0.6 ``_version.schema`` accepts release candidates ("0.6rc0"); pre-release tags of
    earlier tools are drafts of 0.6; SpatialData's "0.5-dev-spatialdata" is 0.5."""
    for v in KNOWN_VERSIONS:
        assert read_as(v) == v
    for v in ("0.6rc0", "0.6rc12", "0.6.dev3", "0.6-dev", "0.6dev", "0.6.dev"):
        assert read_as(v) == "0.6"
    assert read_as("0.5-dev-spatialdata") == "0.5"
    for v in ("0.7", "1.0", "0.6rc", "0.6.dev3x", "0.5rc1", "", " 0.4"):
        assert read_as(v) is None
    assert read_as(None) is None


def test_is_06_draft():
    assert is_06_draft("0.6.dev4") and is_06_draft("0.6-dev") and is_06_draft("0.6dev2")
    assert not is_06_draft("0.6") and not is_06_draft("0.6rc1") and not is_06_draft(None)
    assert not is_06_draft("0.5-dev-spatialdata")


def test_normalise_version(caplog):
    """A version the reader does not know is refused, never guessed; a draft of 0.6 is
    read as 0.6 with one warning naming it."""
    assert normalise_version("0.4") == "0.4"
    assert normalise_version("0.6rc1") == "0.6"
    with caplog.at_level(logging.WARNING):
        assert normalise_version("0.6.dev4", "img") == "0.6"
    assert "img: OME-Zarr '0.6.dev4' is a pre-release draft of 0.6" in caplog.text
    with pytest.raises(MetadataError, match=r"^img: unsupported OME-Zarr version '0\.7' "):
        normalise_version("0.7", "img")
    with pytest.raises(MetadataError, match=r"^/: unsupported"):
        normalise_version("x")


# ---------------------------------------------------------------- references


def test_system_ref():
    """0.6 "input / output": an object with ``name`` and ``path``; the bare string of the
    RFC-5 suites is a name; an empty name or path is none."""
    assert system_ref({"name": "a", "path": "img"}) == SystemRef("a", "img")
    assert system_ref({"name": "", "path": ""}) == SystemRef()
    assert system_ref({"name": 3}) == SystemRef()
    assert system_ref("a") == SystemRef("a")
    assert system_ref("") == SystemRef()
    assert system_ref(None) is None and system_ref(3) is None and system_ref([]) is None
    assert system_name({"name": "g", "axes": []}) == "g"
    assert system_name(7) is None


def test_system_ref_parse_refuses_what_system_ref_cannot_read():
    assert SystemRef.parse(None) is None
    assert SystemRef.parse("a") == system_ref("a")
    with pytest.raises(TransformError, match="invalid coordinate system reference 3"):
        SystemRef.parse(3)


# ------------------------------------------------------- scale / translation


def test_unwrap_sequences():
    """0.6 writes a ``sequence`` of a scale and a translation where 0.4/0.5 wrote a list."""
    s = {"type": "scale", "scale": [2]}
    tr = {"type": "translation", "translation": [1]}
    assert unwrap_sequences([{"type": "sequence", "transformations": [s, tr]}]) == [s, tr]
    nested = {"type": "sequence", "transformations": [{"type": "sequence", "transformations": [s]}]}
    assert unwrap_sequences([nested, tr]) == [s, tr]
    assert unwrap_sequences([{"type": "sequence", "transformations": None}, 5]) == [5]


def test_fold_scale_translation():
    """0.4 §trafo-md: "The transformations in the list are applied sequentially": a
    translation before a scale is scaled by it."""
    ts = [
        {"type": "translation", "translation": [1, 2]},
        {"type": "scale", "scale": [2, 3]},
        {"type": "identity"},
        {"type": "translation", "translation": [0.5, 0.5]},
    ]
    assert fold_scale_translation(ts, 2) == ((2.0, 3.0), (2.5, 6.5))
    assert fold_scale_translation(None, 2) == ((1.0, 1.0), (0.0, 0.0))
    # the reader reads numbers written as strings (the validator does not: see below)
    assert fold_scale_translation([{"type": "scale", "scale": ["2"]}], 1) == ((2.0,), (0.0,))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"type": "scale"}, r"^n: 'coordinateTransformations' must be a list$"),
        ([5], r"^n: invalid coordinate transformation 5$"),
        ([{"type": "affine"}], r"^n: unsupported coordinate transformation type 'affine'$"),
        ([{"type": "scale", "scale": [1]}], r"one value per axis \(2\)$"),
        ([{"type": "scale", "scale": [1, "a"]}], r"is not a list of numbers$"),
        ([{"type": "scale", "scale": [1, 0]}], r"^n: scale \[1, 0\] must be positive$"),
    ],
)
def test_fold_refuses(raw, message):
    with pytest.raises(MetadataError, match=message):
        fold_scale_translation(raw, 2, "n")


def test_fold_skips_a_step_stored_at_a_path(caplog):
    with caplog.at_level(logging.WARNING):
        got = fold_scale_translation([{"type": "scale", "path": "s"}], 2, "n")
    assert got == ((1.0, 1.0), (0.0, 0.0))
    assert "scale transform stored at a path is ignored" in caplog.text


def test_plain_scale_translation():
    """The validator's and the graph's view: the same fold, None for anything not plain."""
    seq = {
        "type": "sequence",
        "transformations": [
            {"type": "scale", "scale": [2, 4]},
            {"type": "translation", "translation": [1, 1]},
        ],
    }
    assert plain_scale_translation([seq]) == ((2.0, 4.0), (1.0, 1.0))
    assert plain_scale_translation([{"type": "identity"}]) is None  # no length stated
    assert plain_scale_translation([{"type": "identity"}], 2) == ((1.0, 1.0), (0.0, 0.0))
    assert plain_scale_translation([{"type": "scale", "scale": ["2"]}]) is None
    assert plain_scale_translation([{"type": "scale", "path": "s"}]) is None
    assert plain_scale_translation([{"type": "scale", "scale": [1]}], 2) is None
    assert plain_scale_translation({"type": "scale"}) is None


def test_is_scale_translation_strictness():
    """0.6 §multiscales-md: a dataset's transformation "MUST be one of the following: A
    single scale or identity transformation; A sequence transformation containing one
    scale and one translation transformation" (§coord-trafo-constraints: "a scale followed
    by a translation"). What 0.4/0.5 can store is looser: any identity / scale /
    translation, or sequences of them."""
    s = {"type": "scale", "scale": [1.0]}
    tr = {"type": "translation", "translation": [1.0]}
    seq = {"type": "sequence", "transformations": [s, tr]}
    rev = {"type": "sequence", "transformations": [tr, s]}
    for t in (s, {"type": "identity"}, seq, {"type": "sequence", "transformations": [s]}):
        assert is_scale_translation(t, dataset=True)
        assert is_scale_translation(t)
    for t in (tr, rev):
        assert not is_scale_translation(t, dataset=True)
        assert is_scale_translation(t)
    affine = {"type": "affine", "affine": [[1.0, 0.0]]}
    assert not is_scale_translation(affine) and not is_scale_translation(affine, dataset=True)
    # parsed transformations answer as their JSON does
    for t in (s, tr, seq, rev, affine):
        parsed = parse_transform(t)
        assert is_scale_translation(parsed) == is_scale_translation(t)
        assert is_scale_translation(parsed, dataset=True) == is_scale_translation(t, dataset=True)


# ------------------------------------------------------------------ OME keys


@pytest.mark.parametrize("key", sorted(OME_KEYS))
def test_ome_keys_one_set(key):
    """The reader's "is this OME-Zarr" and the validator's RFC-2 namespace rule ("OME keys
    at the top of a zarr.json's attributes") ask the same set of keys."""
    attrs = {key: {}}
    assert has_ome_keys(attrs)
    assert has_ome_keys({"ome": attrs})
    r = Reporter()
    rules.check_node_version(r, "", 3, attrs, attrs, None, None)
    assert [f.code for f in r.findings] == ["ome-namespace"]
    assert rules.ome_keys({key: 1, "version": "0.5", "other": 2}) == [key]


def test_not_ome_keys():
    assert not has_ome_keys({"version": "0.5", "other": 1})
    r = Reporter()
    rules.check_node_version(r, "", 3, {"other": 1}, {"other": 1}, None, None)
    assert not r.findings


# -------------------------------------------------------- graph connectedness


def _ms06(transformations):
    axes = [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}]
    return {
        "name": "img",
        "type": "none",
        "metadata": {},
        "coordinateSystems": [
            {"name": n, "axes": axes} for n in ("physical", "world", "other", "lost")
        ],
        "datasets": [
            {
                "path": "0",
                "coordinateTransformations": [
                    {
                        "type": "scale",
                        "scale": [1.0, 1.0],
                        "input": {"path": "0"},
                        "output": {"name": "physical"},
                    }
                ],
            }
        ],
        "coordinateTransformations": transformations,
    }


def test_graph_connected_uses_the_graph():
    """0.6 "Graph connectedness": every coordinate system of a multiscales is linked to
    the intrinsic one, through its transformations taken in either direction."""
    ts = [
        {"type": "identity", "input": "physical", "output": {"name": "world"}},
        {"type": "identity", "input": {"name": "other"}, "output": "world"},
    ]
    r = Reporter()
    rules.check_multiscales(r, "", {"multiscales": [_ms06(ts)]}, "0.6", 3)
    lost = [f.message for f in r.findings if f.code == "graph-connected"]
    assert lost == ["multiscales[0]: 'lost' is linked to no other system"]


# ------------------------------------------------- the model against the validator

_VERSIONS = st.one_of(
    st.sampled_from(KNOWN_VERSIONS),
    st.sampled_from(["0.6rc0", "0.6rc3", "0.6.dev4", "0.6-dev", "0.5-dev-spatialdata"]),
    st.from_regex(r"\A[0-9]\.[0-9]{1,2}([a-z.-]{0,4}[0-9]?)?\Z"),
    st.text(max_size=6),
)
_NAMES = st.lists(st.sampled_from("tczyx"), min_size=2, max_size=5, unique=True)
_NUM = st.floats(0.01, 100.0, allow_nan=False) | st.integers(1, 50)


@st.composite
def _steps(draw, ndim):
    """A dataset's transformations: scale / translation / identity steps, possibly in a
    0.6 sequence."""
    kinds = draw(st.lists(st.sampled_from(["scale", "translation", "identity"]), max_size=4))
    steps: list[dict[str, object]] = []
    for kind in kinds:
        if kind == "identity":
            steps.append({"type": "identity"})
        else:
            steps.append({"type": kind, kind: draw(st.lists(_NUM, min_size=ndim, max_size=ndim))})
    if steps and draw(st.booleans()):
        return [{"type": "sequence", "transformations": steps}]
    return steps


def _reference_fold(steps, ndim):
    """The fold as a product of homogeneous matrices (0.4 §trafo-md: applied in order)."""
    m = np.eye(ndim + 1)
    for t in unwrap_sequences(steps):
        step = np.eye(ndim + 1)
        if t["type"] == "scale":
            step[:ndim, :ndim] = np.diag(t["scale"])
        elif t["type"] == "translation":
            step[:ndim, ndim] = t["translation"]
        m = step @ m
    return np.diag(m)[:ndim], m[:ndim, ndim]


def _image(version, names, steps, zarr_format):
    axes = [{"name": n, "type": "channel" if n == "c" else "space"} for n in names]
    ms = {
        "name": "img",
        "axes": axes,
        "datasets": [{"path": "0", "coordinateTransformations": steps}],
    }
    if zarr_format == 3:
        return {"ome": {"version": version, "multiscales": [ms]}}
    return {"multiscales": [{**ms, "version": version}]}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(version=_VERSIONS, names=_NAMES, data=st.data(), zarr_format=st.sampled_from([2, 3]))
def test_model_and_validator_agree(version, names, data, zarr_format):
    """One generated image document: the version the reader reads it as is the version
    the validator checks it as (and each refuses exactly what the other does); each level's
    scale the reader folds is the one the validator compares the levels by; both equal the
    product of the steps' matrices."""
    steps = data.draw(_steps(len(names)))
    attrs = _image(version, names, steps, zarr_format)
    ome, declared = ome_section(attrs, zarr_format)
    assert declared == version

    # versions
    known = read_as(version)
    assert version_key(version) == version_key(known)
    r = Reporter()
    checked = rules.check_node_version(r, "", zarr_format, attrs, ome, declared, None)
    try:
        model = parse_node_attributes(attrs, zarr_format)
    except MetadataError as e:
        assert checked is None, f"the reader refuses ({e}), the validator checks {checked}"
        assert any(f.code == "version-unknown" for f in r.findings)
        if known is None:
            with pytest.raises(MetadataError):
                normalise_version(version)
        return
    assert known is not None and normalise_version(version) == known == model.version
    assert checked == known
    if is_06_draft(version):
        assert [f.code for f in r.findings if f.code.startswith("version")] == ["version-draft"]

    # scale / translation of the level
    ndim = len(names)
    (level,) = model.multiscales[0].datasets
    want_scale, want_translation = _reference_fold(steps, ndim)
    np.testing.assert_allclose(level.scale, want_scale, rtol=1e-9)
    np.testing.assert_allclose(level.translation, want_translation, rtol=1e-9, atol=1e-9)
    facts = rules.check_multiscales(Reporter(), "", ome, known, zarr_format)
    (validator_scale,) = facts[0].scales if version_key(known) >= (0, 4) else (None,)
    stated = any(t["type"] != "identity" for t in unwrap_sequences(steps))
    if version_key(known) >= (0, 4) and stated:
        assert validator_scale is not None
        np.testing.assert_allclose(validator_scale, level.scale, rtol=1e-12)
    folded = plain_scale_translation(steps, ndim)
    assert folded is not None
    np.testing.assert_allclose(folded[0], level.scale, rtol=1e-12)
    np.testing.assert_allclose(folded[1], level.translation, rtol=1e-12, atol=1e-12)


_REFS = st.one_of(
    st.none(),
    st.text(max_size=3),
    st.integers(),
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(st.text(max_size=3), st.integers(), st.none()),
            "path": st.one_of(st.text(max_size=3), st.none()),
        },
    ),
)


@given(raw=_REFS)
def test_references_read_once(raw):
    """0.6 "input / output": the reader (``SystemRef.parse``, the model's system names) and
    the validator (a scene transformation's "MUST specify a coordinate system name") read
    a reference the same way."""
    ref = system_ref(raw)
    if raw is None or ref is None:
        assert system_name(raw) is None
    if raw is not None and ref is None:
        with pytest.raises(TransformError):
            SystemRef.parse(raw)
    elif raw is not None:
        assert SystemRef.parse(raw) == ref
        assert system_name(raw) == ref.name
    r = Reporter()
    scene = {"coordinateTransformations": [{"type": "identity", "input": raw, "output": "b"}]}
    rules.check_scene(r, "", scene)
    unnamed = [f for f in r.findings if f.code == "scene-transforms" and "input" in f.message]
    assert bool(unnamed) == (system_name(raw) is None)


# ------------------------------------------------------------ the parser table


def test_every_spec_type_has_a_parser():
    """0.6 "Transformation types": one parser per type, and an unknown type is named."""
    from napari_ozx.ngff.model import transforms

    spec_types = {
        "identity",
        "mapAxis",
        "projectAxis",
        "translation",
        "scale",
        "affine",
        "rotation",
        "sequence",
        "byDimension",
        "bijection",
        "displacements",
        "coordinates",
    }
    assert set(transforms._PARSERS) == spec_types
    with pytest.raises(TransformError, match="unknown coordinate transformation type 'warp'"):
        parse_transform({"type": "warp"})
    with pytest.raises(TransformError, match="unknown coordinate transformation type \\['x'\\]"):
        parse_transform({"type": ["x"]})


def test_by_dimension_part_that_is_no_object():
    """A byDimension part whose ``transformation`` is no object is a TransformError naming
    the transformation (it was an AttributeError)."""
    raw = {"type": "byDimension", "transformations": [{"transformation": 3}]}
    with pytest.raises(TransformError, match="byDimension transformation: invalid part"):
        parse_transform(raw)
