"""Asynchronous host transfers: from_host_async with each semantics, empty
buffers filled after a graph was submitted on them, to_host_async, and the
rule that host arrays stay alive (held by the bindings) until the runtime
is done with them, whatever the caller drops."""

import time
import weakref

import numpy as np
import pytest

import pathways as pw
from pathways import _host_async

from conftest import collect, f32, one_node_graph, program

ROWS = "f32[8,4] split(0,all)"


def wait_until(predicate, timeout=10.0):
    """Polls |predicate| (a bounded wait, not a timing assertion)."""
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            return False
        collect()
        time.sleep(0.001)
    return True


@pytest.mark.parametrize("semantics", sorted(pw.HOST_SEMANTICS))
@pytest.mark.parametrize("sharding", [pw.REPLICATED, pw.split(0)], ids=repr)
def test_from_host_async_each_semantics(vs, semantics, sharding):
    host = f32(8, 4, start=1)
    b, host_done = pw.from_host_async(vs, host, sharding, semantics=semantics)
    with host_done:
        with b:
            if semantics == "copy":
                assert host_done.ready  # copied before the call returned
            b.wait(10)
            assert b.spec == pw.ArraySpec("f32", (8, 4), sharding)
            np.testing.assert_array_equal(b.numpy(), host)
        # Released: the runtime is done with |host| (zero-copy included).
        host_done.wait(10)


def test_immutable_array_dropped_at_once_is_kept_until_host_done(vs):
    base = _host_async.pinned_count()
    host = f32(1024, 8, start=3)
    want = host.copy()
    ref = weakref.ref(host)
    b, host_done = vs.from_host_async(host, pw.split(0), semantics="immutable")
    del host
    collect()
    with b, host_done:
        host_done.wait(10)
        np.testing.assert_array_equal(b.numpy(), want)
        # The bindings let go of the array once the runtime did.
        assert wait_until(lambda: ref() is None)
        assert wait_until(lambda: _host_async.pinned_count() == base)


def test_zero_copy_array_lives_as_long_as_the_buffer(vs):
    base = _host_async.pinned_count()
    host = f32(8, 4, start=1)
    ref = weakref.ref(host)
    b, host_done = pw.from_host_async(vs, host, pw.split(0), semantics="zero_copy")
    del host
    collect()
    with host_done:
        # The CPU backend adopted the memory: the buffer is the array.
        assert ref() is not None and not host_done.ready
        ref()[0, 0] = 42.0
        assert b.numpy()[0, 0] == 42.0
        ref()[0, 0] = 1.0
        assert _host_async.pinned_count() == base + 1
        b.release()
        host_done.wait(10)
        assert wait_until(lambda: ref() is None)
        assert _host_async.pinned_count() == base


def test_zero_copy_buffer_used_by_a_graph_after_release(client, vs):
    with vs.compile(program("scale", [ROWS], [ROWS], alpha=2)) as double:
        g = one_node_graph(client, vs, double, ROWS)
        host = f32(8, 4, start=1)
        ref = weakref.ref(host)
        b, host_done = pw.from_host_async(vs, host, pw.split(0), semantics="zero_copy")
        del host
        ex = g.submit(b)
        b.release()  # the submission keeps the buffer, and so the array
        with host_done:
            out = ex.result(10)
            host_done.wait(10)
            np.testing.assert_array_equal(out.numpy(), 2 * f32(8, 4, start=1))
            assert wait_until(lambda: ref() is None)
        out.release()
        g.release()


def test_create_empty_then_fill_after_the_graph_was_submitted(client, vs):
    with vs.compile(program("scale", [ROWS], [ROWS], alpha=2)) as double:
        g = one_node_graph(client, vs, double, ROWS)
        x = vs.create_empty(ROWS)
        assert x.spec == pw.ArraySpec.parse(ROWS) and not x.ready
        ex = g.submit(x)
        read = pw.to_host_async(ex.outputs[0])
        assert not ex.ready and not read.ready  # nothing runs before the fill
        host_done = x.fill_from_host(f32(8, 4, start=5))
        with host_done, read:
            np.testing.assert_array_equal(read.result(10), 2 * f32(8, 4, start=5))
            host_done.wait(10)
        ex.outputs[0].release()
        x.release()
        g.release()


@pytest.mark.parametrize("semantics", sorted(pw.HOST_SEMANTICS))
def test_fill_from_host_each_semantics_and_conversion(vs, semantics):
    x = pw.create_empty(vs, pw.ArraySpec("f32", (8, 4), pw.split(0)))
    # float64 input: converted (copied) to the buffer's dtype first.
    done = pw.fill_from_host(x, np.arange(32, dtype=np.float64).reshape(8, 4),
                             semantics=semantics)
    with done:
        np.testing.assert_array_equal(x.numpy(), f32(8, 4))
        x.release()
        done.wait(10)


def test_to_host_async_keeps_its_destination_alive(vs):
    base = _host_async.pinned_count()
    x = pw.create_empty(vs, ROWS)
    out = np.zeros((8, 4), np.float32)
    ref = weakref.ref(out)
    read = x.to_host_async(out=out)
    event = read.event
    del out, read
    collect()
    # Pending (x is not filled): the bindings hold the destination.
    assert ref() is not None and _host_async.pinned_count() == base + 1
    with event, x.fill_from_host(f32(8, 4, start=2)):
        event.wait(10)
        assert wait_until(lambda: ref() is None)
        assert _host_async.pinned_count() == base
    x.release()


def test_released_unfilled_buffer_fails_its_reads(vs):
    x = pw.create_empty(vs, ROWS)
    read = pw.to_host_async(x)
    x.release()
    with read:
        with pytest.raises(pw.CancelledError, match="before it was filled"):
            read.result(10)
        assert isinstance(read.exception(0), pw.CancelledError)


def test_bad_calls(vs):
    host = f32(8, 4)
    with pytest.raises(ValueError, match="semantics must be one of"):
        pw.from_host_async(vs, host, semantics="borrow")
    with pytest.raises(pw.InvalidArgumentError, match="empty array"):
        pw.from_host_async(vs, np.zeros((0, 4), np.float32))
    with pytest.raises(TypeError, match="ArraySpec"):
        pw.create_empty(vs, 7)
    with pw.create_empty(vs, ROWS) as x:
        with pytest.raises(ValueError, match="shape"):
            x.fill_from_host(f32(4, 8))
        with pytest.raises(ValueError, match="C-contiguous"):
            x.to_host_async(out=np.zeros((4, 8), np.float32))
        with pytest.raises(ValueError, match="C-contiguous"):
            x.to_host_async(out=np.zeros((8, 4), np.float64))
        x.fill_from_host(host, semantics="copy").close()
        with pytest.raises(pw.FailedPreconditionError, match="filled already"):
            x.fill_from_host(host)
        np.testing.assert_array_equal(x.numpy(), host)
    with vs.put(host) as b:
        with pytest.raises(pw.FailedPreconditionError, match="filled already"):
            b.fill_from_host(host)
    with pytest.raises(TypeError, match="Buffer"):
        pw.to_host_async(host)
    x = pw.create_empty(vs, ROWS)
    x.release()
    with pytest.raises(ValueError, match="released Buffer"):
        x.fill_from_host(host)
