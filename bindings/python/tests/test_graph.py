"""Executables, graphs (builder, reprs, validation) and submission."""

import threading

import numpy as np
import pytest

import pathways as pw

from conftest import collect, f32, one_node_graph, program

ROWS = "f32[8,4] split(0,all)"


@pytest.fixture
def kernels(vs):
    exes = {
        "add": vs.compile(program("add", [ROWS, ROWS], [ROWS])),
        "double": vs.compile(program("scale", [ROWS], [ROWS], alpha=2)),
        "copy": vs.compile(program("copy", [ROWS], [ROWS])),
    }
    yield exes
    for e in exes.values():
        e.release()


def test_executable_signature_bytes_and_load(vs, kernels):
    e = kernels["double"]
    assert e.name == "scale" and e.mesh == (2, 4) and e.vslice is vs
    assert e.inputs == (pw.ArraySpec.parse(ROWS),) and e.outputs == e.inputs
    assert e.signature == f"scale({ROWS}) -> {ROWS} for 2x4"
    assert repr(e) == f"<Executable scale({ROWS}) -> {ROWS} for 2x4>"
    data = e.bytes()
    assert data[:8] == b"PWCPUEXE"
    with vs.load(data) as again:
        assert again.signature == e.signature and again.id != e.id
    # Program text works as well as Program objects.
    with vs.compile(str(pw.Program("copy", [ROWS], [ROWS]))) as c:
        assert c.name == "copy"
    with pytest.raises(TypeError):
        vs.compile(42)


def test_graph_builder_repr_and_counts(client, vs, kernels):
    g = client.graph("step")
    x = g.parameter(vs, ROWS, name="x")
    y = g.parameter(vs, pw.ArraySpec.parse(ROWS))
    s = g.compute(kernels["add"], x, y, name="sum")
    d = g.compute(kernels["double"], s)
    g.output(d, s)
    assert repr(x) == f"%0: {ROWS}" and x.ref == "%0"
    text = repr(g)
    assert text.splitlines() == [
        "<Graph 'step' (building): 2 parameter(s), 2 compute(s), 2 output(s)",
        f"  %0 = parameter 0 'x': {ROWS} on 2x4",
        f"  %1 = parameter 1: {ROWS} on 2x4",
        f"  %2 = 'sum' add(%0, %1): {ROWS} on 2x4",
        f"  %3 = scale(%2): {ROWS} on 2x4",
        "  outputs: %3, %2>",
    ]
    assert g.finalize() is g and g.finalized and "(finalized)" in repr(g)
    assert g.counts() == {"parameters": 2, "computes": 2, "outputs": 2, "edges": 1}
    assert g.parameters == (x, y) and g.outputs == (d, s)
    g.release()
    assert "(released)" in repr(g)


def test_submit_returns_futures_and_values(client, vs, kernels):
    g = client.graph("step")
    x, y = g.parameter(vs, ROWS), g.parameter(vs, ROWS)
    s = g.compute(kernels["add"], x, y)
    g.output(g.compute(kernels["double"], s), s)
    a, b = vs.put(f32(8, 4), pw.split(0)), vs.put(f32(8, 4, start=1), pw.split(0))
    ex = g.submit(a, b)
    assert isinstance(ex, pw.Execution) and len(ex.outputs) == 2
    assert all(isinstance(o, pw.Buffer) for o in ex.outputs)
    assert ex.outputs[0].spec == pw.ArraySpec.parse(ROWS)
    assert ex.wait(timeout=30) is ex and ex.ready
    doubled, summed = ex.result()
    np.testing.assert_array_equal(summed.numpy(), f32(8, 4) * 2 + 1)
    np.testing.assert_array_equal(doubled.numpy(), (f32(8, 4) * 2 + 1) * 2)
    assert "2 output(s), ok" in repr(ex)
    # run(): submit + wait, outputs back.
    d2, s2 = g.run(a, b, timeout=30)
    np.testing.assert_array_equal(d2.numpy(), doubled.numpy())


def test_chained_submissions_before_inputs_exist(client, vs, kernels):
    # Each step's input is the previous step's output future (asynchronous
    # dispatch), donated so its memory can be reused.
    g = one_node_graph(client, vs, kernels["double"], ROWS)
    w = vs.put(f32(8, 4, start=1), pw.split(0))
    first = w
    executions = []
    for step in range(10):
        ex = g.submit(w, donate=[step > 0])
        executions.append(ex)
        w = ex.outputs[0]
    assert first.id != 0  # not donated (step 0)
    for ex in executions[1:-1]:
        assert ex.outputs[0].id == 0  # consumed by the next step
    np.testing.assert_array_equal(w.numpy(timeout=30), f32(8, 4, start=1) * 2 ** 10)
    with pytest.raises(ValueError, match="released Buffer"):
        g.submit(executions[0].outputs[0])


def test_validation_errors_name_the_node(client, vs, kernels):
    g = client.graph("bad")
    x = g.parameter(vs, "f32[8,8] split(0,all)")
    g.output(g.compute(kernels["double"], x, name="wrong_shape"))
    with pytest.raises(pw.InvalidArgumentError, match="wrong_shape"):
        g.finalize()
    g.release()
    other = client.graph("other")
    with pytest.raises(TypeError, match="not a Value of this graph"):
        other.compute(kernels["copy"], x)
    with pytest.raises(TypeError):
        other.compute("copy")
    other.release()


def test_submit_argument_errors(client, vs, kernels):
    g = one_node_graph(client, vs, kernels["copy"], ROWS)
    a = vs.put(f32(8, 4), pw.split(0))
    with pytest.raises(TypeError, match="takes 1 argument"):
        g.submit()
    with pytest.raises(TypeError, match="not a Buffer"):
        g.submit(np.zeros((8, 4), np.float32))
    with pytest.raises(ValueError, match="donate has 2 flags"):
        g.submit(a, donate=[True, False])
    with pytest.raises(pw.InvalidArgumentError):
        g.submit(vs.put(f32(8, 8), pw.split(0)))  # spec mismatch at submit
    assert g.run(a).numpy().sum() == f32(8, 4).sum()


def test_concurrent_submits_of_one_graph(client, vs, kernels):
    g = one_node_graph(client, vs, kernels["double"], ROWS).finalize()
    a = vs.put(f32(8, 4), pw.split(0))
    results, errors = [], []

    def work():
        try:
            for _ in range(25):
                results.append(g.submit(a))
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 100
    for ex in results:
        np.testing.assert_array_equal(ex.result(timeout=30).numpy(), f32(8, 4) * 2)
    assert len({ex.outputs[0].id for ex in results}) == 100
    results.clear()
    collect()
