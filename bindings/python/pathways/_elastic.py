"""Elastic training (include/pathways/elastic.h): a job of Python
callbacks that keeps running when a slice dies, on fewer slices, and grows
back when it returns."""

import threading
import weakref

from . import _lowlevel
from ._errors import FailedPreconditionError, check, status_from_exception, take_error
from ._failure import borrowed_error
from ._lifetime import CLOSE_TIMEOUT_S
from ._lowlevel import Closeable, CALLBACK_SCOPE, ffi, in_callback, lib
from ._objects import Buffer
from ._owned import OwnedBox
from ._snapshot import check_prefix, check_step, new_dir_store
from ._types import ArraySpec, fill_mesh, mesh_text, mesh_tuple

_EVENT_NAMES = {lib.PW_ELASTIC_SNAPSHOT: "snapshot", lib.PW_ELASTIC_SLICE_LOST: "slice_lost",
                lib.PW_ELASTIC_SLICE_BACK: "slice_back", lib.PW_ELASTIC_RESTORED: "restored",
                lib.PW_ELASTIC_REMESHED: "remeshed", lib.PW_ELASTIC_GROWN: "grown"}


class StateBuffer(Buffer):
    """A view of one of an Elastic's state buffers (Elastic.state(i)): a
    Buffer the helper owns. Read it, pass it to submissions (never with
    donate=True); releasing it (or dropping it) only forgets the view. It
    is valid until the state is replaced (the next set_state, a restore)."""

    __slots__ = ()

    def _take_handle(self):
        self._id = 0  # the helper's handle: never released here
        return 0


class ElasticEvent:
    """What on_event receives: kind ("snapshot", "slice_lost", "slice_back",
    "restored", "remeshed", "grown"), step (the job's step; for "restored"
    the snapshot's), slice (the physical slice, for lost / back; else None),
    slice_count (slices in use after it), cause (for "slice_lost": the
    exception saying why, or None when a failed step told it), elapsed_ns
    (restored / remeshed / grown: how long the re-mesh took)."""

    __slots__ = ("kind", "step", "slice", "slice_count", "cause", "elapsed_ns")

    def __repr__(self):
        where = f" slice {self.slice}" if self.slice is not None else ""
        return (f"<ElasticEvent {self.kind} step {self.step}{where}, "
                f"{self.slice_count} slice(s)>")


class _Job:
    """What the C helper calls back into: the Python functions, the
    Elastic (strong while run() or close() is in progress, else a weak
    reference) and the exception a callback raised (re-raised by run)."""

    __slots__ = ("setup", "step", "teardown", "on_event", "handle", "ref", "strong",
                 "exc", "exc_text", "event_errors", "__weakref__")

    def __init__(self, setup, step, teardown, on_event):
        self.setup, self.step, self.teardown, self.on_event = setup, step, teardown, on_event
        self.handle = ffi.new_handle(self)
        self.ref = None
        self.strong = None
        self.exc = None
        self.exc_text = None
        self.event_errors = 0

    def elastic(self):
        return self.strong if self.strong is not None else (self.ref() if self.ref else None)

    def fail(self, exc, what):
        status = status_from_exception(exc, f"python {what}")
        self.exc = exc
        self.exc_text = ffi.string(lib.pw_status_message(status)).decode("utf-8", "replace")
        return status


@ffi.def_extern()
def pwpy_elastic_setup(user, celastic, slices, count, restoring):
    with CALLBACK_SCOPE:
        job = ffi.from_handle(user)
        try:
            job.setup(job.elastic(), [slices[i] for i in range(count)], bool(restoring))
        except BaseException as exc:
            return job.fail(exc, "setup")
        job.exc = job.exc_text = None
        return ffi.NULL


@ffi.def_extern()
def pwpy_elastic_step(user, celastic, step):
    with CALLBACK_SCOPE:
        job = ffi.from_handle(user)
        try:
            job.step(job.elastic(), step)
        except BaseException as exc:
            return job.fail(exc, f"step {step}")
        job.exc = job.exc_text = None
        return ffi.NULL


@ffi.def_extern()
def pwpy_elastic_teardown(user, celastic):
    with CALLBACK_SCOPE:
        job = ffi.from_handle(user)
        if job.teardown is None:
            return
        try:
            job.teardown(job.elastic())
        except BaseException:
            from ._event import report_callback_error
            report_callback_error("Elastic teardown")


@ffi.def_extern()
def pwpy_elastic_event(user, cev):
    with CALLBACK_SCOPE:
        job = ffi.from_handle(user)
        if job.on_event is None:
            return
        try:
            ev = ElasticEvent()
            kind = cev.kind
            ev.kind = _EVENT_NAMES.get(kind) or ffi.string(lib.pw_elastic_event_name(kind)).decode()
            ev.step = cev.step
            ev.slice = (cev.slice if kind in (lib.PW_ELASTIC_SLICE_LOST, lib.PW_ELASTIC_SLICE_BACK)
                        else None)
            ev.slice_count = cev.slice_count
            ev.cause = borrowed_error(cev.cause)
            ev.elapsed_ns = cev.elapsed_ns
            job.on_event(ev)
        except BaseException:
            job.event_errors += 1
            from ._event import report_callback_error
            report_callback_error("Elastic on_event")


def _callable(fn, what, required):
    if fn is None and not required:
        return None
    if not callable(fn):
        raise TypeError(f"Elastic: {what} must be callable, not {type(fn).__name__}")
    return fn


def _uint(value, what, bits=32):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Elastic: {what} must be an int, not {type(value).__name__}")
    if not 0 <= value < (1 << bits):
        raise ValueError(f"Elastic: {what} must be in [0, 2**{bits}), not {value}")
    return value


def _seconds_ns(value, what):
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"Elastic: {what} must be a number of seconds, not "
                        f"{type(value).__name__}")
    if value < 0:
        raise ValueError(f"Elastic: {what} must be >= 0 seconds, not {value!r}")
    return int(round(value * 1e9))


class Elastic(Closeable):
    """Runs a job's steps on as many healthy slices of |slice_mesh| as there
    are (pw_elastic_t), snapshotting its state every |snapshot_every| steps
    and recovering from a lost slice by itself: re-mesh onto the healthy
    slices, restore the last snapshot (resharded), replay from its step;
    grow back at a snapshot boundary when the slice returns.

        def setup(el, slices, restoring):     # build on these physical slices
            job.vs = client.vslice(f"{2 * len(slices)}", slices=slices)
            ...
            el.place(0, job.vs, spec)          # where state 0 lives here
            if not restoring:
                el.set_state(0, job.vs.put(x0, spec.sharding))
        def step(el, i):                       # a function of the state and i
            ex = g.submit(el.state(0), job.ones); ex.wait()
            el.set_state(0, ex.outputs[0])     # the helper takes the buffer
        def teardown(el):
            ...                                # release what setup made
        el = pw.Elastic(client, "2", 1, setup=setup, step=step, teardown=teardown)
        el.run(0, 30)

    |states|: how many state buffers (an int) or their names (a sequence of
    str, used in snapshots). The callbacks run on the thread calling run(),
    with the GIL; an exception in setup or step becomes the step's error
    status (so an UnavailableError of a lost slice is recovered from like
    any other loss) and, when it ends the run, run() re-raises that very
    exception. Exceptions of teardown and on_event are reported through
    sys.excepthook. The helper holds the client's topology callback while
    it lives (Client.on_topology is refused meanwhile).

    Options: min_slices / max_slices (0: 1 / every slice of the mesh),
    snapshot_every (steps; 0: 10), return_wait (seconds to wait for a lost
    slice to come back before re-meshing; 0: at once), drain_deadline
    (seconds; 0: 30), max_recoveries (0: 100), keep (snapshots held; 0: 2),
    store_dir / key_prefix (persist snapshots to a dir store).

    Close it (close(), `with`, or garbage collection) before its client;
    closing the client closes it first (calling teardown if set up)."""

    __slots__ = ("client", "slice_mesh", "state_names", "state_count", "_life", "_job",
                 "_driver", "__weakref__")

    def __init__(self, client, slice_mesh, states=1, *, setup, step, teardown=None,
                 on_event=None, min_slices=0, max_slices=0, snapshot_every=0, return_wait=0,
                 drain_deadline=None, max_recoveries=0, keep=0, store_dir=None,
                 key_prefix=None):
        from ._runtime import Client
        self._life = None
        self._driver = None
        if not isinstance(client, Client):
            raise TypeError(f"Elastic: expected a Client, not {type(client).__name__}")
        _lowlevel.flush_deferred()
        job = _Job(_callable(setup, "setup", True), _callable(step, "step", True),
                   _callable(teardown, "teardown", False), _callable(on_event, "on_event", False))
        opts = ffi.new("pw_elastic_options_t*")
        lib.pw_elastic_options_init(opts)
        dims = mesh_tuple(slice_mesh)
        fill_mesh(ffi.addressof(opts, "slice_mesh"), dims)
        keep_alive = [job]
        if isinstance(states, bool):
            raise TypeError("Elastic: states must be a count (int) or a sequence of names")
        if isinstance(states, int):
            names = None
            count = states
        elif isinstance(states, str):
            raise TypeError("Elastic: states must be a count or a sequence of names, not a str "
                            "(use [name] for one)")
        else:
            try:
                names = list(states)
            except TypeError:
                raise TypeError(f"Elastic: states must be a count or a sequence of names, not "
                                f"{type(states).__name__}") from None
            for i, n in enumerate(names):
                if not isinstance(n, str):
                    raise TypeError(f"Elastic: states[{i}] is {type(n).__name__}, not a str")
            count = len(names)
        if not 1 <= count <= 1024:
            raise ValueError(f"Elastic: a job has 1 to 1024 state buffers, not {count}")
        opts.state_count = count
        if names is not None:
            cnames = [ffi.new("char[]", n.encode("utf-8")) for n in names]
            arr = ffi.new("char*[]", cnames)
            keep_alive += [cnames, arr]
            opts.state_names = ffi.cast("const char* const*", arr)
        opts.min_slices = _uint(min_slices, "min_slices")
        opts.max_slices = _uint(max_slices, "max_slices")
        opts.snapshot_every = _uint(snapshot_every, "snapshot_every")
        opts.max_recoveries = _uint(max_recoveries, "max_recoveries")
        opts.keep = _uint(keep, "keep")
        opts.return_wait_ns = _seconds_ns(return_wait, "return_wait")
        opts.drain_deadline_ns = _seconds_ns(drain_deadline, "drain_deadline")
        prefix = check_prefix(key_prefix)
        keep_alive.append(prefix)
        opts.key_prefix = prefix
        cjob = ffi.new("pw_elastic_job_t*")
        cjob.struct_size = ffi.sizeof("pw_elastic_job_t")
        cjob.user = job.handle
        cjob.setup = lib.pwpy_elastic_setup
        cjob.step = lib.pwpy_elastic_step
        cjob.teardown = lib.pwpy_elastic_teardown
        cjob.on_event = lib.pwpy_elastic_event
        box = client._box
        out = ffi.new("pw_elastic_t**")
        from ._failure import _set_lock
        with _set_lock, box as ptr:
            if box.topology is not None:
                raise ValueError(f"Elastic: client {client.name!r} has a topology callback "
                                 f"(Client.on_topology); clear it first, the helper needs it")
            if store_dir is not None:
                opts.store = new_dir_store(store_dir, client.runtime)[0]
            check(lib.pw_elastic_create(ptr, opts, cjob, out))  # C destroys the store on failure
            box.elastics += 1

            def released():
                box.elastics -= 1

            self._life = OwnedBox(out[0], f"Elastic of client {client.name!r}", box,
                                  lib.pw_elastic_destroy, order=0, keep=keep_alive,
                                  on_destroyed=released)
        job.ref = weakref.ref(self)
        self._job = job
        self.client = client
        self.slice_mesh = dims
        self.state_names = tuple(names) if names is not None else None
        self.state_count = count

    # -- guards

    def _enter(self, what):
        """The guard, for a call |what| that only the driving thread may
        make while run() is in progress."""
        d = self._driver
        if d is not None and d != threading.get_ident():
            raise RuntimeError(f"Elastic.{what}: run() is in progress on another thread; only "
                               f"that thread (its callbacks) may call it")
        if self._life is None:
            raise ValueError("operation on an Elastic that was never created")
        return self._life.using()

    @property
    def closed(self):
        return self._life is None or self._life.closing or self._life.ptr is None

    def _index(self, index, what):
        if isinstance(index, str) and self.state_names is not None:
            try:
                return self.state_names.index(index)
            except ValueError:
                raise KeyError(f"Elastic.{what}: no state named {index!r} (states: "
                               f"{list(self.state_names)})") from None
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"Elastic.{what}: a state is named by an int index"
                            f"{' or its name' if self.state_names else ''}, not "
                            f"{type(index).__name__}")
        if not 0 <= index < self.state_count:
            raise IndexError(f"Elastic.{what}: state index {index} out of range "
                             f"({self.state_count} state buffer(s))")
        return index

    # -- from the callbacks

    def place(self, index, vslice, spec):
        """From setup: state |index| (int, or its name) lives on |vslice|
        with |spec| (an ArraySpec or its text) on this mesh; a restore
        reshards onto it."""
        from ._objects import _vslice_handle
        i = self._index(index, "place")
        cvs = _vslice_handle(vslice)
        if not isinstance(spec, (ArraySpec, str)):
            raise TypeError(f"Elastic.place: spec must be an ArraySpec or its text, not "
                            f"{type(spec).__name__}")
        cspec = ArraySpec.parse(spec)._new_c()
        with self._enter("place") as eptr:
            check(lib.pw_elastic_place(eptr, i, cvs, cspec))

    def set_state(self, index, buffer):
        """From setup (the start) or step: |buffer| is state |index| from
        now on. The helper takes the buffer's handle: the Buffer object is
        released by this call (using it afterwards raises ValueError; read
        the state through state(i)). The previous state is released."""
        i = self._index(index, "set_state")
        if not isinstance(buffer, Buffer):
            raise TypeError(f"Elastic.set_state: expected a Buffer, not {type(buffer).__name__}")
        if isinstance(buffer, StateBuffer):
            raise ValueError("Elastic.set_state: that Buffer is a view of a state the helper "
                             "owns already (Elastic.state)")
        if buffer.client is not self.client:
            raise ValueError(f"Elastic.set_state: the buffer belongs to client "
                             f"{buffer.client.name!r}, not {self.client.name!r}")
        bid = buffer._id
        if not bid:
            raise ValueError("Elastic.set_state: the buffer is released")
        box = self.client._box
        with self._enter("set_state") as eptr, box.using("a Buffer"):
            check(lib.pw_elastic_set_state(eptr, i, (bid,)))
            # Ownership moved to the helper (as a donation does).
            if buffer._id == bid:
                buffer._id = 0
                box.live -= 1

    def state(self, index):
        """State |index| (int or name) now: a StateBuffer, a view the
        helper owns (do not donate it). NotFoundError while it has none."""
        i = self._index(index, "state")
        out = ffi.new("pw_buffer_t*")
        with self._enter("state") as eptr:
            check(lib.pw_elastic_state(eptr, i, out))
        b = object.__new__(StateBuffer)
        b.client = self.client
        b._id = out.id
        b._spec = None
        b.vslice = None
        return b

    # -- running

    @property
    def slice_count(self):
        """Physical slices in use now."""
        with self._enter("slice_count") as eptr:
            return lib.pw_elastic_slice_count(eptr)

    def run(self, first_step, count):
        """Runs steps first_step .. first_step + count - 1, recovering from
        lost slices. Returns when the last step completed. Raises the
        exception a setup or step raised when it ended the run (not one the
        helper recovered from), UnavailableError when fewer than min_slices
        are healthy after return_wait or after max_recoveries, or the
        library's error."""
        check_step(first_step, "first_step")
        check_step(count, "count")
        if self._driver is not None:
            raise RuntimeError("Elastic.run: already running (on "
                               f"{'this' if self._driver == threading.get_ident() else 'another'}"
                               " thread)")
        job = self._job
        with self._enter("run") as eptr:
            self._driver = threading.get_ident()
            job.strong = self
            job.exc = job.exc_text = None
            try:
                status = lib.pw_elastic_run(eptr, first_step, count)
            finally:
                self._driver = None
                job.strong = None
            exc, text = job.exc, job.exc_text
            job.exc = job.exc_text = None
        if not status:
            return
        err = take_error(status)
        if exc is not None and text and text in err.message:
            if hasattr(exc, "add_note"):
                exc.add_note(f"pathways: Elastic.run ended: {err.message}")
            raise exc
        raise err

    def stats(self):
        """What the helper did: steps_completed, steps_replayed,
        recoveries, growths, snapshots, slice_count, and the last
        recovery's last_detect_ns / last_drain_ns / last_restore_ns /
        last_first_step_ns. Any thread."""
        c = ffi.new("pw_elastic_stats_t*")
        c.struct_size = ffi.sizeof("pw_elastic_stats_t")
        if self._life is None:
            raise ValueError("operation on an Elastic that was never created")
        with self._life.using() as eptr:
            check(lib.pw_elastic_stats(eptr, c))
        return {k: getattr(c, k) for k in (
            "steps_completed", "steps_replayed", "recoveries", "growths", "snapshots",
            "slice_count", "last_detect_ns", "last_drain_ns", "last_restore_ns",
            "last_first_step_ns")}

    # -- lifetime

    def close(self, timeout=CLOSE_TIMEOUT_S):
        """Tears the job down if it is set up (teardown runs here), releases
        the state and the snapshots, and gives the client's topology
        callback back. Idempotent; waits for a run() in progress on another
        thread (RuntimeError after |timeout|). Not from a callback
        (FailedPreconditionError)."""
        life = self._life
        if life is None or life.ptr is None:
            return
        if in_callback():
            raise FailedPreconditionError(
                "cannot close an Elastic from inside a pathways callback (its own setup/step "
                "included)")
        job = self._job
        job.strong = self
        try:
            life.close(timeout)
        finally:
            job.strong = None

    def __repr__(self):
        if self.closed:
            return "<Elastic closed>"
        try:
            n = self.slice_count
        except (ValueError, RuntimeError):
            n = "?"
        return (f"<Elastic of client {self.client.name!r}: slices of {mesh_text(self.slice_mesh)}, "
                f"{self.state_count} state(s), {n} slice(s) in use>")
