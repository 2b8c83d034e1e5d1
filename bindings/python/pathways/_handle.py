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
    the same. Work already submitted keeps what it needs."""

    __slots__ = ()
    _RELEASE = None
    _HANDLE_ATTR = "_id"

    def _take_handle(self):
        hid = getattr(self, self._HANDLE_ATTR, 0)
        if hid:
            setattr(self, self._HANDLE_ATTR, 0)
        return hid

    def release(self):
        hid = self._take_handle()
        box = self.client._box
        if hid and box.ptr is not None:
            box.live -= 1
            check(getattr(lib, self._RELEASE)(box.ptr, (hid,)))

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
        if not hid:
            return
        box = self.client._box
        if box.ptr is not None:
            box.live -= 1
            status = getattr(lib, self._RELEASE)(box.ptr, (hid,))
            if status:
                lib.pw_status_free(status)
