"""Statuses become exceptions: one class per code, message preserved."""

import pickle

import numpy as np
import pytest

import pathways as pw
from pathways._lowlevel import ffi, lib

from conftest import f32, one_node_graph, program

ALL_ERRORS = [pw.CancelledError, pw.UnknownError, pw.InvalidArgumentError,
              pw.DeadlineExceededError, pw.NotFoundError, pw.AlreadyExistsError,
              pw.PermissionDeniedError, pw.ResourceExhaustedError,
              pw.FailedPreconditionError, pw.AbortedError, pw.OutOfRangeError,
              pw.UnimplementedError, pw.InternalError, pw.UnavailableError,
              pw.DataLossError, pw.UnauthenticatedError]


def test_one_class_per_code():
    assert sorted(c.code for c in ALL_ERRORS) == list(range(1, 17))
    for cls in ALL_ERRORS:
        assert issubclass(cls, pw.PathwaysError)
        assert pw.error_class(cls.code) is cls
        assert ffi.string(lib.pw_status_code_string(cls.code)).decode() == cls.code_name
    assert pw.error_class(99) is pw.UnknownError
    # Builtin bases where the meaning is the same.
    assert issubclass(pw.InvalidArgumentError, ValueError)
    assert issubclass(pw.DeadlineExceededError, TimeoutError)
    assert issubclass(pw.NotFoundError, LookupError)
    assert issubclass(pw.UnimplementedError, NotImplementedError)


@pytest.mark.parametrize("cls", ALL_ERRORS, ids=lambda c: c.code_name)
def test_every_code_survives_a_round_trip_through_c(cls):
    # Python -> pw_status_t (Event.fail) -> C event -> pw_status_t -> Python.
    message = f"detail for {cls.code_name}: ünïcode kept"
    with pw.Event() as ev:
        ev.fail(cls(message))
        with pytest.raises(cls) as info:
            ev.wait()
        assert str(info.value) == message and info.value.message == message
        assert type(ev.exception()) is cls
        assert f"{cls.__name__}" in repr(ev)


def test_other_exceptions_become_unknown_with_the_type_name():
    with pw.Event() as ev:
        ev.fail(RuntimeError("boom"))
        with pytest.raises(pw.UnknownError, match="^RuntimeError: boom$"):
            ev.wait()


def test_errors_pickle_and_repr():
    e = pw.NotFoundError("gone")
    assert repr(e) == "NotFoundError('gone')"
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is pw.NotFoundError and e2.message == "gone"


def test_library_errors_map_to_their_classes(runtime, client, vs):
    # INVALID_ARGUMENT, with the library's message naming the culprit.
    with pytest.raises(pw.InvalidArgumentError, match="dtype"):
        vs.compile("kernel copy\ninput f128[8] replicated\noutput f128[8] replicated\n")
    # NOT_FOUND: a kernel that is not registered.
    with pytest.raises(pw.NotFoundError, match="nosuchkernel"):
        vs.compile(program("nosuchkernel", ["f32[8] replicated"], ["f32[8] replicated"]))
    # NOT_FOUND: a released handle used through the C API.
    b = vs.put(f32(8))
    stale = b.id
    b.release()
    with pytest.raises(pw.NotFoundError):
        from pathways._errors import check
        check(lib.pw_buffer_release(client._box.ptr, (stale,)))
    # RESOURCE_EXHAUSTED: no free physical slice of that size.
    with pytest.raises(pw.ResourceExhaustedError, match="no free physical slice"):
        client.vslice("2x4")  # the client already has the only 2x4 slice
    # OUT_OF_RANGE: a slice index the runtime lacks.
    info = ffi.new("pw_slice_info_t*")
    info.struct_size = ffi.sizeof("pw_slice_info_t")
    with pytest.raises(pw.OutOfRangeError):
        from pathways._errors import check
        check(lib.pw_runtime_slice_info(runtime._ptr, 7, info))
    # FAILED_PRECONDITION: completing an event twice; adding to a frozen graph.
    with pw.Event() as ev:
        ev.signal()
        with pytest.raises(pw.FailedPreconditionError):
            ev.signal()
    exe = vs.compile(program("copy", ["f32[8] replicated"], ["f32[8] replicated"]))
    g = one_node_graph(client, vs, exe, "f32[8] replicated").finalize()
    with pytest.raises(pw.FailedPreconditionError):
        g.parameter(vs, "f32[8] replicated")
    # DATA_LOSS: corrupt executable bytes.
    data = bytearray(exe.bytes())
    data[len(data) // 2] ^= 0xFF
    with pytest.raises(pw.DataLossError):
        vs.load(bytes(data))
    # DEADLINE_EXCEEDED from a wait.
    with pw.Event() as ev, pytest.raises(pw.DeadlineExceededError):
        ev.wait(timeout=0.01)
    g.release()
    exe.release()


def test_permission_denied_for_another_clients_handle(runtime, client, vs):
    other = runtime.client("other")
    ovs = other.vslice("2x4")
    theirs = ovs.put(f32(8))
    exe = vs.compile(program("copy", ["f32[8] replicated"], ["f32[8] replicated"]))
    g = one_node_graph(client, vs, exe, "f32[8] replicated")
    with pytest.raises(pw.PermissionDeniedError):
        g.submit(theirs)
    other.close()
    g.release()
    exe.release()


def test_unavailable_when_a_device_fails(runtime, client, vs):
    x = vs.put(f32(8, 2), pw.split(0))
    exe = vs.compile(program("copy", [x.spec], [x.spec]))
    g = one_node_graph(client, vs, exe, x.spec)
    runtime.set_device_health("island", 3, "failed")
    assert runtime.slice("island").health == "failed"
    ex = g.submit(x)
    with pytest.raises(pw.UnavailableError, match="device"):
        ex.wait(timeout=30)
    with pytest.raises(pw.UnavailableError):
        ex.outputs[0].numpy(timeout=30)
    assert "failed: UnavailableError" in repr(ex.outputs[0])
    # The slice was lost with its device, and x's shards with it.
    with pytest.raises(pw.DataLossError, match="island"):
        g.run(x, timeout=30)
    runtime.set_device_health("island", 3, "healthy")
    x2 = vs.put(f32(8, 2), pw.split(0))
    np.testing.assert_array_equal(g.run(x2, timeout=30).numpy(), f32(8, 2))
    x2.release()
    del ex
    g.release()
    exe.release()
    x.release()


def test_already_exists_for_a_kernel_name_taken(runtime):
    with pytest.raises(pw.AlreadyExistsError):
        runtime.register_kernel("copy", lambda call: None)
