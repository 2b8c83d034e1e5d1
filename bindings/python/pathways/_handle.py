"""Lifetime of a handle in a client's table, shared by VSlice, Executable,
Buffer and Graph."""

from . import _lowlevel
from ._errors import check
from ._lowlevel import lib


class ClientHandle:
    """A handle owned by a Client. Subclasses name the C function that
    releases it (``_RELEASE``) and the attribute holding the id
    (``_HANDLE_ATTR``). ``release()`` (alias ``close()``) drops the handle
    and is idempotent; leaving a ``with`` block and garbage collection do
    the same. Work already submitted keeps what it needs. Once the client
    is closing or closed, releasing is a no-op (the client frees every
    handle it has)."""

    __slots__ = ()
    _RELEASE = None
    _HANDLE_ATTR = "_id"

    def _take_handle(self):
        hid = getattr(self, self._HANDLE_ATTR, 0)
        if hid:
            setattr(self, self._HANDLE_ATTR, 0)
        return hid

    def _release(self, hid):
        """Releases handle |hid| inside the client's guard; the status, or
        None (also when the client is closing)."""
        box = self.client._box
        ptr = box.try_enter()
        if ptr is None:
            return None
        try:
            box.live -= 1
            return getattr(lib, self._RELEASE)(ptr, (hid,))
        finally:
            box.exit()

    def release(self):
        hid = self._take_handle()
        if hid:
            check(self._release(hid))

    def close(self):
        self.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __del__(self):
        if _lowlevel is None:  # interpreter shutdown
            return
        hid = self._take_handle()
        if hid:
            status = self._release(hid)
            if status:
                lib.pw_status_free(status)
