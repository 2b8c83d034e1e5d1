"""Host-memory snapshots of buffers (include/pathways/snapshot.h): the
Snapshotter, what a take returns, and restores onto any virtual slice."""

import os
import time

from . import _lowlevel
from ._errors import FailedPreconditionError, check
from ._event import Event, WAIT_SLICE_S
from ._lifetime import CLOSE_TIMEOUT_S
from ._lowlevel import Closeable, ffi, in_callback, lib
from ._owned import OwnedBox
from ._types import ArraySpec, Sharding

_DEADLINE_EXCEEDED = lib.PW_STATUS_DEADLINE_EXCEEDED


def check_step(step, what="step"):
    if isinstance(step, bool) or not isinstance(step, int):
        raise TypeError(f"{what} must be an int, not {type(step).__name__}")
    if not 0 <= step < (1 << 64):
        raise ValueError(f"{what} must be in [0, 2**64), not {step}")
    return step


def new_dir_store(path, runtime):
    """A pw_store_t* (cdata) of a dir store at |path| (str or PathLike),
    created if missing. The caller hands it to C, which takes it over."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"store_dir must be a str or os.PathLike, not {type(path).__name__}")
    cpath = ffi.new("char[]", os.fsencode(path))
    opts = ffi.new("pw_dir_store_options_t*")
    lib.pw_dir_store_options_init(opts)
    opts.path = cpath
    runtime._set_logger(opts.logger, runtime._log_level)
    store = ffi.new("pw_store_t*")
    check(lib.pw_dir_store_create(opts, store))
    return store


def check_prefix(key_prefix):
    if key_prefix is None:
        return ffi.NULL
    if not isinstance(key_prefix, str):
        raise TypeError(f"key_prefix must be a str, not {type(key_prefix).__name__}")
    return ffi.new("char[]", key_prefix.encode("utf-8"))


def _count(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{what} must be >= 0, not {value}")
    return value


class SnapshotTake:
    """What Snapshotter.take returns: |copied| (an Event: the snapshot is
    complete in host memory, or failed) and |persisted| (an Event: written
    to the store, or why not; None without a store). wait(timeout) waits
    for both and raises the first error."""

    __slots__ = ("step", "copied", "persisted")

    def wait(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        self.copied.wait(timeout)
        if self.persisted is not None:
            self.persisted.wait(None if end is None else max(0.0, end - time.monotonic()))
        return self

    @property
    def ready(self):
        return self.copied.ready and (self.persisted is None or self.persisted.ready)

    def exception(self, timeout=None):
        """Waits, then returns the first error (None when it succeeded)."""
        err = self.copied.exception(timeout)
        if err is None and self.persisted is not None:
            err = self.persisted.exception(timeout)
        return err

    def close(self):
        self.copied.close()
        if self.persisted is not None:
            self.persisted.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<SnapshotTake step {self.step}: copied {self.copied!r}, persisted {self.persisted!r}>"


class Snapshotter(Closeable):
    """Host-memory snapshots of a client's buffers (pw_snapshotter_t).

        snaps = client.snapshotter(keep=2, store_dir=tmp)   # or Snapshotter(client, ...)
        snaps.take(step, [w, b], names=["w", "b"]).wait()
        w2 = snaps.restore(step, "w", other_vslice, sharding=pw.split(0))

    |keep|: complete snapshots held (0: 2). |store_dir|: a directory (made
    if missing) each snapshot is also persisted to, zstd-compressed with
    checksums; load_latest() reads the newest intact one back (after a
    restart). |key_prefix| separates several snapshotters in one store.
    |max_in_flight|, |compression_level|, |chunk_bytes|: see snapshot.h.

    Close it (close(), `with`, or garbage collection) before its client;
    closing the client (or the runtime) closes it first. Thread-safe."""

    __slots__ = ("client", "store_dir", "_life", "__weakref__")

    def __init__(self, client, keep=2, store_dir=None, key_prefix=None, *, max_in_flight=0,
                 compression_level=0, chunk_bytes=0):
        from ._runtime import Client
        self._life = None
        if not isinstance(client, Client):
            raise TypeError(f"expected a Client, not {type(client).__name__}")
        _lowlevel.flush_deferred()
        opts = ffi.new("pw_snapshotter_options_t*")
        lib.pw_snapshotter_options_init(opts)
        opts.keep = _count(keep, "keep")
        opts.max_in_flight = _count(max_in_flight, "max_in_flight")
        opts.chunk_bytes = _count(chunk_bytes, "chunk_bytes")
        if isinstance(compression_level, bool) or not isinstance(compression_level, int):
            raise TypeError("compression_level must be an int")
        opts.compression_level = compression_level
        prefix = check_prefix(key_prefix)
        opts.key_prefix = prefix
        runtime = client.runtime
        box = client._box
        out = ffi.new("pw_snapshotter_t**")
        with box as ptr:
            opts.allocator = runtime._host_mem.allocator
            runtime._set_logger(opts.logger, runtime._log_level)
            if store_dir is not None:
                opts.store = new_dir_store(store_dir, runtime)[0]
            # On failure C has destroyed the store.
            check(lib.pw_snapshotter_create(ptr, opts, out))
            self._life = OwnedBox(out[0], f"Snapshotter of client {client.name!r}", box,
                                  lib.pw_snapshotter_destroy, order=1)
        self.client = client
        self.store_dir = None if store_dir is None else os.fspath(store_dir)

    # -- guards

    def _enter(self):
        life = self._life
        if life is None:
            raise ValueError("operation on a Snapshotter that was never created")
        return life.using()

    @property
    def closed(self):
        return self._life is None or self._life.closing or self._life.ptr is None

    # -- taking

    def take(self, step, buffers, names=None):
        """Snapshots |buffers| (a Buffer or a sequence of this client's
        Buffers) as step |step|: returns at once (a SnapshotTake); the host
        copy runs on the snapshotter's thread, after each buffer is ready.
        The buffers may be released at once (the snapshot holds them).
        |names|: None or one str (or None) per buffer, for restore by name.
        AlreadyExistsError when |step| is held or being taken."""
        from ._objects import Buffer
        check_step(step)
        if isinstance(buffers, Buffer):
            buffers = [buffers]
        try:
            buffers = list(buffers)
        except TypeError:
            raise TypeError(f"buffers must be a Buffer or a sequence of Buffers, not "
                            f"{type(buffers).__name__}") from None
        if not buffers:
            raise ValueError("take: buffers is empty")
        cbufs = ffi.new("pw_buffer_t[]", len(buffers))
        for i, b in enumerate(buffers):
            if not isinstance(b, Buffer):
                raise TypeError(f"buffers[{i}] is {type(b).__name__}, not a Buffer")
            if b.client is not self.client:
                raise ValueError(f"buffers[{i}] belongs to client {b.client.name!r}, not "
                                 f"{self.client.name!r} (the snapshotter's)")
            if not b._id:
                raise ValueError(f"buffers[{i}] is released")
            cbufs[i].id = b._id
        cnames, keep = ffi.NULL, []
        if names is not None:
            names = list(names)
            if len(names) != len(buffers):
                raise ValueError(f"take: {len(names)} names for {len(buffers)} buffers")
            cnames = ffi.new("char*[]", len(names))
            for i, n in enumerate(names):
                if n is None:
                    continue
                if not isinstance(n, str):
                    raise TypeError(f"names[{i}] is {type(n).__name__}, not a str")
                keep.append(ffi.new("char[]", n.encode("utf-8")))
                cnames[i] = keep[-1]
        copied = ffi.new("pw_event_t**")
        persisted = ffi.new("pw_event_t**") if self.store_dir is not None else ffi.NULL
        with self._enter() as sptr, self.client._box.using("a Snapshotter") as _:
            check(lib.pw_snapshot_take(sptr, step, cbufs, ffi.cast("const char* const*", cnames),
                                       len(buffers), copied, persisted))
        t = SnapshotTake()
        t.step = step
        t.copied = Event._adopt(copied[0])
        t.persisted = Event._adopt(persisted[0]) if persisted != ffi.NULL else None
        return t

    def flush(self, timeout=None):
        """Blocks until every take made before the call has finished its
        host copy and persist (or failed); DeadlineExceededError after
        |timeout| seconds (None: no limit). Errors of the takes are their
        events', not raised here. Ctrl-C interrupts it."""
        end = None if timeout is None else time.monotonic() + max(0.0, timeout)
        while True:
            now = time.monotonic()
            left = WAIT_SLICE_S if end is None else min(WAIT_SLICE_S, end - now)
            deadline = lib.pw_clock_now() + int(max(0.0, left) * 1e9)
            with self._enter() as sptr:
                status = lib.pw_snapshotter_flush(sptr, deadline)
            if not status:
                return
            if lib.pw_status_code(status) != _DEADLINE_EXCEEDED or (
                    end is not None and time.monotonic() >= end):
                check(status)
            lib.pw_status_free(status)

    # -- what is held

    @property
    def latest_step(self):
        """The highest step held complete, or None."""
        out = ffi.new("uint64_t*")
        with self._enter() as sptr:
            status = lib.pw_snapshotter_latest_step(sptr, out)
        if status and lib.pw_status_code(status) == lib.PW_STATUS_NOT_FOUND:
            lib.pw_status_free(status)
            return None
        check(status)
        return out[0]

    @property
    def steps(self):
        """The steps held complete, ascending."""
        count = ffi.new("uint32_t*")
        with self._enter() as sptr:
            check(lib.pw_snapshotter_steps(sptr, ffi.NULL, 0, count))
            arr = ffi.new("uint64_t[]", max(1, count[0]))
            check(lib.pw_snapshotter_steps(sptr, arr, count[0], count))
        return [arr[i] for i in range(count[0])]

    def info(self, step):
        """The snapshot of |step| as a dict: step, buffer_count,
        total_bytes, wait_ns, copy_ns, persist_ns, stored_bytes, persisted,
        loaded, and buffers (each {"name", "spec", "bytes", "xxh64"}).
        NotFoundError naming the steps held."""
        check_step(step)
        c = ffi.new("pw_snapshot_info_t*")
        c.struct_size = ffi.sizeof("pw_snapshot_info_t")
        b = ffi.new("pw_snapshot_buffer_info_t*")
        bufs = []
        with self._enter() as sptr:
            check(lib.pw_snapshot_info(sptr, step, c))
            for i in range(c.buffer_count):
                b.struct_size = ffi.sizeof("pw_snapshot_buffer_info_t")
                check(lib.pw_snapshot_buffer_info(sptr, step, i, b))
                bufs.append({"name": ffi.string(b.name).decode("utf-8", "replace"),
                             "spec": ArraySpec._from_c(ffi.addressof(b, "spec")),
                             "bytes": b.bytes, "xxh64": b.xxh64})
        out = {k: getattr(c, k) for k in ("step", "buffer_count", "total_bytes", "wait_ns",
                                           "copy_ns", "persist_ns", "stored_bytes")}
        out["persisted"] = bool(c.persisted)
        out["loaded"] = bool(c.loaded)
        out["buffers"] = bufs
        return out

    def _index(self, sptr, step, key):
        if isinstance(key, str):
            out = ffi.new("uint32_t*")
            check(lib.pw_snapshot_find_buffer(sptr, step, key.encode("utf-8"), out))
            return out[0]
        if isinstance(key, bool) or not isinstance(key, int):
            raise TypeError(f"a snapshot buffer is named by an int index or a str name, not "
                            f"{type(key).__name__}")
        if key < 0:
            raise ValueError(f"buffer index must be >= 0, not {key}")
        return key

    def _spec_for(self, sptr, step, index, spec, sharding):
        if spec is not None and sharding is not None:
            raise ValueError("pass spec or sharding, not both")
        if spec is not None:
            if not isinstance(spec, (ArraySpec, str)):
                raise TypeError(f"spec must be an ArraySpec or its text, not "
                                f"{type(spec).__name__}")
            return ArraySpec.parse(spec)
        if sharding is not None:
            if not isinstance(sharding, (Sharding, str)):
                raise TypeError(f"sharding must be a Sharding or its text, not "
                                f"{type(sharding).__name__}")
            b = ffi.new("pw_snapshot_buffer_info_t*")
            b.struct_size = ffi.sizeof("pw_snapshot_buffer_info_t")
            check(lib.pw_snapshot_buffer_info(sptr, step, index, b))
            base = ArraySpec._from_c(ffi.addressof(b, "spec"))
            return ArraySpec(base.dtype, base.shape, Sharding.parse(sharding))
        return None

    # -- restoring

    def restore(self, step, buffer, vslice, spec=None, *, sharding=None):
        """A new Buffer on |vslice| (of any client) holding buffer |buffer|
        (index or name) of the snapshot of |step|, laid out by |spec| (the
        snapshot's dtype and shape; default: as taken) or with |sharding|
        (the snapshot's dtype and shape, another sharding): a different
        mesh, fewer slices. The bytes are copied before it returns."""
        from ._objects import _adopt_buffer, _vslice_handle
        check_step(step)
        cvs = _vslice_handle(vslice)
        client = vslice.client
        out = ffi.new("pw_buffer_t*")
        box = client._box
        with self._enter() as sptr, box.using("a VSlice") as cptr:
            index = self._index(sptr, step, buffer)
            s = self._spec_for(sptr, step, index, spec, sharding)
            cspec = ffi.NULL if s is None else s._new_c(vslice.mesh)
            check(lib.pw_snapshot_restore(sptr, step, index, cptr, cvs, cspec, out))
            box.live += 1
        return _adopt_buffer(client, out.id, s, vslice)

    def restore_all(self, step, vslice, specs=None, *, sharding=None):
        """Every buffer of the snapshot of |step| onto |vslice|, in order
        (a list of Buffers); |specs|: None or one spec per buffer;
        |sharding|: one sharding for all. All or nothing."""
        from ._objects import _adopt_buffer, _vslice_handle
        check_step(step)
        cvs = _vslice_handle(vslice)
        client = vslice.client
        box = client._box
        with self._enter() as sptr, box.using("a VSlice") as cptr:
            c = ffi.new("pw_snapshot_info_t*")
            c.struct_size = ffi.sizeof("pw_snapshot_info_t")
            check(lib.pw_snapshot_info(sptr, step, c))
            n = c.buffer_count
            if specs is not None and sharding is not None:
                raise ValueError("pass specs or sharding, not both")
            pyspecs = [None] * n
            cspecs = ffi.NULL
            if specs is not None:
                specs = list(specs)
                if len(specs) != n:
                    raise ValueError(f"restore_all: {len(specs)} specs for the {n} buffers of "
                                     f"the snapshot of step {step}")
                pyspecs = [self._spec_for(sptr, step, i, s, None) for i, s in enumerate(specs)]
            elif sharding is not None:
                pyspecs = [self._spec_for(sptr, step, i, None, sharding) for i in range(n)]
            if pyspecs[0] is not None:
                cspecs = ffi.new("pw_array_spec_t[]", n)
                for i, s in enumerate(pyspecs):
                    cspecs[i] = s._new_c(vslice.mesh)[0]
            outs = ffi.new("pw_buffer_t[]", n)
            check(lib.pw_snapshot_restore_all(sptr, step, cptr, cvs, cspecs, n, outs))
            box.live += n
        return [_adopt_buffer(client, outs[i].id, pyspecs[i], vslice) for i in range(n)]

    def load_latest(self):
        """Reads the newest intact snapshot of this prefix from the store
        into memory and returns its step; a torn or corrupt one is logged
        and skipped. FailedPreconditionError without a store, NotFoundError
        when none is intact."""
        out = ffi.new("uint64_t*")
        with self._enter() as sptr:
            check(lib.pw_snapshotter_load_latest(sptr, out))
        return out[0]

    # -- lifetime

    def close(self, timeout=CLOSE_TIMEOUT_S):
        """Stops it: takes still waiting for their buffers fail with
        CancelledError, copies in progress finish, queued persists are
        written; then frees every snapshot. Idempotent, thread-safe (waits
        for calls in flight, RuntimeError after |timeout|). Not from inside
        a callback (FailedPreconditionError)."""
        life = self._life
        if life is None or life.ptr is None:
            return
        if in_callback():
            raise FailedPreconditionError(
                "cannot close a Snapshotter from inside a pathways callback")
        life.close(timeout)

    def __repr__(self):
        if self.closed:
            return "<Snapshotter closed>"
        try:
            steps = self.steps
        except ValueError:
            return "<Snapshotter closing>"
        store = f", store {self.store_dir!r}" if self.store_dir else ""
        return f"<Snapshotter of client {self.client.name!r}: steps {steps}{store}>"
