"""Runtime (the controller and its backends), physical slices, clients and
virtual slices."""

import atexit
import logging
import weakref
from typing import Callable, List, Optional, Sequence, Union

from . import _lowlevel
from ._handle import ClientHandle
from ._errors import FailedPreconditionError, check
from ._lifetime import CLOSE_TIMEOUT_S, Lifetime
from ._backends import Backend, CpuBackend, SimBackend, as_backends
from ._cache import CompileCache
from ._lowlevel import Closeable, CALLBACK_SCOPE, ffi, in_callback, lib
from . import _metrics
from ._metrics import MetricsServer
from ._trace import Trace, dump_lines
from ._types import fill_mesh, mesh_from_c, mesh_text, mesh_tuple

_HEALTH_NAMES = {
    lib.PW_DEVICE_HEALTHY: "healthy",
    lib.PW_DEVICE_DEGRADED: "degraded",
    lib.PW_DEVICE_FAILED: "failed",
}
_HEALTH_CODES = {v: k for k, v in _HEALTH_NAMES.items()}
_LOG_LEVELS = {"debug": lib.PW_LOG_DEBUG, "info": lib.PW_LOG_INFO, "warn": lib.PW_LOG_WARN,
               "warning": lib.PW_LOG_WARN, "error": lib.PW_LOG_ERROR, "off": lib.PW_LOG_OFF}
_PY_LOG_LEVELS = {lib.PW_LOG_DEBUG: logging.DEBUG, lib.PW_LOG_INFO: logging.INFO,
                  lib.PW_LOG_WARN: logging.WARNING, lib.PW_LOG_ERROR: logging.ERROR}

# Runtimes alive in this process: closed at interpreter exit, before the
# interpreter can no longer run the callbacks their pool threads make.
_live_runtimes = weakref.WeakSet()


@atexit.register
def _close_all_runtimes():
    for rt in list(_live_runtimes):
        try:
            rt.close()
        except Exception:  # pragma: no cover
            pass


def _cstr(text):
    return ffi.string(text).decode("utf-8", "replace")


def _health_code(health):
    if isinstance(health, str):
        try:
            return _HEALTH_CODES[health]
        except KeyError:
            raise ValueError(f"health must be one of {sorted(_HEALTH_CODES)}, not {health!r}") from None
    return int(health)


# ---- logging -------------------------------------------------------------------


class _Logger:
    __slots__ = ("fn", "handle")

    def __init__(self, fn):
        self.fn = fn
        self.handle = ffi.new_handle(self)


@ffi.def_extern()
def pwpy_log(level, subsystem, message, user):
    with CALLBACK_SCOPE:
        try:
            logger = ffi.from_handle(user)
            logger.fn(_cstr(lib.pw_log_level_string(level)), _cstr(subsystem), _cstr(message))
        except BaseException:
            from ._event import report_callback_error
            report_callback_error("log callback")


def _python_logging(level, subsystem, message):
    logging.getLogger("pathways." + subsystem).log(
        _PY_LOG_LEVELS.get(_LOG_LEVELS.get(level, lib.PW_LOG_ERROR), logging.ERROR), "%s", message)


# ---- memory statistics -------------------------------------------------------


class _Counter:
    """A C counting allocator; freed only after everything using it."""

    __slots__ = ("ptr", "allocator")

    def __init__(self):
        self.ptr = lib.pwpy_counting_allocator_create()
        if self.ptr == ffi.NULL:
            raise MemoryError("cannot allocate a counting allocator")
        self.allocator = lib.pwpy_counting_allocator_get(self.ptr)

    def stats(self):
        s = ffi.new("pwpy_memory_stats_t*")
        lib.pwpy_counting_allocator_stats(self.ptr, s)
        return {k: getattr(s, k) for k in ("live_blocks", "live_bytes", "peak_bytes",
                                           "allocations", "failed_allocations",
                                           "mismatched_frees")}

    def destroy(self):
        ptr, self.ptr = self.ptr, None
        if ptr is not None:
            lib.pwpy_counting_allocator_destroy(ptr)


# ---- Runtime -------------------------------------------------------------------


def _slice_descs(slices):
    """Normalises the |slices| argument into [(name, mesh, host, backend,
    first_device)] (backend and first_device None when not given)."""
    if isinstance(slices, (str, int, dict, tuple)):
        slices = [slices]
    out = []
    for i, s in enumerate(slices):
        if isinstance(s, dict):
            extra = set(s) - {"name", "mesh", "host", "backend", "first_device"}
            if extra:
                raise TypeError(f"slices[{i}]: unknown keys {sorted(extra)}")
            if "mesh" not in s:
                raise TypeError(f"slices[{i}]: a slice needs a 'mesh'")
            first = s.get("first_device")
            if first is not None and (isinstance(first, bool) or not isinstance(first, int)
                                      or first < 0):
                raise TypeError(f"slices[{i}]: first_device must be an int >= 0, not {first!r}")
            out.append((s.get("name") or f"slice{i}", mesh_tuple(s["mesh"]),
                        int(s.get("host", 0)), s.get("backend"), first))
        else:
            out.append((f"slice{i}", mesh_tuple(s), 0, None, None))
    if not out:
        raise ValueError("a runtime needs at least one slice")
    return out


def _backend_index(key, backends, i):
    """Which of |backends| slice |i| names (None: the first one)."""
    if key is None:
        return 0
    if isinstance(key, Backend):
        for k, b in enumerate(backends):
            if b is key:
                return k
        raise ValueError(f"slices[{i}]: its backend is not in the runtime's backends")
    if isinstance(key, str):
        kinds = [k for k, b in enumerate(backends) if b.kind == key]
        if len(kinds) != 1:
            raise ValueError(f"slices[{i}]: backend {key!r} names {len(kinds)} of the "
                             f"runtime's backends ({[b.kind for b in backends]}); use an index")
        return kinds[0]
    if isinstance(key, bool) or not isinstance(key, int):
        raise TypeError(f"slices[{i}]: backend must be an index, a kind or a Backend, "
                        f"not {type(key).__name__}")
    if not 0 <= key < len(backends):
        raise ValueError(f"slices[{i}]: backend {key} out of range (the runtime has "
                         f"{len(backends)})")
    return key


_SCHED_POLICIES = {"fifo": "pw_sched_policy_fifo", "priority": "pw_sched_policy_priority",
                   "fair_share": "pw_sched_policy_fair_share"}


class Runtime(Closeable):
    """The controller: device backends whose devices are laid out as
    physical slices, and the clients (jobs) that share them.

        rt = Runtime("2x4")                                   # one 2x4 CPU slice
        rt = Runtime([{"name": "a", "mesh": "2x4"}, "8", (1,)])
        sim = SimBackend(mode="manual")
        rt = Runtime([{"mesh": "4", "backend": 0}, {"mesh": "8", "backend": "sim"}],
                     backends=[CpuBackend(), sim])

    |slices|: one slice or a list; each a mesh ("2x4", 8, (2, 4)) or a dict
    {name, mesh, host, backend, first_device}: |backend| an index into
    |backends|, a kind ("cpu", "sim") or the Backend object (default: the
    first); |first_device| the backend ordinal of its mesh index 0
    (default: after the previous slices on that backend).

    |backends|: Backend objects (CpuBackend, SimBackend), one or a list;
    None: one CpuBackend(workers=|workers|, device_memory=|device_memory|)
    (pool threads, on which Python kernels run; per-device memory cap in
    bytes). Each backend object serves one runtime, which owns it from
    then on (Runtime.backends; SimBackend's stepping and failure injection
    work while the runtime is open).

    Scheduling (include/pathways/scheduler.h): |sched_policy| "fifo"
    (default), "priority" (Client priority, highest first) or "fair_share"
    (Client weight, over measured device time) picks which client's op
    enters a slice's sequence when an admission slot frees up;
    |sched_window| ops of a slice may be admitted and unfinished at a time
    (0: unlimited: ops enter as submitted and the policy is not asked).

    |compile_cache|: a CompileCache every compile of this runtime goes
    through (also set_compile_cache()).

    |runtime_workers| host threads parallelise large host transfers.
    |logger|: None (silent unless PW_LOG is set), True (Python `logging`,
    logger "pathways.<subsystem>"), or a callable(level, subsystem, message)
    called from any thread; |log_level| filters before formatting.
    Failure (include/pathways/runtime.h, "Failure"), in seconds, None for
    the library's default: |health_poll| (poll device health this often;
    None: only on failed launches and check_health()), |launch_deadline|
    (a launch not done by then fails), |deadline_loses_slice| (such a miss
    also loses the slice), |loss_grace| (how long a lost slice's launches
    may take to fail before the runtime fails them).

    Close it (close(), `with`, or garbage collection) after its clients;
    closing destroys any client still open. Runtimes left open are closed at
    interpreter exit. Thread-safe: close() waits for the calls other threads
    are making on the runtime and its clients (see close()).
    """

    def __init__(self, slices: Union[str, int, tuple, dict, Sequence] = "2x4", *,
                 backends: Union[None, Backend, Sequence[Backend]] = None, workers: int = 2,
                 device_memory: Optional[int] = None, runtime_workers: int = 0,
                 logger: Union[None, bool, Callable[[str, str, str], None]] = None,
                 log_level: str = "warn", health_poll: Optional[float] = None,
                 launch_deadline: Optional[float] = None, deadline_loses_slice: bool = False,
                 loss_grace: Optional[float] = None, sched_policy: Optional[str] = None,
                 sched_window: int = 0, compile_cache: Optional["CompileCache"] = None):
        _lowlevel.flush_deferred()
        failure = {"health_poll": _ns(health_poll, "health_poll"),
                   "launch_deadline": _ns(launch_deadline, "launch_deadline"),
                   "loss_grace": _ns(loss_grace, "loss_grace")}
        if not isinstance(deadline_loses_slice, bool):
            raise TypeError(f"deadline_loses_slice must be a bool, not "
                            f"{type(deadline_loses_slice).__name__}")
        if sched_policy is not None and sched_policy not in _SCHED_POLICIES:
            raise ValueError(f"sched_policy must be one of {sorted(_SCHED_POLICIES)} or None, "
                             f"not {sched_policy!r}")
        if isinstance(sched_window, bool) or not isinstance(sched_window, int) \
                or not 0 <= sched_window < (1 << 32):
            raise TypeError(f"sched_window must be an int >= 0, not {sched_window!r}")
        if compile_cache is not None and not isinstance(compile_cache, CompileCache):
            raise TypeError(f"compile_cache must be a CompileCache, not "
                            f"{type(compile_cache).__name__}")
        self._life = Lifetime(None, "Runtime")
        self._clients = {}   # id(box) -> _ClientBox, for close()
        self._kernels = []   # keep-alive of Python kernels (their handles)
        self._caches = []    # C caches this runtime borrowed (released after it)
        self._cache = None
        descs = _slice_descs(slices)
        blist = as_backends(backends)
        if not blist:
            blist = [CpuBackend(workers=workers, device_memory=device_memory)]
        elif workers != 2 or device_memory is not None:
            raise TypeError("workers and device_memory are CpuBackend options; with "
                            "backends=, give them to CpuBackend(...)")
        if len(set(map(id, blist))) != len(blist):
            raise ValueError("the same backend object is listed twice in backends")
        for b in blist:
            if b._rt is not None:
                raise ValueError(f"this {type(b).__name__} already belongs to a runtime; "
                                 "make one backend object per Runtime")
        # Lay the slices out on their backends.
        layout = []                      # (name, mesh, host, backend, first)
        next_free = [0] * len(blist)
        needed = [0] * len(blist)
        first_slice = [None] * len(blist)
        for i, (name, mesh, host, bkey, first) in enumerate(descs):
            b = _backend_index(bkey, blist, i)
            n = _device_count(mesh)
            if first is None:
                first = next_free[b]
            next_free[b] = first + n
            needed[b] = max(needed[b], first + n)
            if first_slice[b] is None:
                first_slice[b] = n
            layout.append((name, mesh, host, b, first))
        self._slice_backends = [b for _, _, _, b, _ in layout]
        self._logger = None
        if logger is not None and logger is not False:
            if log_level not in _LOG_LEVELS:
                raise ValueError(f"log_level must be one of {sorted(_LOG_LEVELS)}")
            self._logger = _Logger(_python_logging if logger is True else logger)
        self._log_level = log_level
        self._host_mem = _Counter()
        self._device_mem = _Counter()

        keep = []
        cslices = ffi.new("pw_slice_desc_t[]", len(layout))
        for i, (name, mesh, host, b, first) in enumerate(layout):
            cname = ffi.new("char[]", name.encode())
            keep.append(cname)
            cslices[i].name = cname
            fill_mesh(cslices[i].mesh, mesh)
            cslices[i].backend = b
            cslices[i].first_device = first
            cslices[i].host = host
        cbackends = ffi.new("pw_backend_t[]", len(blist))
        set_logger = lambda clogger: self._set_logger(clogger, log_level)  # noqa: E731
        for k, b in enumerate(blist):
            try:
                if isinstance(b, SimBackend):
                    cbackends[k] = b._create(self._device_mem.allocator, set_logger, needed[k],
                                             first_slice[k])
                else:
                    cbackends[k] = b._create(self._device_mem.allocator, set_logger, needed[k])
            except BaseException:
                for j in range(k):  # not handed to a runtime yet: ours to destroy
                    lib.pwpy_backend_destroy(cbackends[j])
                    blist[j]._c = None
                self._host_mem.destroy()
                self._device_mem.destroy()
                raise
        for k, b in enumerate(blist):
            b._bind(self, k)
        self._backends = blist

        opts = ffi.new("pw_runtime_options_t*")
        opts.struct_size = ffi.sizeof("pw_runtime_options_t")
        opts.allocator = self._host_mem.allocator
        self._set_logger(opts.logger, log_level)
        opts.worker_count = runtime_workers
        opts.backends = cbackends
        opts.backend_count = len(blist)
        opts.slices = cslices
        opts.slice_count = len(layout)
        if sched_policy is not None:
            opts.sched_policy = getattr(lib, _SCHED_POLICIES[sched_policy])()
        opts.sched_window = sched_window
        opts.health_poll_ns = failure["health_poll"]
        opts.launch_deadline_ns = failure["launch_deadline"]
        opts.loss_grace_ns = failure["loss_grace"]
        opts.deadline_loses_slice = deadline_loses_slice
        out = ffi.new("pw_runtime_t**")
        # On failure the runtime has destroyed the backends.
        status = lib.pw_runtime_create(opts, out)
        if status:
            for b in blist:
                b._c = None
                b.runtime = None
            self._host_mem.destroy()
            self._device_mem.destroy()
            check(status)
        self._life.ptr = out[0]
        self._sched = (sched_policy or "fifo", sched_window)
        _live_runtimes.add(self)
        if compile_cache is not None:
            self.set_compile_cache(compile_cache)

    def _set_logger(self, clogger, level):
        if self._logger is None:
            clogger.fn = ffi.NULL  # zero logger: the PW_LOG default
            return
        clogger.fn = lib.pwpy_log
        clogger.user = self._logger.handle
        clogger.min_level = _LOG_LEVELS[level]

    @property
    def _ptr(self):
        """The C runtime (None once closed). Only for tests: calls pass it
        to C inside `with self._life as ptr:`."""
        return self._life.ptr

    @property
    def closed(self):
        return self._life.ptr is None

    # -- topology

    @property
    def slices(self):
        """The physical slices (Slice objects, live views)."""
        with self._life as ptr:
            n = lib.pw_runtime_slice_count(ptr)
        return [Slice(self, i) for i in range(n)]

    def slice(self, key):
        """A physical slice by index or name."""
        if isinstance(key, str):
            for s in self.slices:
                if s.name == key:
                    return s
            raise KeyError(f"no slice named {key!r}")
        with self._life as ptr:
            n = lib.pw_runtime_slice_count(ptr)
        if not 0 <= key < n:
            raise IndexError(f"slice index {key} out of range (the runtime has {n})")
        return Slice(self, key)

    @property
    def backends(self) -> List[Backend]:
        """The runtime's backends (CpuBackend, SimBackend objects), in the
        order slices name them."""
        return list(self._backends)

    def backend(self, slice) -> Backend:
        """The backend physical slice |slice| (index or name) runs on."""
        return self._backends[self._slice_backends[self.slice(slice).index]]

    @property
    def sched_policy(self) -> str:
        """The gang scheduling policy: "fifo", "priority" or "fair_share"."""
        return self._sched[0]

    @property
    def sched_window(self) -> int:
        """Ops of a slice admitted and unfinished at most (0: unlimited)."""
        return self._sched[1]

    # -- compile cache

    @property
    def compile_cache(self) -> Optional["CompileCache"]:
        """The CompileCache compiles go through (None: none)."""
        return self._cache

    def set_compile_cache(self, cache: Optional["CompileCache"]) -> None:
        """Routes this runtime's compiles through |cache| (None: stops).
        Compiles already running use the previous setting. The runtime
        keeps the C cache alive until it is closed, whatever becomes of
        |cache| (closing it stops nothing here)."""
        if cache is not None and not isinstance(cache, CompileCache):
            raise TypeError(f"cache must be a CompileCache or None, not {type(cache).__name__}")
        with self._life as ptr:
            if cache is None:
                check(lib.pw_runtime_set_compile_cache(ptr, ffi.NULL))
            else:
                c = cache._retain()  # ValueError once the cache is closed
                try:
                    check(lib.pw_runtime_set_compile_cache(ptr, c))
                except BaseException:
                    lib.pw_cache_release(c)
                    raise
                self._caches.append(c)
            self._cache = cache

    # -- clients

    def client(self, name: Optional[str] = None, *, weight: int = 1,
               priority: int = 0) -> "Client":
        """A new client (job/tenant) of this runtime. |weight| (>= 1) is
        its share under the "fair_share" policy, |priority| its rank under
        "priority" (higher first)."""
        return Client(self, name, weight=weight, priority=priority)

    # -- kernels

    def register_kernel(self, name, fn=None, **kwargs):
        """Registers a Python function as a CPU backend kernel; see
        pathways.register_kernel for the arguments. Usable as a decorator:

            @rt.register_kernel("square", inputs=1, outputs=1)
            def square(call):
                call.outputs[0][...] = call.inputs[0] ** 2
        """
        from ._kernels import register_kernel
        if fn is None:
            return lambda f: register_kernel(self, name, f, **kwargs)
        return register_kernel(self, name, fn, **kwargs)

    # -- fault injection and statistics

    def set_device_health(self, slice, mesh_index, health):
        """Test hook: sets the health ("healthy", "degraded", "failed") of
        device |mesh_index| of physical slice |slice| (index or name). A
        failed device fails the work queued on it with UnavailableError.
        On a sim slice: "failed" fails the chip now, "healthy" repairs it
        (SimBackend.fail / repair)."""
        s = self.slice(slice)
        dev = s.device(mesh_index)
        code = _health_code(health)
        backend = self._backends[self._slice_backends[s.index]]
        with self._life:
            backend._set_health(dev.backend_device, code)

    # -- failure (include/pathways/runtime.h, "Failure")

    def check_health(self):
        """Asks the backend for every device's health now and applies it:
        a slice with a failed device is lost, a slice lost that way whose
        devices are all usable again comes back. Returns how many slices
        changed (topology callbacks are told on the health thread)."""
        out = ffi.new("uint32_t*")
        with self._life as ptr:
            check(lib.pw_runtime_check_health(ptr, out))
        return out[0]

    def lose_slice(self, slice, reason="lost by the host"):
        """Marks physical slice |slice| (index or name) lost for |reason|
        (the cause topology callbacks see), as if its devices had failed:
        work on it fails with UnavailableError, buffers that lived on it
        raise DataLossError. A no-op when it is lost already."""
        index = self.slice(slice).index
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a str, not {type(reason).__name__}")
        with self._life as ptr:
            check(lib.pw_runtime_lose_slice(ptr, index, reason.encode("utf-8")))

    def restore_slice(self, slice):
        """Brings lost slice |slice| (index or name) back online
        (FailedPreconditionError while one of its devices is failed).
        Buffers made before the loss stay lost."""
        index = self.slice(slice).index
        with self._life as ptr:
            check(lib.pw_runtime_restore_slice(ptr, index))

    def memory_stats(self):
        """Counters of the two allocators this runtime was given: "host"
        (the runtime's own objects: clients, handles, buffers' bookkeeping,
        executions, events) and "device" (the CPU backend: device memory,
        kernels, queues). Each: live_blocks, live_bytes, peak_bytes,
        allocations, failed_allocations, mismatched_frees."""
        with self._life:  # the counters are freed with the runtime
            return {"host": self._host_mem.stats(), "device": self._device_mem.stats()}

    def trace(self, path, *, events_per_thread=0):
        """A context manager recording a trace of this runtime while its
        block runs, written to |path| as Chrome Trace Event JSON (open it
        in ui.perfetto.dev or chrome://tracing) when the block ends:

            with runtime.trace("step.json") as t:
                run_step()
            print(t.stats)   # {"events": ..., "dropped": ..., ...}

        |events_per_thread|: each recording thread's ring (0: 65536; full
        rings drop their oldest events, counted in stats["dropped"])."""
        return Trace(self, path, events_per_thread)

    def enable_metrics(self):
        """Starts counting (include/pathways/metrics.h): ops, launches,
        device time, latencies, transfers, cache hits, per slice and per
        client. Off by default. FailedPreconditionError when on already."""
        with self._life:
            _metrics.enable(self._ptr)

    def disable_metrics(self):
        """Stops counting (and serving). FailedPreconditionError when off."""
        with self._life:
            check(lib.pw_runtime_metrics_disable(self._ptr))

    def metrics(self):
        """The metrics now, as {family: {"type", "help", "samples"}}; a
        sample is {"labels": {...}, "value": v}, or for a histogram
        {"labels", "sum", "count", "buckets": [(upper bound, cumulative
        count), ...]}. FailedPreconditionError while metrics are off."""
        with self._life:
            return _metrics.read(self._ptr)

    def metrics_text(self):
        """The metrics in the Prometheus text exposition format 0.0.4."""
        with self._life:
            return _metrics.prometheus_text(self._ptr)

    def serve_metrics(self, port=0, *, address=None):
        """Serves the metrics over HTTP (GET /metrics) on |address|
        (default 127.0.0.1, loopback only) and |port| (0: an ephemeral
        one, see .port and .url). Returns a MetricsServer (a context
        manager); metrics must be on."""
        return MetricsServer(self, port, address)

    def dump(self):
        """What every device of every slice waits for, one line each (the
        op its cursor is at, its state, its queue): for a runtime that is
        stuck (pw_runtime_dump). Returns the lines."""
        with self._life:
            return dump_lines(self._ptr)

    # -- lifetime

    def close(self, timeout=CLOSE_TIMEOUT_S):
        """Destroys every client still open (Client.close), then the runtime
        and its backend (joining its pool). Idempotent; thread-safe.

        Calls other threads are making on the runtime or its clients'
        objects are waited for: from the start of the close every new call
        raises ValueError, and the runtime is freed only once the calls in
        flight have returned (each is one short C call; waits on events do
        not hold a close up). If some are still in flight after |timeout|
        seconds (None: no limit), RuntimeError, and what was not closed yet
        stays open. Not allowed from inside a callback
        (FailedPreconditionError: a kernel would wait for itself)."""
        if in_callback():
            raise FailedPreconditionError(
                "cannot close a Runtime from inside a pathways callback (a pool thread)")
        self._life.close(lambda ptr: self._destroy(ptr, timeout), timeout)

    def _destroy(self, ptr, timeout):
        # No call on the runtime is in flight and none can start, so no
        # client can be added: close them (each waits for its own calls;
        # a timeout there reopens the runtime, nothing of it freed yet).
        # A manual sim delivers nothing by itself: deliver what is queued,
        # or destroying the clients would wait for it.
        for b in self._backends:
            if lib.pw_sim_backend_is_sim(b._c):
                status = lib.pw_sim_backend_run_all(b._c, ffi.NULL)
                if status:  # not manual (threaded: FAILED_PRECONDITION): nothing to do
                    lib.pw_status_free(status)
        for box in list(self._clients.values()):
            box.close(timeout)
            self._clients.pop(id(box), None)
        check(lib.pw_runtime_destroy(ptr))
        for b in self._backends:
            b._c = None
        for c in self._caches:
            lib.pw_cache_release(c)
        self._caches.clear()
        _live_runtimes.discard(self)
        self._kernels.clear()
        self._host_mem.destroy()
        self._device_mem.destroy()

    def __repr__(self):
        if self._life.ptr is None:
            return "<Runtime closed>"
        try:
            parts = ", ".join(f"{s.name!r} {mesh_text(s.mesh)}" for s in self.slices)
        except ValueError:  # closing on another thread
            return "<Runtime closing>"
        kinds = "+".join(b.kind for b in self._backends)
        return f"<Runtime {kinds}: {parts}; {len(self._clients)} client(s)>"


def _ns(seconds, what):
    """Seconds (None or 0: the library's default) as integer nanoseconds."""
    if seconds is None:
        return 0
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(seconds).__name__}")
    if seconds < 0:
        raise ValueError(f"{what} must be >= 0 seconds, not {seconds!r}")
    return int(round(seconds * 1e9))


def _device_count(mesh):
    n = 1
    for d in mesh:
        n *= d
    return n


class Device:
    """One device of a physical slice (a snapshot of its info)."""

    __slots__ = ("slice", "mesh_index", "backend_device", "host", "memory_bytes", "health", "kind")

    def __init__(self, info):
        self.slice = info.slice
        self.mesh_index = info.mesh_index
        self.backend_device = info.backend_device
        self.host = info.host
        self.memory_bytes = info.memory_bytes
        self.health = _HEALTH_NAMES.get(info.health, str(info.health))
        self.kind = _cstr(info.kind)

    def __repr__(self):
        return (f"<Device {self.kind}:{self.backend_device} slice {self.slice} "
                f"position {self.mesh_index}, {self.health}>")


class Slice:
    """A physical slice of the runtime (an island of devices). Properties
    are read from the runtime each time, so they are current."""

    __slots__ = ("runtime", "index")

    def __init__(self, runtime, index):
        self.runtime = runtime
        self.index = index

    def _info(self):
        info = ffi.new("pw_slice_info_t*")
        info.struct_size = ffi.sizeof("pw_slice_info_t")
        with self.runtime._life as ptr:
            check(lib.pw_runtime_slice_info(ptr, self.index, info))
        return info

    # Field views do not keep their struct alive: hold |info| while reading.

    @property
    def name(self):
        info = self._info()
        return _cstr(info.name)

    @property
    def mesh(self):
        info = self._info()
        return mesh_from_c(info.mesh)

    @property
    def device_count(self):
        return self._info().device_count

    @property
    def host(self):
        return self._info().host

    @property
    def backend(self):
        info = self._info()
        return _cstr(info.backend)

    @property
    def health(self):
        """"healthy", "degraded" or "failed" (the worst of its devices)."""
        return _HEALTH_NAMES.get(self._info().health)

    @property
    def state(self):
        """"online" or "lost" (see Runtime.lose_slice, check_health)."""
        return _cstr(lib.pw_slice_state_name(self._info().state))

    @property
    def lost(self):
        return self._info().state == lib.PW_SLICE_LOST

    @property
    def losses(self):
        """How many times it was lost since the runtime began."""
        return self._info().losses

    @property
    def bound_vslices(self):
        """How many virtual slices (of any client) are bound to it."""
        return self._info().bound_vslices

    def device(self, mesh_index):
        info = ffi.new("pw_device_info_t*")
        info.struct_size = ffi.sizeof("pw_device_info_t")
        with self.runtime._life as ptr:
            check(lib.pw_runtime_device_info(ptr, self.index, mesh_index, info))
        return Device(info)

    @property
    def devices(self):
        return [self.device(i) for i in range(self.device_count)]

    def set_health(self, mesh_index, health):
        """Test hook; see Runtime.set_device_health."""
        self.runtime.set_device_health(self.index, mesh_index, health)

    def __eq__(self, other):
        return isinstance(other, Slice) and other.runtime is self.runtime and other.index == self.index

    def __hash__(self):
        return hash((id(self.runtime), self.index))

    def __repr__(self):
        try:
            i = self._info()
        except ValueError:
            return f"<Slice {self.index} of a closed runtime>"
        return (f"<Slice {self.index} {_cstr(i.name)!r} {mesh_text(mesh_from_c(i.mesh))} "
                f"{_cstr(i.backend)} {_HEALTH_NAMES.get(i.health)}"
                f"{', lost' if i.state == lib.PW_SLICE_LOST else ''}, "
                f"{i.bound_vslices} vslice(s) bound>")


# ---- Client ---------------------------------------------------------------------


class _ClientBox(Lifetime):
    """The C client pointer and its lifetime guard (the in-use count of the
    calls made with it), shared by the Client, everything it made and its
    runtime, so that whichever closes first leaves the others a guard that
    refuses calls, never a dangling pointer. |live| counts the handles
    created through this client and not released yet. |armed| holds the
    boxes of its armed graphs still alive (pathways._graph._ArmedBox),
    destroyed before the client: the C client would destroy them itself
    and leave their Python pointers dangling."""

    __slots__ = ("live", "runtime", "armed", "owned", "topology", "elastics", "__weakref__")

    def __init__(self, ptr, runtime, name):
        super().__init__(ptr, f"client {name!r}")
        self.live = 0
        self.runtime = runtime
        self.armed = set()
        # Boxes of snapshotters and elastic helpers (pathways._owned), which
        # borrow the C client: destroyed before it.
        self.owned = set()
        # The topology callback set by Client.on_topology (kept until the C
        # client can no longer call it), and the elastic helpers alive
        # (each holds the client's topology callback).
        self.topology = None
        self.elastics = 0

    def close(self, timeout=CLOSE_TIMEOUT_S):
        """Lifetime.close: waits for the calls in flight, then frees the
        client. Idempotent."""
        return Lifetime.close(self, self._destroy, timeout)

    def _destroy(self, ptr):
        # Each waits for its runs (GIL released); one another thread is
        # destroying is waited for (its lock). No submission is in flight:
        # those hold the guard.
        for armed in list(self.armed):
            armed.destroy(self)
        self.armed.clear()
        # Elastic helpers first (their teardown may use a snapshotter's
        # restored buffers), then snapshotters.
        for owned in sorted(self.owned, key=lambda o: o.order):
            owned.close(CLOSE_TIMEOUT_S)
        # Waits for the client's in-flight executions (GIL released): their
        # Python kernels run meanwhile, and any call they make on this
        # client raises ValueError.
        check(lib.pw_client_destroy(ptr))
        self.live = 0
        self.topology = None  # no delivery runs once the destroy returned


class Client(Closeable):
    """A job of the runtime. Everything it creates (virtual slices,
    executables, buffers, graphs, armed graphs) belongs to it; close() (or
    `with`, or garbage collection) waits for its in-flight work and frees
    all of it. Thread-safe, close() included (see close()).

    |live_handles| counts the C handles created through this client and not
    released yet: it returns to its earlier value once the Python objects
    are closed or collected (a leak check)."""

    _guard = "_box"

    __slots__ = ("_box", "runtime", "name", "__weakref__")

    def __init__(self, runtime, name=None, *, weight=1, priority=0):
        _lowlevel.flush_deferred()
        self._box = None
        opts = ffi.new("pw_client_options_t*")
        opts.struct_size = ffi.sizeof("pw_client_options_t")
        cname = ffi.new("char[]", name.encode()) if name else ffi.NULL
        opts.name = cname
        opts.weight = weight
        opts.priority = priority
        out = ffi.new("pw_client_t**")
        self.runtime = runtime
        # Registered with the runtime inside its guard: a runtime closing
        # meanwhile either refuses this or finds the client and closes it.
        with runtime._life as rptr:
            check(lib.pw_client_create(rptr, opts, out))
            self.name = _cstr(lib.pw_client_name(out[0]))
            self._box = _ClientBox(out[0], runtime, self.name)
            runtime._clients[id(self._box)] = self._box

    @property
    def closed(self):
        return self._box is None or self._box.closing

    @property
    def live_handles(self):
        return self._box.live

    def trim(self):
        """Frees what the client keeps for reuse (the blocks of finished
        runs and the device memory they keep): pw_client_trim. Memory
        measurements call it first, so that what the cache happens to hold
        does not count."""
        with self._box as ptr:
            check(lib.pw_client_trim(ptr))

    # -- virtual slices

    def vslice(self, mesh, *, exclusive=False, slices=None, backend=None, device_kind=None,
               host=None, slice_name=None, share_own=False):
        """Asks the resource manager for a virtual slice of |mesh| ("2x4",
        8, (2, 4)); ResourceExhaustedError when no physical slice fits.

        Placement: |backend| (its name: "cpu", "sim", a plugin's),
        |device_kind|, |host| and |slice_name| admit only physical slices
        with those attributes (NotFoundError listing every slice when none
        has them); |share_own| lets this client bind a physical slice it
        already has a virtual slice on.

        |slices| spans several physical slices: a count (the resource
        manager picks that many slices of one backend, each with
        device_count(mesh) / count devices) or a sequence of physical slice
        indices. Ops on a spanning virtual slice run as one gang across the
        slices (their collectives span them), in one consistent order on
        every slice. Mesh order is slice-major over ascending slice index."""
        return VSlice(self, mesh, exclusive=exclusive, slices=slices, backend=backend,
                      device_kind=device_kind, host=host, slice_name=slice_name,
                      share_own=share_own)

    # -- shortcuts (see the classes)

    def put(self, array, vslice, sharding=None, *, dtype=None):
        """Buffer.from_array(self, vslice, array, sharding, dtype=dtype)."""
        from ._objects import Buffer
        return Buffer.from_array(self, vslice, array, sharding, dtype=dtype)

    def compile(self, program, vslice):
        from ._objects import Executable
        return Executable.compile(self, vslice, program)

    def load(self, data, vslice):
        from ._objects import Executable
        return Executable.load(self, vslice, data)

    def graph(self, name=None):
        from ._graph import Graph
        return Graph(self, name)

    def decode_graph(self, data, vslices, executables=(), name=None):
        """A new, finalized Graph of this client from graph file |data|
        (bytes-like; Graph.encode wrote it, here or in another process):
        the file's virtual slices bound to |vslices| (in the file's order;
        equal meshes), inline programs compiled (through the runtime's
        compile cache if it has one), executables written by hash looked up
        among |executables|. Decoding the same bytes with the same bindings
        while the earlier graph is alive returns that graph again, without
        compiling. InvalidArgumentError naming the path for bad bytes
        ("nodes[2].inputs[0]: ..."); the arguments of submit() are the
        file's parameters, in order."""
        from ._graphfile import decode_graph
        return decode_graph(self, data, vslices, executables, name)

    def register_host_task(self, name, fn):
        """Registers |fn| (see Graph.add_host) as host task |name|
        ([A-Za-z0-9_.-], 1-63 bytes) of this client: Graph.add_host(name,
        ...) and decoded graph files whose host nodes name it use it. A name
        registered again is replaced for later uses."""
        from ._host import forget, new_task
        ctask = new_task(fn, repr(name))
        try:
            with self._box as ptr:
                check(lib.pw_client_register_host_task(ptr, name.encode(), ctask))
        except BaseException:
            forget(ctask)
            raise

    # -- failure and snapshots

    def on_topology(self, fn):
        """Sets (fn None: clears) the client's topology callback:
        fn(event) for every slice lost or back (a TopologyEvent: change
        "lost"/"back", slice, slice_name, losses, cause, time_ns), on the
        runtime's health thread with the GIL held. Exceptions it raises are
        reported through sys.excepthook (and counted in
        Client.topology_errors), never reach C. When this returns (or the
        client is closed) the previous callback is no longer running and
        will not run again. Not while an Elastic of this client is alive
        (it holds the callback): ValueError."""
        from ._failure import set_topology
        set_topology(self, fn)

    @property
    def topology_errors(self):
        """Exceptions raised by the topology callback so far (the current
        one), and the last of them: (count, exception or None)."""
        t = self._box.topology
        return (0, None) if t is None else (t.errors, t.last_error)

    def snapshotter(self, keep=2, store_dir=None, key_prefix=None, **options):
        """A Snapshotter of this client's buffers (pathways.Snapshotter):
        keeps the last |keep| snapshots in host memory and, with
        |store_dir|, persists each one in that directory (a dir store)."""
        from ._snapshot import Snapshotter
        return Snapshotter(self, keep=keep, store_dir=store_dir, key_prefix=key_prefix,
                           **options)

    # -- lifetime

    def close(self, timeout=CLOSE_TIMEOUT_S):
        """Frees everything this client owns, once its in-flight work is
        done (armed graphs still open are closed first). Idempotent;
        thread-safe.

        From the start of the close every call on the client or its
        objects raises ValueError; calls already in flight on other threads
        are waited for (each is one short C call; waits on events do not
        hold a close up), then its executions. If calls are still in flight
        after |timeout| seconds (None: no limit), RuntimeError and the
        client stays open. Not allowed from inside a callback."""
        box = self._box
        if box is None or box.ptr is None:
            return
        if in_callback():
            raise FailedPreconditionError(
                "cannot close a Client from inside a pathways callback (a pool thread)")
        if box.close(timeout):
            box.runtime._clients.pop(id(box), None)

    def __repr__(self):
        state = "closed" if self.closed else f"{self._box.live} live handle(s)"
        return f"<Client {self.name!r}: {state}>"


class VSlice(ClientHandle):
    """A client's virtual slice: the mesh it asked for, bound by the
    resource manager to a physical slice."""

    _RELEASE = "pw_vslice_release"
    _HANDLE_ATTR = "id"

    __slots__ = ("client", "_h", "id", "mesh", "__weakref__")

    def __init__(self, client, mesh, *, exclusive=False, slices=None, backend=None,
                 device_kind=None, host=None, slice_name=None, share_own=False):
        dims = mesh_tuple(mesh)
        out = ffi.new("pw_vslice_t*")
        flags = lib.PW_VSLICE_EXCLUSIVE if exclusive else lib.PW_VSLICE_DEFAULT
        if share_own:
            flags |= lib.PW_VSLICE_SHARE_OWN
        placed = any(v is not None for v in (backend, device_kind, host, slice_name))
        box = client._box
        if placed and slices is not None:
            raise ValueError("placement attributes apply to a virtual slice on one "
                             "physical slice, not with slices=")
        if placed or (share_own and slices is None):
            req = ffi.new("pw_vslice_request_t*")
            req.struct_size = ffi.sizeof("pw_vslice_request_t")
            fill_mesh(ffi.addressof(req, "mesh"), dims)
            req.flags = flags
            keep = []
            for field, value in (("backend", backend), ("device_kind", device_kind),
                                 ("slice_name", slice_name)):
                if value is not None:
                    if not isinstance(value, str):
                        raise TypeError(f"{field} must be a str, got {type(value).__name__}")
                    keep.append(ffi.new("char[]", value.encode()))
                    setattr(req, field, keep[-1])
            if host is not None:
                if not isinstance(host, int) or host < 0 or host >= 0xFFFFFFFF:
                    raise ValueError(f"host must be a host id (0 .. 2**32 - 2), got {host!r}")
                req.host = host
            else:
                req.host = 0xFFFFFFFF
            with box as ptr:
                check(lib.pw_vslice_create_request(ptr, req, out))
                box.live += 1
        elif slices is None:
            cmesh = fill_mesh(ffi.new("pw_mesh_shape_t*"), dims)
            with box as ptr:
                check(lib.pw_vslice_create(ptr, cmesh, flags, out))
                box.live += 1
        else:
            span = ffi.new("pw_vslice_span_t*")
            span.struct_size = ffi.sizeof("pw_vslice_span_t")
            fill_mesh(ffi.addressof(span, "mesh"), dims)
            span.flags = flags
            if isinstance(slices, int):
                span.slice_count = slices
                pinned = ffi.NULL
            else:
                indices = [int(i) for i in slices]
                if not indices or any(i < 0 for i in indices):
                    raise ValueError(f"slices must be a count or non-negative slice "
                                     f"indices, got {slices!r}")
                pinned = ffi.new("uint32_t[]", indices)
                span.slice_count = len(indices)
            span.slices = pinned
            with box as ptr:
                check(lib.pw_vslice_create_spanning(ptr, span, out))
                box.live += 1
        self.client = client
        self._h = out
        self.id = out.id
        self.mesh = dims

    def _handle(self):
        if self.id == 0:
            raise ValueError("operation on a released VSlice")
        return self._h[0]

    @property
    def device_count(self):
        return _device_count(self.mesh)

    @property
    def slices(self):
        """The physical Slices it is bound to, in mesh order (one unless
        it spans several)."""
        count = ffi.new("uint32_t*")
        h = self._handle()
        with self.client._box as ptr:
            check(lib.pw_vslice_slices(ptr, h, ffi.NULL, 0, count))
            indices = ffi.new("uint32_t[]", max(count[0], 1))
            check(lib.pw_vslice_slices(ptr, h, indices, count[0], count))
        return [Slice(self.client.runtime, indices[i]) for i in range(count[0])]

    @property
    def slice(self):
        """The physical Slice it is bound to (the lowest-numbered one when
        it spans several)."""
        index = ffi.new("uint32_t*")
        h = self._handle()
        with self.client._box as ptr:
            check(lib.pw_vslice_binding(ptr, h, index, ffi.NULL))
        return Slice(self.client.runtime, index[0])

    def info(self):
        """What it is bound to and whether it can run (pw_vslice_info): a
        VSliceInfo with mesh, slice_count, first_slice, lost_slices,
        first_lost_slice (None when none is lost) and lost_since_bound
        (a slice was lost since it was bound: its older buffers are
        gone, even if the slice is back)."""
        from ._failure import vslice_info
        return vslice_info(self)

    @property
    def lost(self):
        """True while a physical slice it is bound to is lost."""
        return self.info().lost_slices > 0

    def put(self, array, sharding=None, *, dtype=None):
        """A new Buffer on this virtual slice holding |array|; see
        Buffer.from_array."""
        from ._objects import Buffer
        return Buffer.from_array(self.client, self, array, sharding, dtype=dtype)

    def from_host_async(self, array, sharding=None, *, dtype=None, semantics="immutable"):
        """(Buffer, host_done Event) at once; see pathways.from_host_async."""
        from ._host_async import from_host_async
        return from_host_async(self, array, sharding, dtype=dtype, semantics=semantics)

    def create_empty(self, spec):
        """An unfilled Buffer of |spec|; see pathways.create_empty."""
        from ._host_async import create_empty
        return create_empty(self, spec)

    def compile(self, program):
        """Compiles |program| (a Program or program text) for this mesh."""
        from ._objects import Executable
        return Executable.compile(self.client, self, program)

    def load(self, data):
        """Loads executable bytes (Executable.bytes()) without compiling."""
        from ._objects import Executable
        return Executable.load(self.client, self, data)

    def __repr__(self):
        if self.id == 0 or self.client.closed:
            return f"<VSlice {mesh_text(self.mesh)} released>"
        try:
            s = self.slice
        except ValueError:  # closed meanwhile
            return f"<VSlice {mesh_text(self.mesh)} released>"
        return f"<VSlice {mesh_text(self.mesh)} of client {self.client.name!r} on slice {s.name!r}>"
