"""Events: waits, timeouts, Ctrl-C, callbacks from worker threads, combinators."""

import _thread
import threading
import time

import pytest

import pathways as pw

from conftest import f32, one_node_graph, program


def test_user_event_lifecycle():
    ev = pw.Event()
    assert not ev.ready and repr(ev) == "<Event pending>"
    with pytest.raises(pw.DeadlineExceededError, match="timed out after 0.02 s"):
        ev.wait(timeout=0.02)
    with pytest.raises(pw.DeadlineExceededError):
        ev.wait(timeout=0)
    with pytest.raises(pw.DeadlineExceededError):
        ev.exception(timeout=0.01)
    ev.signal()
    assert ev.ready and ev.exception() is None and repr(ev) == "<Event ok>"
    ev.wait()
    ev.wait(timeout=0)
    ev.close()
    ev.close()
    assert repr(ev) == "<Event closed>"
    with pytest.raises(ValueError, match="closed Event"):
        ev.wait()


def test_wait_timeout_is_honoured():
    with pw.Event() as ev:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            ev.wait(timeout=0.3)
        assert 0.25 <= time.monotonic() - t0 < 5


def test_ctrl_c_interrupts_a_wait():
    timer = threading.Timer(0.2, _thread.interrupt_main)
    with pw.Event() as never:
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            never.wait()  # no timeout: only the interrupt ends it
        elapsed = time.monotonic() - t0
    timer.join()
    assert elapsed < 5


def test_ctrl_c_interrupts_a_buffer_read(runtime, client, vs1):
    gate = threading.Event()

    @runtime.register_kernel("stall")
    def stall(call):
        gate.wait(10)

    exe = vs1.compile(program("stall", ["f32[1] replicated"], ["f32[1] replicated"]))
    g = one_node_graph(client, vs1, exe, "f32[1] replicated")
    ex = g.submit(vs1.put(f32(1)))
    timer = threading.Timer(0.2, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            ex.outputs[0].numpy()
    finally:
        gate.set()
        timer.join()
    ex.wait(timeout=30)


def test_callback_runs_on_the_worker_thread_that_completes(runtime, client, vs1):
    gate = threading.Event()

    @runtime.register_kernel("held")
    def held(call):
        gate.wait(10)
        call.outputs[0][...] = 1

    exe = vs1.compile(program("held", ["f32[1] replicated"], ["f32[1] replicated"]))
    g = one_node_graph(client, vs1, exe, "f32[1] replicated")
    ex = g.submit(vs1.put(f32(1)))
    got = []
    fired = threading.Event()
    main = threading.get_ident()

    def on_done(error):
        got.append((error, threading.get_ident()))
        fired.set()

    ex.done.add_done_callback(on_done)
    assert not got  # not complete yet: registered, not run
    gate.set()
    assert fired.wait(30)
    assert got[0][0] is None and got[0][1] != main
    # Already complete: runs at once on this thread.
    ex.done.add_done_callback(on_done)
    assert got[1] == (None, main)


def test_callback_receives_the_error_and_reports_its_own_exceptions(monkeypatch):
    reported = []
    monkeypatch.setattr("sys.excepthook", lambda *exc: reported.append(exc[1]))
    errors = []
    with pw.Event() as ev:
        ev.add_done_callback(errors.append)
        ev.add_done_callback(lambda err: 1 / 0)
        ev.fail(pw.AbortedError("stop"))
    assert type(errors[0]) is pw.AbortedError and str(errors[0]) == "stop"
    assert type(reported[0]) is ZeroDivisionError


def test_callback_fires_cancelled_when_the_last_reference_goes():
    errors = []
    ev = pw.Event()
    ev.add_done_callback(errors.append)
    ev.close()
    assert type(errors[0]) is pw.CancelledError


def test_callbacks_from_many_threads_all_run():
    count = 200
    done = []
    events = [pw.Event() for _ in range(count)]
    for ev in events:
        ev.add_done_callback(done.append)
    threads = [threading.Thread(target=lambda evs=events[i::4]: [e.signal() for e in evs])
               for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert done == [None] * count
    for ev in events:
        ev.close()


def test_all_and_any():
    a, b = pw.Event(), pw.Event()
    both, first = pw.Event.all([a, b]), pw.Event.any([a, b])
    assert not both.ready and not first.ready
    b.fail(pw.InternalError("b broke"))
    assert first.ready and type(first.exception()) is pw.InternalError
    assert not both.ready
    a.signal()
    with pytest.raises(pw.InternalError, match="b broke"):
        both.wait(timeout=5)
    with pw.Event.all([]) as empty:
        assert empty.ready
    with pytest.raises(TypeError, match="events\\[0\\]"):
        pw.Event.all(["nope"])
    for e in (a, b, both, first):
        e.close()
