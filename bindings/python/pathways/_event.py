"""Events: the completion of anything (a buffer becoming ready, an execution
finishing), with waits that take timeouts and stay interruptible."""

import sys
import threading
import time

from . import _lowlevel
from ._errors import DeadlineExceededError, check, take_error
from ._lowlevel import CALLBACK_SCOPE, IMMEDIATE_PAST, SYSTEM_ALLOCATOR, ffi, lib

# Waits block in C for at most this long at a time, then come back to the
# interpreter so that signal handlers (Ctrl-C: KeyboardInterrupt) run.
WAIT_SLICE_S = 0.05
_WAIT_SLICE_NS = int(WAIT_SLICE_S * 1e9)
_DEADLINE_EXCEEDED = lib.PW_STATUS_DEADLINE_EXCEEDED
_monotonic_ns = time.monotonic_ns  # CLOCK_MONOTONIC, as pw_clock_now


def wait_event_ptr(ptr, timeout):
    """Waits for the C event |ptr|; raises its error, or DeadlineExceededError
    after |timeout| seconds (None: no limit; 0: poll). The C wait runs with
    the GIL released, in slices of WAIT_SLICE_S."""
    if timeout is None:
        end = None
    else:
        end = _monotonic_ns() + max(0, int(timeout * 1e9))
    while True:
        now = _monotonic_ns()
        if end is None or end - now > _WAIT_SLICE_NS:
            deadline = now + _WAIT_SLICE_NS
        else:
            deadline = end
        status = lib.pw_event_wait(ptr, deadline)
        if not status:
            return
        if lib.pw_status_code(status) != _DEADLINE_EXCEEDED or lib.pw_event_is_ready(ptr):
            if lib.pw_status_code(status) == _DEADLINE_EXCEEDED:
                # Completed just after the slice ran out: use its own status.
                lib.pw_status_free(status)
                status = lib.pw_event_wait(ptr, IMMEDIATE_PAST)
                if not status:
                    return
            raise take_error(status)
        lib.pw_status_free(status)
        # Back in the interpreter: a pending KeyboardInterrupt is raised here.
        if end is not None and _monotonic_ns() >= end:
            raise DeadlineExceededError(f"wait timed out after {timeout:g} s")


def event_error(ptr):
    """The error of a completed event (None if OK)."""
    status = lib.pw_event_wait(ptr, IMMEDIATE_PAST)
    return take_error(status) if status else None


# ---- callbacks from C ----------------------------------------------------------

# Handles of callbacks registered and not yet run (keeps them alive).
_pending = set()
_pending_lock = threading.Lock()


class _Callback:
    __slots__ = ("fn", "handle")

    def __init__(self, fn):
        self.fn = fn
        self.handle = ffi.new_handle(self)


def report_callback_error(what):
    """Reports an exception raised by user code called from C, which has no
    caller to raise it to: through sys.excepthook, like a thread would."""
    try:
        exc_type, exc, tb = sys.exc_info()
        sys.stderr.write(f"pathways: exception in {what}:\n")
        sys.excepthook(exc_type, exc, tb)
    except BaseException:  # pragma: no cover - never let it reach C
        pass


@ffi.def_extern()
def pwpy_event_callback(user, status):
    """Runs on the completing thread (often a CPU backend pool thread)."""
    with CALLBACK_SCOPE:
        cb = ffi.from_handle(user)
        with _pending_lock:
            _pending.discard(cb)
        error = take_error(status) if status else None
        try:
            cb.fn(error)
        except BaseException:
            report_callback_error(f"event callback {cb.fn!r}")


def on_ready(ptr, fn):
    cb = _Callback(fn)
    with _pending_lock:
        _pending.add(cb)
    status = lib.pw_event_on_ready(ptr, lib.pwpy_event_callback, cb.handle)
    if status:
        # The callback never runs when registration fails.
        with _pending_lock:
            _pending.discard(cb)
        raise take_error(status)


# ---- Event -----------------------------------------------------------------------


class Event:
    """A one-shot completion: OK or an error. Event() makes one that you
    complete with signal()/fail(); the runtime hands out others (a buffer's
    ready event, an execution's done event).

    Thread-safe. Holds one reference to the C event, dropped by close(), by
    leaving a `with` block, or when garbage collected."""

    __slots__ = ("_ptr", "__weakref__")

    def __init__(self):
        out = ffi.new("pw_event_t**")
        check(lib.pw_event_create(SYSTEM_ALLOCATOR, out))
        self._ptr = out[0]

    @classmethod
    def _adopt(cls, ptr):
        """Wraps a C event reference the caller owns."""
        ev = cls.__new__(cls)
        ev._ptr = ptr
        return ev

    def _live(self):
        ptr = self._ptr
        if ptr is None:
            raise ValueError("operation on a closed Event")
        return ptr

    @property
    def ready(self):
        """True once the event has completed (OK or not). Never blocks."""
        return bool(lib.pw_event_is_ready(self._live()))

    def wait(self, timeout=None):
        """Blocks until the event completes; raises its error if it failed.
        |timeout| in seconds (None: no limit, 0: poll); DeadlineExceededError
        when it runs out. Ctrl-C interrupts the wait (KeyboardInterrupt)."""
        ptr = self._live()
        if lib.pw_event_is_ready(ptr):
            status = lib.pw_event_wait(ptr, IMMEDIATE_PAST)
            if status:
                raise take_error(status)
            return
        wait_event_ptr(ptr, timeout)

    def exception(self, timeout=None):
        """Waits like wait() and returns the event's error (None if OK)
        instead of raising it. Raises DeadlineExceededError if the timeout
        runs out first."""
        ptr = self._live()
        if not lib.pw_event_is_ready(ptr):
            try:
                wait_event_ptr(ptr, timeout)
            except Exception:
                if not lib.pw_event_is_ready(ptr):
                    raise
        return event_error(ptr)

    def add_done_callback(self, fn):
        """Calls fn(error) once when the event completes, where error is None
        or the exception the event failed with. fn runs on the completing
        thread (a CPU backend pool thread, say) with the GIL held, or at once
        on this thread if the event has already completed. Exceptions it
        raises are reported through sys.excepthook."""
        on_ready(self._live(), fn)

    def signal(self):
        """Completes the event OK (FailedPreconditionError if it already
        completed)."""
        check(lib.pw_event_signal(self._live()))

    def fail(self, error):
        """Completes the event with |error| (a PathwaysError, or any
        exception: UNKNOWN with its text)."""
        from ._errors import status_from_exception
        check(lib.pw_event_fail(self._live(), status_from_exception(error)))

    @staticmethod
    def all(events):
        """An event that completes when every one of |events| has, with the
        first error observed."""
        return _combine(lib.pw_event_join, events)

    @staticmethod
    def any(events):
        """An event that completes with the status of the first of |events|
        to complete."""
        return _combine(lib.pw_event_any, events)

    def close(self):
        """Drops this object's reference (idempotent)."""
        ptr, self._ptr = self._ptr, None
        if ptr is not None:
            lib.pw_event_release(ptr)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        ptr = getattr(self, "_ptr", None)
        if ptr is not None and _lowlevel is not None and lib is not None:
            self._ptr = None
            lib.pw_event_release(ptr)

    def __repr__(self):
        ptr = self._ptr
        if ptr is None:
            return "<Event closed>"
        if not lib.pw_event_is_ready(ptr):
            return "<Event pending>"
        err = event_error(ptr)
        return "<Event ok>" if err is None else f"<Event failed: {type(err).__name__}: {err}>"


def _combine(fn, events):
    events = list(events)
    arr = ffi.new("pw_event_t*[]", max(1, len(events)))
    for i, e in enumerate(events):
        if not isinstance(e, Event):
            raise TypeError(f"events[{i}] is {type(e).__name__}, not an Event")
        arr[i] = e._live()
    out = ffi.new("pw_event_t**")
    check(fn(SYSTEM_ALLOCATOR, arr, len(events), out))
    return Event._adopt(out[0])
