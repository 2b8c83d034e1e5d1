"""Host nodes: Python functions in a slice's gang order over zero-copy numpy
views of the shards; errors named; registered tasks."""

import numpy as np
import pytest

import pathways as pw
from pathways import _host

from conftest import program


def _scale(vs, alpha, spec="f32[8,4] split(0,all)"):
    return vs.compile(program("scale", [spec], [spec], alpha=alpha))


def test_a_host_task_runs_between_compute_ops(client, vs):
    spec = "f32[8,4] split(0,all)"
    seen = {}

    def plus_one(call):
        seen["devices"] = call.device_count
        seen["shape"] = call.inputs[0][0].shape
        seen["writable"] = call.inputs[0][0].flags.writeable
        for src, dst in zip(call.inputs[0], call.outputs[0]):
            dst[...] = src + 1

    g = client.graph("host")
    x = g.parameter(vs, spec)
    a = g.compute(_scale(vs, 2), x)
    h = g.add_host(plus_one, vs, [a], [spec], name="plus1")
    c = g.compute(_scale(vs, 3), h)
    g.output(h, c)
    data = np.arange(32, dtype=np.float32).reshape(8, 4)
    for _ in range(2):
        hv, cv = g.run(vs.put(data, pw.split(0)))
        np.testing.assert_array_equal(hv.numpy(), 2 * data + 1)
        np.testing.assert_array_equal(cv.numpy(), 3 * (2 * data + 1))
        hv.release()
        cv.release()
    assert seen == {"devices": 8, "shape": (1, 4), "writable": False}
    assert "host(%1)" in repr(g)
    g.release()


def test_views_are_the_shards_themselves(client, vs):
    """Writing through an output view is what the next op reads: no copy."""
    spec = "f32[8] replicated"

    def fill(call):
        for m, out in enumerate(call.outputs[0]):
            out[:] = m  # each device's replica gets its own mesh index

    g = client.graph("fill")
    h = g.add_host(fill, vs, [], [spec], name="fill")
    g.output(g.compute(_scale(vs, 1, spec), h))
    out = g.run()
    # A replicated buffer reads back from device 0.
    np.testing.assert_array_equal(out.numpy(), np.zeros(8, np.float32))
    out.release()
    g.release()


def test_an_exception_fails_the_node_and_its_dependents(client, vs):
    spec = "f32[8,4] split(0,all)"

    def broken(call):
        raise ValueError("no batch today")

    g = client.graph("broken")
    x = g.parameter(vs, spec)
    h = g.add_host(broken, vs, [x], [spec], name="loader")
    g.output(g.compute(_scale(vs, 2), h))
    ex = g.submit(vs.put(np.zeros((8, 4), np.float32), pw.split(0)))
    with pytest.raises(pw.InvalidArgumentError) as err:
        ex.wait(10)
    assert '("loader")' in str(err.value) and "no batch today" in str(err.value)
    with pytest.raises(pw.InvalidArgumentError, match="input node 1"):
        ex.outputs[0].numpy()
    for b in ex.outputs:
        b.release()
    g.release()


def test_misuse(client, vs):
    g = client.graph("bad")
    x = g.parameter(vs, "f32[8,4] split(0,all)")
    with pytest.raises(TypeError, match="callable"):
        g.add_host(42, vs, [x], [])
    with pytest.raises(pw.InvalidArgumentError, match="output spec 0"):
        g.add_host(lambda call: None, vs, [x], ["f32[7] split(0,all)"])
    with pytest.raises(pw.NotFoundError, match="host task 'nope' is not registered"):
        g.add_host("nope", vs, [x], [])
    assert _host.live_count() == 0, "a failed add keeps nothing alive"
    g.release()


def test_registered_tasks_are_found_by_name(client, vs):
    spec = "f32[8,4] split(0,all)"
    calls = []

    def bump(call):
        calls.append(call.name)
        for src, dst in zip(call.inputs[0], call.outputs[0]):
            dst[...] = src + 10

    client.register_host_task("bump", bump)
    g = client.graph("named")
    x = g.parameter(vs, spec)
    g.output(g.add_host("bump", vs, [x], [spec], name="b"))
    data = np.ones((8, 4), np.float32)
    out = g.run(vs.put(data, pw.split(0)))
    np.testing.assert_array_equal(out.numpy(), data + 10)
    assert calls == ["b"]
    out.release()
    g.release()


def test_tasks_are_let_go_with_their_graphs(runtime):
    before = _host.live_count()
    c = runtime.client("short")
    v = c.vslice("1")
    g = c.graph("g")
    g.add_host(lambda call: None, v, [], [])
    c.register_host_task("t", lambda call: None)
    assert _host.live_count() == before + 2
    g.run()
    c.close()
    assert _host.live_count() == before
