"""Array byte sizes near the int64 and size_t limits, from Python: a shape
whose bytes do not fit PW_ARRAY_MAX_BYTES is refused (InvalidArgumentError
naming the shape) wherever a spec enters the library, and a spec the
library accepts has exactly elements x dtype size bytes."""

import random

import pytest

import pathways as pw

from conftest import program

MAX_BYTES = 2**63 - 1  # PW_ARRAY_MAX_BYTES on 64-bit Linux
DTYPES = ("f32", "f64", "i32", "i64", "u8")
SHARDINGS = ("replicated", "split(0,all)", "split(1,all)", "split(0,0)", "split(1,1)")
ITEMSIZE = {"f32": 4, "f64": 8, "i32": 4, "i64": 8, "u8": 1}


def near_limit_shape(rng):
    """Two dimensions whose product lands near 2^60-2^66 elements."""
    a = 2 ** rng.randint(0, 62) + rng.randint(-2, 2)
    target = 2 ** rng.randint(60, 66)
    b = max(1, target // max(a, 1) + rng.randint(-2, 2))
    return (max(1, a), min(b, 2**63 - 1))


def spec_text(dtype, shape, sharding):
    return f"{dtype}[{','.join(map(str, shape))}] {sharding}"


def test_wrapping_byte_sizes_are_refused_through_graphs_and_executables(client, vs):
    rng = random.Random(19)
    refused = accepted = 0
    for i in range(300):
        dtype = DTYPES[i % len(DTYPES)]
        shape = near_limit_shape(rng)
        text = spec_text(dtype, shape, SHARDINGS[rng.randrange(len(SHARDINGS))])
        exact = shape[0] * shape[1] * ITEMSIZE[dtype]
        g = client.graph(f"sizes{i}")
        try:
            try:
                value = g.parameter(vs, text)
            except pw.InvalidArgumentError as e:
                refused += 1
                if exact > MAX_BYTES:
                    assert str(shape[0]) in str(e), str(e)
                    # The same spec as an executable's signature.
                    with pytest.raises(pw.InvalidArgumentError):
                        vs.compile(program("copy", [text], [text]))
                continue
            assert exact <= MAX_BYTES, f"{text} accepted with {exact} bytes"
            assert value.spec.nbytes == exact
            accepted += 1
        finally:
            g.release()
    assert refused > 0 and accepted > 0, (refused, accepted)


@pytest.mark.parametrize("text", [
    "f64[2305843009213693953,2] split(0,all)",   # 2^61+1 rows: 16 bytes wrapped
    "f64[4611686018427387906] replicated",        # 2^62+2: 16 bytes wrapped
    "u8[9223372036854775807,2] replicated",
])
def test_the_issues_shapes_are_refused_naming_the_shape(client, vs, text):
    g = client.graph("huge")
    try:
        with pytest.raises(pw.InvalidArgumentError) as e:
            g.parameter(vs, text)
        dims = text[text.index("["):text.index("]") + 1]
        assert dims in str(e.value), str(e.value)
    finally:
        g.release()
    with pytest.raises(pw.InvalidArgumentError):
        vs.compile(program("copy", [text], [text]))
