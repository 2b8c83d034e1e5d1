"""Armed graphs (Graph.arm() -> ArmedGraph, pw_graph_exec_t): the results,
checks and errors of Graph.submit, overlapping runs, and lifetimes: close
waits for the runs, a closed armed graph raises, closing the client (or the
runtime) closes the armed graphs still open, and garbage collection in any
order frees them."""

import gc
import threading
import weakref

import numpy as np
import pytest

import pathways as pw
from pathways import _lowlevel

from conftest import collect, f32, one_node_graph, program

ROWS = "f32[8,4] split(0,all)"
SOLO = "f32[4] replicated"
GATE_TIMEOUT_S = 30


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


@pytest.fixture
def gate(runtime):
    """A Python kernel "gate" (x -> x + 1) that blocks until the returned
    threading.Event is set, so runs stay in flight as long as a test needs;
    set again at teardown so that nothing is left waiting."""
    opened = threading.Event()
    calls = []

    @runtime.register_kernel("gate", inputs=1, outputs=1)
    def _gate(call):
        calls.append(call.mesh_index)
        if not opened.wait(GATE_TIMEOUT_S):
            raise pw.DeadlineExceededError("gate never opened")
        return call.inputs[0] + 1

    opened.calls = calls
    yield opened
    opened.set()


def two_step_graph(client, vs, kernels):
    g = client.graph("step")
    x, y = g.parameter(vs, ROWS), g.parameter(vs, ROWS)
    s = g.compute(kernels["add"], x, y)
    g.output(g.compute(kernels["double"], s), s)
    return g


def test_results_equal_graph_submit(client, vs, kernels):
    g = two_step_graph(client, vs, kernels)
    a, b = vs.put(f32(8, 4), pw.split(0)), vs.put(f32(8, 4, start=1), pw.split(0))
    handles = client.live_handles
    armed = g.arm()
    assert isinstance(armed, pw.ArmedGraph) and g.finalized
    assert armed.graph is g and armed.client is client and armed.name == "step"
    assert not armed.closed
    assert repr(armed) == "<ArmedGraph 'step': 2 parameter(s), 2 output(s)>"
    assert client.live_handles == handles + 1  # the armed graph counts

    ex = armed.submit(a, b)
    assert isinstance(ex, pw.Execution) and ex.graph is g and len(ex.outputs) == 2
    assert all(isinstance(o, pw.Buffer) for o in ex.outputs)
    assert [o.spec for o in ex.outputs] == [pw.ArraySpec.parse(ROWS)] * 2
    assert ex.wait(timeout=30) is ex and ex.ready and "2 output(s), ok" in repr(ex)
    ref = g.submit(a, b).result(timeout=30)
    for got, want in zip(ex.result(), ref):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(ex.outputs[1].numpy(), f32(8, 4) * 2 + 1)
    # run(): submit + wait, outputs back, as Graph.run.
    d2, s2 = armed.run(a, b, timeout=30)
    np.testing.assert_array_equal(d2.numpy(), ref[0].numpy())
    del ex, ref, d2, s2, got, want
    armed.close()
    assert armed.closed and repr(armed) == "<ArmedGraph 'step' closed>"
    assert client.live_handles == handles
    g.release()


def test_reruns_with_donation_chain_like_graph_submit(client, vs, kernels):
    g = one_node_graph(client, vs, kernels["double"], ROWS)
    with g.arm() as armed:
        w = vs.put(f32(8, 4, start=1), pw.split(0))
        first = w
        executions = []
        for step in range(10):
            ex = armed.submit(w, donate=[step > 0])
            executions.append(ex)
            w = ex.outputs[0]
        assert first.id != 0  # not donated (step 0)
        for ex in executions[1:-1]:
            assert ex.outputs[0].id == 0  # consumed by the next step
        np.testing.assert_array_equal(w.numpy(timeout=30), f32(8, 4, start=1) * 2 ** 10)
        # Rerun the same arguments many times, one after another.
        for _ in range(20):
            np.testing.assert_array_equal(armed.run(first, timeout=30).numpy(),
                                          f32(8, 4, start=1) * 2)
        with pytest.raises(ValueError, match="released Buffer"):
            armed.submit(executions[0].outputs[0])
    assert armed.closed


def test_overlapping_submits_without_waiting(runtime, client, vs1, gate):
    # Every run blocks in the gate kernel until the gate opens, so all of
    # them are in flight at once: more than the armed graph's private
    # execution blocks, the rest from the client's cache.
    exe = vs1.compile(program("gate", [SOLO], [SOLO]))
    g = one_node_graph(client, vs1, exe, SOLO)
    x = vs1.put(f32(4))
    with g.arm() as armed:
        runs = [armed.submit(x) for _ in range(8)]
        assert not any(ex.ready for ex in runs)
        assert len({ex.outputs[0].id for ex in runs}) == 8
        gate.set()
        for ex in runs:
            np.testing.assert_array_equal(ex.result(timeout=30).numpy(), f32(4) + 1)
    assert len(gate.calls) == 8
    del runs
    exe.release()
    g.release()


def close_in_thread(armed, runs):
    """Starts a thread closing |armed|; returns it and what it saw of
    |runs| just before close() and right after it returned."""
    seen = {}
    entering = threading.Event()

    def closer():
        seen["before"] = [ex.ready for ex in runs]
        entering.set()
        armed.close()  # blocks (GIL released) until the runs complete
        seen["after"] = [ex.ready for ex in runs]

    t = threading.Thread(target=closer)
    t.start()
    assert entering.wait(30)
    return t, seen


def test_close_waits_for_a_run_in_flight(runtime, client, vs1, gate):
    exe = vs1.compile(program("gate", [SOLO], [SOLO]))
    g = one_node_graph(client, vs1, exe, SOLO)
    x = vs1.put(f32(4))
    armed = g.arm()
    runs = [armed.submit(x)]
    t, seen = close_in_thread(armed, runs)
    gate.set()
    t.join(60)
    assert not t.is_alive()
    assert seen["before"] == [False] and seen["after"] == [True]
    assert armed.closed
    # What the run produced outlives the armed graph.
    np.testing.assert_array_equal(runs[0].result(timeout=0).numpy(), f32(4) + 1)
    del runs
    exe.release()
    g.release()


def test_close_with_many_runs_in_flight(runtime, client, vs1, gate):
    # More runs than the armed graph has private execution blocks: close()
    # returns once the gate opens, and every run completes with its value.
    exe = vs1.compile(program("gate", [SOLO], [SOLO]))
    g = one_node_graph(client, vs1, exe, SOLO)
    x = vs1.put(f32(4))
    armed = g.arm()
    runs = [armed.submit(x) for _ in range(6)]
    t, seen = close_in_thread(armed, runs)
    gate.set()
    t.join(60)
    assert not t.is_alive() and armed.closed
    assert seen["before"] == [False] * 6
    for ex in runs:
        np.testing.assert_array_equal(ex.result(timeout=30).numpy(), f32(4) + 1)
    del runs
    exe.release()
    g.release()


@pytest.fixture
def two_gates(runtime):
    """A kernel "gate2" (x -> x + 1) whose runs wait for gate "neg" when
    x[0] < 0, for gate "pos" otherwise; both opened at teardown."""
    gates = {"pos": threading.Event(), "neg": threading.Event()}

    @runtime.register_kernel("gate2", inputs=1, outputs=1)
    def _gate2(call):
        which = "neg" if call.inputs[0][0] < 0 else "pos"
        if not gates[which].wait(GATE_TIMEOUT_S):
            raise pw.DeadlineExceededError(f"gate {which} never opened")
        return call.inputs[0] + 1

    yield gates
    for e in gates.values():
        e.set()


def test_close_waits_for_runs_beyond_the_private_blocks(runtime, client, vs1, two_gates):
    exe = vs1.compile(program("gate2", [SOLO], [SOLO]))
    g = one_node_graph(client, vs1, exe, SOLO)
    x, y = vs1.put(f32(4)), vs1.put(-f32(4) - 1)
    armed = g.arm()
    # Two runs held by gate "pos" (in the armed blocks while in flight),
    # then one held by gate "neg", which finds no armed block free.
    runs = [armed.submit(x), armed.submit(x), armed.submit(y)]
    t, seen = close_in_thread(armed, runs)
    try:
        two_gates["pos"].set()
        runs[0].wait(timeout=30)
        runs[1].wait(timeout=30)
        # The third run is still held: close() must still be waiting for it.
        t.join(3)
        assert t.is_alive(), f"close() returned with runs in flight: {seen}"
    finally:
        two_gates["neg"].set()
        t.join(60)
    assert seen["after"] == [True] * 3
    del runs
    exe.release()
    g.release()


def test_failed_runs_complete_and_raise_as_graph_submit(runtime, client, vs1):
    @runtime.register_kernel("armed_fails", inputs=1, outputs=1)
    def _fails(call):
        raise pw.OutOfRangeError("armed_fails: no")

    exe = vs1.compile(program("armed_fails", [SOLO], [SOLO]))
    g = one_node_graph(client, vs1, exe, SOLO)
    x = vs1.put(f32(4))
    armed = g.arm()
    ex, ref = armed.submit(x), g.submit(x)
    for e in (ex, ref):
        with pytest.raises(pw.OutOfRangeError, match="armed_fails: no"):
            e.wait(timeout=30)
        with pytest.raises(pw.OutOfRangeError):
            e.outputs[0].numpy(timeout=30)
    armed.close()  # failed runs completed too
    del ex, ref
    exe.release()
    g.release()


@pytest.mark.parametrize("how", ["graph", "armed"])
def test_argument_errors_match_graph_submit(client, vs, kernels, how):
    g = one_node_graph(client, vs, kernels["copy"], ROWS)
    armed = g.arm()
    submit = g.submit if how == "graph" else armed.submit
    a = vs.put(f32(8, 4), pw.split(0))
    with pytest.raises(TypeError, match=r"graph 'copy' takes 1 argument\(s\), got 0"):
        submit()
    with pytest.raises(TypeError, match="argument 0 is ndarray, not a Buffer"):
        submit(np.zeros((8, 4), np.float32))
    with pytest.raises(ValueError, match="donate has 2 flags, the graph has 1 parameters"):
        submit(a, donate=[True, False])
    with pytest.raises(pw.InvalidArgumentError):
        submit(vs.put(f32(8, 8), pw.split(0)))  # spec mismatch, found by the library
    gone = vs.put(f32(8, 4), pw.split(0))
    gone.release()
    with pytest.raises(ValueError, match="argument 0 is a released Buffer"):
        submit(gone)
    # Nothing leaked or broken by the failures.
    assert submit(a).result(timeout=30).numpy().sum() == f32(8, 4).sum()
    armed.close()
    g.release()


def test_arm_errors(runtime, client, vs, kernels):
    bad = client.graph("bad")
    x = bad.parameter(vs, "f32[8,8] split(0,all)")
    bad.output(bad.compute(kernels["double"], x, name="wrong_shape"))
    handles = client.live_handles
    with pytest.raises(pw.InvalidArgumentError, match="wrong_shape"):
        bad.arm()
    assert client.live_handles == handles
    bad.release()
    with pytest.raises(ValueError, match="released Graph"):
        bad.arm()
    with pytest.raises(TypeError, match="expected a Graph"):
        pw.ArmedGraph("not a graph")
    other = runtime.client("other")
    ovs = other.vslice("2x4")
    og = one_node_graph(other, ovs, ovs.compile(program("copy", [ROWS], [ROWS])), ROWS)
    other.close()
    with pytest.raises(ValueError, match="closed client"):
        og.arm()


def test_use_after_close_raises(client, vs, kernels):
    g = one_node_graph(client, vs, kernels["copy"], ROWS)
    a = vs.put(f32(8, 4), pw.split(0))
    armed = g.arm()
    armed.run(a, timeout=30)
    armed.close()
    armed.close()  # idempotent
    for use in (lambda: armed.submit(a), lambda: armed.run(a), lambda: armed.submit()):
        with pytest.raises(ValueError, match=r"closed ArmedGraph \(graph 'copy'\)"):
            use()
    with g.arm() as again:  # the graph itself is untouched: arm it again
        assert not again.closed and again.run(a, timeout=30).numpy().sum() == f32(8, 4).sum()
    assert again.closed
    with pytest.raises(ValueError, match="closed ArmedGraph"):
        again.submit(a)
    g.release()


def test_armed_graph_keeps_its_graph_after_release(client, vs, kernels):
    g = one_node_graph(client, vs, kernels["double"], ROWS)
    a = vs.put(f32(8, 4), pw.split(0))
    armed = g.arm()
    g.release()
    with pytest.raises(ValueError, match="released Graph"):
        g.submit(a)
    np.testing.assert_array_equal(armed.run(a, timeout=30).numpy(), f32(8, 4) * 2)
    armed.close()


def test_client_closed_with_armed_graphs_alive(runtime, gate):
    c = runtime.client("doomed")
    v = c.vslice("1")
    x = v.put(f32(4))
    exe = v.compile(program("gate", [SOLO], [SOLO]))
    g = one_node_graph(c, v, exe, SOLO)
    idle, busy = g.arm(), g.arm()
    runs = [busy.submit(x) for _ in range(3)]
    assert not any(ex.ready for ex in runs)
    gate.set()
    c.close()  # closes both armed graphs (waiting for the runs), then the client
    assert c.closed and c.live_handles == 0
    assert idle.closed and busy.closed and all(ex.ready for ex in runs)
    for armed in (idle, busy):
        with pytest.raises(ValueError, match="ArmedGraph of closed client 'doomed'"):
            armed.submit(x)
        armed.close()  # a no-op now
        assert repr(armed) == "<ArmedGraph 'gate' closed>"
    with pytest.raises(ValueError, match="closed client"):
        g.arm()
    del idle, busy, runs
    collect()


def test_runtime_closed_with_armed_graphs_alive():
    rt = pw.Runtime("1", workers=1)
    c = rt.client()
    v = c.vslice("1")
    x = v.put(f32(4))
    g = one_node_graph(c, v, v.compile(program("copy", [SOLO], [SOLO])), SOLO)
    armed = g.arm()
    ex = armed.submit(x)
    rt.close()
    assert armed.closed and c.closed and ex.ready
    with pytest.raises(ValueError, match="closed client"):
        armed.submit(x)
    del armed, ex
    collect()


def test_concurrent_submits_of_one_armed_graph(client, vs, kernels):
    # The C API allows one thread at a time per armed graph: the binding
    # serialises the submissions, so threads may share one.
    g = one_node_graph(client, vs, kernels["double"], ROWS)
    a = vs.put(f32(8, 4), pw.split(0))
    armed = g.arm()
    results, errors = [], []

    def work():
        try:
            for _ in range(25):
                results.append(armed.submit(a))
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
    armed.close()
    g.release()
    collect()


def test_close_from_a_callback_is_refused_and_collection_there_deferred(client, vs, kernels):
    g = one_node_graph(client, vs, kernels["copy"], ROWS)
    a = vs.put(f32(8, 4), pw.split(0))
    handles = client.live_handles
    armed = g.arm()
    ref = weakref.ref(armed)
    outcome = {}
    ran = threading.Event()
    holder = [armed]

    def callback(error):
        try:
            holder[0].close()
        except pw.FailedPreconditionError as e:
            outcome["close"] = str(e)  # not |e|: its traceback holds the armed graph
        holder.clear()  # the last reference: collected here, on the pool thread
        outcome["collected"] = ref() is None
        ran.set()

    ex = armed.submit(a)
    del armed
    ex.done.add_done_callback(callback)
    assert ran.wait(30)
    assert "from inside a pathways callback" in outcome["close"]
    assert outcome["collected"]
    ex.wait(timeout=30)
    del ex
    collect()
    # Deferred off the pool thread; destroyed at the next flush.
    assert len(client._box.armed) == 1 and client.live_handles == handles + 1
    _lowlevel.flush_deferred()
    assert client.live_handles == handles
    assert not client._box.armed
    g.release()


def test_unreferenced_armed_graph_is_collected_and_closed(client, vs, kernels):
    g = one_node_graph(client, vs, kernels["copy"], ROWS)
    a = vs.put(f32(8, 4), pw.split(0))
    handles = client.live_handles
    armed = g.arm()
    ex = armed.submit(a)
    ref = weakref.ref(armed)
    del armed  # runs may still be in flight: the finalizer waits for them
    collect()
    assert ref() is None and client.live_handles == handles + 1  # ex's output
    assert ex.result(timeout=30).numpy().sum() == f32(8, 4).sum()
    del ex
    collect()
    assert client.live_handles == handles
    g.release()


@pytest.mark.parametrize("first", ["armed", "client", "runtime", "any"])
def test_garbage_collection_in_any_order(first):
    # A cycle holding a runtime, a client, a graph and armed graphs with
    # runs in flight: whichever finalizer the collector runs first, nothing
    # is used after it is freed.
    rt = pw.Runtime("1", workers=1)
    c = rt.client()
    v = c.vslice("1")
    x = v.put(f32(4))
    g = one_node_graph(c, v, v.compile(program("copy", [SOLO], [SOLO])), SOLO)
    armed = [g.arm(), g.arm()]
    runs = [armed[0].submit(x), armed[1].submit(x)]

    class Holder:
        pass

    h = Holder()
    h.me, h.objects = h, (rt, c, v, x, g, armed, runs)
    refs = [weakref.ref(o) for o in (rt, c, g, armed[0], armed[1], h)]
    if first == "armed":
        armed[0].__del__()  # run one finalizer by hand first (as the GC would)
    elif first == "client":
        c.__del__()
    elif first == "runtime":
        rt.__del__()
    del rt, c, v, x, g, armed, runs, h
    gc.collect()
    collect()
    assert all(r() is None for r in refs)
