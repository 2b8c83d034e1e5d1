"""Device backends a Runtime is built from: the bundled CPU backend (real
kernels on host threads) and the simulated backend "sim" (a fleet of
accelerators in virtual time, with failure injection and a trace;
include/pathways/backends/sim.h).

A backend object holds options until a Runtime is created with it; the
runtime then owns the C backend, and the object becomes a live view of it
(SimBackend's stepping, statistics and failure injection) until the
runtime is closed. One backend object serves one runtime.
"""

import math
import weakref
from typing import Callable, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from ._errors import check
from ._lowlevel import CALLBACK_SCOPE, ffi, lib

__all__ = ["Backend", "CpuBackend", "SimBackend", "SimEvent", "SimFailure", "SIM_NEVER",
           "SIM_NOW"]

#: "Never" and "now" as virtual times (pw_sim_time_t).
SIM_NEVER = (1 << 64) - 1
SIM_NOW = (1 << 64) - 2

_SIM_MODES = {"inline": lib.PW_SIM_MODE_INLINE, "threaded": lib.PW_SIM_MODE_THREADED,
              "manual": lib.PW_SIM_MODE_MANUAL}
_SIM_MEMORY = {"host": lib.PW_SIM_MEMORY_HOST, "virtual": lib.PW_SIM_MEMORY_VIRTUAL}
_SIM_FAIL = {"chip": lib.PW_SIM_FAIL_CHIP, "slice": lib.PW_SIM_FAIL_SLICE}
_SIM_EVENTS = {lib.PW_SIM_EVENT_DONE: "done", lib.PW_SIM_EVENT_FAILED: "failed",
               lib.PW_SIM_EVENT_TRANSFER: "transfer", lib.PW_SIM_EVENT_CANCELLED: "cancelled"}
_HEALTH = {lib.PW_DEVICE_HEALTHY: "healthy", lib.PW_DEVICE_DEGRADED: "degraded",
           lib.PW_DEVICE_FAILED: "failed"}


def _uint(value, what, *, bits=32, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value < (1 << bits):
        raise ValueError(f"{what} must be in [0, 2**{bits}), not {value}")
    return value


def _rate(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number, not {type(value).__name__}")
    if not value >= 0 or math.isinf(value):
        raise ValueError(f"{what} must be a finite number >= 0, not {value!r}")
    return float(value)


def _choice(value, table, what):
    if value not in table:
        raise ValueError(f"{what} must be one of {sorted(table)}, not {value!r}")
    return table[value]


class SimFailure(NamedTuple):
    """A scheduled failure: |kind| "chip" (|index| is a device ordinal of
    the backend) or "slice" (every chip of sim slice |index|), at virtual
    time |at| (ns)."""
    kind: str
    index: int
    at: int


class SimEvent(NamedTuple):
    """One trace event of the sim: an op (or transfer) on |device| that
    started at |start| and completed at |time| (virtual ns); |kind| is
    "done", "failed", "transfer" or "cancelled"; |gang_id| the launch's
    gang (0 for transfers); |op| the executable's name."""
    time: int
    start: int
    device: int
    kind: str
    gang_id: int
    op: str


class Backend:
    """Base of the backend objects. |name| is the backend's kind ("cpu",
    "sim"); |runtime| the Runtime it belongs to (None before)."""

    kind = "?"
    __slots__ = ("_rt", "index", "_c")

    def __init__(self):
        self._rt = None   # a weak reference: the runtime owns its backends, not the reverse
        self.index = None
        self._c = None  # the pw_backend_t (cdata, by value) once created

    @property
    def runtime(self):
        """The Runtime this backend belongs to (None before, or once that
        runtime is gone)."""
        return None if self._rt is None else self._rt()

    @runtime.setter
    def runtime(self, rt):
        self._rt = None if rt is None else weakref.ref(rt)

    # -- used by Runtime

    def _bind(self, runtime, index):
        if self._rt is not None:
            raise ValueError(f"this {type(self).__name__} already belongs to a runtime; "
                             "make one backend object per Runtime")
        self.runtime = runtime
        self.index = index

    def _create(self, allocator, set_logger, device_count):
        """Creates the C backend for |device_count| devices (the most the
        runtime's slices need); returns the pw_backend_t."""
        raise NotImplementedError

    def _set_health(self, device, health):
        raise NotImplementedError

    def _live(self):
        """Context manager: the runtime's guard; yields the C backend."""
        if self._rt is None:
            raise ValueError(f"this {type(self).__name__} is not part of a Runtime yet")
        rt = self._rt()
        if rt is None:
            raise ValueError(f"operation on a {type(self).__name__} of a closed Runtime")
        return _BackendCall(self, rt)

    def __repr__(self):
        rt = self.runtime
        if self._rt is None:
            state = "unbound"
        elif rt is None or rt.closed:
            state = "closed"
        else:
            state = f"backend {self.index} of a runtime"
        return f"<{type(self).__name__} {state}>"


class _BackendCall:
    __slots__ = ("backend", "runtime")

    def __init__(self, backend, runtime):
        self.backend = backend
        self.runtime = runtime  # strong while the call runs

    def __enter__(self):
        self.runtime._life.enter(f"a {type(self.backend).__name__}")
        return self.backend._c

    def __exit__(self, *exc):
        self.runtime._life.exit()
        return False


class CpuBackend(Backend):
    """The bundled CPU backend: every device is host memory, kernels run on
    |workers| pool threads (Python kernels too). |devices|: how many (None:
    as many as the runtime's slices on it need). |device_memory| caps each
    device (bytes; None: unbounded). |host|: the host id its devices
    report."""

    kind = "cpu"
    __slots__ = ("devices", "workers", "device_memory", "host")

    def __init__(self, *, devices: Optional[int] = None, workers: int = 2,
                 device_memory: Optional[int] = None, host: int = 0):
        super().__init__()
        self.devices = _uint(devices, "devices", allow_none=True)
        self.workers = _uint(workers, "workers")
        self.device_memory = _uint(device_memory, "device_memory", bits=64, allow_none=True)
        self.host = _uint(host, "host")

    def _create(self, allocator, set_logger, device_count):
        cpu = ffi.new("pw_cpu_backend_options_t*")
        lib.pw_cpu_backend_options_init(cpu)
        cpu.allocator = allocator
        cpu.device_count = self.devices if self.devices is not None else device_count
        cpu.worker_count = self.workers
        cpu.host = self.host
        if self.device_memory is not None:
            cpu.device_memory_bytes = self.device_memory
        set_logger(cpu.logger)
        out = ffi.new("pw_backend_t*")
        check(lib.pw_cpu_backend_create(cpu, out))
        self._c = out[0]
        return self._c

    def _set_health(self, device, health):
        check(lib.pw_cpu_backend_set_health(self._c, device, health))


class _Tracer:
    __slots__ = ("fn", "events", "handle", "errors", "last_error")

    def __init__(self, fn):
        self.fn = fn
        self.events = [] if fn is True else None
        self.handle = ffi.new_handle(self)
        self.errors = 0
        self.last_error = None


@ffi.def_extern()
def pwpy_sim_trace(user, event):
    with CALLBACK_SCOPE:
        tracer = ffi.from_handle(user)
        try:
            ev = SimEvent(event.time, event.start, event.device,
                          _SIM_EVENTS.get(event.kind, str(event.kind)), event.gang_id,
                          ffi.string(event.op).decode("utf-8", "replace")
                          if event.op != ffi.NULL else "")
            if tracer.events is not None:
                tracer.events.append(ev)  # list.append is atomic under the GIL
            else:
                tracer.fn(ev)
        except BaseException as exc:  # never into C
            tracer.errors += 1
            tracer.last_error = exc
            from ._event import report_callback_error
            report_callback_error("sim trace callback")


class _SimOps:
    """Stepping, statistics, trace and failure injection of a sim backend
    (SimBackend, or a sim made by a plugin: PluginBackend). On another
    backend they raise InvalidArgumentError ("not a sim")."""

    __slots__ = ()

    # -- stepping (manual mode)

    def run_all(self) -> int:
        """Delivers every queued completion (and those their callbacks
        queue), on this thread, in virtual-time order. Returns how many."""
        out = ffi.new("uint64_t*")
        with self._live() as b:
            check(lib.pw_sim_backend_run_all(b, out))
        return out[0]

    def run_until(self, time_ns: int) -> int:
        """Delivers the completions up to virtual time |time_ns| and moves
        the clock there. Returns how many were delivered."""
        t = _uint(time_ns, "time_ns", bits=64)
        out = ffi.new("uint64_t*")
        with self._live() as b:
            check(lib.pw_sim_backend_run_until(b, t, out))
        return out[0]

    def step(self) -> int:
        """Delivers the one earliest completion; 0 when none was queued."""
        out = ffi.new("uint64_t*")
        with self._live() as b:
            check(lib.pw_sim_backend_step(b, out))
        return out[0]

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Threaded mode: waits (at most |timeout| s) until nothing is
        queued or being delivered; True when idle."""
        ns = int(max(0.0, float(timeout)) * 1e9)
        with self._live() as b:
            return bool(lib.pw_sim_backend_wait_idle(b, ns))

    # -- queries

    @property
    def clock(self) -> int:
        """The simulation clock (virtual ns)."""
        with self._live() as b:
            return lib.pw_sim_backend_clock(b)

    @property
    def trace_hash(self) -> int:
        """The 64-bit trace hash of every completion so far (sim.h,
        DETERMINISM): equal run after run for the same workload."""
        with self._live() as b:
            return lib.pw_sim_backend_trace_hash(b)

    def stats(self) -> dict:
        """clock, trace_hash, events, failed, transfers, queued, busy_ns,
        span_start, span_end, host_launches."""
        s = ffi.new("pw_sim_stats_t*")
        s.struct_size = ffi.sizeof("pw_sim_stats_t")
        with self._live() as b:
            check(lib.pw_sim_backend_stats(b, s))
        return {k: getattr(s, k) for k in ("clock", "trace_hash", "events", "failed",
                                           "transfers", "queued", "busy_ns", "span_start",
                                           "span_end", "host_launches")}

    def device_state(self, device: int) -> dict:
        """Device |device|'s (a backend ordinal) timeline and failure
        state: slice, chip, busy_until, fail_at (None: none scheduled),
        events, health, busy_ns, first_start, last_end, outstanding,
        waiting_gang."""
        d = _uint(device, "device")
        s = ffi.new("pw_sim_device_state_t*")
        s.struct_size = ffi.sizeof("pw_sim_device_state_t")
        with self._live() as b:
            check(lib.pw_sim_backend_device_state(b, d, s))
        out = {k: getattr(s, k) for k in ("slice", "chip", "busy_until", "events", "busy_ns",
                                          "first_start", "last_end", "outstanding",
                                          "waiting_gang")}
        out["fail_at"] = None if s.fail_at == SIM_NEVER else s.fail_at
        out["health"] = _HEALTH.get(s.health, str(s.health))
        return out

    def events(self) -> List[SimEvent]:
        """The events recorded so far (trace=True), oldest first."""
        if getattr(self, "_tracer", None) is None or self._tracer.events is None:
            raise ValueError("events() needs SimBackend(trace=True)")
        return list(self._tracer.events)

    @property
    def trace_errors(self) -> Tuple[int, Optional[BaseException]]:
        """Exceptions the trace callable raised: (count, last one)."""
        t = getattr(self, "_tracer", None)
        return (0, None) if t is None else (t.errors, t.last_error)

    # -- failure injection

    def fail(self, kind: str, index: int, at: Optional[int] = None) -> None:
        """Schedules the failure of chip or slice |index| (|kind| "chip" or
        "slice") at virtual time |at| (ns; None: now: every op on it not
        yet completed fails, UnavailableError)."""
        k = _choice(kind, _SIM_FAIL, "kind")
        i = _uint(index, "index")
        t = SIM_NOW if at is None else _uint(at, "at", bits=64)
        with self._live() as b:
            check(lib.pw_sim_backend_fail(b, k, i, t))

    def repair(self, kind: str, index: int) -> None:
        """Cancels any failure of chip or slice |index|: healthy again."""
        k = _choice(kind, _SIM_FAIL, "kind")
        i = _uint(index, "index")
        with self._live() as b:
            check(lib.pw_sim_backend_repair(b, k, i))


class SimBackend(_SimOps, Backend):
    """The simulated backend "sim": |slices| sim slices of
    |devices_per_slice| chips each (None: derived from the runtime's
    slices on it), in virtual time (include/pathways/backends/sim.h).

    |mode|: "inline" (completions run inside the launch), "threaded" (a
    simulator thread delivers them in virtual-time order) or "manual"
    (they wait until run_all() / run_until() / step(): repeatable runs;
    Runtime.close() runs them all first). |memory|: "host" (real bytes,
    the copy and all_reduce_sum kinds move data) or "virtual" (sizes only,
    for fleets that would not fit). Programs are sim program text ("op
    NAME", "time 20us", "flops 4.2e12", "input f32[8] split(0,all)", ...).

    Cost model (None: the library's default): chip_flops_per_s,
    chip_bytes_per_s, ici_bytes_per_s, ici_latency_ns, dcn_bytes_per_s,
    dcn_latency_ns, launch_overhead_ns, dispatch_latency_ns. Streams:
    queue_depth, blocking_collectives. devices_per_host: chips per host.

    Failure injection: |failures| (SimFailure or (kind, index, at_ns)
    tuples), |random_chip_failures| / |random_slice_failures| drawn from
    |seed| over [0, failure_window_ns); later, fail() and repair().

    |trace|: None, True (record every event: events()), or a callable
    fn(SimEvent) run on the delivering thread, possibly several at once;
    it must not call into the runtime. Exceptions it raises are reported
    through sys.excepthook and counted (trace_errors).
    """

    kind = "sim"
    __slots__ = ("_opts", "_failures", "_tracer", "mode")

    def __init__(self, *, slices: Optional[int] = None,
                 devices_per_slice: Optional[int] = None, mode: str = "inline",
                 memory: str = "host", device_memory: Optional[int] = None,
                 chip_flops_per_s: Optional[float] = None,
                 chip_bytes_per_s: Optional[float] = None,
                 ici_bytes_per_s: Optional[float] = None, ici_latency_ns: Optional[int] = None,
                 dcn_bytes_per_s: Optional[float] = None, dcn_latency_ns: Optional[int] = None,
                 launch_overhead_ns: Optional[int] = None, seed: int = 0,
                 random_chip_failures: int = 0, random_slice_failures: int = 0,
                 failure_window_ns: Optional[int] = None,
                 failures: Iterable[Union[SimFailure, Tuple[str, int, int]]] = (),
                 trace: Union[None, bool, Callable[[SimEvent], None]] = None,
                 queue_depth: int = 0, blocking_collectives: bool = False,
                 dispatch_latency_ns: int = 0, devices_per_host: int = 0):
        super().__init__()
        self.mode = mode
        o = {"slice_count": _uint(slices, "slices", allow_none=True),
             "devices_per_slice": _uint(devices_per_slice, "devices_per_slice",
                                        allow_none=True),
             "mode": _choice(mode, _SIM_MODES, "mode"),
             "memory": _choice(memory, _SIM_MEMORY, "memory"),
             "device_memory_bytes": _uint(device_memory, "device_memory", bits=64,
                                          allow_none=True),
             "seed": _uint(seed, "seed", bits=64),
             "random_chip_failures": _uint(random_chip_failures, "random_chip_failures"),
             "random_slice_failures": _uint(random_slice_failures, "random_slice_failures"),
             "failure_window_ns": _uint(failure_window_ns, "failure_window_ns", bits=64,
                                        allow_none=True),
             "queue_depth": _uint(queue_depth, "queue_depth"),
             "dispatch_latency_ns": _uint(dispatch_latency_ns, "dispatch_latency_ns", bits=64),
             "devices_per_host": _uint(devices_per_host, "devices_per_host")}
        for name, value in (("chip_flops_per_s", chip_flops_per_s),
                            ("chip_bytes_per_s", chip_bytes_per_s),
                            ("ici_bytes_per_s", ici_bytes_per_s),
                            ("dcn_bytes_per_s", dcn_bytes_per_s)):
            o[name] = None if value is None else _rate(value, name)
        for name, value in (("ici_latency_ns", ici_latency_ns),
                            ("dcn_latency_ns", dcn_latency_ns),
                            ("launch_overhead_ns", launch_overhead_ns)):
            o[name] = _uint(value, name, bits=64, allow_none=True)
        if not isinstance(blocking_collectives, bool):
            raise TypeError("blocking_collectives must be a bool")
        o["blocking_collectives"] = blocking_collectives
        self._opts = o
        self._failures = []
        if isinstance(failures, (str, bytes)):
            raise TypeError("failures must be a sequence of (kind, index, at_ns)")
        for i, f in enumerate(failures):
            try:
                kind, index, at = f
            except (TypeError, ValueError):
                raise TypeError(f"failures[{i}] must be (kind, index, at_ns), not {f!r}") from None
            self._failures.append(SimFailure(kind, _uint(index, f"failures[{i}].index"),
                                             _uint(at, f"failures[{i}].at", bits=64)))
            _choice(kind, _SIM_FAIL, f"failures[{i}].kind")
        if trace is not None and trace is not True and not callable(trace):
            raise TypeError(f"trace must be None, True or a callable, not {type(trace).__name__}")
        self._tracer = None if trace is None else _Tracer(trace)

    def _layout(self, device_count, first_slice_devices):
        dps = self._opts["devices_per_slice"] or first_slice_devices or 8
        sc = self._opts["slice_count"] or max(1, -(-device_count // dps))
        return sc, dps

    def _create(self, allocator, set_logger, device_count, first_slice_devices=None):
        o = self._opts
        c = ffi.new("pw_sim_backend_options_t*")
        lib.pw_sim_backend_options_init(c)
        c.allocator = allocator
        set_logger(c.logger)
        c.slice_count, c.devices_per_slice = self._layout(device_count, first_slice_devices)
        for name in ("mode", "memory", "seed", "random_chip_failures", "random_slice_failures",
                     "queue_depth", "dispatch_latency_ns", "devices_per_host",
                     "blocking_collectives"):
            setattr(c, name, o[name])
        for name in ("device_memory_bytes", "failure_window_ns", "chip_flops_per_s",
                     "chip_bytes_per_s", "ici_bytes_per_s", "dcn_bytes_per_s",
                     "ici_latency_ns", "dcn_latency_ns", "launch_overhead_ns"):
            if o[name] is not None:
                setattr(c, name, o[name])
        keep = None
        if self._failures:
            keep = ffi.new("pw_sim_failure_t[]", len(self._failures))
            for i, f in enumerate(self._failures):
                keep[i].kind = _SIM_FAIL[f.kind]
                keep[i].index = f.index
                keep[i].at = f.at
            c.failures = keep
            c.failure_count = len(self._failures)
        if self._tracer is not None:
            c.trace = lib.pwpy_sim_trace
            c.trace_user = self._tracer.handle
        out = ffi.new("pw_backend_t*")
        check(lib.pw_sim_backend_create(c, out))  # copies the schedule
        self._c = out[0]
        return self._c

    def _set_health(self, device, health):
        if health == lib.PW_DEVICE_FAILED:
            check(lib.pw_sim_backend_fail(self._c, lib.PW_SIM_FAIL_CHIP, device, SIM_NOW))
        elif health == lib.PW_DEVICE_HEALTHY:
            check(lib.pw_sim_backend_repair(self._c, lib.PW_SIM_FAIL_CHIP, device))
        else:
            raise ValueError("a sim device is healthy or failed (SimBackend.fail/repair)")


def as_backends(backends: Union[None, Backend, Sequence[Backend]]) -> List[Backend]:
    """Normalises Runtime's |backends| argument."""
    if backends is None:
        return []
    if isinstance(backends, Backend):
        return [backends]
    if isinstance(backends, (str, bytes)):
        raise TypeError("backends must be Backend objects (CpuBackend(), SimBackend(...))")
    out = list(backends)
    for i, b in enumerate(out):
        if not isinstance(b, Backend):
            raise TypeError(f"backends[{i}] is {type(b).__name__}, not a Backend "
                            "(CpuBackend(), SimBackend(...))")
    if not out:
        raise ValueError("backends is empty: give at least one backend")
    return out
