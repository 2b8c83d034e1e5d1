"""Failure and topology: a failed device fails work with UnavailableError,
buffers that lived on a lost slice raise DataLossError, the topology
callback sees lost/back, lose/restore by the host, virtual slice info."""

import threading

import numpy as np
import pytest

import pathways as pw

from conftest import collect, f32, one_node_graph, program


def _wait_for(cond, what, timeout=10.0):
    ev = threading.Event()
    for _ in range(int(timeout / 0.01)):
        if cond():
            return
        ev.wait(0.01)
    raise AssertionError(f"timed out waiting for {what}")


class Recorder:
    def __init__(self):
        self.events = []
        self.lock = threading.Lock()
        self.cv = threading.Condition(self.lock)

    def __call__(self, ev):
        with self.cv:
            self.events.append(ev)
            self.cv.notify_all()

    def wait(self, n, timeout=10.0):
        with self.cv:
            assert self.cv.wait_for(lambda: len(self.events) >= n, timeout), self.events
            return list(self.events)


def test_failed_device_unavailable_then_data_loss(runtime, client, vs):
    rec = Recorder()
    client.on_topology(rec)
    x = vs.put(f32(8, 4), pw.split(0))
    exe = vs.compile(program("scale", [x.spec], [x.spec], alpha=2))
    g = one_node_graph(client, vs, exe, x.spec)
    np.testing.assert_array_equal(g.run(x).numpy(), f32(8, 4) * 2)
    island = runtime.slice("island")
    assert island.state == "online" and island.losses == 0 and not island.lost
    runtime.set_device_health("island", 2, "failed")
    ex = g.submit(x)
    with pytest.raises(pw.UnavailableError):
        ex.wait(timeout=10)
    # The failed launch (or the check) marks the slice lost.
    runtime.check_health()
    _wait_for(lambda: island.lost, "the slice to be lost")
    assert island.state == "lost" and island.losses == 1 and "lost" in repr(island)
    (lost,) = rec.wait(1)[:1]
    assert lost.change == "lost" and lost.slice == island.index and lost.slice_name == "island"
    assert lost.losses == 1 and isinstance(lost.cause, pw.PathwaysError)
    info = vs.info()
    assert info.lost_slices == 1 and info.first_lost_slice == island.index
    assert info.lost_since_bound and vs.lost and info.slice_count == 1
    # The buffer's only copy was there.
    with pytest.raises(pw.DataLossError, match="island"):
        x.numpy()
    # Repaired: a health check brings it back; old buffers stay lost.
    runtime.set_device_health("island", 2, "healthy")
    assert runtime.check_health() == 1
    events = rec.wait(2)
    assert events[1].change == "back" and events[1].cause is None
    assert island.state == "online" and not vs.lost and vs.info().lost_since_bound
    with pytest.raises(pw.DataLossError):
        x.numpy()
    y = vs.put(f32(8, 4), pw.split(0))
    np.testing.assert_array_equal(g.run(y).numpy(), f32(8, 4) * 2)
    assert client.topology_errors == (0, None)
    client.on_topology(None)
    for o in (y, x, g, exe):
        o.release()


def test_lose_and_restore_by_the_host(runtime, client, vs, vs1):
    rec = Recorder()
    client.on_topology(rec)
    a = vs1.put(f32(4))
    runtime.lose_slice("solo", "maintenance")
    ev = rec.wait(1)[0]
    assert ev.change == "lost" and ev.slice_name == "solo"
    assert isinstance(ev.cause, pw.UnavailableError) and "maintenance" in str(ev.cause)
    assert runtime.slice("solo").lost and not runtime.slice("island").lost
    runtime.lose_slice(1)  # lost already: nothing happens
    assert runtime.slice(1).losses == 1
    with pytest.raises(pw.DataLossError):
        a.numpy()
    # Other slices are untouched.
    b = vs.put(f32(8, 4), pw.split(0))
    np.testing.assert_array_equal(b.numpy(), f32(8, 4))
    runtime.restore_slice("solo")
    assert rec.wait(2)[1].change == "back"
    assert not runtime.slice("solo").lost
    assert "TopologyEvent" in repr(ev) and "maintenance" in repr(ev)
    for o in (a, b):
        o.release()


def test_topology_callback_exception_is_reported_not_raised(runtime, client, capsys):
    seen = []

    def bad(ev):
        seen.append(ev)
        raise RuntimeError("boom in the callback")

    client.on_topology(bad)
    runtime.lose_slice(1, "test")
    _wait_for(lambda: client.topology_errors[0] == 1, "the callback to run")
    count, err = client.topology_errors
    assert isinstance(err, RuntimeError) and "boom" in str(err)
    assert "topology callback" in capsys.readouterr().err
    # Replacing and clearing are safe; the runtime keeps working.
    rec = Recorder()
    client.on_topology(rec)
    runtime.restore_slice(1)
    assert rec.wait(1)[0].change == "back"
    client.on_topology(None)
    runtime.lose_slice(1)
    runtime.restore_slice(1)
    assert len(rec.events) == 1 and len(seen) == 1


def test_client_close_with_a_topology_callback(runtime):
    c = runtime.client("closing")
    rec = Recorder()
    c.on_topology(rec)
    runtime.lose_slice(1)
    rec.wait(1)
    c.close()  # clears it: no delivery afterwards
    runtime.restore_slice(1)
    other = runtime.client("other")
    other_rec = Recorder()
    other.on_topology(other_rec)
    runtime.lose_slice(1)
    other_rec.wait(1)
    assert len(rec.events) == 1
    other.close()
    with pytest.raises(ValueError, match="closed client"):
        c.on_topology(rec)


def test_misuse(runtime, client):
    with pytest.raises(TypeError, match="callable"):
        client.on_topology(42)
    with pytest.raises(IndexError):
        runtime.lose_slice(7)
    with pytest.raises(KeyError):
        runtime.restore_slice("nope")
    with pytest.raises(TypeError, match="reason"):
        runtime.lose_slice(0, 5)
    with pytest.raises(TypeError, match="health_poll"):
        pw.Runtime("2", health_poll="fast")
    with pytest.raises(ValueError, match="loss_grace"):
        pw.Runtime("2", loss_grace=-1)
    # Restoring a slice whose device is failed names it.
    runtime.set_device_health("island", 0, "failed")
    runtime.check_health()
    with pytest.raises(pw.FailedPreconditionError):
        runtime.restore_slice("island")
    runtime.set_device_health("island", 0, "healthy")
    runtime.check_health()
    runtime.close()
    with pytest.raises(ValueError, match="closed"):
        runtime.check_health()


def test_health_poll_sees_failure_and_return():
    with pw.Runtime([{"name": "a", "mesh": "2"}, {"name": "b", "mesh": "2"}],
                    health_poll=0.001, loss_grace=0.5) as rt:
        c = rt.client()
        rec = Recorder()
        c.on_topology(rec)
        rt.set_device_health("b", 1, "failed")
        assert rec.wait(1)[0].change == "lost"
        rt.set_device_health("b", 1, "healthy")
        assert rec.wait(2)[1].change == "back"
        c.close()
    collect()
