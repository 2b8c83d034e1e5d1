"""Signatures past the 16 of the C struct's fixed arrays: a CPU executable
with 300 inputs and 300 outputs (the variadic add_scalar kernel) reports
every spec and runs (include/pathways/backend.h, signature v2)."""

import numpy as np

import pathways as pw

from conftest import one_node_graph, program

WIDE = 300


def test_three_hundred_inputs_and_outputs(client, vs1):
    spec = "f32[4] replicated"
    exe = vs1.compile(program("add_scalar", [spec] * WIDE, [spec] * WIDE, value=1))
    assert len(exe.inputs) == WIDE and len(exe.outputs) == WIDE
    assert exe.inputs[WIDE - 1] == exe.outputs[WIDE - 1]
    g = one_node_graph(client, vs1, exe, *([spec] * WIDE))
    xs = [vs1.put(np.full(4, i, dtype=np.float32)) for i in range(WIDE)]
    ys = g.run(*xs, timeout=60)
    assert len(ys) == WIDE
    for i, y in enumerate(ys):
        np.testing.assert_array_equal(y.numpy(), np.full(4, i + 1, dtype=np.float32))
