"""Closing a Client or a Runtime while other threads use it: every call
either succeeds or raises ValueError (never a library NotFoundError, a
crash or a use after free, which the asan preset would catch), close()
waits for the calls in flight and never deadlocks with waits or with
Python kernels calling in from pool threads; and every kind of object
raises ValueError once its client (or runtime) is closed."""

import threading

import pytest

import pathways as pw

from conftest import f32, one_node_graph, program

SPEC = "f32[16] replicated"
JOIN_TIMEOUT_S = 30      # a thread still running after this has deadlocked
ROUNDS = 20              # rounds of each race; each takes 0.02-0.1 s
CALLS_BEFORE_CLOSE = 3   # calls each hammering thread makes before the close


class Hammer:
    """Threads calling |fn|(k) in a loop until they get ValueError (the
    object closed); records any other exception. |started| is set once
    each thread has made CALLS_BEFORE_CLOSE calls, so the close lands while
    calls are being made."""

    def __init__(self, fns):
        self.errors = []
        self.refused = 0
        self.done_calls = 0
        self._lock = threading.Lock()
        self._ready = threading.Semaphore(0)
        self._n = len(fns)
        self.threads = [threading.Thread(target=self._run, args=(fn,), daemon=True)
                        for fn in fns]

    def _run(self, fn):
        signalled = False
        k = 0
        try:
            while True:
                try:
                    fn(k)
                except ValueError as e:
                    # Not InvalidArgumentError (from C), not another misuse.
                    if isinstance(e, pw.PathwaysError) or "closed" not in str(e):
                        raise
                    with self._lock:
                        self.refused += 1
                    return
                k += 1
                with self._lock:
                    self.done_calls += 1
                if k == CALLS_BEFORE_CLOSE:
                    self._ready.release()
                    signalled = True
        except BaseException as e:  # reported by the test
            with self._lock:
                self.errors.append(e)
        finally:
            if not signalled:
                self._ready.release()

    def start_and_wait_until_busy(self):
        for t in self.threads:
            t.start()
        for _ in range(self._n):
            assert self._ready.acquire(timeout=JOIN_TIMEOUT_S)

    def join(self):
        for t in self.threads:
            t.join(JOIN_TIMEOUT_S)
            assert not t.is_alive(), "a thread hung across the close"
        assert not self.errors, repr(self.errors[:3])
        assert self.refused == len(self.threads)


def _workload(rt, c):
    """One call kind per thread: buffer creation, submit + wait, reads
    (handle look-ups), a virtual slice's binding, slices of the runtime."""
    vs = c.vslice("1")
    exe = vs.compile(program("copy", [SPEC], [SPEC]))
    g = one_node_graph(c, vs, exe, SPEC)
    armed = g.arm()
    x = vs.put(f32(16))
    data = f32(16)

    def put(k):
        vs.put(data).release()

    def submit(k):
        ex = g.submit(x)
        ex.wait(JOIN_TIMEOUT_S)
        ex.outputs[0].release()

    def submit_armed(k):
        armed.submit(x).wait(JOIN_TIMEOUT_S)

    def read(k):
        assert x.numpy()[3] == 3
        x.event.close()
        assert exe.bytes()

    def lookups(k):
        assert vs.slice.name and vs.slices
        assert g.counts()["computes"] == 1

    def graph(k):
        h = c.graph("h")
        h.output(h.compute(exe, h.parameter(vs, SPEC)))
        h.finalize()
        h.release()

    return [put, submit, submit_armed, read, lookups, graph]


def test_closing_a_client_while_threads_call_it():
    for _ in range(ROUNDS):
        with pw.Runtime("1", workers=2) as rt:
            c = rt.client("raced")
            hammer = Hammer(_workload(rt, c))
            hammer.start_and_wait_until_busy()
            c.close()
            hammer.join()
            assert c.closed and c.live_handles == 0
            # The runtime is still fine.
            with rt.client("after") as c2:
                assert c2.vslice("1").put(f32(2)).numpy().tolist() == [0, 1]


def test_closing_the_runtime_while_threads_call_it_and_its_clients():
    for _ in range(ROUNDS):
        rt = pw.Runtime("1", workers=2)
        c = rt.client("raced")
        fns = _workload(rt, c)

        def topology(k):
            assert rt.slices[0].devices[0].kind == "cpu"
            assert rt.memory_stats()["host"]["live_blocks"] > 0

        def clients(k):
            with rt.client(f"c{k}") as other:
                other.vslice("1").release()

        hammer = Hammer(fns + [topology, clients])
        hammer.start_and_wait_until_busy()
        rt.close()
        hammer.join()
        assert rt.closed and c.closed


def test_concurrent_closes_all_return_once_closed():
    for _ in range(ROUNDS):
        rt = pw.Runtime("1", workers=1)
        c = rt.client()
        c.vslice("1").put(f32(4))
        barrier = threading.Barrier(4)
        errors = []

        def close(obj):
            try:
                barrier.wait(JOIN_TIMEOUT_S)
                obj.close()
                assert obj.closed
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=close, args=(o,)) for o in (c, c, rt, rt)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(JOIN_TIMEOUT_S)
            assert not t.is_alive()
        assert not errors, errors


def test_close_waits_for_a_blocked_kernel_and_kernel_calls_get_value_error():
    """A kernel blocked on a pool thread while the client closes: close
    waits for its execution (pw_client_destroy), a thread waiting for the
    output is not holding the close up, and what the kernel then calls on
    the closing client and runtime raises ValueError instead of
    deadlocking."""
    rt = pw.Runtime("1", workers=2)
    c = rt.client("blocked")
    vs = c.vslice("1")
    gate = threading.Event()
    entered = threading.Event()
    seen = []

    @rt.register_kernel("blocker", inputs=1, outputs=1)
    def blocker(call):
        entered.set()
        assert gate.wait(JOIN_TIMEOUT_S)
        for fn in (lambda: vs.put(f32(2)), lambda: vs.slice, lambda: rt.slices,
                   lambda: c.graph()):
            try:
                fn()
                seen.append("ok")
            except ValueError as e:
                seen.append(type(e).__name__ + ": " + str(e))
        call.outputs[0][...] = call.inputs[0] + 1

    exe = vs.compile(program("blocker", [SPEC], [SPEC]))
    g = one_node_graph(c, vs, exe, SPEC)
    ex = g.submit(vs.put(f32(16)))
    assert entered.wait(JOIN_TIMEOUT_S)
    waited = []
    waiter = threading.Thread(target=lambda: waited.append(ex.done.exception(JOIN_TIMEOUT_S)))
    waiter.start()
    closer = threading.Thread(target=rt.close)
    closer.start()
    while not c._box.closing:  # the close has begun: calls are refused from now on
        closer.join(0.001)
    gate.set()
    closer.join(JOIN_TIMEOUT_S)
    waiter.join(JOIN_TIMEOUT_S)
    assert not closer.is_alive() and not waiter.is_alive(), "close deadlocked"
    assert rt.closed and c.closed
    assert waited == [None]  # the execution completed (close waited for it)
    assert len(seen) == 4 and all(s.startswith("ValueError: operation on") for s in seen), seen


def test_close_times_out_on_a_call_that_does_not_return():
    """A call in flight that does not return (simulated: the guard entered
    by hand) makes close raise RuntimeError after its timeout and leaves
    the client open and usable."""
    with pw.Runtime("1", workers=1) as rt:
        c = rt.client("stuck")
        vs = c.vslice("1")
        c._box.enter()
        try:
            with pytest.raises(RuntimeError, match="1 call.* still in flight.*stays open"):
                c.close(timeout=0.05)
            with pytest.raises(RuntimeError, match="still in flight"):
                rt.close(timeout=0.05)
        finally:
            c._box.exit()
        assert not c.closed and not rt.closed
        assert vs.put(f32(3)).numpy().tolist() == [0, 1, 2]
        c.close()
        assert c.closed


@pytest.mark.parametrize("close_what", ["client", "runtime"])
def test_every_object_raises_value_error_after_close(close_what):
    rt = pw.Runtime([{"name": "a", "mesh": "2"}], workers=1)

    @rt.register_kernel(f"noop_{close_what}", inputs=1, outputs=1)
    def noop(call):
        call.outputs[0][...] = call.inputs[0]

    c = rt.client("doomed")
    vs = c.vslice("2")
    x = vs.put(f32(16))
    exe = vs.compile(program("copy", [SPEC], [SPEC]))
    g = one_node_graph(c, vs, exe, SPEC)
    armed = g.arm()
    building = c.graph("building")
    p = building.parameter(vs, SPEC)
    ex = g.submit(x)
    ex.wait(JOIN_TIMEOUT_S)
    ready = x.event
    s = rt.slice(0)
    (rt if close_what == "runtime" else c).close()

    calls = {
        "Client.vslice": lambda: c.vslice("1"),
        "Client.graph": lambda: c.graph(),
        "Client.put": lambda: c.put(f32(2), vs),
        "VSlice.put": lambda: vs.put(f32(2)),
        "VSlice.compile": lambda: vs.compile(program("copy", [SPEC], [SPEC])),
        "VSlice.load": lambda: vs.load(b"x"),
        "VSlice.slice": lambda: vs.slice,
        "VSlice.slices": lambda: vs.slices,
        "Buffer.numpy": lambda: x.numpy(),
        "Buffer.wait": lambda: x.wait(),
        "Buffer.event": lambda: x.event,
        "Buffer.to_host": lambda: x.to_host(bytearray(64)),
        "output Buffer": lambda: ex.outputs[0].numpy(),
        "Executable.bytes": lambda: exe.bytes(),
        "Graph.submit": lambda: g.submit(x),
        "Graph.run": lambda: g.run(x),
        "Graph.counts": lambda: g.counts(),
        "Graph.arm": lambda: g.arm(),
        "Graph.parameter": lambda: building.parameter(vs, SPEC),
        "Graph.compute": lambda: building.compute(exe, p),
        "Graph.output": lambda: building.output(p),
        "Graph.finalize": lambda: building.finalize(),
        "ArmedGraph.submit": lambda: armed.submit(x),
        "ArmedGraph.run": lambda: armed.run(x),
    }
    if close_what == "runtime":
        calls.update({
            "Runtime.slices": lambda: rt.slices,
            "Runtime.slice": lambda: rt.slice(0),
            "Runtime.client": lambda: rt.client(),
            "Runtime.register_kernel": lambda: rt.register_kernel("k2", noop),
            "Runtime.set_device_health": lambda: rt.set_device_health(0, 0, "failed"),
            "Runtime.memory_stats": lambda: rt.memory_stats(),
            "Slice.name": lambda: s.name,
            "Slice.devices": lambda: s.devices,
            "Slice.device": lambda: s.device(0),
        })
    wrong = {}
    for what, fn in calls.items():
        try:
            fn()
            wrong[what] = "no error"
        except ValueError as e:
            if isinstance(e, pw.PathwaysError) or "closed" not in str(e):
                wrong[what] = f"{type(e).__name__}: {e}"
        except BaseException as e:  # noqa: B902 - any other is the failure
            wrong[what] = f"{type(e).__name__}: {e}"
    assert not wrong, wrong
    assert "closed" in repr(x) and "closed" in repr(c) and "released" in repr(exe)
    assert "closed" in repr(armed) and "Graph" in repr(g) and "VSlice" in repr(vs)
    # Releases are no-ops, closes idempotent; events stay valid values.
    for obj in (x, exe, g, vs, building, armed, c, rt if close_what == "runtime" else c):
        obj.close()
    assert ex.done.ready and ready.ready and ex.done.exception() is None
    ready.close()
    with pytest.raises(ValueError, match="closed Event"):
        ready.wait()
    rt.close()
