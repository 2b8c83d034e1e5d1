"""Graph files from Python: encode, decode (inline and by hash, into
another client), check, canonicalise, view, hash; bad bytes and misuse
raise Python exceptions, never crash."""

import json

import numpy as np
import pytest

import pathways as pw

SPEC = "f32[8,4] split(0,all)"


def double_graph(client, vs, name="double"):
    exe = vs.compile(pw.Program("scale", [SPEC], [SPEC], {"alpha": 2}))
    g = client.graph(name)
    g.output(g.compute(exe, g.parameter(vs, SPEC), name="dbl"))
    return g, exe


def test_round_trip_into_another_client(runtime, client, vs):
    g, _ = double_graph(client, vs)
    data = g.encode()
    assert isinstance(data, bytes) and g.encode() == data  # deterministic
    info = pw.check_graph_file(data)
    assert (info.vslices, info.executables, info.parameters, info.nodes, info.outputs) == \
        (1, 1, 1, 1, 1)
    assert info.hash == pw.graph_file_hash(data) and len(info.hash) == 32
    other = runtime.client("other")
    try:
        vs2 = other.vslice("2x4")
        g2 = other.decode_graph(data, [vs2], name="decoded")
        assert g2.finalized and len(g2.parameters) == 1
        assert str(g2.outputs[0].spec) == str(pw.ArraySpec.parse(SPEC))
        assert "dbl(" in repr(g2)
        x = vs2.put(np.ones((8, 4), np.float32), pw.split(0))
        np.testing.assert_array_equal(g2.run(x, timeout=10).numpy(), np.full((8, 4), 2.0))
        # Same bytes, same bindings, graph alive: the same graph again.
        g3 = other.decode_graph(data, vs2)
        np.testing.assert_array_equal(g3.run(x, timeout=10).numpy(), np.full((8, 4), 2.0))
        for obj in (g3, g2, x, vs2):
            obj.release()
    finally:
        other.close()


def test_executables_by_hash(client, vs):
    g, exe = double_graph(client, vs)
    data = g.encode(executables_by_hash=True)
    assert len(data) < len(g.encode())
    with pytest.raises(pw.NotFoundError, match=exe.hash):
        client.decode_graph(data, [vs])
    loaded = vs.load(exe.bytes())
    assert loaded.hash == exe.hash
    g2 = client.decode_graph(data, [vs], [loaded])
    x = vs.put(np.full((8, 4), 3.0, np.float32), pw.split(0))
    np.testing.assert_array_equal(g2.run(x, timeout=10).numpy(), np.full((8, 4), 6.0))
    for obj in (g2, x, loaded, exe, g):
        obj.release()


def test_canonical_and_json(client, vs):
    g, exe = double_graph(client, vs)
    data = g.encode()
    assert pw.canonical_graph_file(data) == data
    assert pw.canonical_graph_file(bytearray(data)) == data
    view = json.loads(pw.graph_file_json(memoryview(data)))
    assert view["v"] == 1 and view["hash"] == pw.graph_file_hash(data)
    assert view["nodes"][0]["name"] == "dbl"
    assert pw.GRAPH_FORMAT_VERSION >= 1
    g.release()
    exe.release()


def test_bad_bytes_never_crash(client, vs):
    g, exe = double_graph(client, vs)
    data = g.encode()
    with pytest.raises(pw.InvalidArgumentError, match="empty"):
        pw.check_graph_file(b"")
    with pytest.raises(pw.InvalidArgumentError, match="trailing"):
        pw.check_graph_file(data + b"\x00")
    # Every truncation and a bit flip in every byte: an error or a valid
    # graph, never a crash, for the file checker and the decoder.
    rejected = 0
    for cut in range(1, len(data)):
        with pytest.raises(pw.PathwaysError):
            pw.check_graph_file(data[:cut])
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= 0x20
        try:
            pw.check_graph_file(bytes(bad))
            g2 = client.decode_graph(bytes(bad), [vs])
            g2.release()
        except pw.PathwaysError:
            rejected += 1
    assert rejected > len(data) // 2
    g.release()
    exe.release()


def test_misuse(runtime, client, vs):
    g, exe = double_graph(client, vs)
    data = g.encode()
    with pytest.raises(TypeError, match="bytes-like"):
        pw.check_graph_file(12)
    with pytest.raises(TypeError, match="not a path"):
        pw.check_graph_file("graph.pwg")
    with pytest.raises(TypeError, match="not a VSlice"):
        client.decode_graph(data, ["2x4"])
    with pytest.raises(TypeError, match="not an Executable"):
        client.decode_graph(data, [vs], ["exe"])
    other = runtime.client("other")
    try:
        with pytest.raises(ValueError, match="belongs to client"):
            other.decode_graph(data, [vs])
        with pytest.raises(ValueError, match="belongs to client"):
            g.encode(vslices=[other.vslice("1")])
    finally:
        other.close()
    small = client.vslice("1")
    with pytest.raises(pw.InvalidArgumentError):
        client.decode_graph(data, [small])  # the mesh differs
    with pytest.raises(pw.InvalidArgumentError):
        client.decode_graph(data, [])  # too few bindings
    with pytest.raises(TypeError):
        g.encode(executables_by_hash="yes")
    g.release()
    with pytest.raises(ValueError, match="released Graph"):
        g.encode()
    small.release()
    exe.release()
