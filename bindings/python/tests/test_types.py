"""Value types: dtypes, meshes, shardings, array specs, programs."""

import numpy as np
import pytest

import pathways as pw
from pathways._types import dtype_code, mesh_tuple


def test_dtype_mapping_covers_every_pathways_dtype():
    # The full table is in test_dtypes.py; numpy dtypes that are their own
    # pathways dtype map both ways (bf16 and the f8 types are views).
    assert len(pw.DTYPES) == 16
    for name, dt in pw.DTYPES.items():
        if name in pw.VIEW_DTYPES:
            continue
        assert dtype_code(name) == dtype_code(dt) == dtype_code(dt.type) == dtype_code(str(dt))


@pytest.mark.parametrize("bad", [np.complex128, np.float128, "c128", "f128"])
def test_unsupported_dtype_is_a_type_error_listing_the_supported_ones(bad):
    with pytest.raises(TypeError, match="f32 \\(float32\\)"):
        dtype_code(bad)


def test_mesh_shapes_parse_from_text_ints_and_tuples():
    assert mesh_tuple("2x4") == (2, 4)
    assert mesh_tuple(8) == (8,)
    assert mesh_tuple((2, 2, 2)) == (2, 2, 2)
    with pytest.raises(pw.InvalidArgumentError):
        mesh_tuple("2y4")
    with pytest.raises(pw.InvalidArgumentError):
        mesh_tuple((0, 4))
    with pytest.raises(pw.InvalidArgumentError):
        mesh_tuple((1, 1, 1, 1, 1))


def test_sharding_values_and_text():
    assert repr(pw.REPLICATED) == "replicated" and pw.replicated() is pw.REPLICATED
    s = pw.split(0)
    assert repr(s) == "split(0,all)" and s.mesh_axis == pw.ALL and not s.replicated
    assert repr(pw.split(1, 0)) == "split(1,0)"
    assert pw.Sharding.parse("split(1, 0)") == pw.split(1, 0)
    assert pw.split(0) == "split(0,all)"
    assert hash(pw.split(0)) == hash(pw.Sharding.parse("split(0,all)"))
    with pytest.raises(AttributeError):
        s.tensor_axis = 3
    with pytest.raises(pw.InvalidArgumentError, match="bad sharding"):
        pw.Sharding.parse("split(0)")


def test_array_spec_text_round_trip():
    spec = pw.ArraySpec("f32", (256, 8), pw.split(0))
    assert repr(spec) == "f32[256,8] split(0,all)"
    assert pw.ArraySpec.parse(repr(spec)) == spec
    assert pw.ArraySpec.parse("i64[3]") == pw.ArraySpec(np.int64, 3)
    scalar = pw.ArraySpec.parse("f64[]")
    assert scalar.shape == () and scalar.size == 1 and scalar.nbytes == 8
    assert spec.nbytes == 256 * 8 * 4 and spec.dtype == np.float32 and spec.dtype_name == "f32"
    with pytest.raises(pw.InvalidArgumentError, match="unknown dtype"):
        pw.ArraySpec.parse("f128[2]")


def test_program_text_is_the_library_format_and_round_trips():
    p = pw.Program("matmul", ["f32[64,16] split(0,all)", "f32[16,4] replicated"],
                   ["f32[64,4] split(0,all)"], {"transpose_b": 0, "note": "x"})
    text = p.text
    assert text.splitlines()[0] == "kernel matmul"
    assert "input f32[64,16] split(0,all)" in text and "attr transpose_b 0" in text
    assert pw.Program.parse(text) == p
    assert "Program('matmul'" in repr(p) and str(p) == text


def test_program_errors_come_from_the_library_with_the_line():
    with pytest.raises(pw.InvalidArgumentError, match="line 2"):
        pw.Program.parse("kernel copy\ninput f128[2] replicated\n")
    with pytest.raises(pw.InvalidArgumentError):
        pw.Program("bad name!", [], ["f32[1]"]).text
