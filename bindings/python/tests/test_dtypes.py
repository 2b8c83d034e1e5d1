"""Every pathways dtype from Python: the numpy mapping (bf16 and the f8
types as uint16/uint8 bit-pattern views, bool as numpy bool, c64 as
complex64), names and sizes agreeing with the C library, buffers of each
dtype round-tripping, the library's narrow-float conversions against
numpy's float16, and CPU-backend kernels on the new dtypes."""

import numpy as np
import pytest

import pathways as pw
from pathways._lowlevel import ffi, lib
from pathways._types import dtype_code

from conftest import one_node_graph, program

TABLE = {  # short name: (C value, numpy name, host numpy dtype)
    "f32": (1, "float32", "float32"), "f64": (2, "float64", "float64"),
    "i32": (3, "int32", "int32"), "i64": (4, "int64", "int64"), "u8": (5, "uint8", "uint8"),
    "bf16": (6, "bfloat16", "uint16"), "f16": (7, "float16", "float16"),
    "i8": (8, "int8", "int8"), "i16": (9, "int16", "int16"), "u16": (10, "uint16", "uint16"),
    "u32": (11, "uint32", "uint32"), "u64": (12, "uint64", "uint64"),
    "bool": (13, "bool", "bool"), "f8e4m3fn": (14, "float8_e4m3fn", "uint8"),
    "f8e5m2": (15, "float8_e5m2", "uint8"), "c64": (16, "complex64", "complex64"),
}


def test_the_mapping_is_the_documented_table_and_the_c_librarys():
    assert {n: str(dt) for n, dt in pw.DTYPES.items()} == {n: t[2] for n, t in TABLE.items()}
    assert pw.NUMPY_NAMES == {n: t[1] for n, t in TABLE.items()}
    assert pw.VIEW_DTYPES == {"bf16", "f8e4m3fn", "f8e5m2"}
    assert lib.PW_DTYPE_COUNT == len(TABLE) + 1
    for name, (value, npname, host) in TABLE.items():
        assert dtype_code(name) == dtype_code(npname) == value
        assert ffi.string(lib.pw_dtype_name(value)).decode() == name
        assert ffi.string(lib.pw_dtype_numpy_name(value)).decode() == npname
        assert lib.pw_dtype_size(value) == np.dtype(host).itemsize


def test_numpy_dtypes_mean_their_own_type():
    assert dtype_code(np.float16) == lib.PW_DTYPE_F16
    assert dtype_code(np.uint16) == lib.PW_DTYPE_U16  # never bf16
    assert dtype_code(np.uint8) == lib.PW_DTYPE_U8    # never an f8 type
    assert dtype_code(bool) == dtype_code(np.bool_) == lib.PW_DTYPE_BOOL
    assert dtype_code(np.complex64) == dtype_code("complex64") == lib.PW_DTYPE_C64
    assert dtype_code(np.int8) == lib.PW_DTYPE_I8 and dtype_code("u64") == lib.PW_DTYPE_U64


@pytest.mark.parametrize("bad", [np.complex128, np.longdouble, "f128", "BF16", "float8", object])
def test_dtypes_pathways_cannot_hold_are_type_errors_listing_the_others(bad):
    with pytest.raises(TypeError, match=r"bf16 \(bfloat16\)"):
        dtype_code(bad)


def test_array_specs_keep_the_pathways_dtype():
    spec = pw.ArraySpec("bf16", (4, 2))
    assert spec.dtype == np.uint16 and spec.dtype_name == "bf16" and spec.nbytes == 16
    assert repr(spec) == "bf16[4,2] replicated"
    assert spec != pw.ArraySpec("u16", (4, 2)) and spec == pw.ArraySpec("bfloat16", (4, 2))
    assert hash(spec) != hash(pw.ArraySpec("u16", (4, 2)))
    assert pw.ArraySpec.parse("float8_e4m3fn[3]").dtype_name == "f8e4m3fn"
    assert pw.ArraySpec.parse("c64[2] split(0,all)").dtype == np.complex64
    text = pw.Program("copy", ["bool[8] replicated"], ["bool[8] replicated"]).text
    assert "input bool[8] replicated" in text


def host_array(name, rng, shape=(8, 12)):
    dt = pw.DTYPES[name]
    if name == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if name == "c64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    return rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, shape, dtype=dt, endpoint=True)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_buffers_of_every_dtype_round_trip(vs, name):
    host = host_array(name, np.random.default_rng(TABLE[name][0]))
    with vs.put(host, pw.split(0), dtype=name) as b:
        assert b.spec == pw.ArraySpec(name, (8, 12), pw.split(0))
        assert b.spec.dtype_name == name and b.dtype == pw.DTYPES[name]
        out = b.numpy()
        assert out.dtype == pw.DTYPES[name]
        np.testing.assert_array_equal(out, host)


def test_view_dtypes_take_bit_patterns_not_values(vs1):
    bits = np.array([0x3F80, 0x4000, 0x7FC0], dtype=np.uint16)  # bf16 1, 2, NaN
    with vs1.put(bits, dtype="bf16") as b:
        assert b.spec.dtype_name == "bf16"
        assert b.numpy().tolist() == bits.tolist()
    with vs1.put(bits) as b:  # a plain uint16 array is u16
        assert b.spec.dtype_name == "u16"
    with pytest.raises(TypeError, match="held as uint16 bit patterns"):
        vs1.put(np.array([1.0, 2.0], dtype=np.float32), dtype="bf16")
    with pytest.raises(TypeError, match="held as uint8 bit patterns"):
        vs1.put(np.array([1, 2], dtype=np.int8), dtype="float8_e4m3fn")


def test_library_conversions_match_numpy_float16():
    rng = np.random.default_rng(3)
    values = np.concatenate([
        rng.standard_normal(4000).astype(np.float32) * np.float32(2.0) ** rng.integers(-30, 18, 4000),
        np.array([65504, 65519, 65520, 2**-24, 2**-25, 3 * 2**-25, 1 + 2**-11, np.inf, -np.inf],
                 dtype=np.float32)])
    with np.errstate(over="ignore"):  # the overflows to inf are part of the test
        want = values.astype(np.float16).view(np.uint16)
    got = np.array([lib.pw_f32_to_f16(float(v)) for v in values], dtype=np.uint16)
    np.testing.assert_array_equal(got, want)
    back = np.array([lib.pw_f16_to_f32(int(b)) for b in want], dtype=np.float32)
    np.testing.assert_array_equal(back, want.view(np.float16).astype(np.float32))


def run_kernel(client, vs, kernel, spec, *arrays, dtype):
    exe = vs.compile(program(kernel, [spec] * len(arrays), [spec]))
    g = one_node_graph(client, vs, exe, *([spec] * len(arrays)))
    return g.run(*(vs.put(a, pw.split(0), dtype=dtype) for a in arrays), timeout=30).numpy()


def test_cpu_kernels_on_the_new_dtypes(client, vs):
    rng = np.random.default_rng(11)
    # f16: numpy's float16 add computes in float and rounds once, as pathways does.
    a = rng.standard_normal((8, 4)).astype(np.float16) * np.float16(300)
    b = rng.standard_normal((8, 4)).astype(np.float16) * np.float16(300)
    a[0, 0], b[0, 0] = 65504, 65504  # overflows to inf
    out = run_kernel(client, vs, "add", "f16[8,4] split(0,all)", a, b, dtype="f16")
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, a + b)
    assert out[0, 0] == np.inf
    # bf16: bit patterns in and out; the reference rounds the f32 sum once.
    x = np.array([lib.pw_f32_to_bf16(float(v)) for v in rng.standard_normal(32)], np.uint16)
    y = np.array([lib.pw_f32_to_bf16(float(v)) for v in rng.standard_normal(32)], np.uint16)
    x, y = x.reshape(8, 4), y.reshape(8, 4)
    out = run_kernel(client, vs, "mul", "bf16[8,4] split(0,all)", x, y, dtype="bf16")
    want = [lib.pw_f32_to_bf16(lib.pw_bf16_to_f32(int(p)) * lib.pw_bf16_to_f32(int(q)))
            for p, q in zip(x.ravel(), y.ravel())]
    assert out.dtype == np.uint16 and out.ravel().tolist() == want
    # i8 wraps as numpy's int8 does; u64 keeps every bit.
    i = rng.integers(-128, 127, (8, 4), dtype=np.int8, endpoint=True)
    j = rng.integers(-128, 127, (8, 4), dtype=np.int8, endpoint=True)
    np.testing.assert_array_equal(run_kernel(client, vs, "add", "i8[8,4] split(0,all)", i, j,
                                             dtype="i8"), i + j)
    u = rng.integers(0, 2**64 - 1, (8, 4), dtype=np.uint64, endpoint=True)
    np.testing.assert_array_equal(run_kernel(client, vs, "mul", "u64[8,4] split(0,all)", u, u,
                                             dtype="u64"), u * u)
    # c64 complex multiply.
    c = (rng.standard_normal((8, 4)) + 1j * rng.standard_normal((8, 4))).astype(np.complex64)
    np.testing.assert_allclose(run_kernel(client, vs, "mul", "c64[8,4] split(0,all)", c, c,
                                          dtype="c64"), c * c, rtol=1e-6)


def test_kernels_refuse_dtypes_they_do_not_compute(vs):
    with pytest.raises(pw.InvalidArgumentError, match="kernel 'add' does not take dtype bool"):
        vs.compile(program("add", ["bool[8] replicated"] * 2, ["bool[8] replicated"]))
    with pytest.raises(pw.InvalidArgumentError, match="kernel 'relu' does not take dtype f8e5m2"):
        vs.compile(program("relu", ["f8e5m2[8] replicated"], ["f8e5m2[8] replicated"]))


def test_numpy_bf16_helpers_match_the_library():
    rng = np.random.default_rng(5)
    with np.errstate(all="ignore"):  # a few scale past float32: inf, which is a case too
        scaled = np.ldexp(rng.standard_normal(3000).astype(np.float32),
                          rng.integers(-140, 120, 3000).astype(np.int32))
    values = np.concatenate([
        scaled,
        np.frombuffer(np.array([0x3F808000, 0x3F818000, 0x7F7FFFFF, 0x00008000, 0x00018000,
                                0x7FC00001, 0xFF800001], np.uint32).tobytes(), np.float32),
        np.array([np.inf, -np.inf, np.nan, -0.0], np.float32)])
    with np.errstate(over="ignore"):
        bits = pw.bf16_from_float(values)
    assert bits.dtype == np.uint16
    assert bits.tolist() == [lib.pw_f32_to_bf16(float(v)) for v in values]
    back = pw.bf16_to_float(bits)
    assert back.dtype == np.float32
    finite = ~np.isnan(back)
    assert back[finite].tolist() == [lib.pw_bf16_to_f32(int(b)) for b in bits[finite]]
    # 1 + 2^-8 is a tie between 1 and the next bf16: to even, 1.
    assert pw.bf16_to_float(pw.bf16_from_float([1.0, 1.00390625])).tolist() == [1.0, 1.0]
