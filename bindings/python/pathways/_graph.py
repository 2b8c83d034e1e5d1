"""Graphs: a builder with readable reprs, submission, and armed graphs."""

import threading

from . import _lowlevel
from ._handle import ClientHandle
from ._errors import FailedPreconditionError, check, take_error
from ._event import Event
from ._lowlevel import ffi, in_callback, lib
from ._objects import Executable, _adopt_buffer, _vslice_handle
from ._types import ArraySpec, Sharding, as_sharding, as_spec, mesh_text, parse_spec_text



def _fill_args(cargs, args):
    """Writes the handle ids of Buffers |args| into the C array |cargs|."""
    i = 0
    try:
        for i, b in enumerate(args):
            bid = b._id
            if not bid:
                raise ValueError(f"argument {i} is a released Buffer")
            cargs[i].id = bid
    except AttributeError:
        raise TypeError(f"argument {i} is {type(args[i]).__name__}, not a Buffer") from None


class _Call:
    """`with _Call(graph) as ptr:` runs a call on |graph| inside its
    client's guard (Graph._enter)."""

    __slots__ = ("graph",)

    def __init__(self, graph):
        self.graph = graph

    def __enter__(self):
        return self.graph._enter()

    def __exit__(self, *exc):
        self.graph.client._box.exit()
        return False


def _output_ids(couts, nout):
    """The output handle ids a submit wrote into |couts|."""
    if nout == 1:
        return (couts[0].id,)
    return [couts[k].id for k in range(nout)]


class _Runs:
    """run() over the class's submit(): Graph and ArmedGraph."""

    __slots__ = ()

    def run(self, *args, donate=None, timeout=None):
        """submit(), wait for the execution, and return its outputs (one
        Buffer, or a tuple if the graph has several outputs)."""
        ex = self.submit(*args, donate=donate)
        ex.wait(timeout)
        return ex.outputs[0] if len(ex.outputs) == 1 else ex.outputs


class Value:
    """An edge of a graph: output |output| of node |node|, with its spec.
    repr: %node (first output) or %node.output."""

    __slots__ = ("graph", "node", "output", "spec", "vslice")

    def __init__(self, graph, node, output, spec, vslice):
        self.graph = graph
        self.node = node
        self.output = output
        self.spec = spec
        self.vslice = vslice

    @property
    def ref(self):
        return f"%{self.node}" if self.output == 0 else f"%{self.node}.{self.output}"

    def __repr__(self):
        return f"{self.ref}: {self.spec}"


class _Node:
    __slots__ = ("index", "kind", "name", "param", "executable", "vslice", "inputs", "outputs")

    def describe(self):
        outs = ", ".join(str(v.spec) for v in self.outputs)
        where = f" on {mesh_text(self.vslice.mesh)}"
        if self.kind == "parameter":
            label = f" {self.name!r}" if self.name else ""
            return f"%{self.index} = parameter {self.param}{label}: {outs}{where}"
        args = ", ".join(v.ref for v in self.inputs)
        label = f"{self.name!r} " if self.name else ""
        if self.kind == "transfer":
            return f"%{self.index} = {label}transfer({args}): {outs}{where}"
        if self.kind == "decoded":  # a node of a graph file (Client.decode_graph)
            lhs = ", ".join(v.ref for v in self.outputs) or "()"
            return f"{lhs} = {self.name}({args}): {outs or '()'}{where}"
        if self.kind == "host":
            lhs = (f"%{self.index}" if len(self.outputs) <= 1
                   else "(" + ", ".join(v.ref for v in self.outputs) + ")")
            return f"{lhs} = {label}host({args}): {outs or '()'}{where}"
        lhs = (f"%{self.index}" if len(self.outputs) == 1
               else "(" + ", ".join(v.ref for v in self.outputs) + ")")
        return f"{lhs} = {label}{self.executable.name}({args}): {outs}{where}"


class Graph(_Runs, ClientHandle):
    """A program: parameters (arrays supplied at submit), compute nodes
    (an executable on a virtual slice) and outputs. Build it, then submit
    it as often as you like: the first submit (or finalize()) validates and
    lowers it once.

        g = client.graph("step")
        x = g.parameter(vs, "f32[256,8] split(0,all)")
        w = g.parameter(vs, "f32[8,1] replicated")
        z = g.compute(matmul, x, w, name="logits")
        g.output(z)
        ex = g.submit(xbuf, wbuf)      # returns at once
        ex.outputs[0].numpy()          # waits for the value
    """

    _RELEASE = "pw_graph_release"
    _HANDLE_ATTR = "_id"

    __slots__ = ("client", "name", "_id", "_h", "_hv", "_nodes", "_params", "_outputs",
                 "_finalized", "_lock", "_cargs", "_couts", "_cdone", "_donate", "_out_meta",
                 "__weakref__")

    def __init__(self, client, name=None):
        out = ffi.new("pw_graph_t*")
        box = client._box
        with box as ptr:
            check(lib.pw_graph_create(ptr, out))
            box.live += 1
        self.client = client
        self.name = name
        self._h = out
        self._id = out.id
        self._nodes = {}
        self._params = []
        self._outputs = []
        self._finalized = False
        self._lock = threading.Lock()
        self._cargs = self._couts = self._cdone = None
        self._donate = {}

    def _enter(self):
        """Enters the client's guard for a call on this graph: the C
        client; the caller exits the guard (self.client._box.exit())."""
        if not self._id:
            raise ValueError("operation on a released Graph")
        return self.client._box.enter("a Graph")

    def _enter_call(self):
        return _Call(self)

    @classmethod
    def _adopt_decoded(cls, client, out, name, view, vslices):
        """Wraps graph handle |out| that pw_graph_decode just made (counted
        already), finalized, recording its parameters, nodes and outputs
        from |view| (the file's JSON view) for submit and repr. Values are
        numbered by the file's buffer ids."""
        g = object.__new__(cls)
        g.client, g.name, g._h, g._id = client, name, out, out.id
        g._nodes, g._params, g._outputs = {}, [], []
        g._lock = threading.Lock()
        g._cargs = g._couts = g._cdone = None
        g._donate = {}
        g._finalized = True
        bufs = {}
        for b in view["buffers"]:
            vs = vslices[b["vslice"]]
            spec = parse_spec_text(b["spec"])
            if b.get("sharding", "").startswith("P("):  # tiled: with the mesh's axis names
                spec = ArraySpec(spec.dtype_name, spec.shape, Sharding.parse(b["sharding"]))
            bufs[b["id"]] = Value(g, b["id"], 0, spec, vs)
        for k, bid in enumerate(view["parameters"]):
            n = _Node()
            n.index, n.kind, n.name, n.param = bid, "parameter", None, k
            n.executable, n.vslice, n.inputs = None, bufs[bid].vslice, ()
            n.outputs = (bufs[bid],)
            g._nodes[bid] = n
            g._params.append(n)
        for node in view["nodes"]:
            n = _Node()
            n.kind, n.param, n.executable = "decoded", None, None
            n.name = node.get("name") or ("transfer" if "executable" not in node else "op")
            n.inputs = tuple(bufs[i] for i in node["inputs"])
            n.outputs = tuple(bufs[i] for i in node["outputs"])
            n.vslice = vslices[node["vslice"]]
            n.index = node["outputs"][0] if node["outputs"] else -1 - node["id"]
            g._nodes[n.index] = n
        g._outputs = [bufs[i] for i in view["outputs"]]
        g.finalize()
        return g

    @property
    def id(self):
        return self._id

    # -- building

    def parameter(self, vslice, spec, name=None):
        """Adds the next parameter: an array of |spec| (ArraySpec or text
        "f32[8,4] split(0,all)") living on |vslice|. Returns its Value."""
        spec = as_spec(spec)
        cvs = _vslice_handle(vslice)
        cspec = spec._new_c(vslice.mesh)
        node = ffi.new("uint32_t*")
        with _Call(self) as ptr:
            check(lib.pw_graph_add_parameter(ptr, self._h[0], cvs, cspec, node))
        n = _Node()
        n.index, n.kind, n.name, n.param = node[0], "parameter", name, len(self._params)
        n.executable, n.vslice, n.inputs = None, vslice, ()
        n.outputs = (Value(self, node[0], 0, spec, vslice),)
        self._nodes[n.index] = n
        self._params.append(n)
        return n.outputs[0]

    def compute(self, executable, *inputs, vslice=None, name=None):
        """Adds a node running |executable| over |inputs| (Values of this
        graph) on |vslice| (default: the one it was compiled on). Returns its
        output Value, or a tuple of them if it has several."""
        if not isinstance(executable, Executable):
            raise TypeError(f"expected an Executable, not {type(executable).__name__}")
        vslice = vslice if vslice is not None else executable.vslice
        cvs = _vslice_handle(vslice)
        cin = ffi.new("pw_value_t[]", max(1, len(inputs)))
        for i, v in enumerate(inputs):
            if not isinstance(v, Value) or v.graph is not self:
                raise TypeError(f"input {i} of {name or executable.name!r} is not a Value of "
                                f"this graph: {v!r}")
            cin[i].node = v.node
            cin[i].output = v.output
        node = ffi.new("uint32_t*")
        cname = name.encode() if name else ffi.NULL
        if not executable._id:
            raise ValueError("operation on a released Executable")
        eh = (executable._id,)
        with _Call(self) as ptr:
            check(lib.pw_graph_add_compute(ptr, self._h[0], cname, eh, cvs, cin, len(inputs),
                                           node))
        n = _Node()
        n.index, n.kind, n.name, n.param = node[0], "compute", name, None
        n.executable, n.vslice, n.inputs = executable, vslice, tuple(inputs)
        n.outputs = tuple(Value(self, node[0], k, spec, vslice)
                          for k, spec in enumerate(executable.outputs))
        self._nodes[n.index] = n
        return n.outputs[0] if len(n.outputs) == 1 else n.outputs

    def transfer(self, value, vslice, sharding, name=None):
        """Adds a node moving |value| onto |vslice| (another virtual slice,
        possibly spanning several physical ones, or the same one) laid out
        as |sharding| ("replicated", "split(0,all)", a Sharding). Only the
        shard-to-shard copies needed are made, by the runtime's transport,
        in the destination's gang order. Returns the moved Value."""
        if not isinstance(value, Value) or value.graph is not self:
            raise TypeError(f"transfer input is not a Value of this graph: {value!r}")
        sharding = as_sharding(sharding)
        cs = ffi.new("pw_sharding_t*")
        sharding._to_c(cs, len(value.spec.shape) if getattr(value, "spec", None) is not None
                       else None, vslice.mesh)
        node = ffi.new("uint32_t*")
        cname = name.encode() if name else ffi.NULL
        cvs = _vslice_handle(vslice)
        with _Call(self) as ptr:
            check(lib.pw_graph_add_transfer(ptr, self._h[0], cname, (value.node, value.output),
                                            cvs, cs[0], node))
        n = _Node()
        n.index, n.kind, n.name, n.param = node[0], "transfer", name, None
        n.executable, n.vslice, n.inputs = None, vslice, (value,)
        spec = ArraySpec(value.spec.dtype_name, value.spec.shape, sharding)
        n.outputs = (Value(self, node[0], 0, spec, vslice),)
        self._nodes[n.index] = n
        return n.outputs[0]

    def add_host(self, fn, vslice, inputs=(), out_specs=(), name=None):
        """Adds a host node: |fn|(call) runs on the host of |vslice|'s slice,
        in its gang order (after the slice's earlier ops completed, before
        its later ones launch), once per run, on a runtime thread with the
        GIL taken. call.inputs[k][m] / call.outputs[k][m] are numpy views of
        the shards on mesh device m (no copies; valid during the call):
        read the inputs, fill the outputs (|out_specs|: ArraySpecs or text,
        on |vslice|'s mesh). An exception fails the node (named in the
        message) and its dependents, like a failed launch. |fn| may be the
        name of a task registered with Client.register_host_task (then the
        graph can be encoded). Returns the output Value, a tuple of them,
        or None without outputs."""
        from ._host import forget, new_task
        inputs = tuple(inputs)
        specs = [as_spec(s) for s in out_specs]
        cvs = _vslice_handle(vslice)
        cin = ffi.new("pw_value_t[]", max(1, len(inputs)))
        for i, v in enumerate(inputs):
            if not isinstance(v, Value) or v.graph is not self:
                raise TypeError(f"input {i} of host node {name!r} is not a Value of this "
                                f"graph: {v!r}")
            cin[i].node = v.node
            cin[i].output = v.output
        cspecs = ffi.new("pw_array_spec_t[]", max(1, len(specs)))
        for k, s in enumerate(specs):
            s._to_c(cspecs[k], getattr(vslice, "mesh", None))
        node = ffi.new("uint32_t*")
        cname = name.encode() if name else ffi.NULL
        if isinstance(fn, str):
            with _Call(self) as ptr:
                check(lib.pw_graph_add_host_by_name(ptr, self._h[0], cname, fn.encode(), cvs,
                                                    cin, len(inputs), cspecs, len(specs), node))
        else:
            ctask = new_task(fn, repr(name or getattr(fn, "__name__", "host")))
            try:
                with _Call(self) as ptr:
                    check(lib.pw_graph_add_host(ptr, self._h[0], cname, ctask, cvs, cin,
                                                len(inputs), cspecs, len(specs), node))
            except BaseException:
                forget(ctask)
                raise
        n = _Node()
        n.index, n.kind, n.name, n.param = node[0], "host", name, None
        n.executable, n.vslice, n.inputs = None, vslice, inputs
        n.outputs = tuple(Value(self, node[0], k, s, vslice) for k, s in enumerate(specs))
        self._nodes[n.index] = n
        if not n.outputs:
            return None
        return n.outputs[0] if len(n.outputs) == 1 else n.outputs

    def output(self, *values):
        """Declares |values| as the next graph outputs, in order."""
        for v in values:
            if not isinstance(v, Value) or v.graph is not self:
                raise TypeError(f"graph output must be a Value of this graph, not {v!r}")
            with _Call(self) as ptr:
                check(lib.pw_graph_add_output(ptr, self._h[0], (v.node, v.output)))
            self._outputs.append(v)

    def finalize(self):
        """Validates and lowers the graph (errors name the node). Idempotent;
        the graph is frozen afterwards. Returns self."""
        with _Call(self) as ptr:
            if not self._finalized:
                check(lib.pw_graph_finalize(ptr, self._h[0]))
                self._finalized = True
            self._cargs = ffi.new("pw_buffer_t[]", max(1, len(self._params)))
            self._couts = ffi.new("pw_buffer_t[]", max(1, len(self._outputs)))
            self._cdone = ffi.new("pw_event_t**")
            self._hv = self._h[0]  # the handle by value, made once
            self._out_meta = tuple((v.spec, v.vslice) for v in self._outputs)
        return self

    @property
    def finalized(self):
        return self._finalized

    @property
    def parameters(self):
        """The parameter Values, in order."""
        return tuple(n.outputs[0] for n in self._params)

    @property
    def outputs(self):
        """The output Values, in order."""
        return tuple(self._outputs)

    def counts(self):
        """The library's counts: parameters, computes, outputs, edges."""
        c = ffi.new("pw_graph_counts_t*")
        c.struct_size = ffi.sizeof("pw_graph_counts_t")
        with _Call(self) as ptr:
            check(lib.pw_graph_counts(ptr, self._h[0], c))
        return {"parameters": c.parameters, "computes": c.computes, "outputs": c.outputs,
                "edges": c.edges}

    # -- submission

    def _donate_options(self, donate):
        key = tuple(bool(d) for d in donate)
        if len(key) != len(self._params):
            raise ValueError(f"donate has {len(key)} flags, the graph has "
                             f"{len(self._params)} parameters")
        opts = self._donate.get(key)
        if opts is None:
            flags = ffi.new("bool[]", key)
            opts = ffi.new("pw_submit_options_t*")
            opts.struct_size = ffi.sizeof("pw_submit_options_t")
            opts.donate = flags
            self._donate[key] = opts = (opts, flags)
        return opts[0]

    def submit(self, *args, donate=None):
        """Runs the graph once on Buffers |args| (one per parameter, in
        order) and returns an Execution at once: its outputs are Buffers that
        become ready later, its done event completes when every op has.
        |donate|: one flag per argument; a donated argument is consumed (its
        Buffer is released) and its memory may be reused for an output.
        Thread-safe."""
        box = self.client._box
        if not self._finalized:
            self.finalize()
        nargs = len(self._params)
        nout = len(self._outputs)
        if len(args) != nargs:
            raise TypeError(f"graph {self.name or ''!r} takes {nargs} argument(s), got {len(args)}")
        opts = ffi.NULL if donate is None else self._donate_options(donate)
        if not self._id:
            raise ValueError("operation on a released Graph")
        cptr = box.enter("a Graph")  # Graph._enter, inline: the hot path
        lock = self._lock
        mine = lock.acquire(False)
        try:
            if mine:
                cargs, couts, cdone = self._cargs, self._couts, self._cdone
            else:  # another thread is submitting this graph: private arrays
                cargs = ffi.new("pw_buffer_t[]", max(1, nargs))
                couts = ffi.new("pw_buffer_t[]", max(1, nout))
                cdone = ffi.new("pw_event_t**")
            _fill_args(cargs, args)
            status = lib.pw_graph_submit(cptr, self._hv, cargs, nargs, opts, couts, nout, cdone)
            if status:
                raise take_error(status)
            ids = _output_ids(couts, nout)
            done = cdone[0]
            box.live += nout
        finally:
            if mine:
                lock.release()
            box.exit()
        return _execution(self, box, args, ids, done, donate)

    def encode(self, vslices=None, *, executables_by_hash: bool = False) -> bytes:
        """The graph as a graph file (CBOR bytes, docs/formats.md), which
        Client.decode_graph (here or in another process) turns back into a
        graph. |vslices|: the graph's virtual slices in the order to number
        them (the decoder is given them in that order; default: by first
        use). Executables are written inline (program and options), or by
        their hash with |executables_by_hash| (the decoder then needs
        them). Deterministic: equal graphs give equal bytes. Python host
        tasks (add_host with a callable) cannot be encoded: register them
        by name (Client.register_host_task)."""
        from ._graphfile import encode_graph
        return encode_graph(self, vslices, executables_by_hash=executables_by_hash)

    def arm(self):
        """Arms the graph for repeated submission: finalizes it (errors
        name the node) and returns an ArmedGraph, whose submit() skips the
        handle look-up and the graph reference of each Graph.submit and
        runs in execution blocks of its own. The ArmedGraph keeps the graph
        alive: this Graph may be released while it is open. Close it
        (close(), `with`, or garbage collection) before reusing its
        memory; closing the client closes it."""
        _lowlevel.flush_deferred()
        return ArmedGraph(self)

    def __repr__(self):
        computes = sum(1 for n in self._nodes.values() if n.kind != "parameter")
        state = "finalized" if self._finalized else "building"
        if not self._id:
            state = "released"
        head = (f"<Graph {self.name or ''!r} ({state}): {len(self._params)} parameter(s), "
                f"{computes} compute(s), {len(self._outputs)} output(s)")
        lines = [head]
        for index in sorted(self._nodes):
            lines.append("  " + self._nodes[index].describe())
        if self._outputs:
            lines.append("  outputs: " + ", ".join(v.ref for v in self._outputs))
        return "\n".join(lines) + ">"


def _new_event():
    return object.__new__(Event)


def _new_execution():
    return object.__new__(Execution)


def _execution(graph, box, args, ids, done, donate):
    """The Execution of a submission of |graph| that returned output handle
    ids |ids| (counted already in |box|, the client's) and the done event
    reference |done|; marks the Buffers donated from |args| released."""
    client = graph.client
    outputs = tuple([_adopt_buffer(client, bid, spec, vslice)
                     for bid, (spec, vslice) in zip(ids, graph._out_meta)])
    if donate is not None:
        for k, d in enumerate(donate):
            if d and args[k]._id:
                args[k]._id = 0
                box.live -= 1
    ev = _new_event()
    ev._ptr = done
    ex = _new_execution()
    ex.graph, ex.outputs, ex.done = graph, outputs, ev
    return ex


# ---- armed graphs ----------------------------------------------------------------


class _ArmedBox:
    """The C armed graph (pw_graph_exec_t*), shared by the ArmedGraph and
    its client's box (_ClientBox.armed) so that whichever closes first
    leaves the other a None. |lock| serialises the C calls on it (the C
    API allows one thread at a time per armed graph): submissions, and the
    destruction, which then never overlaps a submission or another
    destruction in progress."""

    __slots__ = ("ptr", "lock")

    def __init__(self, ptr):
        self.ptr = ptr
        self.lock = threading.Lock()

    def destroy(self, cbox):
        """Waits for the armed graph's runs and frees it (GIL released);
        idempotent. |cbox|: its client's _ClientBox, which must still hold
        the C client."""
        with self.lock:
            ptr, self.ptr = self.ptr, None
            if ptr is None:
                return
            check(lib.pw_graph_exec_destroy(ptr))
            # Only now: a client closing meanwhile on another thread found
            # this box in |armed| and is waiting for the lock, not
            # destroying the C client under this call.
            cbox.armed.discard(self)
            cbox.live -= 1


class ArmedGraph(_Runs):
    """A graph armed for repeated submission (Graph.arm()): what CUDA calls
    an instantiated graph. submit() and run() are Graph's, with the same
    arguments, checks, outputs (an Execution) and errors, minus the
    per-submission handle look-up and graph reference; runs may overlap,
    like the graph's own.

        with g.arm() as step:
            for batch in batches:
                ex = step.submit(w, batch, donate=[True, False])
                w = ex.outputs[0]

    close() (or leaving a `with` block, or garbage collection) waits for
    its runs, then frees it (see docs/python.md for a known gap in the C
    library's wait); closing its client (or the runtime) closes it first.
    A closed ArmedGraph raises ValueError when used. Thread-safe:
    submissions from several threads are serialised.
    Not to be closed from inside a callback (FailedPreconditionError: it
    would wait for the pool thread running the callback); one collected
    there is closed later, off that thread."""

    __slots__ = ("graph", "client", "_box", "_cargs", "_couts", "_cdone", "__weakref__")

    def __init__(self, graph):
        self._box = None
        if not isinstance(graph, Graph):
            raise TypeError(f"expected a Graph, not {type(graph).__name__}")
        graph.finalize()
        self.graph = graph
        self.client = graph.client
        # One set of C arrays: submissions are serialised by the box's lock.
        self._cargs = ffi.new("pw_buffer_t[]", max(1, len(graph._params)))
        self._couts = ffi.new("pw_buffer_t[]", max(1, len(graph._outputs)))
        self._cdone = ffi.new("pw_event_t**")
        out = ffi.new("pw_graph_exec_t**")
        cbox = graph.client._box
        # Registered inside the guard: a client closing meanwhile either
        # refuses this or finds it in |armed| and destroys it first.
        with _Call(graph) as ptr:
            check(lib.pw_graph_exec_create(ptr, graph._hv, out))
            self._box = box = _ArmedBox(out[0])
            cbox.armed.add(box)
            cbox.live += 1

    def _closed_error(self):
        name = self.graph.name or ""
        if self.client._box.closing:
            return ValueError(f"operation on an ArmedGraph of closed client "
                              f"{self.client.name!r} (graph {name!r})")
        return ValueError(f"operation on a closed ArmedGraph (graph {name!r})")

    @property
    def name(self):
        return self.graph.name

    @property
    def closed(self):
        box = self._box
        return box is None or box.ptr is None

    def submit(self, *args, donate=None):
        """Graph.submit through the armed graph: runs it once on Buffers
        |args| (one per parameter, in order) and returns an Execution at
        once. |donate|: one flag per argument; a donated argument is
        consumed (its Buffer is released)."""
        box = self._box
        if box.ptr is None:
            raise self._closed_error()
        g = self.graph
        nargs = len(g._params)
        nout = len(g._outputs)
        if len(args) != nargs:
            raise TypeError(f"graph {g.name or ''!r} takes {nargs} argument(s), got {len(args)}")
        opts = ffi.NULL if donate is None else g._donate_options(donate)
        cargs, couts, cdone = self._cargs, self._couts, self._cdone
        cbox = self.client._box
        # The client's guard too: a close waits for this submission, then
        # destroys the armed graph (which waits for its runs).
        if cbox.try_enter() is None:
            raise self._closed_error()
        try:
            with box.lock:
                ptr = box.ptr
                if ptr is None:  # closed by another thread meanwhile
                    raise self._closed_error()
                _fill_args(cargs, args)
                status = lib.pw_graph_exec_submit(ptr, cargs, nargs, opts, couts, nout, cdone)
                if status:
                    raise take_error(status)
                ids = _output_ids(couts, nout)
                done = cdone[0]
                cbox.live += nout
        finally:
            cbox.exit()
        return _execution(g, cbox, args, ids, done, donate)

    def close(self):
        """Waits for its runs (pw_graph_exec_destroy; they always complete,
        failed or not), then frees it. Idempotent; a no-op once its client is
        closed. Not allowed from inside a callback."""
        box = self._box
        if box is None or box.ptr is None:
            return
        if in_callback():
            raise FailedPreconditionError(
                "cannot close an ArmedGraph from inside a pathways callback (a pool thread): "
                "it waits for its runs")
        box.destroy(self.client._box)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        box = getattr(self, "_box", None)
        if box is None or box.ptr is None or _lowlevel is None:
            return
        cbox = self.client._box
        if in_callback():
            _lowlevel.defer(lambda: box.destroy(cbox))
        else:
            box.destroy(cbox)

    def __repr__(self):
        g = self.graph
        if self.closed:
            return f"<ArmedGraph {g.name or ''!r} closed>"
        return (f"<ArmedGraph {g.name or ''!r}: {len(g._params)} parameter(s), "
                f"{len(g._outputs)} output(s)>")


class Execution:
    """One submission of a graph: |outputs| (Buffers, futures) and |done|
    (an Event completing when every op has, with the first error)."""

    __slots__ = ("graph", "outputs", "done")

    def __init__(self, graph, outputs, done):
        self.graph = graph
        self.outputs = outputs
        self.done = done

    @property
    def ready(self):
        return self.done.ready

    def wait(self, timeout=None):
        """Waits for the whole execution; raises its first error."""
        self.done.wait(timeout)
        return self

    def result(self, timeout=None):
        """wait(), then the outputs (one Buffer or a tuple)."""
        self.done.wait(timeout)
        return self.outputs[0] if len(self.outputs) == 1 else self.outputs

    def __repr__(self):
        state = self.done
        return (f"<Execution of graph {self.graph.name or ''!r}: {len(self.outputs)} output(s), "
                f"{repr(state)[1:-1].replace('Event ', '')}>")
