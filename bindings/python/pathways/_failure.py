"""Failure and topology (include/pathways/runtime.h, "Failure"): the
client's topology callback, and what a virtual slice says about lost
slices."""

import threading

from ._errors import error_class
from ._lowlevel import CALLBACK_SCOPE, ffi, lib
from ._types import mesh_from_c

_NO_SLICE = 0xFFFFFFFF
_CHANGES = {lib.PW_TOPOLOGY_SLICE_LOST: "lost", lib.PW_TOPOLOGY_SLICE_BACK: "back"}


def borrowed_error(status):
    """The exception of a borrowed pw_status_t (not freed); None for OK."""
    if status == ffi.NULL:
        return None
    code = lib.pw_status_code(status)
    return error_class(code)(ffi.string(lib.pw_status_message(status)).decode("utf-8", "replace"))


class TopologyEvent:
    """One change of a physical slice, as Client.on_topology's callback
    receives it: change ("lost" or "back"), slice (physical index),
    slice_name, losses (the slice's count of losses, this one included),
    cause (for "lost": the exception saying why, e.g. an UnavailableError;
    None for "back"), time_ns (pw_clock_now when the runtime saw it)."""

    __slots__ = ("change", "slice", "slice_name", "losses", "cause", "time_ns")

    def __repr__(self):
        why = f": {self.cause}" if self.cause is not None else ""
        return (f"<TopologyEvent slice {self.slice} {self.slice_name!r} {self.change} "
                f"(losses {self.losses}){why}>")


class _Topology:
    __slots__ = ("fn", "handle", "errors", "last_error", "__weakref__")

    def __init__(self, fn):
        self.fn = fn
        self.handle = ffi.new_handle(self)
        self.errors = 0
        self.last_error = None


@ffi.def_extern()
def pwpy_topology(user, cev):
    """Runs on the runtime's health thread (cffi takes the GIL)."""
    with CALLBACK_SCOPE:
        t = None
        try:
            t = ffi.from_handle(user)
            ev = TopologyEvent()
            ev.change = _CHANGES.get(cev.change, str(cev.change))
            ev.slice = cev.slice
            ev.slice_name = (ffi.string(cev.slice_name).decode("utf-8", "replace")
                             if cev.slice_name != ffi.NULL else "")
            ev.losses = cev.losses
            ev.cause = borrowed_error(cev.cause)
            ev.time_ns = cev.time_ns
            t.fn(ev)
        except BaseException as exc:
            if t is not None:
                t.errors += 1
                t.last_error = exc
            from ._event import report_callback_error
            report_callback_error("topology callback")


_set_lock = threading.Lock()


def set_topology(client, fn):
    if fn is not None and not callable(fn):
        raise TypeError(f"a topology callback must be callable or None, not "
                        f"{type(fn).__name__}")
    box = client._box
    with _set_lock:
        if box.elastics:
            raise ValueError(f"client {client.name!r}: its topology callback is held by an "
                             f"Elastic helper; close the Elastic first")
        with box as ptr:
            if box.topology is not None:
                # Cleared first: when that returns the old callback is not
                # running, so its handle may go (a replacement alone does
                # not promise that).
                from ._errors import check
                check(lib.pw_client_set_topology_callback(ptr, ffi.NULL, ffi.NULL))
                box.topology = None
            if fn is not None:
                t = _Topology(fn)
                box.topology = t  # before C can call it
                status = lib.pw_client_set_topology_callback(ptr, lib.pwpy_topology, t.handle)
                if status:
                    box.topology = None
                    from ._errors import raise_status
                    raise_status(status)


class VSliceInfo:
    """VSlice.info(): mesh, slice_count, first_slice, lost_slices,
    first_lost_slice (None when none is lost), lost_since_bound."""

    __slots__ = ("mesh", "slice_count", "first_slice", "lost_slices", "first_lost_slice",
                 "lost_since_bound")

    def _asdict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return "VSliceInfo(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


def vslice_info(vslice):
    c = ffi.new("pw_vslice_info_t*")
    c.struct_size = ffi.sizeof("pw_vslice_info_t")
    h = vslice._handle()
    from ._errors import check
    with vslice.client._box.using("a VSlice") as ptr:
        check(lib.pw_vslice_info(ptr, h, c))
    info = VSliceInfo()
    info.mesh = mesh_from_c(c.mesh)
    info.slice_count = c.slice_count
    info.first_slice = c.first_slice
    info.lost_slices = c.lost_slices
    info.first_lost_slice = None if c.first_lost_slice == _NO_SLICE else c.first_lost_slice
    info.lost_since_bound = bool(c.lost_since_bound)
    return info
