"""The private cffi module (_pathways_ffi) and the little state shared by the
Pythonic layer: which threads are inside a callback from C, and destruction
work deferred out of such callbacks."""

import threading

__all__ = ["ffi", "lib", "INFINITE_FUTURE", "IMMEDIATE_PAST", "SYSTEM_ALLOCATOR",
           "in_callback", "CALLBACK_SCOPE", "defer", "flush_deferred", "close_or_defer"]

try:
    from _pathways_ffi import ffi, lib  # noqa: F401  (re-exported)
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "pathways: cannot load the compiled module _pathways_ffi (" + str(exc) + "). "
        "Install the package (pip install --no-build-isolation ./bindings/python, or "
        "cmake --install <build-dir>; docs/python.md, \"Install\"), or, to use a build "
        "tree, put <build-dir>/bindings/python on PYTHONPATH, next to "
        "<source>/bindings/python."
    ) from exc

INFINITE_FUTURE = (1 << 63) - 1
IMMEDIATE_PAST = -(1 << 63)
SYSTEM_ALLOCATOR = lib.pw_allocator_system()

# Threads currently running a callback from C (a Python kernel, an event
# callback, a log line). Destroying a client or a runtime there would wait
# for the very work the thread is doing, so it is refused (explicit close)
# or deferred (garbage collection).
_tls = threading.local()


def in_callback():
    return getattr(_tls, "depth", 0) > 0


class callback_scope:
    """Marks the current thread as inside a callback from C."""

    __slots__ = ()

    def __enter__(self):
        _tls.depth = getattr(_tls, "depth", 0) + 1

    def __exit__(self, *exc):
        _tls.depth -= 1
        return False


CALLBACK_SCOPE = callback_scope()

# Closures deferred by finalizers that ran inside a callback; run by the
# next thread that is not in one (see flush_deferred).
_deferred = []
_deferred_lock = threading.Lock()


def defer(fn):
    with _deferred_lock:
        _deferred.append(fn)


def flush_deferred():
    if not _deferred or in_callback():
        return
    with _deferred_lock:
        work = list(_deferred)
        del _deferred[:]
    for fn in work:
        fn()


class Closeable:
    """close() for `with` blocks and for the garbage collector: a class
    with a close(timeout=...) and a guard attribute (named by |_guard|,
    whose .ptr is None once closed) mixes this in."""

    __slots__ = ()
    _guard = "_life"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        guard = getattr(self, self._guard, None)
        # close_or_defer is None when the interpreter is shutting down.
        if guard is None or guard.ptr is None or close_or_defer is None:
            return
        close_or_defer(self.close)


def close_or_defer(close):
    """For finalizers: close(timeout=0) now, or later off this thread when
    this thread is in a callback or calls on the object are in flight (a
    finalizer must neither wait for its own pool thread nor block)."""
    if in_callback():
        defer(close)
        return
    try:
        close(timeout=0)
    except RuntimeError:
        defer(close)
