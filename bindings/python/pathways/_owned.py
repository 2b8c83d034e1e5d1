"""The lifetime of a C object that borrows a client (a snapshotter, an
elastic helper): its own guard (pathways._lifetime), registered with the
client's box so that closing the client (or its runtime) destroys it
first; closing it first unregisters it."""

from ._errors import check
from ._lifetime import CLOSE_TIMEOUT_S, Lifetime


class OwnedBox(Lifetime):
    """|ptr| of a C object borrowing the client of |cbox| (a _ClientBox),
    freed by |destroy_fn| (a C function returning a status). |order|: the
    client destroys lower orders first. |keep| holds what C may still call
    or read (callback handles, strings) until the destroy has returned;
    |on_destroyed| runs after it."""

    __slots__ = ("cbox", "destroy_fn", "order", "keep", "on_destroyed", "__weakref__")

    def __init__(self, ptr, label, cbox, destroy_fn, order, keep=None, on_destroyed=None):
        super().__init__(ptr, label)
        self.cbox = cbox
        self.destroy_fn = destroy_fn
        self.order = order
        self.keep = keep
        self.on_destroyed = on_destroyed
        cbox.owned.add(self)

    def close(self, timeout=CLOSE_TIMEOUT_S):
        """Waits for the calls in flight on it, then destroys it; False if
        it was closed already. Idempotent, thread-safe."""
        return Lifetime.close(self, self._destroy, timeout)

    def _destroy(self, ptr):
        check(self.destroy_fn(ptr))
        self.cbox.owned.discard(self)
        done, self.on_destroyed = self.on_destroyed, None
        self.keep = None
        if done is not None:
            done()
