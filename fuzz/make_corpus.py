#!/usr/bin/env python3
"""Regenerates the seed corpus of the graph-file fuzz target.

    python3 fuzz/make_corpus.py

Writes fuzz/corpus/graph/*.cbor and tests/graph_format/corpus_expect.txt
(one line per file: name, then "ok" or a text the validation error must
contain). Needs only the standard library: it carries its own small CBOR
encoder, which can also write the non-canonical forms (unsorted keys,
long integer heads) that decoders must accept.
"""
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus", "graph")
EXPECT = os.path.join(ROOT, "tests", "graph_format", "corpus_expect.txt")


def head(major, value, wide=False):
    if wide:
        return bytes([(major << 5) | 27]) + struct.pack(">Q", value)
    if value < 24:
        return bytes([(major << 5) | value])
    if value < 0x100:
        return bytes([(major << 5) | 24, value])
    if value < 0x10000:
        return bytes([(major << 5) | 25]) + struct.pack(">H", value)
    if value < 0x100000000:
        return bytes([(major << 5) | 26]) + struct.pack(">I", value)
    return bytes([(major << 5) | 27]) + struct.pack(">Q", value)


def enc(item, canonical=True, wide=False):
    if isinstance(item, bool):
        return b"\xf5" if item else b"\xf4"
    if isinstance(item, int):
        return head(0, item, wide) if item >= 0 else head(1, -1 - item)
    if isinstance(item, bytes):
        return head(2, len(item)) + item
    if isinstance(item, str):
        b = item.encode()
        return head(3, len(b)) + b
    if isinstance(item, list):
        return head(4, len(item)) + b"".join(enc(x, canonical, wide) for x in item)
    if isinstance(item, dict):
        pairs = [(enc(k, canonical), enc(v, canonical, wide)) for k, v in item.items()]
        if canonical:
            pairs.sort(key=lambda p: (len(p[0]), p[0]))
        else:
            pairs.reverse()
        return head(5, len(pairs)) + b"".join(k + v for k, v in pairs)
    raise TypeError(item)


COPY = b"copy\ninput f32[8] split(0,all)\noutput f32[8] split(0,all)\n"
ADD2 = (b"noop\ninput f32[8] split(0,all)\ninput f32[8] split(0,all)\n"
        b"output f32[8] split(0,all)\n")
SPLIT = {"split": 0, "mesh_axis": "all"}


def buf(vslice=0, dtype="f32", shape=(8,), sharding=None):
    return {"vslice": vslice, "dtype": dtype, "shape": list(shape),
            "sharding": SPLIT if sharding is None else sharding}


def exe(program=COPY, vslice=0, options=""):
    return {"vslice": vslice, "program": program, "options": options}


def node(name, inputs, outputs, executable=0, vslice=0):
    return {"name": name, "executable": executable, "vslice": vslice,
            "inputs": inputs, "outputs": outputs}


def graph(**kw):
    g = {"v": 1, "vslices": [[2, 4]], "executables": [exe()], "buffers": [buf(), buf()],
         "parameters": [0], "nodes": [node("c", [0], [1])], "outputs": [1]}
    g.update(kw)
    return g


def chain(n):
    return graph(buffers=[buf() for _ in range(n + 1)],
                 nodes=[node("step%d" % i, [i], [i + 1]) for i in range(n)],
                 outputs=[n])


CASES = []


def case(name, data, expect):
    CASES.append((name, data if isinstance(data, bytes) else enc(data), expect))


case("valid_minimal", graph(), "ok")
case("valid_noncanonical", enc(graph(), canonical=False, wide=True), "ok")
case("valid_chain8", chain(8), "ok")
case("valid_diamond", graph(
    executables=[exe(), exe(ADD2)],
    buffers=[buf() for _ in range(4)],
    nodes=[node("left", [0], [1]), node("right", [0], [2]),
           node("join", [1, 2], [3], executable=1)],
    outputs=[3, 1]), "ok")
case("valid_out_of_order", graph(
    buffers=[buf() for _ in range(3)],
    nodes=[node("second", [1], [2]), node("first", [0], [1])],
    outputs=[2]), "ok")
case("valid_by_hash", graph(executables=[{"hash": bytes(range(16))}]), "ok")
case("valid_two_slices", graph(
    vslices=[[2, 4], [8]],
    executables=[exe(), exe(vslice=1)],
    buffers=[buf(), buf(), buf(1), buf(1)],
    parameters=[0, 2],
    nodes=[node("a", [0], [1]), node("b", [2], [3], executable=1, vslice=1)],
    outputs=[1, 3]), "ok")
# Past the signature's fixed arrays (16): 300 inputs and 300 outputs.
WIDE = 300
case("valid_wide_300", graph(
    executables=[exe(b"noop\n" + b"input f32[8] split(0,all)\n" * WIDE +
                     b"output f32[8] split(0,all)\n" * WIDE)],
    buffers=[buf() for _ in range(2 * WIDE)],
    parameters=list(range(WIDE)),
    nodes=[node("wide", list(range(WIDE)), list(range(WIDE, 2 * WIDE)))],
    outputs=list(range(WIDE, 2 * WIDE))), "ok")
case("valid_params_only", graph(executables=[], buffers=[buf(sharding="replicated")],
                                nodes=[], outputs=[0]), "ok")
case("valid_empty", graph(vslices=[], executables=[], buffers=[], parameters=[], nodes=[],
                          outputs=[]), "ok")
case("valid_cpu_program", graph(
    executables=[exe(b"kernel relu\ninput f32[8,4] split(0,all)\n"
                     b"output f32[8,4] split(0,all)\n")],
    buffers=[buf(shape=(8, 4)), buf(shape=(8, 4))]), "ok")

case("valid_transfer", graph(
    vslices=[[2, 4], [8]],
    buffers=[buf(), buf(), buf(1, sharding="replicated")],
    nodes=[node("a", [0], [1]), {"name": "t", "vslice": 1, "inputs": [1], "outputs": [2]}],
    outputs=[2]), "ok")
case("bad_version", graph(v=4), "v: unknown format version 4")
case("bad_no_version", {k: v for k, v in graph().items() if k != "v"}, "missing key \"v\"")
case("bad_unknown_key", graph(extra=1), "graph: unknown key \"extra\"")
case("bad_wrong_type", graph(parameters="0"), "parameters: expected an array, found a text")
case("bad_indefinite", b"\xbf\x61v\x01\xff", "indefinite-length item")
case("bad_huge_count", b"\xa2\x61v\x01\x65nodes\x9a\x10\x00\x00\x00",
     "declares 268435456 elements, but only 0 bytes are left")
case("bad_deep", b"\xa2\x61v\x01\x65nodes" + b"\x81" * 40 + b"\x00",
     "nesting deeper than 8 levels")
case("bad_trailing", enc(graph()) + b"\x00", "trailing bytes")
case("bad_truncated", enc(graph())[:-3], "truncated")
case("bad_dangling", graph(nodes=[node("c", [9], [1])]),
     "nodes[0].inputs[0]: refers to buffer 9, which does not exist (2 buffers)")
case("bad_cycle", graph(
    buffers=[buf() for _ in range(3)],
    executables=[exe(), exe(ADD2)],
    nodes=[node("head", [0, 2], [1], executable=1), node("tail", [1], [2])],
    outputs=[2]), "graph has a cycle")
case("bad_two_producers", graph(nodes=[node("a", [0], [1]), node("b", [0], [1])]),
     "nodes[1].outputs[0]: buffer 1 is already produced by nodes[0]")
case("bad_unproduced", graph(buffers=[buf(), buf(), buf()]),
     "buffers[2]: is neither a parameter nor a node output")
case("bad_dtype", graph(buffers=[buf(dtype="f128"), buf()]),
     "buffers[0].dtype: unknown dtype \"f128\"")
case("bad_dtype_uppercase", graph(buffers=[buf(), buf(dtype="BF16")]),
     "buffers[1].dtype: unknown dtype \"BF16\"")
case("bad_dtype_number", graph(buffers=[buf(dtype=6), buf()]),
     "buffers[0].dtype: expected a text string, found an unsigned integer")
# Every dtype (docs/formats.md), by its short and by its numpy name.
DTYPES = [("f32", "float32"), ("f64", "float64"), ("i32", "int32"), ("i64", "int64"),
          ("u8", "uint8"), ("bf16", "bfloat16"), ("f16", "float16"), ("i8", "int8"),
          ("i16", "int16"), ("u16", "uint16"), ("u32", "uint32"), ("u64", "uint64"),
          ("bool", "bool"), ("f8e4m3fn", "float8_e4m3fn"), ("f8e5m2", "float8_e5m2"),
          ("c64", "complex64")]
for k, label in ((0, "short"), (1, "numpy")):
    case("valid_every_dtype_" + label, graph(
        executables=[], buffers=[buf(dtype=d[k], sharding="replicated") for d in DTYPES],
        parameters=list(range(len(DTYPES))), nodes=[],
        outputs=list(range(len(DTYPES)))), "ok")
case("valid_bf16_add_transfer", graph(
    vslices=[[2, 4], [8]],
    executables=[exe(b"kernel add\ninput bf16[8,2] split(0,all)\ninput bf16[8,2] split(0,all)\n"
                     b"output bf16[8,2] split(0,all)\n")],
    buffers=[buf(dtype="bf16", shape=(8, 2)), buf(dtype="bf16", shape=(8, 2)),
             buf(1, dtype="bf16", shape=(8, 2), sharding="replicated")],
    nodes=[node("a", [0, 0], [1]), {"name": "t", "vslice": 1, "inputs": [1], "outputs": [2]}],
    outputs=[2]), "ok")
case("bad_transfer_dtype", graph(
    vslices=[[2, 4], [8]],
    buffers=[buf(dtype="u16"), buf(dtype="u16"), buf(1, dtype="f16", sharding="replicated")],
    nodes=[node("a", [0], [1]), {"name": "t", "vslice": 1, "inputs": [1], "outputs": [2]}],
    outputs=[2]), "a transfer keeps dtype and shape: buffer 2 is f16[8]")
case("bad_sharding", graph(buffers=[buf(shape=(7,)), buf()]), "buffers[0]")
case("bad_duplicate_key", b"\xa2\x61v\x01\x61v\x01", "duplicate key \"v\"")
case("bad_not_a_map", [1, 2, 3], "graph: expected a map, found an array")
case("bad_transfer_shape", graph(
    vslices=[[2, 4], [8]],
    buffers=[buf(), buf(), buf(1, shape=(16,), sharding="replicated")],
    nodes=[node("a", [0], [1]), {"name": "t", "vslice": 1, "inputs": [1], "outputs": [2]}],
    outputs=[2]), "nodes[1].outputs[0]: a transfer keeps dtype and shape: buffer 2 is f32[16]")
case("bad_transfer_arity", graph(
    nodes=[{"name": "t", "vslice": 0, "inputs": [0], "outputs": [1, 0]}]),
    "nodes[0]: a transfer node (one without \"executable\") has one input and one output")
case("bad_cross_slice_input", graph(
    vslices=[[2, 4], [8]], buffers=[buf(1), buf()]),
    "nodes[0].inputs[0]: buffer 0 lives on vslice 1, the node runs on vslice 0")
# Host nodes (version 2): a task the decoding client registered by name.
def host(name, task, inputs, outputs, vslice=0):
    return {"name": name, "host": task, "vslice": vslice, "inputs": inputs, "outputs": outputs}


case("valid_host", graph(
    v=2, buffers=[buf() for _ in range(4)],
    nodes=[node("c", [0], [1]), host("save", "snapshot", [1], [2]), node("d", [2], [3])],
    outputs=[3]), "ok")
case("valid_host_no_io", graph(
    v=2, nodes=[node("c", [0], [1]), host("tick", "snapshot", [], [])]), "ok")
case("bad_host_in_v1", graph(
    buffers=[buf() for _ in range(3)], nodes=[node("c", [0], [1]), host("h", "snapshot", [1], [2])],
    outputs=[2]), "nodes[1].host: host nodes need format version 2 (the file says 1)")
case("bad_v2_without_host", graph(v=2), "v: version 2 is for graphs with host nodes")
case("bad_host_and_executable", graph(
    v=2, nodes=[dict(node("c", [0], [1]), host="snapshot")]),
    "has both \"executable\" and \"host\"")
case("bad_host_name", graph(
    v=2, nodes=[node("c", [0], [1]), host("h", "snap shot", [], [])]),
    "nodes[1].host: a host task name is [A-Za-z0-9_.-]")
case("bad_host_cross_slice", graph(
    v=2, vslices=[[2, 4], [8]], buffers=[buf(), buf(), buf(1)],
    nodes=[node("c", [0], [1]), host("h", "snapshot", [1], [2])], outputs=[2]),
    "nodes[1].outputs[0]: buffer 2 lives on vslice 1, the node runs on vslice 0")
case("bad_hash_and_program", graph(executables=[dict(exe(), hash=bytes(16))]),
     "has both \"hash\" and an inline program")

# Transfer-heavy and huge-shape files: decoding them lowers transfers whose
# plans are one record per pair of intersecting shards, however many rows
# they move (tests/graph_format checks the memory bound on every file).
ROWS = {"split": 1, "mesh_axis": "all"}
case("valid_transfer_rows", graph(
    vslices=[[8], [2, 4]], executables=[],
    buffers=[buf(dtype="u8", shape=(1 << 24, 8), sharding=ROWS),
             buf(1, dtype="u8", shape=(1 << 24, 8), sharding="replicated")],
    nodes=[{"name": "gather", "vslice": 1, "inputs": [0], "outputs": [1]}],
    outputs=[1]), "ok")
# 32 hops between the two vslices, through every sharding each mesh has.
ON_8 = [ROWS, SPLIT, "replicated"]
ON_2X4 = [{"split": 0, "mesh_axis": 0}, {"split": 1, "mesh_axis": 1}, "replicated", ROWS]
case("valid_transfer_chain", graph(
    vslices=[[8], [2, 4]], executables=[],
    buffers=[buf(k % 2, shape=(64, 4096),
                 sharding=ON_2X4[k // 2 % 4] if k % 2 else ON_8[k // 2 % 3])
             for k in range(33)],
    nodes=[{"name": "hop%d" % k, "vslice": (k + 1) % 2, "inputs": [k], "outputs": [k + 1]}
           for k in range(32)],
    outputs=[32]), "ok")
case("valid_huge_transfer", graph(
    vslices=[[8], [2, 4]], executables=[],
    buffers=[buf(dtype="u8", shape=(1 << 62,), sharding=SPLIT),
             buf(1, dtype="u8", shape=(1 << 62,), sharding={"split": 0, "mesh_axis": 1})],
    nodes=[{"name": "t", "vslice": 1, "inputs": [0], "outputs": [1]}],
    outputs=[1]), "ok")
case("bad_huge_bytes", graph(
    buffers=[buf(dtype="f64", shape=((1 << 61) + 1, 2), sharding="replicated"), buf()]),
    "array f64[2305843009213693953,2]: 4611686018427387906 elements of 8 bytes exceed")
case("bad_huge_transfer", graph(
    vslices=[[8], [2, 4]], executables=[],
    buffers=[buf(dtype="f64", shape=((1 << 62) + 8,), sharding=SPLIT),
             buf(1, dtype="f64", shape=((1 << 62) + 8,), sharding="replicated")],
    nodes=[{"name": "t", "vslice": 1, "inputs": [0], "outputs": [1]}],
    outputs=[1]), "array f64[4611686018427387912]: 4611686018427387912 elements of 8 bytes")

# Version 3: named mesh axes and tiled (PartitionSpec) shardings, axes by
# name (from the buffer's vslice) or by index.
MESH_2X4 = [["data", 2], ["model", 4]]


def tiled(spec, unreduced=None):
    s = {"spec": spec}
    if unreduced is not None:
        s["unreduced"] = unreduced
    return s


def params3(buffers, vslices=None):
    return graph(v=3, vslices=vslices or [MESH_2X4], executables=[], buffers=buffers,
                 parameters=list(range(len(buffers))), nodes=[],
                 outputs=list(range(len(buffers))))


case("valid_named_mesh", params3([buf(sharding="replicated"),
                                  buf(sharding={"split": 0, "mesh_axis": 1})]), "ok")
case("valid_tiled_names", params3([
    buf(shape=(8, 16), sharding=tiled([["data"], ["model"]])),
    buf(shape=(8, 4), sharding=tiled([[], ["model"]], ["data"])),
    buf(shape=(16,), sharding=tiled([["data", "model"]])),
    buf(shape=(4, 4), sharding=tiled([], ["data", "model"]))]), "ok")
case("valid_tiled_indices", params3([buf(shape=(8, 16), sharding=tiled([[1], [0]]))],
                                    vslices=[[2, 4]]), "ok")
case("valid_tiled_noncanonical", enc(params3([
    buf(shape=(8, 16), sharding=tiled([["model"], []], [0]))]), canonical=False, wide=True), "ok")
case("valid_tiled_transfer", graph(
    v=3, vslices=[MESH_2X4, [8]], executables=[],
    buffers=[buf(shape=(8, 16), sharding=tiled([["data"], ["model"]])),
             buf(1, shape=(8, 16), sharding=tiled([[], [0]])),
             buf(0, shape=(8, 16), sharding=tiled([["model", "data"]]))],
    nodes=[{"name": "t", "vslice": 1, "inputs": [0], "outputs": [1]},
           {"name": "back", "vslice": 0, "inputs": [1], "outputs": [2]}],
    outputs=[2]), "ok")
case("valid_tiled_host", graph(
    v=3, vslices=[MESH_2X4], buffers=[buf(), buf(), buf(shape=(8,), sharding=tiled([["model"]]))],
    nodes=[node("c", [0], [1]), host("h", "snapshot", [1], [2])], outputs=[2]), "ok")
case("bad_tiled_unknown_name", params3([buf(sharding=tiled([["modle"]]))]),
     "buffers[0].sharding.spec[0][0]: no mesh axis 'modle' (the mesh's axes: data, model)")
case("bad_tiled_axis_twice", params3([buf(shape=(8, 8), sharding=tiled([["data"], ["data"]]))]),
     "buffers[0].sharding.spec[1][0]: mesh axis 'data' is used twice (it already splits "
     "dimension 0)")
case("bad_tiled_unreduced_and_split", params3([buf(sharding=tiled([["model"]], ["model"]))]),
     "buffers[0].sharding.unreduced[0]: mesh axis 'model' splits dimension 0 and is also "
     "unreduced")
case("bad_tiled_unreduced_twice", params3([buf(sharding=tiled([], ["data", "data"]))]),
     "buffers[0].sharding.unreduced[1]: mesh axis 'data' is listed as unreduced twice")
case("bad_tiled_not_divisible", params3([buf(shape=(6,), sharding=tiled([["model"]]))]),
     "buffers[0] (on vslice 0)")
case("bad_tiled_index_range", params3([buf(sharding=tiled([[2]]))]),
     "buffers[0].sharding.spec[0][0]: mesh axis 2 is out of range (the mesh has 2 axes)")
case("bad_tiled_too_many_entries", params3([buf(sharding=tiled([[], ["data"]]))]),
     "buffers[0].sharding.spec: 2 entries for an array of rank 1")
case("bad_tiled_names_unnamed_mesh", params3([buf(sharding=tiled([["data"]]))],
                                             vslices=[[2, 4]]),
     "buffers[0].sharding.spec[0][0]: no mesh axis 'data' (the mesh's axes: 0, 1)")
case("bad_tiled_dangling_vslice", graph(
    v=3, vslices=[MESH_2X4], executables=[], buffers=[buf(3, sharding=tiled([["data"]]))],
    parameters=[0], nodes=[], outputs=[0]),
    "buffers[0].sharding.spec[0][0]: mesh axis 'data' names an axis of vslice 3, which does "
    "not exist")
case("bad_tiled_and_split", params3([buf(sharding=dict(tiled([["data"]]), split=0,
                                                       mesh_axis=0))]),
     "buffers[0].sharding: has both \"split\"/\"mesh_axis\" and \"spec\"/\"unreduced\"")
case("bad_tiled_no_spec", params3([buf(sharding={"unreduced": ["data"]})]),
     "buffers[0].sharding: missing key \"spec\"")
case("bad_tiled_axis_type", params3([buf(sharding=tiled([[True]]))]),
     "buffers[0].sharding.spec[0][0]: expected a mesh axis name or number")
case("bad_tiled_entry_type", params3([buf(sharding=tiled(["data"]))]),
     "buffers[0].sharding.spec[0]: expected an array, found a text")
case("bad_tiled_in_v1", graph(buffers=[buf(sharding=tiled([[0]])), buf()]),
     "buffers[0].sharding.spec: tiled shardings (\"spec\", \"unreduced\") need format "
     "version 3 (the file says 1)")
case("bad_names_in_v2", graph(v=2, vslices=[MESH_2X4],
                              nodes=[node("c", [0], [1]), host("h", "snapshot", [], [])]),
     "vslices[0][0]: mesh axis names need format version 3 (the file says 2)")
case("bad_v3_without_names", graph(v=3), "v: version 3 is for graphs with named mesh axes or "
     "tiled shardings, and this one has none (it is written as version 1)")
case("bad_mesh_name_duplicate", params3([buf(sharding="replicated")],
                                        vslices=[[["data", 2], ["data", 4]]]),
     "vslices[0]: mesh axes 0 and 1 are both named 'data'")
case("bad_mesh_name_invalid", params3([buf(sharding="replicated")],
                                      vslices=[[["2d", 2], ["model", 4]]]),
     "vslices[0]: mesh axis 0's name '2d' is not 1..15 characters")
case("bad_mesh_name_long", params3([buf(sharding="replicated")],
                                   vslices=[[["a" * 16, 2]]]),
     "vslices[0][0][0]: text of 16 bytes (at most 15)")
case("bad_mesh_names_mixed", params3([buf(sharding="replicated")],
                                     vslices=[[["data", 2], 4]]),
     "vslices[0][1]: either every mesh axis is named")
case("bad_mesh_axis_arity", params3([buf(sharding="replicated")],
                                    vslices=[[["data", 2, 1]]]),
     "vslices[0][0]: a named mesh axis is [name, size], not 3 elements")
case("bad_tiled_dtype", params3([buf(dtype="f4", sharding=tiled([["data"]]))]),
     "buffers[0].dtype: unknown dtype \"f4\"")

# The most vslices a file may have, each the smallest mesh: the meshes'
# array is the decoder's largest fixed cost (docs/formats.md, memory bound).
case("valid_most_vslices", graph(
    vslices=[[1]] * 4096, executables=[], buffers=[buf(sharding="replicated")], parameters=[0],
    nodes=[], outputs=[0]), "ok")
case("bad_too_many_vslices", graph(vslices=[[1]] * 4097),
     "vslices: 4097 elements (at most 4096)")


def main():
    os.makedirs(CORPUS, exist_ok=True)
    # regress_* seeds were found by the fuzzer and added by hand: kept, with
    # their lines.
    kept = []
    if os.path.exists(EXPECT):
        with open(EXPECT) as f:
            kept = [l.rstrip("\n") for l in f if l.startswith(("regress_", "# regress_"))]
    for f in os.listdir(CORPUS):
        if f.endswith(".cbor") and not f.startswith("regress_"):
            os.remove(os.path.join(CORPUS, f))
    lines = []
    for name, data, expect in CASES:
        with open(os.path.join(CORPUS, name + ".cbor"), "wb") as f:
            f.write(data)
        lines.append("%s.cbor\t%s" % (name, expect))
    with open(EXPECT, "w") as f:
        f.write("# file<TAB>ok, or a text its validation error contains "
                "(generated by fuzz/make_corpus.py)\n")
        f.write("\n".join(lines + kept) + "\n")


if __name__ == "__main__":
    main()
