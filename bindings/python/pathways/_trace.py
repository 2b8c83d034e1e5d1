"""Traces of a runtime's work for Perfetto and chrome://tracing
(include/pathways/trace.h), and the stuck dump (pw_runtime_dump)."""

import os

from ._lowlevel import ffi, lib
from ._errors import check


class Trace:
    """Records a trace of a runtime while the ``with`` block runs and
    writes it as Chrome Trace Event JSON to ``path`` when it ends (also
    when the block raises). ``stats`` then holds the counts: events kept,
    dropped (overwritten in full per-thread rings), threads.

    Made by Runtime.trace(path, events_per_thread=0)."""

    def __init__(self, runtime, path, events_per_thread=0):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, not {type(path).__name__}")
        self.path = os.fspath(path)
        if not self.path:
            raise ValueError("path must not be empty")
        if not isinstance(events_per_thread, int) or isinstance(events_per_thread, bool) \
                or not 0 <= events_per_thread <= 1 << 24:
            raise ValueError(f"events_per_thread must be an int in [0, 2**24], "
                             f"not {events_per_thread!r}")
        self._runtime = runtime
        self._events = events_per_thread
        self._active = False
        self.stats = None

    def __enter__(self):
        if self._active:
            raise RuntimeError("this trace is recording already")
        options = ffi.new("pw_trace_options_t*")
        options.struct_size = ffi.sizeof("pw_trace_options_t")
        options.events_per_thread = self._events
        with self._runtime._life:
            check(lib.pw_runtime_trace_start(self._runtime._ptr, options))
        self._active = True
        return self

    def __exit__(self, *exc):
        self._active = False
        with self._runtime._life:
            ptr = self._runtime._ptr
            check(lib.pw_runtime_trace_stop(ptr))
            self.stats = trace_stats(ptr)
            check(lib.pw_runtime_trace_write_file(ptr, self.path.encode("utf-8")))
        return False

    def __repr__(self):
        state = "recording" if self._active else "stopped"
        return f"<pathways.Trace {self.path!r} {state} stats={self.stats}>"


def trace_stats(ptr):
    s = ffi.new("pw_trace_stats_t*")
    s.struct_size = ffi.sizeof("pw_trace_stats_t")
    check(lib.pw_runtime_trace_stats(ptr, s))
    return {"events": s.events, "dropped": s.dropped, "threads": s.threads,
            "recording": bool(s.recording)}


@ffi.def_extern()
def pwpy_dump_line(user, line):
    ffi.from_handle(user).append(ffi.string(line).decode("utf-8", "replace"))


def dump_lines(ptr):
    lines = []
    handle = ffi.new_handle(lines)
    check(lib.pw_runtime_dump(ptr, lib.pwpy_dump_line, handle))
    return lines
