"""Python-defined CPU kernels.

A Python function registered with Runtime.register_kernel becomes a kernel
of the runtime's CPU backend: programs name it like a built-in one, and the
backend calls it from its pool threads (through an extern "Python" cffi
callback, which takes the GIL) once per device of each launch, with that
device's shards as numpy arrays.

Those arrays are Python-owned copies, not views of device memory: the
inputs are copied in (and made read-only), the outputs are copied out to
device memory when the kernel returns. A kernel may therefore keep an array
past its call (in a global, a closure, a traceback) without ever touching
device memory the runtime has since reused or freed: what it writes there
later reaches no buffer. For the small shards Python kernels are used for,
two copies cost less than building numpy views of C memory did.
"""

import numpy as np

from ._errors import FailedPreconditionError, status_from_exception
from ._lowlevel import CALLBACK_SCOPE, ffi, lib
from ._types import Program, dtype_code, mesh_from_c, numpy_dtype, shape_from_c

_DTYPE_GROUPS = {"any": 0, "float": ("f32", "f64"), "int": ("i32", "i64"),
                 "half": ("f16", "bf16"),
                 "integer": ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")}


class Param:
    """One kernel parameter: a name (for messages), the dtypes it accepts
    (None/"any", "float", "int", "half", "integer", or an iterable of dtypes) and its rank (-1:
    any)."""

    __slots__ = ("name", "dtypes", "rank")

    def __init__(self, name=None, dtypes=None, rank=-1):
        self.name = name
        self.dtypes = dtypes
        self.rank = rank

    def mask(self):
        d = self.dtypes
        if d is None or d == "any":
            return lib.PW_CPU_DTYPES_ANY
        if isinstance(d, str) and d in _DTYPE_GROUPS:
            d = _DTYPE_GROUPS[d]
        elif isinstance(d, str):
            d = (d,)
        m = 0
        for x in d:
            m |= 1 << dtype_code(x)
        return m

    def __repr__(self):
        return f"Param({self.name!r}, dtypes={self.dtypes!r}, rank={self.rank})"


class Attr:
    """One attribute a kernel accepts: |kind| float (a number) or str."""

    __slots__ = ("name", "kind", "required")

    def __init__(self, name, kind=float, required=False):
        if kind not in (float, int, str):
            raise TypeError("Attr kind must be float (int) or str")
        self.name = name
        self.kind = kind
        self.required = required

    def __repr__(self):
        return f"Attr({self.name!r}, {self.kind.__name__}, required={self.required})"


def _params(spec, role):
    if isinstance(spec, int):
        return [Param(f"{role}{i}") for i in range(spec)]
    out = []
    for i, p in enumerate(spec):
        if isinstance(p, Param):
            out.append(p)
        elif isinstance(p, str):
            out.append(Param(p))
        else:
            raise TypeError(f"{role}s[{i}]: expected a name or a Param, not {p!r}")
    return out


def _attrs(spec):
    if spec is None:
        return []
    if isinstance(spec, dict):
        return [Attr(name, kind) for name, kind in spec.items()]
    return [a if isinstance(a, Attr) else Attr(a) for a in spec]


class KernelCall:
    """What a Python kernel receives for one device of one launch.

    inputs      this device's input shards: read-only numpy arrays (copies)
    outputs     this device's output shards: writable numpy arrays to fill
                (contents undefined at entry), copied to the device when
                the kernel returns; writes after that reach no buffer
    attrs       {name: float | str}
    mesh        the mesh shape compiled for; mesh_index: this device's
                row-major position in it; device: the backend ordinal
    program     the Program (global specs and shardings); read it during
                the call (it is read from C then, and kept)
    """

    __slots__ = ("inputs", "outputs", "attrs", "mesh", "mesh_index", "device", "_c",
                 "_program")

    @property
    def program(self):
        program = self._program
        if program is None:
            c = self._c
            if c is None:  # the C call it describes is gone
                raise ValueError("KernelCall.program read after the kernel call returned "
                                 "(read it during the call)")
            program = self._program = Program._from_c(c.program)
        return program

    def __repr__(self):
        ins = ", ".join(f"{a.dtype}{list(a.shape)}" for a in self.inputs)
        outs = ", ".join(f"{a.dtype}{list(a.shape)}" for a in self.outputs)
        return (f"<KernelCall device {self.device} position {self.mesh_index} of "
                f"{'x'.join(map(str, self.mesh))}: ({ins}) -> ({outs})>")


def _input_array(shard):
    """A read-only copy of input |shard| (a pw_cpu_input_shard_t)."""
    arr = np.empty(shape_from_c(shard.shape), dtype=numpy_dtype(shard.dtype))
    size = shard.size
    if size:
        if size != arr.nbytes:
            raise ValueError(f"input shard of {size} bytes for {arr.dtype}{list(arr.shape)}")
        ffi.memmove(arr, shard.data, size)
    arr.flags.writeable = False
    return arr


def _output_array(shard):
    """A Python-owned array for output |shard|, copied out after the call."""
    return np.empty(shape_from_c(shard.shape), dtype=numpy_dtype(shard.dtype))


class _Kernel:
    __slots__ = ("name", "fn", "check", "handle", "__weakref__")

    def __init__(self, name, fn, check):
        self.name = name
        self.fn = fn
        self.check = check
        self.handle = ffi.new_handle(self)


@ffi.def_extern()
def pwpy_kernel_run(call):
    with CALLBACK_SCOPE:
        kernel = kc = None
        try:
            kernel = ffi.from_handle(call.user)
            kc = KernelCall()
            kc._c = call
            kc._program = None
            kc.inputs = [_input_array(call.inputs[i]) for i in range(call.input_count)]
            # Ours, not the list the kernel may rebind entries of.
            outs = tuple([_output_array(call.outputs[i]) for i in range(call.output_count)])
            kc.outputs = list(outs)
            attrs = {}
            for i in range(call.attr_count):
                a = call.attrs[i]
                attrs[ffi.string(a.name).decode()] = (
                    a.number if a.kind == lib.PW_CPU_ATTR_NUMBER else ffi.string(a.text).decode())
            kc.attrs = attrs
            kc.mesh = mesh_from_c(call.mesh[0])
            kc.mesh_index = call.mesh_index
            kc.device = call.device
            result = kernel.fn(kc)
            if result is not None:
                if not isinstance(result, (tuple, list)):
                    result = (result,)
                if len(result) != len(outs):
                    raise ValueError(f"returned {len(result)} array(s) for "
                                     f"{len(outs)} output(s)")
                for out, value in zip(outs, result):
                    out[...] = value
            for i, out in enumerate(outs):
                shard = call.outputs[i]
                size = shard.size
                if size:
                    if out.nbytes != size:  # resized in place; memmove reads |size|
                        raise ValueError(f"output {i} was resized in place to "
                                         f"{out.dtype}{list(out.shape)}")
                    ffi.memmove(shard.data, out, size)
            return ffi.NULL
        except BaseException as exc:
            name = kernel.name if kernel is not None else "?"
            return status_from_exception(exc, f"python kernel '{name}'")
        finally:
            if kc is not None:  # kept by the kernel or a traceback: no C left in it
                kc._c = None


@ffi.def_extern()
def pwpy_kernel_check(user, program, mesh):
    with CALLBACK_SCOPE:
        kernel = None
        try:
            kernel = ffi.from_handle(user)
            kernel.check(Program._from_c(program), mesh_from_c(mesh[0]))
            return ffi.NULL
        except BaseException as exc:
            name = kernel.name if kernel is not None else "?"
            return status_from_exception(exc, f"python kernel '{name}' check")


def register_kernel(runtime, name, fn, *, inputs=1, outputs=1, attrs=None,
                    open_attrs=False, same_dtype=False, check=None):
    """Registers |fn| as CPU kernel |name| of |runtime|'s backend.

    fn(call: KernelCall) runs once per device of each launch, on a pool
    thread with the GIL held; it fills call.outputs in place or returns the
    output arrays (one, or a tuple), which are copied in. An exception fails
    the launch: a PathwaysError keeps its code, ValueError/TypeError become
    InvalidArgumentError, anything else UnknownError, with the message.

    inputs/outputs: a count, or a list of names or Param (dtype mask, rank).
    attrs: {name: float|str} (optional ones) or a list of Attr.
    open_attrs: accept attributes not listed. same_dtype: every parameter
    shares one dtype. check(program, mesh): optional validation at compile
    and load; raise to reject (InvalidArgumentError by default).

    Kernels cannot be unregistered; the function is kept alive with the
    runtime. AlreadyExistsError if |name| is taken.
    """
    from ._errors import check as check_status
    ins, outs, attr_list = _params(inputs, "input"), _params(outputs, "output"), _attrs(attrs)
    keep = []

    def cstr(s):
        if s is None:
            return ffi.NULL
        c = ffi.new("char[]", s.encode())
        keep.append(c)
        return c

    def params(ps):
        arr = ffi.new("pw_cpu_param_spec_t[]", max(1, len(ps)))
        for i, p in enumerate(ps):
            arr[i].name = cstr(p.name)
            arr[i].dtypes = p.mask()
            arr[i].rank = p.rank
        keep.append(arr)
        return arr

    cattrs = ffi.new("pw_cpu_attr_spec_t[]", max(1, len(attr_list)))
    for i, a in enumerate(attr_list):
        cattrs[i].name = cstr(a.name)
        cattrs[i].kind = lib.PW_CPU_ATTR_STRING if a.kind is str else lib.PW_CPU_ATTR_NUMBER
        cattrs[i].required = bool(a.required)
    kernel = _Kernel(name, fn, check)
    d = ffi.new("pw_cpu_kernel_def_t*")
    d.struct_size = ffi.sizeof("pw_cpu_kernel_def_t")
    d.name = cstr(name)
    d.input_count = len(ins)
    d.inputs = params(ins)
    d.output_count = len(outs)
    d.outputs = params(outs)
    d.attr_count = len(attr_list)
    d.attrs = cattrs
    d.flags = ((lib.PW_CPU_KERNEL_SAME_DTYPE if same_dtype else 0)
               | (lib.PW_CPU_KERNEL_OPEN_ATTRS if open_attrs else 0))
    d.check = lib.pwpy_kernel_check if check is not None else ffi.NULL
    d.run = lib.pwpy_kernel_run
    d.user = kernel.handle
    cpus = [b for b in runtime.backends if b.kind == "cpu"]
    if not cpus:
        raise FailedPreconditionError("register_kernel: the runtime has no CPU backend "
                                      "(Python kernels run on CpuBackend devices)")
    with runtime._life:
        runtime._kernels.append(kernel)
        for b in cpus:  # every CPU backend of the runtime knows the kernel
            check_status(lib.pw_cpu_backend_register_kernel(b._c, d))
    return fn
