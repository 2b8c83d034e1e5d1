"""What a Python kernel is handed outlives the call harmlessly: its arrays
are Python-owned copies, so a kernel that stashes them (a global, a
closure) and writes through them later, even after the buffers, the client
and the runtime are freed, reaches no device memory (under the asan preset
a read or write of freed memory would abort the test run)."""

import gc

import numpy as np
import pytest

import pathways as pw

from conftest import collect, f32, one_node_graph, program

SPEC = "f32[64,64] replicated"  # 16 KiB shards: freed memory malloc reuses soon
ROUNDS = 20


def test_a_stashed_kernel_view_never_reaches_device_memory():
    rt = pw.Runtime("1", workers=1)
    stash = []

    @rt.register_kernel("stasher", inputs=1, outputs=1)
    def stasher(call):
        call.outputs[0][...] = call.inputs[0] * 2
        stash.append((call, call.inputs[0], call.outputs[0], call.outputs[0][1:, ::2]))

    c = rt.client("views")
    vs = c.vslice("1")
    g = one_node_graph(c, vs, vs.compile(program("stasher", [SPEC], [SPEC])), SPEC)
    x = vs.put(f32(64, 64))
    y = g.run(x, timeout=30)
    want = f32(64, 64) * 2
    call, kept_in, kept_out, kept_slice = stash[0]

    # While everything is alive: the kept arrays are not the buffers' memory.
    kept_out[...] = -1.0
    kept_slice[...] = -2.0
    np.testing.assert_array_equal(y.numpy(), want)
    with pytest.raises(ValueError, match="read-only"):
        kept_in[0, 0] = 5.0
    np.testing.assert_array_equal(x.numpy(), f32(64, 64))
    with pytest.raises(ValueError, match="after the kernel call returned"):
        call.program

    # More runs, each freeing its output, then everything closed and freed:
    # writing through the stash afterwards writes into the copies only.
    for _ in range(ROUNDS):
        g.run(x, timeout=30).release()
    x.release()
    c.close()
    rt.close()
    del x, y, g, vs, c, rt
    collect()
    # (Through memoryviews too: their memcpy is one ASan intercepts, which
    # it cannot do for numpy's own loops.)
    for _, kin, kout, kslice in stash:
        kout[...] = 7.0
        kslice[...] = 8.0
        assert kout[0, 0] == 7.0 and kout[1, 0] == 8.0
        raw = memoryview(kout).cast("B")
        raw[:] = bytes(len(raw))
        assert not any(kout.tobytes())
        assert kin.tobytes() == f32(64, 64).tobytes()
    # Memory malloc hands out now holds none of it.
    fresh = [np.full((64, 64), 3.0, np.float32) for _ in range(64)]
    assert all((f == 3.0).all() for f in fresh)
    stash.clear()
    gc.collect()
