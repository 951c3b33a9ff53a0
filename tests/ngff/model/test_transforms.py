"""ngff.transforms and ngff.graph: every 0.6 transformation type ("Transformation types"
of the 0.6 specification) against points computed here by hand, inverses, composition
through the graph, and each kind of bad input as one TransformError naming it."""

from __future__ import annotations

import numpy as np
import pytest

from napari_ozx.errors import OzxError, TransformError
from napari_ozx.ngff.model.graph import TransformGraph, graph_from_hierarchy, parse_key
from napari_ozx.ngff.model.transforms import (
    Affine,
    Identity,
    Scale,
    Sequence_,
    SystemRef,
    Translation,
    VectorField,
    parse_transform,
    simplest,
)

P = np.array([[1.0, 2.0], [-3.0, 0.5]])


def t(**raw):
    return parse_transform(raw)


def test_system_ref_shapes():
    """'input / output': the spec's object, and the bare string of the RFC-5 suites."""
    assert SystemRef.parse({"name": "a", "path": "img"}) == SystemRef("a", "img")
    assert SystemRef.parse("a") == SystemRef("a")
    assert SystemRef.parse({"name": "g", "axes": [{"name": "x"}]}) == SystemRef("g")
    assert parse_transform({"type": "identity", "input": "a", "output": {"name": "b"}}).output == (
        SystemRef("b")
    )


def test_identity_scale_translation():
    np.testing.assert_array_equal(t(type="identity").apply(P), P)
    np.testing.assert_array_equal(t(type="scale", scale=[3.12, 2]).apply(P), P * [3.12, 2])
    np.testing.assert_array_equal(
        t(type="translation", translation=[9, -1.42]).apply(P), P + np.array([9, -1.42])
    )
    np.testing.assert_allclose(t(type="scale", scale=[4, 0.5]).inverse().apply(P), P / [4, 0.5])


def test_map_axis_is_a_permutation():
    """'mapAxis': "The value at position i ... indicates which input axis becomes the
    i-th output axis"."""
    m = t(type="mapAxis", mapAxis=[1, 0])
    np.testing.assert_array_equal(m.apply(P), P[:, ::-1])
    m3 = t(type="mapAxis", mapAxis=[2, 0, 1])
    q = np.array([[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(m3.apply(q), [[3.0, 1.0, 2.0]])
    np.testing.assert_array_equal(m3.inverse().apply(m3.apply(q)), q)
    with pytest.raises(TransformError, match="mapAxis"):
        t(type="mapAxis", mapAxis=[0, 0])


def test_affine_rows_act_on_column_vectors():
    """'affine' example 1: y = 1*j + 2*i + 3 ... with [[1, 2, 3], [4, 5, 6]]."""
    a = t(type="affine", affine=[[1, 2, 3], [4, 5, 6]])
    want = [[1 * 1 + 2 * 2 + 3, 4 * 1 + 5 * 2 + 6], [1 * -3 + 2 * 0.5 + 3, 4 * -3 + 5 * 0.5 + 6]]
    np.testing.assert_allclose(a.apply(P), want)
    np.testing.assert_allclose(a.inverse().apply(a.apply(P)), P)
    # 2-D in, 3-D out (example 2): not square, so no inverse
    a23 = t(type="affine", affine=[[0, 0, 1], [3, 4, 2], [6, 7, 5]])
    np.testing.assert_allclose(a23.apply([[1.0, 1.0]]), [[1.0, 9.0, 18.0]])
    with pytest.raises(TransformError, match="not invertible"):
        a23.inverse()


def test_rotation_and_its_inverse():
    r = t(type="rotation", rotation=[[0, -1], [1, 0]])
    np.testing.assert_array_equal(r.apply([[1.0, 2.0]]), [[-2.0, 1.0]])
    np.testing.assert_array_equal(r.inverse().apply([[-2.0, 1.0]]), [[1.0, 2.0]])
    with pytest.raises(TransformError, match="not a rotation"):
        t(type="rotation", rotation=[[2, 0], [0, 1]])
    with pytest.raises(TransformError, match="not a rotation"):
        t(type="rotation", rotation=[[1, 0], [0, -1]])  # a reflection: determinant -1


def test_sequence_applies_in_order():
    """'sequence' example: x = (i + 0.1) * 2, y = (j + 0.9) * 3."""
    s = t(
        type="sequence",
        transformations=[
            {"type": "translation", "translation": [0.1, 0.9]},
            {"type": "scale", "scale": [2, 3]},
        ],
    )
    np.testing.assert_allclose(s.apply(P), (P + np.array([0.1, 0.9])) * [2, 3])
    np.testing.assert_allclose(s.inverse().apply(s.apply(P)), P)
    assert s.is_linear and s.matrix().shape == (3, 3)


def test_by_dimension_both_spellings():
    """'byDimension': parts with inputAxes / outputAxes (the spec) or input_axes /
    output_axes (the RFC-5 suite)."""
    for ia, oa in (("inputAxes", "outputAxes"), ("input_axes", "output_axes")):
        b = t(
            type="byDimension",
            transformations=[
                {"type": "translation", "translation": [5.0], ia: [0], oa: [1]},
                {"type": "scale", "scale": [10.0], ia: [1], oa: [0]},
            ],
        )
        np.testing.assert_allclose(b.apply([[1.0, 2.0]]), [[20.0, 6.0]])
        np.testing.assert_allclose(b.inverse().apply([[20.0, 6.0]]), [[1.0, 2.0]])
        np.testing.assert_allclose(b.matrix() @ [1.0, 2.0, 1.0], [20.0, 6.0, 1.0])
    with pytest.raises(TransformError, match="output axis"):
        t(
            type="byDimension",
            transformations=[
                {"type": "identity", "inputAxes": [0], "outputAxes": [1]},
                {"type": "identity", "inputAxes": [1], "outputAxes": [1]},
            ],
        )


def test_bijection_uses_its_explicit_inverse():
    b = t(
        type="bijection",
        forward={"type": "translation", "translation": [1, 1]},
        inverse={"type": "translation", "translation": [10, 10]},
    )
    np.testing.assert_array_equal(b.apply([[0.0, 0.0]]), [[1.0, 1.0]])
    np.testing.assert_array_equal(b.inverse().apply([[0.0, 0.0]]), [[10.0, 10.0]])


def test_project_axis_adds_and_drops():
    """'projectAxis' example: c = 0, z = 0, y = i, x = j."""
    p = t(type="projectAxis", droppedInputs=[], createdOutputs=[0, 1])
    np.testing.assert_array_equal(p.apply([[4.0, 5.0]]), [[0.0, 0.0, 4.0, 5.0]])
    np.testing.assert_array_equal(p.inverse().apply([[0.0, 0.0, 4.0, 5.0]]), [[4.0, 5.0]])
    d = t(type="projectAxis", droppedInputs=[0], createdOutputs=[0])
    np.testing.assert_array_equal(d.apply([[7.0, 4.0, 5.0]]), [[0.0, 4.0, 5.0]])
    with pytest.raises(TransformError, match="no inverse"):
        d.inverse()
    assert not d.is_linear  # a viewer cannot show a change of dimension as an affine


def test_displacements_and_coordinates_fields():
    """'coordinates and displacements': the table of the 2-D displacement example, a
    field with its own scale of 2 along y: (0, 0) -> (1, 2); (2, 0) -> (0.5, 1.2);
    (1, 0) interpolated linearly -> (0.75, 1.6)."""
    data = np.zeros((2, 1, 2))  # y, x, vector (the displacement axis last here)
    data[0, 0] = (1.0, 2.0)
    data[1, 0] = (0.5, 1.2)
    field = VectorField(data, 2, (2.0, 1.0), (0.0, 0.0))
    disp = parse_transform({"type": "displacements", "path": "f"}, load_field=lambda p: field)
    got = disp.apply([[0.0, 0.0], [2.0, 0.0], [1.0, 0.0]])
    np.testing.assert_allclose(got, [[1.0, 2.0], [2.5, 1.2], [1.75, 1.6]])
    near = parse_transform(
        {"type": "displacements", "path": "f", "interpolation": "nearest"},
        load_field=lambda p: field,
    )
    np.testing.assert_allclose(near.apply([[0.8, 0.0]]), [[1.8, 2.0]])
    coords = parse_transform({"type": "coordinates", "path": "f"}, load_field=lambda p: field)
    np.testing.assert_allclose(coords.apply([[1.0, 0.0]]), [[0.75, 1.6]])
    assert not disp.is_linear
    with pytest.raises(TransformError, match="no closed-form inverse"):
        disp.inverse()


def test_bad_input_is_one_error_naming_the_transformation():
    with pytest.raises(TransformError, match="unknown coordinate transformation type 'warp'"):
        t(type="warp")
    with pytest.raises(TransformError, match="scale transformation 'px'"):
        t(type="scale", name="px", scale="big")
    with pytest.raises(TransformError, match="rows of different lengths"):
        t(type="affine", affine=[[1, 0, 0], [0, 1]])
    with pytest.raises(TransformError, match="stored at 'params'"):
        t(type="affine", path="params")
    assert issubclass(TransformError, OzxError)


def test_simplest_prefers_less_expressive_transformations():
    """'coordinateTransformations': "Implementations SHOULD prefer to store
    transformations as a sequence of less expressive transformations"."""
    assert isinstance(simplest(np.eye(3)), Identity)
    assert isinstance(simplest(np.diag([2.0, 3.0, 1.0])), Scale)
    m = np.eye(3)
    m[:2, 2] = (4, 5)
    assert isinstance(simplest(m), Translation)
    a = np.deg2rad(25)
    r = np.array([[np.cos(a), -np.sin(a), 1.0], [np.sin(a), np.cos(a), 2.0], [0, 0, 1]])
    r[:2, :2] = r[:2, :2] @ np.diag([0.5, 0.25])
    s = simplest(r)
    assert isinstance(s, Sequence_)
    assert [x.type for x in s.transformations] == ["scale", "rotation", "translation"]
    np.testing.assert_allclose(s.matrix(), r, atol=1e-12)
    shear = np.array([[1.0, 0.4, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert isinstance(simplest(shear), Affine)
    for m in (r, shear):  # serialised and parsed back: the same matrix
        back = parse_transform(simplest(m).to_json())
        np.testing.assert_allclose(back.matrix(), m, atol=1e-12)


# ------------------------------------------------------------------- graph


def _scene(transforms, systems=("a", "b", "c")):
    cs = [{"name": n, "axes": [{"name": "y"}, {"name": "x"}]} for n in systems]
    docs = {
        "": {
            "version": "0.6",
            "scene": {"coordinateSystems": cs, "coordinateTransformations": transforms},
        }
    }
    return graph_from_hierarchy(docs.get)


def test_graph_paths_forwards_backwards_and_through():
    g = _scene(
        [
            {"type": "scale", "scale": [2, 2], "input": "a", "output": "b"},
            {"type": "translation", "translation": [1, 0], "input": "c", "output": "b"},
        ]
    )
    np.testing.assert_allclose(g.path(("", "a"), ("", "c")).apply([[1.0, 1.0]]), [[1.0, 2.0]])
    np.testing.assert_allclose(g.path(("", "c"), ("", "a")).apply([[1.0, 2.0]]), [[1.0, 1.0]])
    assert g.path(("", "a"), ("", "a")).apply([[3.0, 4.0]]).tolist() == [[3.0, 4.0]]


def test_graph_errors_name_the_system_or_transformation():
    g = _scene(
        [{"type": "displacements", "path": "f", "input": "a", "output": "b"}], ("a", "b", "c")
    )
    with pytest.raises(TransformError, match="unknown coordinate system 'z'"):
        g.path(("", "a"), ("", "z"))
    with pytest.raises(TransformError, match="'c' cannot be reached"):
        g.path(("", "a"), ("", "c"))
    with pytest.raises(TransformError, match=r"displacements .* no inverse"):
        g.path(("", "b"), ("", "a"))
    with pytest.raises(TransformError, match="3 input dimensions, coordinate system 'a' has 2"):
        _scene([{"type": "scale", "scale": [1, 2, 3], "input": "a", "output": "b"}]).path(
            ("", "a"), ("", "b")
        )


def test_graph_cycle_that_disagrees():
    g = _scene(
        [
            {"type": "scale", "scale": [2, 2], "input": "a", "output": "b"},
            {"type": "scale", "scale": [3, 3], "input": "b", "output": "c"},
            {"type": "scale", "scale": [5, 5], "input": "a", "output": "c"},
        ]
    )
    with pytest.raises(TransformError, match="disagree"):
        g.check_cycles()
    TransformGraph().check_cycles()


def test_path_leaving_the_root_is_refused():
    docs = {
        "": {
            "scene": {
                "coordinateTransformations": [
                    {
                        "type": "identity",
                        "input": {"name": "p", "path": "../x"},
                        "output": {"name": "p", "path": "y"},
                    }
                ]
            }
        }
    }
    with pytest.raises(TransformError, match="leaves the hierarchy"):
        graph_from_hierarchy(docs.get)


def test_parse_key():
    assert parse_key("world") == ("", "world")
    assert parse_key("tiles/a:physical") == ("tiles/a", "physical")
