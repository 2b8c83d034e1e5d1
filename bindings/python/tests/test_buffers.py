"""Buffers and numpy: round trips, dtypes, shardings, copies, buffer protocol."""

import array
import re

import numpy as np
import pytest

import pathways as pw

from conftest import f32


@pytest.mark.parametrize("name", sorted(pw.DTYPES))
@pytest.mark.parametrize("sharding", [pw.REPLICATED, pw.split(0), pw.split(1, 1), pw.split(0, 0)],
                         ids=repr)
def test_numpy_round_trip_every_dtype_and_sharding(vs, name, sharding):
    dt = pw.DTYPES[name]
    rng = np.random.default_rng(7)
    host = (rng.standard_normal((8, 12)) * 50).astype(dt)
    with vs.put(host, sharding, dtype=name) as b:
        assert b.dtype == dt and b.shape == (8, 12) and b.sharding == sharding
        assert b.spec == pw.ArraySpec(name, (8, 12), sharding)
        assert b.nbytes == host.nbytes and b.ndim == 2 and b.size == 96
        out = b.numpy()
        assert out.dtype == dt
        np.testing.assert_array_equal(out, host)
        np.testing.assert_array_equal(np.asarray(b), host)


def test_scalar_and_rank_three(vs1):
    with vs1.put(np.float64(2.5)) as s:
        assert s.shape == () and s.numpy() == 2.5
    cube = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    with vs1.put(cube) as b:
        np.testing.assert_array_equal(b.numpy(), cube)


def test_inputs_that_need_a_copy_are_converted(vs1):
    base = np.arange(20, dtype=np.float32).reshape(4, 5)
    strided = base[:, ::2]                       # not contiguous
    assert not strided.flags.c_contiguous
    with vs1.put(strided) as b:
        np.testing.assert_array_equal(b.numpy(), strided)
    swapped = base.astype(">f4")                 # non-native byte order
    with vs1.put(swapped) as b:
        assert b.dtype == np.float32
        np.testing.assert_array_equal(b.numpy(), base)
    with vs1.put([[1, 2], [3, 4]], dtype="f32") as b:  # lists, cast
        assert b.dtype == np.float32 and b.numpy().tolist() == [[1, 2], [3, 4]]
    with vs1.put(base, dtype=np.float64) as b:
        assert b.dtype == np.float64
    with pytest.raises(TypeError, match="not supported"):
        vs1.put(np.zeros(3, np.complex128))
    with pytest.raises(TypeError, match="not supported"):
        vs1.put(np.zeros(3, np.longdouble))


def test_buffer_protocol_inputs(vs1):
    with vs1.put(b"\x01\x02\x03") as b:
        assert b.dtype == np.uint8 and b.numpy().tolist() == [1, 2, 3]
    with vs1.put(array.array("d", [1.5, 2.5])) as b:
        assert b.dtype == np.float64 and b.numpy().tolist() == [1.5, 2.5]
    with vs1.put(memoryview(bytearray(range(4)))) as b:
        assert bytes(b) == bytes(range(4))
    with vs1.put(memoryview(np.arange(6, dtype=np.int64)).cast("B").cast("q", (2, 3))) as b:
        assert b.shape == (2, 3) and b.dtype == np.int64


def test_reading_into_caller_memory(vs):
    host = f32(8, 4)
    with vs.put(host, pw.split(0)) as b:
        out = np.zeros((8, 4), np.float32)
        assert b.to_numpy(out=out) is out
        np.testing.assert_array_equal(out, host)
        raw = bytearray(b.nbytes)
        b.to_host(raw)
        assert bytes(raw) == host.tobytes() == b.tobytes() == bytes(b)
        view = memoryview(bytearray(b.nbytes))
        b.to_host(view)
        assert view.tobytes() == host.tobytes()
        with pytest.raises(ValueError, match="destination holds"):
            b.to_host(bytearray(3))
        with pytest.raises(ValueError, match="C-contiguous"):
            b.to_numpy(out=np.zeros((4, 8), np.float32))
        with pytest.raises(BufferError):
            b.to_host(b"read-only")
        assert np.asarray(b, dtype=np.float64).dtype == np.float64


def test_shape_errors_come_from_the_library(vs):
    with pytest.raises(pw.InvalidArgumentError, match="divisible|split"):
        vs.put(f32(6, 4), pw.split(0))          # 6 rows over 8 devices
    with pytest.raises(pw.InvalidArgumentError):
        vs.put(f32(8, 4), pw.split(5))          # no tensor axis 5


@pytest.mark.parametrize("shape,dim", [((0,), 0), ((0, 4), 0), ((8, 0), 1), ((2, 3, 0), 2)])
def test_an_empty_array_is_refused_naming_its_zero_dimension(vs1, shape, dim):
    want = rf"empty array: shape {re.escape(str(shape))}, dimension {dim} is 0"
    with pytest.raises(pw.InvalidArgumentError, match=want):
        vs1.put(np.zeros(shape, np.float32))
    with pytest.raises(ValueError, match=want):  # converted inputs too
        vs1.put(np.zeros(shape, np.float64), dtype="i32")
    if len(shape) == 1:
        with pytest.raises(ValueError, match=want):
            vs1.put(b"")
    assert vs1.client.live_handles == 1  # the virtual slice only


def test_buffer_state_repr_event_and_release(vs):
    b = vs.put(f32(8), pw.split(0))
    assert repr(b) == "<Buffer f32[8] split(0,all) on 2x4, ready>"
    assert b.ready and b.wait() is b and b.exception() is None
    with b.event as ev:
        assert ev.ready and repr(ev) == "<Event ok>"
    assert b.id != 0
    b.release()
    b.release()
    assert b.id == 0 and repr(b) == "<Buffer on 2x4 released>"
    with pytest.raises(ValueError, match="released Buffer"):
        b.numpy()
