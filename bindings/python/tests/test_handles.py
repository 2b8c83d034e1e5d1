"""Handles of another runtime: the two runtimes' first clients use the same
slots for different kinds of object, and each call given the other
runtime's handle raises the documented error (PermissionDeniedError naming
the call, the handle and "another runtime"; InvalidArgumentError for a
handle of the wrong kind) instead of crashing or naming a local object."""

import re

import pytest

import pathways as pw

from conftest import f32, one_node_graph, program

ROWS = "f32[8,4] split(0,all)"


def hex_id(handle):
    return f"0x{handle.id:016x}"


@pytest.fixture
def other():
    """A second runtime like conftest's, its first client and a virtual
    slice, a buffer, an executable and a graph made in that order; the
    test runtime's fixture makes the executable before the buffer, so the
    buffer here has the slot of the executable there."""
    rt = pw.Runtime([{"name": "island", "mesh": "2x4"}, {"name": "solo", "mesh": "1"}],
                    workers=2)
    c = rt.client("other")
    vs = c.vslice("2x4")
    buf = vs.put(f32(8, 4), pw.split(0))
    exe = vs.compile(program("copy", [ROWS], [ROWS]))
    g = one_node_graph(c, vs, exe, ROWS)
    yield {"client": c, "vs": vs, "buf": buf, "exe": exe, "graph": g}
    for h in (g, exe, buf, vs):
        h.release()
    c.close()
    rt.close()


@pytest.fixture
def local(client, vs):
    exe = vs.compile(program("copy", [ROWS], [ROWS]))
    g = one_node_graph(client, vs, exe, ROWS)
    buf = vs.put(f32(8, 4), pw.split(0))
    yield {"vs": vs, "buf": buf, "exe": exe, "graph": g}
    for h in (buf, g, exe):
        h.release()


def test_submit_refuses_another_runtimes_buffer_executable_and_graph(local, other):
    g = local["graph"]
    buf = other["buf"]
    with pytest.raises(pw.PermissionDeniedError) as info:
        g.submit(buf)
    message = str(info.value)
    assert message.startswith("pw_graph_submit: args[0]: buffer handle ")
    assert hex_id(buf) in message and "belongs to another runtime" in message
    # An executable or a graph where a buffer goes: the wrong kind.
    for wrong, kind in ((other["exe"], "executable"), (other["graph"], "graph")):
        with pytest.raises(pw.InvalidArgumentError,
                           match=re.escape(f"handle {hex_id(wrong)} is a {kind} handle, "
                                           f"not a buffer handle")):
            g.submit(wrong)
    # Both runtimes still run their own graphs.
    assert g.run(local["buf"]).numpy().sum() == f32(8, 4).sum()
    assert other["graph"].run(buf).numpy().sum() == f32(8, 4).sum()


def test_building_refuses_another_runtimes_executable_and_vslice(client, local, other):
    with client.graph("mixed") as h:
        x = h.parameter(local["vs"], ROWS)
        with pytest.raises(pw.PermissionDeniedError) as info:
            h.compute(other["exe"], x, vslice=local["vs"])
        message = str(info.value)
        assert message.startswith("pw_graph_add_compute: executable: executable handle ")
        assert hex_id(other["exe"]) in message and "another runtime" in message
        with pytest.raises(pw.PermissionDeniedError,
                           match=re.escape(f"virtual slice handle {hex_id(other['vs'])} "
                                           f"belongs to another runtime")):
            h.parameter(other["vs"], ROWS)
        h.output(h.compute(local["exe"], x))
        assert h.run(local["buf"]).numpy().sum() == f32(8, 4).sum()
