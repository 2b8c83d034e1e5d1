"""Python-defined CPU kernels, called from the backend's pool threads."""

import threading

import numpy as np
import pytest

import pathways as pw

from conftest import f32, one_node_graph, program

ROWS = "f32[8,2] split(0,all)"


def run_once(client, vs, kernel, spec_in, spec_out, **attrs):
    exe = vs.compile(program(kernel, [spec_in], [spec_out], **attrs))
    g = one_node_graph(client, vs, exe, spec_in)
    return exe, g


def test_kernel_runs_per_device_on_pool_threads(runtime, client, vs):
    calls = []
    main = threading.get_ident()

    @runtime.register_kernel("affine", inputs=[pw.Param("x", "float", 2)],
                             outputs=[pw.Param("y", "float", 2)],
                             attrs=[pw.Attr("a", float, required=True), pw.Attr("tag", str)])
    def affine(call):
        calls.append((threading.get_ident(), call.mesh_index, call.device,
                      call.inputs[0].shape, call.mesh, dict(call.attrs)))
        assert not call.inputs[0].flags.writeable and call.outputs[0].flags.writeable
        call.outputs[0][...] = call.inputs[0] * call.attrs["a"] + call.mesh_index

    assert affine.__name__ == "affine"  # the decorator returns the function
    exe, g = run_once(client, vs, "affine", ROWS, ROWS, a=3, tag="t1")
    x = vs.put(f32(8, 2), pw.split(0))
    y = g.run(x, timeout=30).numpy()
    expected = f32(8, 2) * 3 + np.repeat(np.arange(8, dtype=np.float32), 2).reshape(8, 2)
    np.testing.assert_array_equal(y, expected)
    assert sorted(c[1] for c in calls) == list(range(8))
    assert all(c[0] != main for c in calls), "kernels must run on pool threads"
    assert all(c[3] == (1, 2) and c[4] == (2, 4) for c in calls)
    assert calls[0][5] == {"a": 3.0, "tag": "t1"}
    with pytest.raises(pw.InvalidArgumentError, match="a"):
        vs.compile(program("affine", [ROWS], [ROWS]))  # required attr missing


def test_kernel_may_return_its_outputs(runtime, client, vs1):
    @runtime.register_kernel("minmax", inputs=1, outputs=2, same_dtype=True)
    def minmax(call):
        x = call.inputs[0]
        return np.minimum(x, 0), np.maximum(x, 0)

    spec = "i64[5] replicated"
    exe = vs1.compile(program("minmax", [spec], [spec, spec]))
    g = one_node_graph(client, vs1, exe, spec)
    lo, hi = g.run(vs1.put(np.array([-2, -1, 0, 1, 2])), timeout=30)
    assert lo.numpy().tolist() == [-2, -1, 0, 0, 0] and hi.numpy().tolist() == [0, 0, 0, 1, 2]


def test_kernel_sees_the_program_and_a_readable_call(runtime, client, vs1):
    seen = {}

    @runtime.register_kernel("peek", inputs=1, outputs=1, open_attrs=True)
    def peek(call):
        seen["program"] = call.program
        seen["repr"] = repr(call)
        call.outputs[0][...] = 0

    exe, g = run_once(client, vs1, "peek", "u8[3] replicated", "u8[3] replicated", anything=1)
    g.run(vs1.put(b"abc"), timeout=30)
    assert seen["program"].kernel == "peek" and seen["program"].attrs == {"anything": 1}
    assert "KernelCall device 8 position 0 of 1" in seen["repr"]


@pytest.mark.parametrize("raised,expected", [
    (ValueError("bad value"), pw.InvalidArgumentError),
    (RuntimeError("broken"), pw.UnknownError),
    (pw.DataLossError("bits flipped"), pw.DataLossError),
])
def test_kernel_exceptions_fail_the_execution_with_a_mapped_code(runtime, client, vs, raised,
                                                                 expected):
    name = f"fails_{expected.code_name.lower()}"

    @runtime.register_kernel(name)
    def fails(call):
        if call.mesh_index == 5:
            raise raised
        call.outputs[0][...] = 1

    exe, g = run_once(client, vs, name, ROWS, ROWS)
    ex = g.submit(vs.put(f32(8, 2), pw.split(0)))
    with pytest.raises(expected) as info:
        ex.wait(timeout=30)
    msg = str(info.value)
    assert f"python kernel '{name}'" in msg and str(raised) in msg and "device 5" in msg
    with pytest.raises(expected):
        ex.outputs[0].numpy(timeout=30)


def test_wrong_return_count_is_an_error(runtime, client, vs1):
    runtime.register_kernel("two", lambda call: (1, 2), inputs=1, outputs=1)
    exe, g = run_once(client, vs1, "two", "f32[2] replicated", "f32[2] replicated")
    with pytest.raises(pw.InvalidArgumentError, match="returned 2 array"):
        g.run(vs1.put(f32(2)), timeout=30)


def test_check_hook_validates_at_compile(runtime, client, vs1):
    checked = []

    def check(prog, mesh):
        checked.append((prog.kernel, mesh))
        if prog.inputs[0].shape[0] % 2:
            raise pw.InvalidArgumentError("needs an even length")

    runtime.register_kernel("even", lambda call: call.inputs[0], check=check)
    vs1.compile(program("even", ["f32[4] replicated"], ["f32[4] replicated"])).release()
    with pytest.raises(pw.InvalidArgumentError, match="even length"):
        vs1.compile(program("even", ["f32[3] replicated"], ["f32[3] replicated"]))
    assert checked[0] == ("even", (1,))


def test_registration_errors(runtime):
    with pytest.raises(pw.InvalidArgumentError):
        runtime.register_kernel("bad name", lambda call: None)
    with pytest.raises(TypeError):
        runtime.register_kernel("bad_params", lambda call: None, inputs=[3])
    runtime.register_kernel("once", lambda call: None)
    with pytest.raises(pw.AlreadyExistsError):
        runtime.register_kernel("once", lambda call: None)


def test_main_thread_waits_release_the_gil_for_kernels(runtime, client, vs1):
    # The kernel blocks until the main thread, which is waiting on the
    # execution, lets it go from another thread: possible only if the wait
    # releases the GIL while kernels run on pool threads.
    gate = threading.Event()
    started = threading.Event()

    @runtime.register_kernel("gated")
    def gated(call):
        started.set()
        assert gate.wait(10)
        call.outputs[0][...] = 7

    exe, g = run_once(client, vs1, "gated", "f32[1] replicated", "f32[1] replicated")
    ex = g.submit(vs1.put(f32(1)))
    threading.Thread(target=lambda: (started.wait(10), gate.set())).start()
    assert ex.result(timeout=30).numpy().tolist() == [7]


def test_closing_from_a_callback_is_refused_and_collection_is_deferred(runtime, client, vs1):
    from pathways import _lowlevel

    refused = []

    @runtime.register_kernel("closer")
    def closer(call):
        for obj in (client, runtime):
            try:
                obj.close()
            except pw.FailedPreconditionError as e:
                refused.append(str(e))
        call.outputs[0][...] = 0

    exe = vs1.compile(program("closer", ["f32[1] replicated"], ["f32[1] replicated"]))
    g = one_node_graph(client, vs1, exe, "f32[1] replicated")
    g.run(vs1.put(f32(1)), timeout=30)
    assert len(refused) == 2 and "inside a pathways callback" in refused[0]
    # A client collected on a pool thread is closed later, off that thread.
    doomed = runtime.client("collected-in-callback")
    with _lowlevel.CALLBACK_SCOPE:
        doomed.__del__()
    assert not doomed.closed
    _lowlevel.flush_deferred()
    assert doomed.closed
