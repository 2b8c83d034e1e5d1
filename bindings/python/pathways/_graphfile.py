"""Graph files (include/pathways/graph_format.h): graphs as bytes (CBOR,
docs/formats.md). Encode a client's graph, decode bytes into a graph of
another client (or process), and check, canonicalise, view and hash files
without a runtime."""

import json
import os
from typing import NamedTuple, Optional, Sequence

from ._errors import InvalidArgumentError, check
from ._lowlevel import SYSTEM_ALLOCATOR, ffi, lib

__all__ = ["GraphFileInfo", "check_graph_file", "canonical_graph_file", "graph_file_json",
           "graph_file_hash", "encode_graph", "decode_graph", "GRAPH_FORMAT_VERSION"]

GRAPH_FORMAT_VERSION = lib.PW_GRAPH_FORMAT_VERSION


class GraphFileInfo(NamedTuple):
    """What a graph file holds: counts, and its canonical hash (32 hex
    digits: XXH3-128 of the deterministic encoding; equal for equal
    graphs whatever encoding the producer used)."""
    vslices: int
    executables: int
    buffers: int
    parameters: int
    nodes: int
    outputs: int
    hash: str


def _bytes_of(data, what="data"):
    """A cffi view of bytes-like |data|: the bytes themselves, or the file a
    path names."""
    if isinstance(data, (str, os.PathLike)):
        raise TypeError(f"{what} must be bytes-like (the file's contents), not a path; "
                        f"read it first: open(path, 'rb').read()")
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(f"{what} must be bytes-like, not {type(data).__name__}") from None
    if view.nbytes == 0:
        raise InvalidArgumentError(f"{what}: an empty graph file (0 bytes)")
    return ffi.from_buffer(view.cast("B") if view.ndim != 1 or view.format != "B" else view)


def _hex(hash_struct):
    out = ffi.new("char[33]")
    lib.pw_graph_hash_format(hash_struct, out)
    return ffi.string(out).decode()


def _take(ptr, size):
    """Copies |size| bytes the library allocated from the system allocator
    and frees them."""
    try:
        return bytes(ffi.buffer(ptr, size))
    finally:
        SYSTEM_ALLOCATOR.free(SYSTEM_ALLOCATOR.self, ptr, size)


def check_graph_file(data) -> GraphFileInfo:
    """Decodes and checks |data| (bytes-like) as a graph file: syntax,
    schema, references, specs against meshes, one producer per buffer, no
    cycle (not the programs: decode_graph compiles them).
    InvalidArgumentError naming the path ("nodes[3].inputs[1]: ...")."""
    buf = _bytes_of(data)
    info = ffi.new("pw_graph_format_info_t*")
    info.struct_size = ffi.sizeof("pw_graph_format_info_t")
    check(lib.pw_graph_format_check(buf, len(buf), SYSTEM_ALLOCATOR, info))
    return GraphFileInfo(info.vslices, info.executables, info.buffers, info.parameters,
                         info.nodes, info.outputs, _hex(ffi.addressof(info, "hash")))


def graph_file_hash(data) -> str:
    """The canonical hash of graph file |data| (check_graph_file(data).hash)."""
    return check_graph_file(data).hash


def canonical_graph_file(data) -> bytes:
    """|data| checked and re-encoded deterministically (what encode_graph
    writes): canonical(canonical(x)) == canonical(x)."""
    buf = _bytes_of(data)
    out = ffi.new("void**")
    size = ffi.new("size_t*")
    check(lib.pw_graph_format_canonicalize(buf, len(buf), SYSTEM_ALLOCATOR, out, size))
    return _take(out[0], size[0])


def graph_file_json(data) -> str:
    """A readable JSON view of graph file |data| (programs as text when
    printable, long ones cut): for people, not for decoding."""
    buf = _bytes_of(data)
    out = ffi.new("char**")
    size = ffi.new("size_t*")
    check(lib.pw_graph_format_dump_json(buf, len(buf), SYSTEM_ALLOCATOR, out, size))
    text = _take(ffi.cast("void*", out[0]), size[0])
    return text.rstrip(b"\0").decode("utf-8", "replace")


def _vslice_ids(vslices, client, what):
    from ._runtime import VSlice
    if isinstance(vslices, VSlice):
        vslices = [vslices]
    out = list(vslices)
    for i, v in enumerate(out):
        if not isinstance(v, VSlice):
            raise TypeError(f"{what}[{i}] is {type(v).__name__}, not a VSlice")
        if v.client is not client:
            raise ValueError(f"{what}[{i}] belongs to client {v.client.name!r}, not "
                             f"{client.name!r}")
        if v.id == 0:
            raise ValueError(f"{what}[{i}] is a released VSlice")
    return out


def encode_graph(graph, vslices: Optional[Sequence] = None, *,
                 executables_by_hash: bool = False) -> bytes:
    """Graph.encode: see there."""
    client = graph.client
    opts = ffi.new("pw_graph_encode_options_t*")
    opts.struct_size = ffi.sizeof("pw_graph_encode_options_t")
    if not isinstance(executables_by_hash, bool):
        raise TypeError("executables_by_hash must be a bool")
    opts.executables_by_hash = executables_by_hash
    keep = None
    if vslices is not None:
        vs = _vslice_ids(vslices, client, "vslices")
        keep = ffi.new("pw_vslice_t[]", [(v.id,) for v in vs] or [(0,)])
        opts.vslices = keep
        opts.vslice_count = len(vs)
    out = ffi.new("void**")
    size = ffi.new("size_t*")
    with graph._enter_call() as ptr:
        check(lib.pw_graph_encode(ptr, graph._h[0], opts, SYSTEM_ALLOCATOR, out, size))
    return _take(out[0], size[0])


def _spec_of(buf):
    """An ArraySpec from the JSON view of a file's buffer."""
    from ._types import ArraySpec, replicated, split
    sh = buf["sharding"]
    if sh == "replicated":
        sharding = replicated()
    else:
        axis = sh["mesh_axis"]
        sharding = split(sh["split"], axis)
    return ArraySpec(buf["dtype"], tuple(buf["shape"]), sharding)


def decode_graph(client, data, vslices, executables=(), name=None):
    """Client.decode_graph: see there."""
    from ._graph import Graph
    from ._objects import Executable
    buf = _bytes_of(data)
    vs = _vslice_ids(vslices, client, "vslices")
    exes = list(executables)
    for i, e in enumerate(exes):
        if not isinstance(e, Executable):
            raise TypeError(f"executables[{i}] is {type(e).__name__}, not an Executable")
        if e.client is not client:
            raise ValueError(f"executables[{i}] belongs to another client")
    # The file's own view gives what the Python Graph records: its
    # parameters' and outputs' specs and virtual slices.
    view = json.loads(graph_file_json(data))
    opts = ffi.new("pw_graph_decode_options_t*")
    opts.struct_size = ffi.sizeof("pw_graph_decode_options_t")
    cvs = ffi.new("pw_vslice_t[]", [(v.id,) for v in vs] or [(0,)])
    opts.vslices = cvs
    opts.vslice_count = len(vs)
    cex = ffi.new("pw_executable_t[]", [(e._id,) for e in exes] or [(0,)])
    opts.executables = cex
    opts.executable_count = len(exes)
    out = ffi.new("pw_graph_t*")
    box = client._box
    with box as ptr:
        check(lib.pw_graph_decode(ptr, buf, len(buf), opts, out))
        box.live += 1
    return Graph._adopt_decoded(client, out, name, view, vs)
