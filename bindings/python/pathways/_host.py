"""Host tasks: Python functions run by host nodes of a graph (Graph.add_host,
Client.register_host_task), on the runtime's host-task threads, in their
slice's gang order, over numpy views of the shards (no copies)."""

import threading

import numpy as np

from ._errors import status_from_exception
from ._lowlevel import CALLBACK_SCOPE, ffi, lib
from ._types import ArraySpec, numpy_dtype

# Tasks the C side may still call: kept until their destroy callback (the
# graph or registry holding them let go), whichever thread that comes on.
_LIVE = {}
_LIVE_LOCK = threading.Lock()


class HostTaskCall:
    """What a host function gets, valid during the call only.

    inputs[k][m] / outputs[k][m]: numpy views of input / output k's shard on
    mesh device m, straight over the runtime's memory (inputs read-only).
    Copy what you keep: the memory is reused after the call. node, name,
    gang_id, device_count; input_specs / output_specs (global ArraySpecs)."""

    __slots__ = ("node", "name", "gang_id", "device_count", "input_specs", "output_specs",
                 "inputs", "outputs")

    def __repr__(self):
        return (f"HostTaskCall(node {self.node} {self.name!r}, {self.device_count} devices, "
                f"{len(self.inputs)} inputs, {len(self.outputs)} outputs)")


def _shard_views(specs, rows, sizes, count, devices, writable):
    out = []
    for k in range(count):
        spec = specs[k]
        dtype = np.dtype(numpy_dtype(spec.dtype))
        shape = [spec.shape.dims[i] for i in range(spec.shape.rank)]
        size = sizes[k]
        total = dtype.itemsize * int(np.prod(shape, dtype=np.int64)) if shape else dtype.itemsize
        if spec.sharding.kind == lib.PW_SHARDING_SPLIT and size and total != size:
            axis = spec.sharding.tensor_axis
            shape[axis] = shape[axis] * size // total
        views = []
        for m in range(devices):
            ptr = rows[k][m]
            if size == 0 or ptr == ffi.NULL:
                views.append(np.empty(shape, dtype))
                continue
            arr = np.frombuffer(ffi.buffer(ptr, size), dtype=dtype).reshape(shape)
            if not writable:
                arr.flags.writeable = False
            views.append(arr)
        out.append(views)
    return out


class _HostTask:
    __slots__ = ("fn", "label", "handle", "__weakref__")

    def __init__(self, fn, label):
        self.fn = fn
        self.label = label
        self.handle = ffi.new_handle(self)


@ffi.def_extern()
def pwpy_host_task_run(user, c):
    with CALLBACK_SCOPE:
        task = call = None
        try:
            task = ffi.from_handle(user)
            call = HostTaskCall()
            call.node = c.node
            call.name = ffi.string(c.name).decode("utf-8", "replace")
            call.gang_id = c.gang_id
            call.device_count = c.device_count
            call.input_specs = [ArraySpec._from_c(c.input_specs[k]) for k in range(c.input_count)]
            call.output_specs = [ArraySpec._from_c(c.output_specs[k])
                                 for k in range(c.output_count)]
            call.inputs = _shard_views(c.input_specs, c.inputs, c.input_bytes, c.input_count,
                                       c.device_count, False)
            call.outputs = _shard_views(c.output_specs, c.outputs, c.output_bytes,
                                        c.output_count, c.device_count, True)
            task.fn(call)
            return ffi.NULL
        except BaseException as exc:
            label = task.label if task is not None else "?"
            return status_from_exception(exc, f"python host task {label}")
        finally:
            if call is not None:  # a kept call must not reach freed memory through C
                call.inputs = call.outputs = None


@ffi.def_extern()
def pwpy_host_task_destroy(user):
    with _LIVE_LOCK:
        _LIVE.pop(user, None)


def new_task(fn, label):
    """A pw_host_task_t* (cdata, kept alive by the caller while the C call
    that copies it runs) for Python callable |fn|. Call forget(task) if that
    call fails: C then never calls destroy."""
    if not callable(fn):
        raise TypeError(f"a host task must be callable, not {type(fn).__name__}")
    t = _HostTask(fn, label)
    with _LIVE_LOCK:
        _LIVE[t.handle] = t
    c = ffi.new("pw_host_task_t*")
    c.struct_size = ffi.sizeof("pw_host_task_t")
    c.fn = lib.pwpy_host_task_run
    c.user = t.handle
    c.destroy = lib.pwpy_host_task_destroy
    return c


def forget(ctask):
    with _LIVE_LOCK:
        _LIVE.pop(ctask.user, None)


def live_count():
    """Host tasks the runtime may still call (for leak tests)."""
    with _LIVE_LOCK:
        return len(_LIVE)
