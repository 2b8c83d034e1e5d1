"""Snapshots: take and restore bit for bit, onto another virtual slice with
another sharding, persistence through a dir store, lifetimes, misuse."""

import numpy as np
import pytest

import pathways as pw

from conftest import collect, f32


def test_take_restore_bit_for_bit(client, vs, vs1):
    a = vs.put(f32(8, 4), pw.split(0))
    bits = np.random.default_rng(1).integers(0, 2**32, size=16, dtype=np.uint32)
    b = vs.put(bits.view(np.float32).reshape(4, 4))  # NaNs and all: bits, not values
    with client.snapshotter(keep=2) as snaps:
        t = snaps.take(3, [a, b], names=["a", None])
        assert t.wait(10) is t and t.ready and t.persisted is None and t.exception() is None
        assert snaps.steps == [3] and snaps.latest_step == 3
        info = snaps.info(3)
        assert info["buffer_count"] == 2 and info["total_bytes"] == a.nbytes + b.nbytes
        assert info["buffers"][0]["name"] == "a" and info["buffers"][1]["name"] == ""
        assert info["buffers"][0]["spec"] == a.spec and not info["persisted"]
        same = snaps.restore(3, "a", vs)
        assert same.spec == a.spec
        np.testing.assert_array_equal(same.numpy(), f32(8, 4))
        # Onto another virtual slice (one device), resharded.
        other = snaps.restore(3, 0, vs1, "f32[8,4] replicated")
        np.testing.assert_array_equal(other.numpy(), f32(8, 4))
        split1 = snaps.restore(3, "a", vs, sharding=pw.split(1, 1))
        assert split1.sharding == pw.split(1, 1)
        np.testing.assert_array_equal(split1.numpy(), f32(8, 4))
        raw = snaps.restore(3, 1, vs1)
        assert raw.tobytes() == b.tobytes()
        both = snaps.restore_all(3, vs1, sharding="replicated")
        assert [x.tobytes() for x in both] == [a.tobytes(), b.tobytes()]
        # keep=2: the oldest goes.
        snaps.take(4, a).wait()
        snaps.take(5, [a]).wait()
        snaps.flush(10)
        assert snaps.steps == [4, 5]
        with pytest.raises(pw.NotFoundError, match="3"):
            snaps.info(3)
        with pytest.raises(pw.AlreadyExistsError):
            snaps.take(5, [a])
        assert "Snapshotter" in repr(snaps) and "SnapshotTake" in repr(t)
        t.close()
        for x in [same, other, split1, raw, *both]:
            x.release()
    assert snaps.closed and "closed" in repr(snaps)
    with pytest.raises(ValueError, match="closed Snapshotter"):
        snaps.steps
    snaps.close()  # idempotent
    a.release()
    b.release()


def test_persistence_round_trip(tmp_path, runtime, client, vs):
    a = vs.put(f32(8, 4, start=7), pw.split(0))
    with client.snapshotter(keep=2, store_dir=tmp_path, key_prefix="job") as snaps:
        t = snaps.take(10, [a], names=["w"])
        t.wait(10)
        assert t.persisted.ready and t.persisted.exception() is None
        info = snaps.info(10)
        assert info["persisted"] and info["stored_bytes"] > 0 and info["buffers"][0]["xxh64"]
    assert any(tmp_path.iterdir())
    # A new snapshotter (a restarted job) on another client reads it back.
    c2 = runtime.client("restarted")
    v2 = c2.vslice("1")
    with c2.snapshotter(store_dir=str(tmp_path), key_prefix="job") as snaps:
        assert snaps.steps == []
        assert snaps.load_latest() == 10
        info = snaps.info(10)
        assert info["loaded"] and info["buffers"][0]["name"] == "w"
        w = snaps.restore(10, "w", v2, sharding="replicated")
        np.testing.assert_array_equal(w.numpy(), f32(8, 4, start=7))
        w.release()
    with c2.snapshotter(store_dir=tmp_path, key_prefix="other") as snaps:
        with pytest.raises(pw.NotFoundError):
            snaps.load_latest()
    with c2.snapshotter() as snaps:
        with pytest.raises(pw.FailedPreconditionError):
            snaps.load_latest()
    v2.release()
    c2.close()
    a.release()


def test_closed_with_its_client(runtime):
    c = runtime.client("short")
    v = c.vslice("1")
    a = v.put(f32(4))
    snaps = c.snapshotter()
    snaps.take(0, a).wait()
    c.close()  # closes the snapshotter first
    assert snaps.closed
    with pytest.raises(ValueError, match="closed Snapshotter of client 'short'"):
        snaps.take(1, a)
    # Collected without closing: closed by its finalizer.
    c = runtime.client("gc")
    c.snapshotter()
    collect()
    c.close()


def test_misuse(client, vs, vs1, runtime):
    a = vs.put(f32(8, 4), pw.split(0))
    with pytest.raises(TypeError, match="Client"):
        pw.Snapshotter("client")
    with pytest.raises(TypeError, match="keep"):
        client.snapshotter(keep="2")
    with pytest.raises(TypeError, match="store_dir"):
        client.snapshotter(store_dir=3)
    with pytest.raises(pw.InvalidArgumentError, match="prefix"):
        client.snapshotter(key_prefix="bad/prefix")
    other = runtime.client("other")
    ov = other.vslice("1")
    ob = ov.put(f32(2))
    with client.snapshotter() as snaps:
        with pytest.raises(TypeError, match="step"):
            snaps.take("1", [a])
        with pytest.raises(ValueError, match="step"):
            snaps.take(-1, [a])
        with pytest.raises(TypeError, match=r"buffers\[0\]"):
            snaps.take(1, [np.zeros(3)])
        with pytest.raises(ValueError, match="empty"):
            snaps.take(1, [])
        with pytest.raises(ValueError, match="belongs to client 'other'"):
            snaps.take(1, [ob])
        with pytest.raises(ValueError, match="names"):
            snaps.take(1, [a], names=["x", "y"])
        snaps.take(1, [a], names=["x"]).wait()
        with pytest.raises(pw.NotFoundError):
            snaps.restore(2, 0, vs)
        with pytest.raises(pw.NotFoundError):
            snaps.restore(1, "nope", vs)
        with pytest.raises(pw.OutOfRangeError):
            snaps.restore(1, 4, vs)
        with pytest.raises(TypeError, match="index or a str"):
            snaps.restore(1, 0.5, vs)
        with pytest.raises(TypeError, match="VSlice"):
            snaps.restore(1, 0, "vs")
        with pytest.raises(pw.InvalidArgumentError):
            snaps.restore(1, 0, vs, "f32[4,4] replicated")  # another shape
        with pytest.raises(ValueError, match="specs"):
            snaps.restore_all(1, vs, specs=[])
        assert snaps.latest_step == 1
        # Restore into another client.
        r = snaps.restore(1, "x", ov, sharding="replicated")
        np.testing.assert_array_equal(r.numpy(), f32(8, 4))
        r.release()
    ob.release()
    ov.release()
    other.close()
    a.release()
