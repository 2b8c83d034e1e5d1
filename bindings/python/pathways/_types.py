"""Value types: dtypes, mesh shapes, shardings, array specs, CPU programs.

Plain Python values with readable reprs in the library's own text forms
("f32[256,8] split(0,all)", "2x4"), converted to and from the C structs.
"""

import re

import numpy as np

from ._errors import InvalidArgumentError, check
from ._lowlevel import ffi, lib

# ---- dtypes ------------------------------------------------------------------

# pathways dtype code, short name, numpy/ml_dtypes name, the numpy dtype a
# host array of it has. Values are the C enum's (docs/formats.md). numpy has
# no bfloat16 or float8 types: those are held as their bit patterns, in
# uint16 / uint8 arrays of the same width (views; ml_dtypes arrays of those
# types are accepted and viewed the same way).
_DTYPES = (
    (lib.PW_DTYPE_F32, "f32", "float32", np.dtype(np.float32)),
    (lib.PW_DTYPE_F64, "f64", "float64", np.dtype(np.float64)),
    (lib.PW_DTYPE_I32, "i32", "int32", np.dtype(np.int32)),
    (lib.PW_DTYPE_I64, "i64", "int64", np.dtype(np.int64)),
    (lib.PW_DTYPE_U8, "u8", "uint8", np.dtype(np.uint8)),
    (lib.PW_DTYPE_BF16, "bf16", "bfloat16", np.dtype(np.uint16)),
    (lib.PW_DTYPE_F16, "f16", "float16", np.dtype(np.float16)),
    (lib.PW_DTYPE_I8, "i8", "int8", np.dtype(np.int8)),
    (lib.PW_DTYPE_I16, "i16", "int16", np.dtype(np.int16)),
    (lib.PW_DTYPE_U16, "u16", "uint16", np.dtype(np.uint16)),
    (lib.PW_DTYPE_U32, "u32", "uint32", np.dtype(np.uint32)),
    (lib.PW_DTYPE_U64, "u64", "uint64", np.dtype(np.uint64)),
    (lib.PW_DTYPE_BOOL, "bool", "bool", np.dtype(np.bool_)),
    (lib.PW_DTYPE_F8E4M3FN, "f8e4m3fn", "float8_e4m3fn", np.dtype(np.uint8)),
    (lib.PW_DTYPE_F8E5M2, "f8e5m2", "float8_e5m2", np.dtype(np.uint8)),
    (lib.PW_DTYPE_C64, "c64", "complex64", np.dtype(np.complex64)),
)
_CODE_TO_NUMPY = {code: dt for code, _, _, dt in _DTYPES}
_CODE_TO_NAME = {code: name for code, name, _, _ in _DTYPES}
#: The dtypes numpy lacks, held as same-width unsigned bit patterns.
VIEW_DTYPES = frozenset(name for code, name, npname, dt in _DTYPES if npname != dt.name)
_VIEW_NUMPY_NAMES = frozenset(n for _, _, n, dt in _DTYPES if n != dt.name)
# A numpy dtype means its own pathways dtype (uint16 is u16, never bf16).
_NUMPY_TO_CODE = {dt: code for code, _, npname, dt in _DTYPES if npname == dt.name}
_NAME_TO_CODE = {name: code for code, name, _, _ in _DTYPES}
_NAME_TO_CODE.update({npname: code for code, _, npname, _ in _DTYPES})

#: The numpy dtype a host array of each pathways dtype has, by short name.
DTYPES = {name: dt for _, name, _, dt in _DTYPES}
#: The numpy / ml_dtypes name of each pathways dtype, by short name.
NUMPY_NAMES = {name: npname for _, name, npname, _ in _DTYPES}


def dtype_code(dtype):
    """The C dtype of |dtype|: a pathways name ("f32", "bf16") or numpy /
    ml_dtypes name ("float32", "bfloat16", "float8_e4m3fn"), a numpy dtype
    or anything np.dtype() accepts (np.float16, bool). A numpy dtype maps to
    its own type: uint16 is u16; bf16 and the f8 types are asked for by
    name (or by an ml_dtypes dtype, which has that name). TypeError for a
    dtype pathways cannot hold (the message lists those it can)."""
    if isinstance(dtype, str) and dtype in _NAME_TO_CODE:
        return _NAME_TO_CODE[dtype]
    try:
        dt = np.dtype(dtype)
        code = _NUMPY_TO_CODE.get(dt)
        if code is None and dt.name in _VIEW_NUMPY_NAMES and dt.isnative:
            code = _NAME_TO_CODE[dt.name]  # ml_dtypes' bfloat16, float8_*
    except TypeError:
        code = None
    if code is None:
        raise TypeError(
            f"dtype {dtype!r} is not supported by pathways; use one of "
            + ", ".join(f"{n} ({NUMPY_NAMES[n]})" for n in DTYPES))
    return code


def numpy_dtype(code):
    """The numpy dtype of a host array of C dtype |code| (uint16 for bf16,
    uint8 for the f8 types)."""
    return _CODE_TO_NUMPY[code]


def dtype_name(code):
    return _CODE_TO_NAME.get(code, "invalid")


def bf16_from_float(values):
    """bf16 bit patterns (a uint16 array) of |values| (anything numpy turns
    into float32): round to nearest, ties to even, NaN kept as a quiet NaN,
    as pw_f32_to_bf16 does. For Buffer.from_array(..., dtype="bf16")."""
    f = np.ascontiguousarray(values, dtype=np.float32)
    u = f.view(np.uint32)
    with np.errstate(over="ignore"):
        bits = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    bits[nan] = ((u[nan] >> 16) & 0x8000).astype(np.uint16) | np.uint16(0x7FC0)
    return bits


def bf16_to_float(bits):
    """The float32 values of bf16 bit patterns |bits| (exact)."""
    b = np.ascontiguousarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)


# ---- mesh shapes -------------------------------------------------------------


def mesh_tuple(mesh):
    """Normalises a mesh shape: "2x4", 8, (2, 4) or [2, 4] -> (2, 4)."""
    if isinstance(mesh, str):
        m = ffi.new("pw_mesh_shape_t*")
        check(lib.pw_mesh_shape_parse(mesh.encode(), m))
        return tuple(m.dims[0:m.rank])
    if isinstance(mesh, (int, np.integer)):
        mesh = (int(mesh),)
    try:
        dims = tuple(int(d) for d in mesh)
    except TypeError:
        raise TypeError(f"a mesh shape is 'AxB', an int or a tuple of ints, not {mesh!r}") from None
    fill_mesh(ffi.new("pw_mesh_shape_t*"), dims)
    return dims


def fill_mesh(cmesh, dims):
    """Fills a pw_mesh_shape_t (checked by the library)."""
    if not 1 <= len(dims) <= lib.PW_MAX_MESH_RANK or any(d < 1 or d >= 1 << 32 for d in dims):
        raise InvalidArgumentError(
            f"mesh shape {dims!r}: rank must be 1..{lib.PW_MAX_MESH_RANK} and every dim >= 1")
    cmesh.rank = len(dims)
    for i, d in enumerate(dims):
        cmesh.dims[i] = d
    check(lib.pw_mesh_shape_check(cmesh if ffi.typeof(cmesh).kind == "pointer"
                                  else ffi.addressof(cmesh)))
    return cmesh


def mesh_text(dims):
    return "x".join(str(d) for d in dims)


def mesh_from_c(cmesh):
    return tuple(cmesh.dims[0:cmesh.rank])


# ---- shardings ---------------------------------------------------------------

ALL = "all"  # mesh_axis meaning every device of the mesh, row-major


class Sharding:
    """How a global array is laid out over a mesh: replicated, or split in
    equal blocks along |tensor_axis| over mesh axis |mesh_axis| (an int, or
    "all" for every device of the mesh). Immutable; repr is the program
    text form: replicated, split(0,all), split(1,0)."""

    __slots__ = ("kind", "tensor_axis", "mesh_axis")

    def __init__(self, kind="replicated", tensor_axis=0, mesh_axis=ALL):
        if kind not in ("replicated", "split"):
            raise ValueError(f"sharding kind must be 'replicated' or 'split', not {kind!r}")
        if mesh_axis != ALL:
            mesh_axis = int(mesh_axis)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "tensor_axis", int(tensor_axis) if kind == "split" else 0)
        object.__setattr__(self, "mesh_axis", mesh_axis if kind == "split" else 0)

    def __setattr__(self, name, value):
        raise AttributeError("Sharding is immutable")

    @property
    def replicated(self):
        return self.kind == "replicated"

    def __repr__(self):
        if self.kind == "replicated":
            return "replicated"
        return f"split({self.tensor_axis},{self.mesh_axis})"

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, str):
            other = Sharding.parse(other)
        return (isinstance(other, Sharding) and self.kind == other.kind
                and self.tensor_axis == other.tensor_axis and self.mesh_axis == other.mesh_axis)

    def __hash__(self):
        return hash((self.kind, self.tensor_axis, self.mesh_axis))

    _SPLIT = re.compile(r"^split\((\d+),(\d+|all)\)$")

    @classmethod
    def parse(cls, text):
        """Parses "replicated" or "split(T,M)" (M a number or "all")."""
        if isinstance(text, Sharding):
            return text
        t = text.replace(" ", "")
        if t == "replicated":
            return REPLICATED
        m = cls._SPLIT.match(t)
        if not m:
            raise InvalidArgumentError(f"bad sharding {text!r}: expected replicated or split(T,M)")
        return cls("split", int(m.group(1)), m.group(2) if m.group(2) == ALL else int(m.group(2)))

    def _to_c(self, cs):
        if self.kind == "replicated":
            cs.kind, cs.tensor_axis, cs.mesh_axis = lib.PW_SHARDING_REPLICATED, 0, 0
        else:
            cs.kind = lib.PW_SHARDING_SPLIT
            cs.tensor_axis = self.tensor_axis
            cs.mesh_axis = lib.PW_MESH_AXIS_ALL if self.mesh_axis == ALL else self.mesh_axis

    @classmethod
    def _from_c(cls, cs):
        if cs.kind == lib.PW_SHARDING_REPLICATED:
            return REPLICATED
        axis = ALL if cs.mesh_axis == lib.PW_MESH_AXIS_ALL else cs.mesh_axis
        return cls("split", cs.tensor_axis, axis)


REPLICATED = Sharding()


def replicated():
    """Every device holds the whole array."""
    return REPLICATED


def split(tensor_axis=0, mesh_axis=ALL):
    """Split |tensor_axis| in equal blocks over |mesh_axis| ("all": every
    device of the mesh, row-major)."""
    return Sharding("split", tensor_axis, mesh_axis)


def as_sharding(s):
    if s is None:
        return REPLICATED
    if isinstance(s, Sharding):
        return s
    if isinstance(s, str):
        return Sharding.parse(s)
    raise TypeError(f"expected a Sharding or its text, not {s!r}")


# ---- array specs -------------------------------------------------------------


class ArraySpec:
    """A logical (global) array: numpy dtype, global shape, sharding.
    repr is the program text form, e.g. f32[256,8] split(0,all)."""

    __slots__ = ("dtype", "shape", "sharding", "_code")

    def __init__(self, dtype, shape, sharding=None):
        code = dtype_code(dtype)
        if isinstance(shape, (int, np.integer)):
            shape = (int(shape),)
        shape = tuple(int(d) for d in shape)
        if len(shape) > lib.PW_MAX_RANK:
            raise InvalidArgumentError(f"shape {shape}: rank {len(shape)} exceeds {lib.PW_MAX_RANK}")
        object.__setattr__(self, "_code", code)
        object.__setattr__(self, "dtype", numpy_dtype(code))
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "sharding", as_sharding(sharding))

    def __setattr__(self, name, value):
        raise AttributeError("ArraySpec is immutable")

    @property
    def dtype_name(self):
        """The pathways short name ("bf16"); .dtype is the numpy dtype of
        a host array of it (uint16 for bf16)."""
        return dtype_name(self._code)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    def __repr__(self):
        return f"{self.dtype_name}[{','.join(map(str, self.shape))}] {self.sharding!r}"

    __str__ = __repr__

    def __eq__(self, other):
        if isinstance(other, str):
            other = ArraySpec.parse(other)
        return (isinstance(other, ArraySpec) and self._code == other._code
                and self.shape == other.shape and self.sharding == other.sharding)

    def __hash__(self):
        return hash((self._code, self.shape, self.sharding))

    _TEXT = re.compile(r"^\s*([a-z0-9_]+)\[([0-9,\s]*)\]\s*(.*?)\s*$")

    @classmethod
    def parse(cls, text):
        """Parses "f32[256,8] split(0,all)" (the sharding defaults to
        replicated when left out)."""
        if isinstance(text, ArraySpec):
            return text
        m = cls._TEXT.match(text)
        if not m:
            raise InvalidArgumentError(f"bad array spec {text!r}: expected DTYPE[DIMS] [SHARDING]")
        dims = [d for d in m.group(2).replace(" ", "").split(",") if d]
        sharding = Sharding.parse(m.group(3)) if m.group(3) else REPLICATED
        if m.group(1) not in _NAME_TO_CODE:
            raise InvalidArgumentError(f"bad array spec {text!r}: unknown dtype {m.group(1)!r}")
        return cls(m.group(1), tuple(int(d) for d in dims), sharding)

    def _to_c(self, cspec):
        cspec.dtype = self._code
        cspec.shape.rank = len(self.shape)
        for i, d in enumerate(self.shape):
            cspec.shape.dims[i] = d
        self.sharding._to_c(cspec.sharding)
        return cspec

    def _new_c(self):
        return self._to_c(ffi.new("pw_array_spec_t*"))

    @classmethod
    def _from_c(cls, cspec):
        return cls(_CODE_TO_NAME.get(cspec.dtype, "invalid"),
                   tuple(cspec.shape.dims[0:cspec.shape.rank]),
                   Sharding._from_c(cspec.sharding))


def as_spec(spec):
    if isinstance(spec, ArraySpec):
        return spec
    if isinstance(spec, str):
        return ArraySpec.parse(spec)
    raise TypeError(f"expected an ArraySpec or its text (\"f32[8,4] replicated\"), not {spec!r}")


def shape_from_c(cshape):
    return tuple(cshape.dims[0:cshape.rank])


# ---- CPU backend programs ----------------------------------------------------


class Program:
    """A program of the CPU backend: a kernel name, its parameters in the
    global view and attributes. str() is the program text the backend
    compiles (see include/pathways/backends/cpu.h); the text is produced and
    parsed by the library, so it is exactly what C code would write.

        Program("matmul", inputs=["f32[256,8] split(0,all)", "f32[8,1] replicated"],
                outputs=["f32[256,1] split(0,all)"], attrs={"transpose_b": 0})
    """

    __slots__ = ("kernel", "inputs", "outputs", "attrs")

    def __init__(self, kernel, inputs=(), outputs=(), attrs=None):
        self.kernel = kernel
        self.inputs = [as_spec(s) for s in inputs]
        self.outputs = [as_spec(s) for s in outputs]
        self.attrs = dict(attrs or {})

    def _to_c(self):
        p = ffi.new("pw_cpu_program_t*")
        check(lib.pw_cpu_program_init(p, self.kernel.encode()))
        shape = ffi.new("pw_shape_t*")
        sharding = ffi.new("pw_sharding_t*")
        for add, specs in ((lib.pw_cpu_program_add_input, self.inputs),
                           (lib.pw_cpu_program_add_output, self.outputs)):
            for spec in specs:
                shape.rank = len(spec.shape)
                for i, d in enumerate(spec.shape):
                    shape.dims[i] = d
                spec.sharding._to_c(sharding)
                check(add(p, spec._code, shape, sharding[0]))
        for name, value in self.attrs.items():
            if isinstance(value, str):
                check(lib.pw_cpu_program_set_string(p, name.encode(), value.encode()))
            else:
                check(lib.pw_cpu_program_set_number(p, name.encode(), float(value)))
        return p

    @property
    def text(self):
        p = self._to_c()
        buf = ffi.new("char[]", lib.PW_CPU_PROGRAM_TEXT_MAX)
        n = ffi.new("size_t*")
        check(lib.pw_cpu_program_format(p, buf, lib.PW_CPU_PROGRAM_TEXT_MAX, n))
        return ffi.string(buf, n[0]).decode()

    def __str__(self):
        return self.text

    def __repr__(self):
        args = [repr(self.kernel)]
        args.append("inputs=[" + ", ".join(repr(str(s)) for s in self.inputs) + "]")
        args.append("outputs=[" + ", ".join(repr(str(s)) for s in self.outputs) + "]")
        if self.attrs:
            args.append(f"attrs={self.attrs!r}")
        return f"Program({', '.join(args)})"

    def __eq__(self, other):
        return (isinstance(other, Program) and self.kernel == other.kernel
                and self.inputs == other.inputs and self.outputs == other.outputs
                and self.attrs == other.attrs)

    @classmethod
    def parse(cls, text):
        """Parses program text (the library's parser; errors name the line)."""
        data = text.encode() if isinstance(text, str) else bytes(text)
        p = ffi.new("pw_cpu_program_t*")
        check(lib.pw_cpu_program_parse(data, len(data), p))
        return cls._from_c(p)

    @classmethod
    def _from_c(cls, p):
        attrs = {}
        for i in range(p.attr_count):
            a = p.attrs[i]
            value = a.number if a.kind == lib.PW_CPU_ATTR_NUMBER else ffi.string(a.text).decode()
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            attrs[ffi.string(a.name).decode()] = value
        return cls(ffi.string(p.kernel).decode(),
                   [ArraySpec._from_c(p.inputs[i]) for i in range(p.input_count)],
                   [ArraySpec._from_c(p.outputs[i]) for i in range(p.output_count)],
                   attrs)


def program_bytes(program):
    """Program text bytes from a Program, str or bytes."""
    if isinstance(program, Program):
        return program.text.encode()
    if isinstance(program, str):
        return program.encode()
    if isinstance(program, (bytes, bytearray, memoryview)):
        return bytes(program)
    raise TypeError(f"expected a Program, program text or bytes, not {type(program).__name__}")


_LIB_SPLIT = re.compile(r"split\((\d+) over (?:all devices|mesh axis (\d+))\)")


def parse_spec_text(text):
    """An ArraySpec from the library's own spec text (pw_spec_format, as in
    a graph file's JSON view): "f32[8,4] split(0 over all devices)",
    "... split(1 over mesh axis 0)", "... replicated"."""
    def one(m):
        return f"split({m.group(1)},{m.group(2) if m.group(2) is not None else ALL})"
    return ArraySpec.parse(_LIB_SPLIT.sub(one, text))
