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


class Mesh(tuple):
    """A mesh shape whose axes may be named, as JAX's Mesh names them:
    Mesh(data=2, model=4), Mesh((("data", 2), ("model", 4))), Mesh("data=2,model=4")
    or, unnamed, Mesh((2, 4)). It is the tuple of its dims (so it goes
    wherever a mesh shape does: vslice creation, slices, specs) with
    .axis_names (a tuple of str, or None when unnamed). Like the library's
    pw_mesh_shape_equal, == compares dims only: names are labels."""

    def __new__(cls, axes=None, **named):
        if axes is not None and named:
            raise TypeError("Mesh takes axes or keyword axes, not both")
        if isinstance(axes, Mesh):
            return axes
        names = None
        if named:
            names, dims = tuple(named), tuple(named.values())
        elif isinstance(axes, str):
            m = ffi.new("pw_mesh_shape_t*")
            check(lib.pw_mesh_shape_parse(axes.encode(), m))
            return mesh_from_c(m, named=True)
        elif isinstance(axes, (int, np.integer)):
            dims = (int(axes),)
        else:
            try:
                items = tuple(axes)
            except TypeError:
                raise TypeError(f"a mesh is Mesh(data=2, model=4), (('data', 2), ...), 'AxB', "
                                f"an int or a tuple of ints, not {axes!r}") from None
            if items and all(isinstance(a, (tuple, list)) and len(a) == 2 for a in items):
                names, dims = tuple(a[0] for a in items), tuple(a[1] for a in items)
            elif items and any(isinstance(a, (tuple, list)) for a in items):
                raise InvalidArgumentError(
                    f"mesh {axes!r}: either every axis is (name, size) or none is")
            else:
                dims = items
        try:
            dims = tuple(int(d) for d in dims)
        except (TypeError, ValueError):
            raise TypeError(f"mesh {axes or named!r}: axis sizes are ints") from None
        self = super().__new__(cls, dims)
        self.axis_names = tuple(names) if names is not None else None
        if names is not None and any(not isinstance(n, str) for n in names):
            raise TypeError(f"mesh {axes or named!r}: axis names are str")
        fill_mesh(ffi.new("pw_mesh_shape_t*"), self)  # checked by the library
        return self

    @property
    def shape(self):
        """The dims, as a plain tuple."""
        return tuple(self)

    def axis(self, axis):
        """The index of |axis| (a name, or an index)."""
        if isinstance(axis, (int, np.integer)):
            if not 0 <= int(axis) < len(self):
                raise InvalidArgumentError(f"mesh axis {axis} is out of range ({len(self)} axes)")
            return int(axis)
        if self.axis_names is None or axis not in self.axis_names:
            axes = ", ".join(self.axis_names or map(str, range(len(self))))
            raise InvalidArgumentError(f"no mesh axis {axis!r} (the mesh's axes: {axes})")
        return self.axis_names.index(axis)

    def __repr__(self):
        if self.axis_names is None:
            return f"Mesh({tuple(self)!r})"
        return "Mesh(" + ", ".join(f"{n}={d}" for n, d in zip(self.axis_names, self)) + ")"

    def __str__(self):
        return mesh_text(self)

    def __reduce__(self):
        return (Mesh, (tuple(zip(self.axis_names, self)) if self.axis_names else tuple(self),))


def mesh_tuple(mesh):
    """Normalises a mesh shape: "2x4", 8, (2, 4) or [2, 4] -> (2, 4); a
    mesh with named axes (Mesh(data=2, model=4), (("data", 2), ...) or
    "data=2,model=4") -> that Mesh."""
    if isinstance(mesh, Mesh):
        return mesh
    if isinstance(mesh, str):
        m = ffi.new("pw_mesh_shape_t*")
        check(lib.pw_mesh_shape_parse(mesh.encode(), m))
        return mesh_from_c(m)
    if isinstance(mesh, (int, np.integer)):
        mesh = (int(mesh),)
    if isinstance(mesh, (tuple, list)) and any(isinstance(a, (tuple, list)) for a in mesh):
        return Mesh(mesh)
    try:
        dims = tuple(int(d) for d in mesh)
    except TypeError:
        raise TypeError(f"a mesh shape is 'AxB', an int or a tuple of ints, not {mesh!r}") from None
    fill_mesh(ffi.new("pw_mesh_shape_t*"), dims)
    return dims


def fill_mesh(cmesh, dims):
    """Fills a pw_mesh_shape_t, names included for a named Mesh (checked
    by the library: a bad name is an InvalidArgumentError naming it)."""
    if not 1 <= len(dims) <= lib.PW_MAX_MESH_RANK or any(d < 1 or d >= 1 << 32 for d in dims):
        raise InvalidArgumentError(
            f"mesh shape {tuple(dims)!r}: rank must be 1..{lib.PW_MAX_MESH_RANK} and every "
            f"dim >= 1")
    ptr = cmesh if ffi.typeof(cmesh).kind == "pointer" else ffi.addressof(cmesh)
    ptr.rank = len(dims)
    for i, d in enumerate(dims):
        ptr.dims[i] = d
    check(lib.pw_mesh_shape_check(ptr))
    names = getattr(dims, "axis_names", None)
    if names is not None:
        keep = [ffi.new("char[]", n.encode()) for n in names]
        check(lib.pw_mesh_shape_set_axis_names(ptr, len(keep), ffi.new("char*[]", keep)))
    else:
        check(lib.pw_mesh_shape_set_axis_names(ptr, 0, ffi.NULL))
    return cmesh


def mesh_text(dims):
    names = getattr(dims, "axis_names", None)
    if names is not None:
        return ",".join(f"{n}={d}" for n, d in zip(names, dims))
    return "x".join(str(d) for d in dims)


def mesh_from_c(cmesh, named=False):
    """The mesh of a pw_mesh_shape_t: a Mesh when its axes are named (or
    |named|), else a plain tuple of dims."""
    dims = tuple(cmesh.dims[0:cmesh.rank])
    if cmesh.rank == 0 or ffi.string(cmesh.axis_names[0]) == b"":
        if named:
            return Mesh(dims)
        return dims
    names = tuple(ffi.string(cmesh.axis_names[i]).decode() for i in range(cmesh.rank))
    return Mesh(tuple(zip(names, dims)))


def _c_mesh(mesh):
    """A pw_mesh_shape_t* for |mesh| (None -> NULL)."""
    if mesh is None:
        return ffi.NULL
    return fill_mesh(ffi.new("pw_mesh_shape_t*"), mesh_tuple(mesh))


# ---- shardings ---------------------------------------------------------------

ALL = "all"  # mesh_axis meaning every device of the mesh, row-major


def _axis_value(a, what):
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        if a < 0:
            raise InvalidArgumentError(f"{what}: mesh axis {a} is negative")
        return int(a)
    if isinstance(a, str) and a:
        return a
    raise TypeError(f"{what}: a mesh axis is a name or an index, not {a!r}")


def _spec_entry(e, k):
    if e is None:
        return ()
    if isinstance(e, (tuple, list)):
        return tuple(_axis_value(a, f"P entry {k}") for a in e)
    return (_axis_value(e, f"P entry {k}"),)


def _axis_text(a):
    return str(a)


class Sharding:
    """How a global array is laid out over a mesh: replicated; split in
    equal blocks along |tensor_axis| over mesh axis |mesh_axis| (an int, or
    "all" for every device of the mesh); or tiled, a PartitionSpec (see P):
    per tensor dimension the mesh axes splitting it (names or indices), and
    the mesh axes holding partial sums (|unreduced|). Immutable; repr is the
    library's text form: replicated, split(0,all), P(data, None)
    unreduced(model).

    == compares layouts where that needs no mesh: replicated == P(),
    split(1, 0) == P(None, 0); names and indices compare only through a
    mesh (equivalent(other, shape, mesh), which asks the library)."""

    __slots__ = ("kind", "tensor_axis", "mesh_axis", "spec", "unreduced")

    def __init__(self, kind="replicated", tensor_axis=0, mesh_axis=ALL, *, spec=(),
                 unreduced=()):
        if kind not in ("replicated", "split", "tiled"):
            raise ValueError(f"sharding kind must be 'replicated', 'split' or 'tiled', "
                             f"not {kind!r}")
        if mesh_axis != ALL:
            mesh_axis = int(mesh_axis)
        tiled = kind == "tiled"
        spec = tuple(_spec_entry(e, k) for k, e in enumerate(spec)) if tiled else ()
        unreduced = tuple(_axis_value(a, "unreduced") for a in unreduced) if tiled else ()
        if len(spec) > lib.PW_MAX_RANK:
            raise InvalidArgumentError(f"P with {len(spec)} entries (at most {lib.PW_MAX_RANK})")
        used = [a for e in spec for a in e] + list(unreduced)
        for a in used:
            if used.count(a) > 1:
                raise InvalidArgumentError(f"mesh axis {a!r} is used twice in {self._text(spec, unreduced)}")
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "tensor_axis", int(tensor_axis) if kind == "split" else 0)
        object.__setattr__(self, "mesh_axis", mesh_axis if kind == "split" else 0)
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "unreduced", unreduced)

    def __setattr__(self, name, value):
        raise AttributeError("Sharding is immutable")

    @property
    def replicated(self):
        return self._key() == ("tiled", (), ())

    @staticmethod
    def _text(spec, unreduced):
        parts = []
        for e in spec:
            if not e:
                parts.append("None")
            elif len(e) == 1:
                parts.append(_axis_text(e[0]))
            else:
                parts.append("(" + ", ".join(map(_axis_text, e)) + ")")
        text = "P(" + ", ".join(parts) + ")"
        if unreduced:
            text += " unreduced(" + ", ".join(map(_axis_text, unreduced)) + ")"
        return text

    def __repr__(self):
        if self.kind == "replicated":
            return "replicated"
        if self.kind == "split":
            return f"split({self.tensor_axis},{self.mesh_axis})"
        return self._text(self.spec, self.unreduced)

    __str__ = __repr__

    def _key(self):
        if self.kind == "replicated":
            return ("tiled", (), ())
        if self.kind == "split":
            if self.mesh_axis == ALL:
                return ("split", self.tensor_axis, ALL)
            return ("tiled", ((),) * self.tensor_axis + ((self.mesh_axis,),), ())
        spec = list(self.spec)
        while spec and not spec[-1]:
            spec.pop()
        order = sorted(self.unreduced, key=lambda a: (isinstance(a, str), str(a).zfill(8)))
        return ("tiled", tuple(spec), tuple(order))

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = Sharding.parse(other)
            except InvalidArgumentError:
                return False
        return isinstance(other, Sharding) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    _SPLIT = re.compile(r"^split\((\d+),(\d+|all)\)$")
    _SPEC = re.compile(r"^P\((.*?)\)(?:unreduced\((.*)\))?$")

    @classmethod
    def parse(cls, text):
        """Parses "replicated", "split(T,M)" (M a number or "all"), or a
        PartitionSpec "P(data, None, (x, y)) unreduced(model)"."""
        if isinstance(text, Sharding):
            return text
        t = text.replace(" ", "")
        if t == "replicated":
            return REPLICATED
        m = cls._SPLIT.match(t)
        if m:
            return cls("split", int(m.group(1)),
                       m.group(2) if m.group(2) == ALL else int(m.group(2)))
        m = cls._SPEC.match(t)
        if not m:
            raise InvalidArgumentError(f"bad sharding {text!r}: expected replicated, split(T,M) "
                                       f"or P(...) [unreduced(...)]")
        entries, depth, cur = [], 0, ""
        for c in m.group(1) + ",":
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            if c == "," and depth == 0:
                entries.append(cur)
                cur = ""
            else:
                cur += c
            if depth < 0 or depth > 1:
                raise InvalidArgumentError(f"bad sharding {text!r}: unbalanced parentheses")
        if entries == [""]:
            entries = []

        def axis(a):
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*|\d+", a):
                raise InvalidArgumentError(f"bad sharding {text!r}: {a!r} is not a mesh axis")
            return int(a) if a.isdigit() else a

        spec = []
        for e in entries:
            if e == "None":
                spec.append(None)
            elif e.startswith("(") and e.endswith(")"):
                spec.append(tuple(axis(a) for a in e[1:-1].split(",") if a))
            else:
                spec.append(axis(e))
        unreduced = [axis(a) for a in (m.group(2) or "").split(",") if a]
        return cls("tiled", spec=spec, unreduced=unreduced)

    def _to_c(self, cs, rank=None, mesh=None):
        """Fills the pw_sharding_t |cs|; a tiled sharding is parsed by the
        library for an array of |rank| dims over |mesh| (its names resolved
        there; an unknown name is an InvalidArgumentError listing the
        mesh's axes)."""
        if self.kind == "replicated":
            cs.kind, cs.tensor_axis, cs.mesh_axis = lib.PW_SHARDING_REPLICATED, 0, 0
            cs.tile_count, cs.unreduced_axes = 0, 0
        elif self.kind == "split":
            cs.kind = lib.PW_SHARDING_SPLIT
            cs.tensor_axis = self.tensor_axis
            cs.mesh_axis = lib.PW_MESH_AXIS_ALL if self.mesh_axis == ALL else self.mesh_axis
            cs.tile_count, cs.unreduced_axes = 0, 0
        else:
            names = [a for e in self.spec for a in e] + list(self.unreduced)
            if mesh is None and any(isinstance(a, str) for a in names):
                raise InvalidArgumentError(
                    f"sharding {self!r} names mesh axes: it needs the mesh they belong to "
                    f"(a vslice's, or Mesh(...))")
            if rank is None:
                rank = len(self.spec)
            if mesh is None:
                mesh = Mesh((1,) * lib.PW_MAX_MESH_RANK)  # indices: checked against the real mesh later
            mesh = mesh_tuple(mesh)
            names = getattr(mesh, "axis_names", None)
            if names is not None:  # the library reads indices only on unnamed meshes

                def label(a):
                    return names[a] if isinstance(a, int) and a < len(names) else a

                text = self._text([tuple(map(label, e)) for e in self.spec],
                                  [label(a) for a in self.unreduced]).encode()
            else:
                text = repr(self).encode()
            ptr = cs if ffi.typeof(cs).kind == "pointer" else ffi.addressof(cs)
            check(lib.pw_sharding_parse(text, len(text), rank, _c_mesh(mesh), ptr))

    @classmethod
    def _from_c(cls, cs, mesh=None):
        """The Sharding of a pw_sharding_t; a tiled one names its axes
        when |mesh| names them, else gives indices."""
        if cs.kind == lib.PW_SHARDING_REPLICATED:
            return REPLICATED
        if cs.kind == lib.PW_SHARDING_SPLIT:
            axis = ALL if cs.mesh_axis == lib.PW_MESH_AXIS_ALL else cs.mesh_axis
            return cls("split", cs.tensor_axis, axis)
        names = getattr(mesh, "axis_names", None) if mesh is not None else None

        def label(a):
            return names[a] if names is not None and a < len(names) else int(a)

        tiles = [(cs.tiles[i].tensor_axis, cs.tiles[i].mesh_axis)
                 for i in range(min(cs.tile_count, lib.PW_MAX_MESH_RANK))]
        rank = max((t for t, _ in tiles), default=-1) + 1
        spec = [tuple(label(m) for t, m in tiles if t == k) for k in range(rank)]
        unreduced = [label(a) for a in range(lib.PW_MAX_MESH_RANK) if cs.unreduced_axes >> a & 1]
        return cls("tiled", spec=spec, unreduced=unreduced)

    def equivalent(self, other, shape, mesh):
        """True when |self| and |other| lay an array of |shape| out alike
        over |mesh| (the library's pw_sharding_equivalent): P("data") and
        P(0) on Mesh(data=2, model=4), split(0,all) and P(("data", "model")).
        An invalid sharding there raises the library's error."""
        other = as_sharding(other)
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
        cmesh = _c_mesh(mesh)
        cshape = ffi.new("pw_shape_t*")
        cshape.rank = len(shape)
        for i, d in enumerate(shape):
            cshape.dims[i] = d
        a, b = ffi.new("pw_sharding_t*"), ffi.new("pw_sharding_t*")
        self._to_c(a, len(shape), mesh_tuple(mesh))
        other._to_c(b, len(shape), mesh_tuple(mesh))
        check(lib.pw_sharding_check(a, cshape, cmesh))
        check(lib.pw_sharding_check(b, cshape, cmesh))
        return bool(lib.pw_sharding_equivalent(a, b, cshape, cmesh))


REPLICATED = Sharding()


def replicated():
    """Every device holds the whole array."""
    return REPLICATED


def split(tensor_axis=0, mesh_axis=ALL):
    """Split |tensor_axis| in equal blocks over |mesh_axis| ("all": every
    device of the mesh, row-major)."""
    return Sharding("split", tensor_axis, mesh_axis)


def P(*entries, unreduced=()):
    """A tiled sharding written as JAX's PartitionSpec: one entry per tensor
    dimension (fewer: the rest are not split), each None, a mesh axis (a
    name of the vslice's mesh, or an index) or a tuple of axes splitting
    that dimension major to minor; |unreduced| the axes holding partial
    sums. P("data", None), P(("x", "y")), P(None, "model", unreduced=("data",))."""
    return Sharding("tiled", spec=entries, unreduced=unreduced)


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

    def _to_c(self, cspec, mesh=None):
        """Fills a pw_array_spec_t; |mesh| (the vslice's) resolves a tiled
        sharding's axis names."""
        cspec.dtype = self._code
        cspec.shape.rank = len(self.shape)
        for i, d in enumerate(self.shape):
            cspec.shape.dims[i] = d
        self.sharding._to_c(cspec.sharding, len(self.shape), mesh)
        return cspec

    def _new_c(self, mesh=None):
        return self._to_c(ffi.new("pw_array_spec_t*"), mesh)

    @classmethod
    def _from_c(cls, cspec, mesh=None):
        return cls(_CODE_TO_NAME.get(cspec.dtype, "invalid"),
                   tuple(cspec.shape.dims[0:cspec.shape.rank]),
                   Sharding._from_c(cspec.sharding, mesh))


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
