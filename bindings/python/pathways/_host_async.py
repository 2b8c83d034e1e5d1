"""Asynchronous host transfers (include/pathways/buffer.h): from_host_async
with a choice of host-memory semantics, buffers created empty and filled
later, to_host_async returning an event.

The runtime reads (or, for "zero_copy", uses as the buffer) the numpy
array's memory after the call returns, until the host-done event
completes. This module keeps every such array (and the C view of it)
referenced until then, whatever the caller does with its own references,
so dropping them early cannot make the runtime read freed memory. The
same holds for the destination array of to_host_async until its event
completes. What Python cannot stop is writing into an array the runtime
still reads: that gives unspecified buffer contents (never a crash), so
don't (see docs/python.md, "Asynchronous host transfers")."""

import threading

import numpy as np

from ._errors import InvalidArgumentError, check
from ._event import Event, on_ready
from ._lowlevel import ffi, lib
from ._objects import Buffer, _adopt_buffer, _as_host_array, _vslice_handle
from ._types import ArraySpec, as_sharding, dtype_name

__all__ = ["HOST_SEMANTICS", "HostRead", "create_empty", "fill_from_host", "from_host_async",
           "to_host_async"]

#: The names of pw_host_semantics_t.
HOST_SEMANTICS = {
    "copy": lib.PW_HOST_COPY_BEFORE_RETURN,
    "immutable": lib.PW_HOST_IMMUTABLE_UNTIL_TRANSFER_COMPLETES,
    "zero_copy": lib.PW_HOST_ZERO_COPY,
}

# Host memory the runtime may still use: key -> the objects that own it,
# dropped by the callback of the event that says the runtime is done.
_PINNED = {}
_PINNED_LOCK = threading.Lock()


def pinned_count():
    """How many transfers still hold host memory alive (for tests)."""
    with _PINNED_LOCK:
        return len(_PINNED)


def _pin(event_ptr, *objs):
    """Keeps |objs| alive until the C event |event_ptr| completes (at once
    if it has). Registered before the caller can see the event."""
    key = object()
    with _PINNED_LOCK:
        _PINNED[key] = objs

    def unpin(_error):
        with _PINNED_LOCK:
            _PINNED.pop(key, None)

    try:
        on_ready(event_ptr, unpin)
    except Exception:
        # The callback cannot be registered: the memory stays pinned for
        # good (a leak, never a use after free).
        pass


def _options(semantics):
    try:
        code = HOST_SEMANTICS[semantics]
    except (KeyError, TypeError):
        raise ValueError(f"semantics must be one of {sorted(HOST_SEMANTICS)}, not "
                         f"{semantics!r}") from None
    o = ffi.new("pw_host_transfer_options_t*")
    lib.pw_host_transfer_options_init(o)
    o.semantics = code
    return o


def _host_source(array, dtype):
    arr, code = _as_host_array(array, dtype)
    if not arr.size:
        raise InvalidArgumentError(
            f"cannot transfer an empty array: shape {arr.shape}; dimensions must be >= 1")
    return arr, code


def from_host_async(vslice, array, sharding=None, *, dtype=None, semantics="immutable"):
    """Starts a transfer of |array| into a new Buffer on |vslice| laid out
    with |sharding| (default replicated) and returns (buffer, host_done) at
    once. host_done (an Event) completes when the runtime no longer uses
    the array's memory:
      "copy"       copied before this returns (host_done is complete);
      "immutable"  copied later on the runtime's transfer thread; don't
                   write the array until host_done;
      "zero_copy"  the buffer uses the array's memory itself where the
                   backend can (the CPU backend; else as "immutable"):
                   host_done completes only once the buffer is released and
                   no work still reads it; don't write the array until then.
    The buffer becomes ready when its data is on the devices (wait on it,
    or pass it to a graph at once). |array| and |dtype| as in VSlice.put: an
    array that needs converting is copied first, and that copy is what the
    transfer uses."""
    options = _options(semantics)
    cvs = _vslice_handle(vslice)
    arr, code = _host_source(array, dtype)
    spec = ArraySpec(dtype_name(code), arr.shape, as_sharding(sharding))
    cspec = spec._new_c()
    data = ffi.from_buffer(arr)
    out = ffi.new("pw_buffer_t*")
    done = ffi.new("pw_event_t**")
    client = vslice.client
    box = client._box
    with box as ptr:
        check(lib.pw_buffer_from_host_async(ptr, cvs, cspec, data, arr.nbytes, options, out,
                                            done))
        box.live += 1
    _pin(done[0], arr, data)
    return _adopt_buffer(client, out.id, spec, vslice), Event._adopt(done[0])


def create_empty(vslice, spec):
    """A new Buffer of |spec| (an ArraySpec, or its text form such as
    "f32[8,4] split(0,all)") on |vslice| with no contents yet: not ready
    until fill_from_host fills it. Pass it to graphs at once; they run once
    it is filled. Released unfilled, its readiness (and whatever waits on
    it) fails with CancelledError."""
    if isinstance(spec, str):
        spec = ArraySpec.parse(spec)
    if not isinstance(spec, ArraySpec):
        raise TypeError(f"spec must be an ArraySpec or its text, not {type(spec).__name__}")
    cvs = _vslice_handle(vslice)
    cspec = spec._new_c()
    out = ffi.new("pw_buffer_t*")
    client = vslice.client
    box = client._box
    with box as ptr:
        check(lib.pw_buffer_create_empty(ptr, cvs, cspec, out))
        box.live += 1
    return _adopt_buffer(client, out.id, spec, vslice)


def fill_from_host(buffer, array, *, semantics="immutable"):
    """Fills |buffer| (made by create_empty; once) from |array|, which must
    have the buffer's shape (converted to its dtype if it needs to be), with
    |semantics| as from_host_async. Returns the host-done Event."""
    if not isinstance(buffer, Buffer):
        raise TypeError(f"expected a Buffer, not {type(buffer).__name__}")
    options = _options(semantics)
    spec = buffer.spec
    arr, _ = _host_source(array, spec.dtype_name)
    if tuple(arr.shape) != tuple(spec.shape):
        raise ValueError(f"fill_from_host: array of shape {arr.shape}, the buffer {spec} "
                         f"has shape {tuple(spec.shape)}")
    data = ffi.from_buffer(arr)
    done = ffi.new("pw_event_t**")
    ptr, h = buffer._enter()
    try:
        check(lib.pw_buffer_fill_from_host(ptr, h, data, arr.nbytes, options, done))
    finally:
        buffer._exit()
    _pin(done[0], arr, data)
    return Event._adopt(done[0])


class HostRead:
    """An asynchronous read of a buffer into host memory (to_host_async).

    event: the Event that completes once the array holds the buffer's value
    (or with the buffer's error). result(timeout) waits for it and returns
    the numpy array; ready, wait(timeout) and exception(timeout) as on an
    Event. The array is kept alive until the event completes even if this
    object is dropped; don't read or write it before."""

    __slots__ = ("event", "_array")

    def __init__(self, event, array):
        self.event = event
        self._array = array

    @property
    def ready(self):
        """True once the read completed (OK or not). Never blocks."""
        return self.event.ready

    def wait(self, timeout=None):
        """Blocks until the read completed; raises its error."""
        self.event.wait(timeout)
        return self

    def exception(self, timeout=None):
        """Waits, then returns the read's error (None if it succeeded)."""
        return self.event.exception(timeout)

    def result(self, timeout=None):
        """Waits (raising the buffer's error, or DeadlineExceededError after
        |timeout| seconds) and returns the array."""
        self.event.wait(timeout)
        return self._array

    def close(self):
        self.event.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<HostRead {self._array.dtype}{list(self._array.shape)} {self.event!r}>"


def to_host_async(buffer, out=None):
    """Starts copying |buffer|'s global array to host memory once the buffer
    is ready, on the runtime's transfer thread, and returns a HostRead at
    once. |out|: a C-contiguous numpy array of the buffer's dtype and shape
    to write into (default: a new one). The buffer may be released at once;
    the read keeps it."""
    if not isinstance(buffer, Buffer):
        raise TypeError(f"expected a Buffer, not {type(buffer).__name__}")
    spec = buffer.spec
    if out is None:
        out = np.empty(spec.shape, dtype=spec.dtype)
    elif (not isinstance(out, np.ndarray) or out.dtype != spec.dtype
          or tuple(out.shape) != tuple(spec.shape) or not out.flags.c_contiguous
          or not out.flags.writeable):
        raise ValueError(f"to_host_async: out must be a writable C-contiguous {spec.dtype} "
                         f"array of shape {tuple(spec.shape)}")
    dst = ffi.from_buffer(out, require_writable=True)
    done = ffi.new("pw_event_t**")
    ptr, h = buffer._enter()
    try:
        check(lib.pw_buffer_to_host_async(ptr, h, dst, len(dst), done))
    finally:
        buffer._exit()
    _pin(done[0], out, dst)
    return HostRead(Event._adopt(done[0]), out)
