"""Buffers (logical sharded arrays, numpy interop) and executables."""

import numpy as np

from . import _lowlevel
from ._handle import ClientHandle
from ._errors import InvalidArgumentError, check, take_error
from ._event import Event, event_error, wait_event_ptr
from ._lowlevel import IMMEDIATE_PAST, ffi, lib
from ._types import (NUMPY_NAMES, VIEW_DTYPES, ArraySpec, as_sharding, dtype_code, dtype_name,
                     mesh_from_c, mesh_text, numpy_dtype, program_bytes)


def _vslice_handle(vslice):
    from ._runtime import VSlice
    if not isinstance(vslice, VSlice):
        raise TypeError(f"expected a VSlice, not {type(vslice).__name__}")
    return vslice._handle()


def _as_host_array(array, dtype):
    """(array, C dtype): a C-contiguous numpy array of a pathways dtype for
    |array| (anything numpy accepts, or any object with the buffer
    protocol): |array| itself when it already is one (no copy), a converted
    copy otherwise. bf16 and the f8 types (VIEW_DTYPES) are never converted
    to: their array must hold the bit patterns (uint16 / uint8, or an
    ml_dtypes array of that type), which are viewed, not copied."""
    if not isinstance(array, np.ndarray):
        try:
            array = np.asarray(memoryview(array))
        except TypeError:
            array = np.asarray(array)
    if dtype is None and not array.dtype.isnative:
        dtype = array.dtype.newbyteorder("=")  # same type, native byte order
    code = dtype_code(array.dtype if dtype is None else dtype)  # TypeError lists the dtypes
    want = numpy_dtype(code)
    if dtype_name(code) in VIEW_DTYPES:
        if array.dtype.name == NUMPY_NAMES[dtype_name(code)] and array.dtype.isnative:
            array = array.view(want)  # an ml_dtypes array: the same bits
        elif array.dtype != want:
            raise TypeError(
                f"dtype {dtype_name(code)} ({NUMPY_NAMES[dtype_name(code)]}) is held as {want} "
                f"bit patterns: pass a {want} array of them (or an ml_dtypes array), "
                f"not {array.dtype}")
    elif array.dtype != want:
        array = array.astype(want)
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    return array, code


class Buffer(ClientHandle):
    """A logical sharded array on a virtual slice: one object however many
    device shards it has, and its own future (ready, wait(), event).

    Make one from host data with VSlice.put(array, sharding) (or
    Buffer.from_array); graph submissions return others at once, which
    become ready when the op that writes them completes.

    numpy: np.asarray(buf) / buf.numpy() copy the global array out (waiting
    for it); buf.to_numpy(out=arr) / buf.to_host(obj) write into memory you
    provide (any writable buffer-protocol object), with no intermediate
    copy; bytes(buf) gives the raw bytes.
    """

    _RELEASE = "pw_buffer_release"
    _HANDLE_ATTR = "_id"

    __slots__ = ("client", "_id", "_spec", "vslice", "__weakref__")

    @classmethod
    def from_array(cls, client, vslice, array, sharding=None, *, dtype=None):
        """Copies |array| (numpy array, nested lists, any buffer-protocol
        object) into a new buffer laid out with |sharding| (default
        replicated) over |vslice|. A C-contiguous array of a supported dtype
        is read in place; anything else is converted first (one copy).
        |dtype| converts to that dtype."""
        cvs = _vslice_handle(vslice)
        arr, code = _as_host_array(array, dtype)
        if not arr.size:
            zero = arr.shape.index(0)
            raise InvalidArgumentError(
                f"cannot make a buffer of an empty array: shape {arr.shape}, dimension "
                f"{zero} is 0; dimensions must be >= 1")
        spec = ArraySpec(dtype_name(code), arr.shape, as_sharding(sharding))
        out = ffi.new("pw_buffer_t*")
        data = ffi.from_buffer(arr)
        cspec = spec._new_c(vslice.mesh)
        box = client._box
        with box as ptr:
            check(lib.pw_buffer_from_host(ptr, cvs, cspec, data, arr.nbytes, out))
            box.live += 1
        return _adopt_buffer(client, out.id, spec, vslice)

    # -- identity and metadata

    def _enter(self):
        """Enters the client's guard for a call on this buffer: the C
        client and the handle; the caller exits the guard (self._exit())."""
        bid = self._id
        if not bid:
            raise ValueError("operation on a released Buffer")
        return self.client._box.enter("a Buffer"), (bid,)

    def _exit(self):
        self.client._box.exit()

    @property
    def id(self):
        """The 64-bit C handle id (0 once released)."""
        return self._id

    @property
    def spec(self):
        """ArraySpec: dtype, global shape, sharding."""
        spec = self._spec
        if spec is None:
            cspec = ffi.new("pw_array_spec_t*")
            ptr, h = self._enter()
            try:
                check(lib.pw_buffer_spec(ptr, h, cspec))
            finally:
                self._exit()
            mesh = self.vslice.mesh if self.vslice is not None else None
            spec = self._spec = ArraySpec._from_c(cspec, mesh)
        return spec

    @property
    def dtype(self):
        return self.spec.dtype

    @property
    def shape(self):
        return self.spec.shape

    @property
    def sharding(self):
        return self.spec.sharding

    @property
    def ndim(self):
        return len(self.spec.shape)

    @property
    def size(self):
        return self.spec.size

    @property
    def nbytes(self):
        return self.spec.nbytes

    # -- readiness

    @property
    def event(self):
        """A new Event for the buffer's readiness (close it when done). It
        stays valid after the client and the runtime are closed."""
        return Event._adopt(self._ready_event())

    def _ready_event(self):
        out = ffi.new("pw_event_t**")
        ptr, h = self._enter()
        try:
            check(lib.pw_buffer_ready_event(ptr, h, out))
        finally:
            self._exit()
        return out[0]

    def _wait(self, timeout):
        # The wait holds a reference to the event, not the client's guard:
        # it never holds a close up (which completes the event).
        ev = self._ready_event()
        try:
            if not lib.pw_event_is_ready(ev):
                wait_event_ptr(ev, timeout)
            else:
                status = lib.pw_event_wait(ev, IMMEDIATE_PAST)
                if status:
                    raise take_error(status)
        finally:
            lib.pw_event_release(ev)

    @property
    def ready(self):
        """True once the buffer's value (or its error) is there."""
        with self.event as ev:
            return ev.ready

    def wait(self, timeout=None):
        """Blocks until ready; raises the producing op's error, or
        DeadlineExceededError after |timeout| seconds. Interruptible."""
        self._wait(timeout)
        return self

    def exception(self, timeout=None):
        """Waits, then returns the buffer's error (None if it holds a value)."""
        with self.event as ev:
            return ev.exception(timeout)

    # -- host copies

    def to_host(self, out, timeout=None):
        """Waits for the buffer, then copies the whole global array (row
        major) into |out|: any writable object with the buffer protocol of
        exactly nbytes bytes (bytearray, memoryview, numpy array, ...).
        Returns |out|."""
        self._wait(timeout)
        dst = ffi.from_buffer(out, require_writable=True)
        if len(dst) != self.nbytes:
            raise ValueError(f"to_host: destination holds {len(dst)} bytes, the buffer "
                             f"{self.spec} has {self.nbytes}")
        ptr, h = self._enter()
        try:
            check(lib.pw_buffer_to_host(ptr, h, dst, len(dst), IMMEDIATE_PAST))
        finally:
            self._exit()
        return out

    def to_numpy(self, out=None, timeout=None):
        """The global array as numpy: into |out| if given (C-contiguous, the
        buffer's dtype and shape, written in place), else a new array."""
        spec = self.spec
        if out is None:
            out = np.empty(spec.shape, dtype=spec.dtype)
        elif (not isinstance(out, np.ndarray) or out.dtype != spec.dtype
              or out.shape != spec.shape or not out.flags.c_contiguous):
            raise ValueError(f"to_numpy: out must be a C-contiguous {spec.dtype} array of "
                             f"shape {spec.shape}")
        self.to_host(out, timeout)
        return out

    def numpy(self, timeout=None):
        """A new numpy array holding the buffer's value (waits for it)."""
        return self.to_numpy(None, timeout)

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def fill_from_host(self, array, *, semantics="immutable"):
        """Fills this buffer (made by pathways.create_empty) from |array|;
        returns the host-done Event (see pathways.fill_from_host)."""
        from ._host_async import fill_from_host
        return fill_from_host(self, array, semantics=semantics)

    def to_host_async(self, out=None):
        """Starts an asynchronous copy to host memory and returns a HostRead
        at once (see pathways.to_host_async)."""
        from ._host_async import to_host_async
        return to_host_async(self, out)

    def tobytes(self, timeout=None):
        """The raw bytes of the global array (row major, native order)."""
        return bytes(self.to_host(bytearray(self.nbytes), timeout))

    def __bytes__(self):
        return self.tobytes()

    def __buffer__(self, flags):  # Python >= 3.12 (PEP 688): a host copy
        return memoryview(self.numpy())

    def __repr__(self):
        where = f" on {mesh_text(self.vslice.mesh)}" if self.vslice is not None else ""
        if not self._id:
            return f"<Buffer{where} released>"
        if self.client.closed:
            return f"<Buffer{where} of closed client>"
        try:
            spec = self.spec
            with self.event as ev:
                if not ev.ready:
                    state = "pending"
                else:
                    err = event_error(ev._ptr)
                    state = "ready" if err is None else f"failed: {type(err).__name__}: {err}"
        except Exception as e:  # repr must not raise
            return f"<Buffer{where} id={self._id:#x} ({type(e).__name__}: {e})>"
        return f"<Buffer {spec}{where}, {state}>"


def _adopt_buffer(client, bid, spec, vslice):
    """Wraps a buffer handle the caller just created (counted already)."""
    b = object.__new__(Buffer)
    b.client = client
    b._id = bid
    b._spec = spec
    b.vslice = vslice
    return b


class Executable(ClientHandle):
    """A compiled function for a mesh: VSlice.compile(program) compiles it
    with the slice's backend, VSlice.load(bytes) loads compiled bytes.
    signature / inputs / outputs describe what it computes."""

    _RELEASE = "pw_executable_release"
    _HANDLE_ATTR = "_id"

    __slots__ = ("client", "_id", "vslice", "_sig", "__weakref__")

    def _mesh(self):
        """The vslice's mesh (its names label the signature's shardings)."""
        return self.vslice.mesh if getattr(self, "vslice", None) is not None else None

    @classmethod
    def compile(cls, client, vslice, program):
        cvs = _vslice_handle(vslice)
        text = program_bytes(program)
        out = ffi.new("pw_executable_t*")
        box = client._box
        with box as ptr:
            check(lib.pw_executable_compile(ptr, cvs, text, len(text), ffi.NULL, out))
            box.live += 1
        return cls._adopt(client, out.id, vslice)

    @classmethod
    def load(cls, client, vslice, data):
        cvs = _vslice_handle(vslice)
        src = ffi.from_buffer(data)
        out = ffi.new("pw_executable_t*")
        box = client._box
        with box as ptr:
            check(lib.pw_executable_load(ptr, cvs, src, len(src), out))
            box.live += 1
        return cls._adopt(client, out.id, vslice)

    @classmethod
    def _adopt(cls, client, eid, vslice):
        """Wraps a handle the caller just created (counted already)."""
        e = object.__new__(cls)
        e.client = client
        e._id = eid
        e.vslice = vslice
        e._sig = None
        return e

    def _enter(self):
        """Enters the client's guard: the C client and the handle; the
        caller exits it (self.client._box.exit())."""
        eid = self._id
        if not eid:
            raise ValueError("operation on a released Executable")
        return self.client._box.enter("an Executable"), (eid,)

    @property
    def id(self):
        return self._id

    def _signature(self):
        sig = self._sig
        if sig is None:
            c = ffi.new("pw_executable_signature_t*")
            c.struct_size = ffi.sizeof("pw_executable_signature_t")
            ptr, h = self._enter()
            try:  # the signature's views live as long as the handle
                check(lib.pw_executable_signature(ptr, h, c))
                sig = self._sig = (
                    ffi.string(c.name).decode(),
                    mesh_from_c(c.mesh),
                    # v2 views: every spec (past PW_BACKEND_MAX_PARAMS too),
                    # runtime storage valid while the handle lives.
                    tuple(ArraySpec._from_c(c.input_specs[i], self._mesh())
                          for i in range(c.input_count)),
                    tuple(ArraySpec._from_c(c.output_specs[i], self._mesh())
                          for i in range(c.output_count)),
                )
            finally:
                self.client._box.exit()
        return sig

    @property
    def name(self):
        """The kernel/function name."""
        return self._signature()[0]

    @property
    def mesh(self):
        """The mesh shape it was compiled for."""
        return self._signature()[1]

    @property
    def inputs(self):
        """Parameter specs (global view), a tuple of ArraySpec."""
        return self._signature()[2]

    @property
    def outputs(self):
        """Result specs, a tuple of ArraySpec."""
        return self._signature()[3]

    @property
    def signature(self):
        name, mesh, ins, outs = self._signature()
        return (f"{name}({', '.join(map(str, ins))}) -> "
                f"{', '.join(map(str, outs)) if len(outs) == 1 else '(' + ', '.join(map(str, outs)) + ')'}"
                f" for {mesh_text(mesh)}")

    @property
    def hash(self):
        """The content hash (32 hex digits) by which graph files name this
        executable (Graph.encode(executables_by_hash=True))."""
        h = ffi.new("pw_graph_hash_t*")
        ptr, handle = self._enter()
        try:
            check(lib.pw_graph_executable_hash(ptr, handle, h))
        finally:
            self.client._box.exit()
        out = ffi.new("char[33]")
        lib.pw_graph_hash_format(h, out)
        return ffi.string(out).decode()

    def bytes(self):
        """The compiled bytes (cacheable, loadable with VSlice.load)."""
        data = ffi.new("void**")
        size = ffi.new("size_t*")
        ptr, h = self._enter()
        try:  # the bytes live as long as the handle: copied inside the guard
            check(lib.pw_executable_bytes(ptr, h, ffi.cast("const void**", data), size))
            return bytes(ffi.buffer(data[0], size[0]))
        finally:
            self.client._box.exit()

    def __repr__(self):
        if not self._id or self.client.closed:
            return "<Executable released>"
        try:
            return f"<Executable {self.signature}>"
        except ValueError:  # released or closed meanwhile
            return "<Executable released>"
