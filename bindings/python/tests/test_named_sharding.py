"""Named meshes (Mesh) and PartitionSpec shardings (P): construction,
text, equality by layout, the round trip through the C structs, buffers
on a named vslice laid out by name, and errors carrying the library's
message."""

import numpy as np
import pytest

import pathways as pw
from pathways._lowlevel import ffi
from pathways._types import Sharding, mesh_tuple


def test_mesh_forms_and_names():
    m = pw.Mesh(data=2, model=4)
    assert m == (2, 4) and m.axis_names == ("data", "model")
    assert pw.Mesh((("data", 2), ("model", 4))).axis_names == ("data", "model")
    assert pw.Mesh("data=2,model=4").axis_names == ("data", "model")
    assert pw.Mesh((2, 4)).axis_names is None
    assert mesh_tuple((("x", 8),)).axis_names == ("x",)
    assert repr(m) == "Mesh(data=2, model=4)" and str(m) == "data=2,model=4"
    assert m.axis("model") == 1 and m.axis(0) == 0


@pytest.mark.parametrize("bad, needle", [
    ((("data", 2), ("data", 4)), "both named 'data'"),
    ((("2d", 2),), "'2d'"),
    ((("data", 2), 4), "every axis is"),
])
def test_bad_mesh_names_raise_the_library_message(bad, needle):
    with pytest.raises(pw.InvalidArgumentError, match=needle):
        pw.Mesh(bad)


def test_partition_specs_text_and_equality():
    s = pw.P("data", None, ("x", "y"), unreduced=("model",))
    assert repr(s) == "P(data, None, (x, y)) unreduced(model)"
    assert Sharding.parse(repr(s)) == s
    assert pw.P("data", None) == pw.P("data") == "P(data)"
    assert pw.P() == pw.replicated() and pw.P(None, 0) == pw.split(1, 0)
    assert hash(pw.P(None, 0)) == hash(pw.split(1, 0))
    assert pw.P("data") != pw.P("model")
    assert pw.P(unreduced=("a", "b")) == pw.P(unreduced=("b", "a"))
    with pytest.raises(pw.InvalidArgumentError, match="used twice"):
        pw.P("data", "data")
    with pytest.raises(TypeError):
        pw.P(1.5)


def test_equivalence_through_a_mesh_asks_the_library():
    m = pw.Mesh(data=2, model=4)
    assert pw.P("data").equivalent(pw.P(0), (8,), m)
    assert pw.split(0).equivalent(pw.P(("data", "model")), (8,), m)
    assert not pw.P("model").equivalent(pw.P("data"), (8,), m)
    with pytest.raises(pw.NotFoundError, match="no mesh axis 'modle'"):
        pw.P("modle").equivalent(pw.P(), (8,), m)
    with pytest.raises(pw.InvalidArgumentError, match="not divisible"):
        pw.P("model").equivalent(pw.P(), (6,), m)


def test_round_trip_through_c():
    m = pw.Mesh(data=2, model=4)
    for s in (pw.P("data", "model"), pw.P(("model", "data")), pw.P(None, "model", unreduced=("data",)),
              pw.replicated(), pw.split(1, 0), pw.split(0)):
        cs = ffi.new("pw_sharding_t*")
        s._to_c(cs, 2, m)
        back = Sharding._from_c(cs, m)
        assert back == s, (s, back)
        assert repr(back) == repr(s)
    cs = ffi.new("pw_sharding_t*")
    pw.P("data")._to_c(cs, 1, m)
    assert Sharding._from_c(cs) == pw.P(0)  # no mesh: indices
    with pytest.raises(pw.InvalidArgumentError, match="needs the mesh"):
        pw.P("data")._to_c(ffi.new("pw_sharding_t*"), 1, None)


def test_buffers_on_a_named_vslice_are_laid_out_by_name(client):
    vs = client.vslice(pw.Mesh(data=2, model=4))
    try:
        assert vs.mesh.axis_names == ("data", "model")
        x = np.arange(64, dtype=np.float32).reshape(8, 8)
        b = vs.put(x, pw.P("data", "model"))
        assert b.spec.sharding == pw.P("data", "model")
        assert repr(b.spec) == "f32[8,8] P(data, model)"
        np.testing.assert_array_equal(b.numpy(), x)
        with pytest.raises(pw.NotFoundError, match="no mesh axis 'rows' .the mesh's axes: data, model"):
            vs.put(x, pw.P("rows"))
        with pytest.raises(pw.InvalidArgumentError, match="not divisible"):
            vs.put(np.zeros((6, 8), np.float32), pw.P("model"))
        b.release()
    finally:
        vs.release()


def test_text_meshes_with_names_make_named_vslices(client):
    vs = client.vslice("data=2,model=4")
    try:
        assert vs.mesh == (2, 4) and vs.mesh.axis_names == ("data", "model")
    finally:
        vs.release()


def test_graph_files_carry_names_and_partition_specs(client):
    import json
    vs = client.vslice(pw.Mesh(data=2, model=4))
    try:
        g = client.graph("moves")
        p = g.parameter(vs, pw.ArraySpec("f32", (8, 8), pw.P("data", "model")))
        t = g.transfer(p, vs, pw.P(("model", "data")))
        g.output(t)
        data = g.encode()
        view = json.loads(pw.graph_file_json(data))
        assert view["v"] == 3 and view["vslices"] == ["data=2,model=4"]
        assert [b["sharding"] for b in view["buffers"]] == ["P(data, model)", "P((model, data))"]
        g2 = client.decode_graph(data, [vs])
        assert g2.encode() == data
        x = np.arange(64, dtype=np.float32).reshape(8, 8)
        b = vs.put(x, pw.P("data", "model"))
        out = g2.run(b, timeout=10)
        assert out.spec.sharding == pw.P(("model", "data"))
        np.testing.assert_array_equal(out.numpy(), x)
        for obj in (out, b, g2, g):
            obj.release()
    finally:
        vs.release()
