"""The lifetime guard of a Runtime's or a Client's C pointer: an in-use
count of the calls other threads are making with it, which close() waits
for before it frees the C object.

Every call that passes the pointer to C runs between enter() and exit()
(or inside `with guard as ptr:`). enter() never blocks: once a close has
begun it raises ValueError, so a thread never reaches C with a pointer that
is being freed, and a thread that is blocked in a wait (events are waited
for outside the guard) never holds a close up. close() marks the guard
closing, waits for the calls in flight to leave (each is one bounded C
call; the GIL is released while it waits, so Python kernels on the pool
threads keep running), and only then frees the C object. If they have not
left after |timeout| seconds, close() raises RuntimeError and the object
stays open.
"""

import threading

__all__ = ["CLOSE_TIMEOUT_S", "Lifetime"]

#: How long close() waits, by default, for calls in flight on other threads.
CLOSE_TIMEOUT_S = 30.0


class Lifetime:
    """|ptr| (None once closed) and the count of calls using it. |label|
    names the object in errors: "client 'train'" gives "operation on closed
    client 'train'", "operation on a Buffer of closed client 'train'"."""

    __slots__ = ("ptr", "label", "_lock", "_drained", "_calls", "_closing", "_close_lock",
                 "_closer")

    def __init__(self, ptr, label):
        self.ptr = ptr
        self.label = label
        # Reentrant, and taken with `with`: a finalizer (the GC, or a
        # reference dropped) or a signal handler that runs on a thread
        # holding it and releases a handle of this client re-enters it
        # instead of deadlocking, and a KeyboardInterrupt never leaves it
        # held.
        self._lock = threading.RLock()
        self._drained = threading.Condition(self._lock)
        self._calls = 0
        self._closing = False
        # Held by the closing thread (|_closer|) for the whole close: a
        # second close returns once the first has finished.
        self._close_lock = threading.Lock()
        self._closer = None

    def error(self, what=None):
        """The ValueError of a call refused because the object is closed."""
        if what:
            return ValueError(f"operation on {what} of closed {self.label}")
        return ValueError(f"operation on closed {self.label}")

    def enter(self, what=None):
        """Counts a call in and returns the pointer; ValueError (naming
        |what|, the object used) once a close has begun."""
        with self._lock:
            if not self._closing:
                self._calls += 1
                return self.ptr
        raise self.error(what)

    def try_enter(self):
        """enter() for finalizers: the pointer, or None once closing."""
        with self._lock:
            if self._closing:
                return None
            self._calls += 1
        return self.ptr

    def exit(self):
        """Counts a call out (every successful enter() has one)."""
        with self._lock:
            self._calls -= 1
            if self._closing and not self._calls:
                self._drained.notify_all()

    def using(self, what=None):
        """`with guard.using("a Buffer") as ptr:`: enter(what) ... exit()."""
        return _Using(self, what)

    def __enter__(self):
        return self.enter()

    def __exit__(self, *exc):
        self.exit()
        return False

    def _idle(self):
        return not self._calls

    @property
    def closing(self):
        """True from the start of a close (calls are refused) on."""
        return self._closing

    @property
    def in_flight(self):
        return self._calls

    def close(self, destroy, timeout=CLOSE_TIMEOUT_S):
        """Refuses new calls, waits up to |timeout| seconds (None: no limit)
        for those in flight, then calls destroy(ptr). Idempotent: returns
        False if it was closed already (by another thread, say, whose close
        it waited for). If calls are still in flight when the time runs out,
        or destroy raises before freeing anything, the object is reopened
        and the error raised (RuntimeError for the timeout)."""
        me = threading.get_ident()
        if self._closer == me:
            # Reentered on the closing thread (a finalizer the GC ran
            # during the close): the close in progress does it.
            return False
        with self._close_lock:
            self._closer = me
            try:
                return self._close(destroy, timeout)
            finally:
                self._closer = None

    def _close(self, destroy, timeout):
        if self.ptr is None:
            return False
        with self._lock:
            self._closing = True
            try:
                drained = self._drained.wait_for(self._idle, timeout)
            except BaseException:  # KeyboardInterrupt in the wait
                self._closing = False
                raise
            if not drained:
                self._closing = False
                n = self._calls
        if not drained:
            raise RuntimeError(
                f"cannot close {self.label}: {n} call(s) on it still in flight on "
                f"other threads after {timeout:g} s; it stays open")
        ptr, self.ptr = self.ptr, None
        try:
            destroy(ptr)
        except BaseException:
            self.ptr = ptr
            with self._lock:
                self._closing = False
            raise
        return True


class _Using:
    __slots__ = ("life", "what")

    def __init__(self, life, what):
        self.life = life
        self.what = what

    def __enter__(self):
        return self.life.enter(self.what)

    def __exit__(self, *exc):
        self.life.exit()
        return False
