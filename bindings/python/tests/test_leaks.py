"""Leak checks: every C handle and every byte the library allocates is
freed, deterministically (close/with) and on garbage collection.

Memory is compared in a steady state: the runtime keeps the last execution
appended to each physical slice (the slice sequence's tail, with what it
references) until the next one replaces it, so every measurement is taken
after the same last operation on the slice."""

import gc
import time
import weakref

import numpy as np

import pathways as pw

from conftest import collect, f32, one_node_graph, program


SIDES = ("host", "device")


def _live(stats):
    return tuple((stats[side]["live_blocks"], stats[side]["live_bytes"]) for side in SIDES)


def settled_stats(runtime, want=None, timeout=5.0, client=None):
    """runtime.memory_stats() once the last completions are through. A done
    event completes before its completing thread has run the event's
    callbacks (a Python one waits for the GIL this thread holds) and handed
    the execution's block back, so the counts may lag for a moment: with
    |want| (earlier stats), until they equal them; without, until two
    samples 5 ms apart agree. Sleeping releases the GIL. A real leak still
    fails: the counts never come back. With |client|, its block cache is
    emptied first (Client.trim): how many finished runs' blocks it keeps
    depends on how many runs overlapped, which timing decides."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        collect()
        if client is not None:
            client.trim()
        stats = runtime.memory_stats()
        live = _live(stats)
        if (live == _live(want) if want is not None else live == last):
            return stats
        if time.monotonic() > deadline:
            return stats
        last = live
        time.sleep(0.005)


def workload(client, vs, steps=5, explicit=False):
    """Every kind of handle: buffers, executables, graphs, executions,
    events, a Python kernel's outputs."""
    x = vs.put(f32(8, 2), pw.split(0))
    exe = vs.compile(program("scale", [x.spec], [x.spec], alpha=0.5))
    py = vs.compile(program("leak_probe", [x.spec], [x.spec]))
    g = client.graph("w")
    p = g.parameter(vs, x.spec)
    g.output(g.compute(py, g.compute(exe, p)))
    outs = []
    for _ in range(steps):
        ex = g.submit(x)
        ex.done.add_done_callback(lambda err: None)
        outs.append(ex)
    for ex in outs:
        ex.result(timeout=30).numpy()
    with x.event:
        pass
    if explicit:
        for ex in outs:
            ex.outputs[0].release()
            ex.done.close()
        for obj in (g, py, exe, x):
            obj.release()
    return weakref.ref(g)


def test_handles_and_memory_return_to_baseline(runtime, client, vs):
    runtime.register_kernel("leak_probe", lambda call: call.inputs[0] + 1)
    workload(client, vs, steps=20)  # warm up: tables grow once, kernels load
    collect()
    handles = client.live_handles
    memory = settled_stats(runtime, client=client)
    assert memory["host"]["mismatched_frees"] == 0
    assert memory["device"]["mismatched_frees"] == 0

    for explicit in (False, True):
        ref = workload(client, vs, steps=20, explicit=explicit)
        if explicit:
            # Released explicitly: nothing is left, even before any GC.
            assert client.live_handles == handles
        collect()
        assert ref() is None
        assert client.live_handles == handles
        after = settled_stats(runtime, memory, client=client)
        for side in SIDES:
            assert after[side]["live_blocks"] == memory[side]["live_blocks"], (side, after)
            assert after[side]["live_bytes"] == memory[side]["live_bytes"], (side, after)
            assert after[side]["mismatched_frees"] == 0
            assert after[side]["failed_allocations"] == 0


def armed_workload(client, vs, flush, steps=5, explicit=False):
    """Armed graphs: reruns, a donation chain, runs overlapping (more than
    the armed graph's armed blocks), callbacks; then a plain submission
    (|flush|) so that the slice's tail is the same execution every time."""
    x = vs.put(f32(8, 2), pw.split(0))
    exe = vs.compile(program("scale", [x.spec], [x.spec], alpha=0.5))
    py = vs.compile(program("leak_probe", [x.spec], [x.spec]))
    g = client.graph("armed")
    p = g.parameter(vs, x.spec)
    g.output(g.compute(py, g.compute(exe, p)))
    armed = g.arm()
    outs = [armed.submit(x) for _ in range(steps)]
    for ex in outs:
        ex.done.add_done_callback(lambda err: None)
    w = armed.submit(vs.put(f32(8, 2), pw.split(0)), donate=[True]).outputs[0]
    for _ in range(steps):
        w = armed.submit(w, donate=[True]).outputs[0]
    for ex in outs:
        ex.result(timeout=30).numpy()
    w.numpy(timeout=30)
    g.release()  # the armed graph keeps the graph
    if explicit:
        armed.close()
        for ex in outs:
            ex.outputs[0].release()
            ex.done.close()
        for obj in (w, py, exe, x):
            obj.release()
    flush()
    return weakref.ref(armed)


def test_armed_graphs_return_to_baseline(runtime, client, vs):
    runtime.register_kernel("leak_probe", lambda call: call.inputs[0] + 1)
    fx = vs.put(f32(8))
    fg = one_node_graph(client, vs, vs.compile(program("copy", [fx.spec], [fx.spec])), fx.spec)

    def flush():
        fg.run(fx, timeout=30)

    armed_workload(client, vs, flush, steps=20)  # warm up
    collect()
    flush()
    handles = client.live_handles
    memory = settled_stats(runtime, client=client)

    for explicit in (False, True):
        ref = armed_workload(client, vs, flush, steps=20, explicit=explicit)
        if explicit:
            assert client.live_handles == handles
        collect()
        flush()
        assert ref() is None
        assert client.live_handles == handles
        assert not client._box.armed
        after = settled_stats(runtime, memory, client=client)
        for side in SIDES:
            assert after[side]["live_blocks"] == memory[side]["live_blocks"], (side, after)
            assert after[side]["live_bytes"] == memory[side]["live_bytes"], (side, after)
            assert after[side]["mismatched_frees"] == 0
            assert after[side]["failed_allocations"] == 0


def test_closing_a_client_frees_everything_it_owned(runtime):
    runtime.register_kernel("leak_probe", lambda call: call.inputs[0])
    # Another client's one-op graph on the same slice: run before each
    # measurement, so that its execution is the slice's tail both times.
    other = runtime.client("other")
    ovs = other.vslice("2x4")
    ox = ovs.put(f32(8))
    flush = one_node_graph(other, ovs, ovs.compile(program("copy", [ox.spec], [ox.spec])),
                           ox.spec)
    flush.run(ox, timeout=30)
    collect()
    before = settled_stats(runtime)

    client = runtime.client("doomed")
    vs = client.vslice("2x4")
    workload(client, vs, steps=3)
    kept = (vs.put(np.zeros(8, np.float32)), vs.compile(program("copy", [ox.spec], [ox.spec])))
    armed = one_node_graph(client, vs, kept[1], ox.spec).arm()  # left open
    armed.submit(kept[0])
    assert client.live_handles > 0
    client.close()                   # frees what the Python objects still hold
    assert client.live_handles == 0
    flush.run(ox, timeout=30)
    collect()
    after = settled_stats(runtime, before)
    for side in SIDES:
        assert after[side]["live_blocks"] == before[side]["live_blocks"], (side, after)
        assert after[side]["live_bytes"] == before[side]["live_bytes"], (side, after)
    assert armed.closed
    for obj in kept + (armed,):
        obj.close()  # harmless after close
    other.close()


def test_unreferenced_runtime_and_client_are_collected():
    rt = pw.Runtime("2", workers=1)
    c = rt.client()
    b = c.vslice("2").put(f32(2))
    refs = [weakref.ref(o) for o in (rt, c, b)]
    del rt, c, b
    collect()
    assert all(r() is None for r in refs)


def test_reference_cycles_are_freed_by_the_collector():
    rt = pw.Runtime("1", workers=1)
    c = rt.client()
    v = c.vslice("1")
    b = v.put(f32(4))

    class Holder:
        pass

    h = Holder()
    h.me, h.objects = h, (rt, c, v, b)  # a cycle holding everything
    refs = [weakref.ref(o) for o in (rt, c, v, b, h)]
    del rt, c, v, b, h
    gc.collect()
    collect()
    assert all(r() is None for r in refs)


def test_events_and_buffers_may_outlive_their_runtime():
    # An execution's done event is allocated by the runtime; Python may
    # hold it after the runtime is closed (tracebacks, cycles, notebooks).
    rt = pw.Runtime("1", workers=1)
    c = rt.client()
    v = c.vslice("1")
    x = v.put(f32(2))
    g = one_node_graph(c, v, v.compile(program("copy", [x.spec], [x.spec])), x.spec)
    ex = g.submit(x)
    ready = x.event
    ex.wait(timeout=30)
    rt.close()
    assert ex.done.ready and ready.ready
    ex.done.wait()
    assert "released" in repr(g) or "Graph" in repr(g)
    with np.testing.assert_raises(ValueError):
        ex.outputs[0].numpy()
    del ex, ready, g, x, v, c
    collect()
