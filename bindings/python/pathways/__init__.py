"""pathways: Python bindings of libpathways, a Pathways-style single-controller
runtime for accelerator fleets: its bundled CPU backend (real kernels) and
simulated fleet (SimBackend), several of them in one Runtime, the gang
scheduler's policies, the compile cache and graph files.

    import numpy as np
    import pathways as pw

    rt = pw.Runtime("2x4")                      # one 2x4 slice, 8 CPU devices
    client = rt.client("notebook")
    vs = client.vslice("2x4")                   # a virtual slice bound to it
    x = vs.put(np.ones((8, 4), np.float32), pw.split(0))
    double = vs.compile(pw.Program("scale", ["f32[8,4] split(0,all)"],
                                   ["f32[8,4] split(0,all)"], {"alpha": 2}))
    g = client.graph("double")
    g.output(g.compute(double, g.parameter(vs, x.spec)))
    print(g.run(x).numpy())

See docs/python.md. The low-level cffi module (_pathways_ffi) is private.
"""

from ._errors import (
    AbortedError,
    AlreadyExistsError,
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PathwaysError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
    error_class,
)
from ._backends import SIM_NEVER, SIM_NOW, Backend, CpuBackend, SimBackend, SimEvent, SimFailure
from ._cache import CompileCache, compile_key
from ._elastic import Elastic, ElasticEvent, StateBuffer
from ._event import Event
from ._failure import TopologyEvent, VSliceInfo
from ._graph import ArmedGraph, Execution, Graph, Value
from ._graphfile import (GRAPH_FORMAT_VERSION, GraphFileInfo, canonical_graph_file,
                         check_graph_file, graph_file_hash, graph_file_json)
from ._host import HostTaskCall
from ._host_async import (HOST_SEMANTICS, HostRead, create_empty, fill_from_host,
                          from_host_async, to_host_async)
from ._plugin import PLUGIN_ABI_VERSION, Plugin, PluginBackend, load_plugin, plugin_dir
from ._kernels import Attr, KernelCall, Param
from ._lowlevel import ffi as _ffi, lib as _lib
from ._objects import Buffer, Executable
from ._runtime import Client, Device, Runtime, Slice, VSlice
from ._snapshot import Snapshotter, SnapshotTake
from ._metrics import MetricsServer
from ._trace import Trace
from ._types import (ALL, DTYPES, NUMPY_NAMES, REPLICATED, VIEW_DTYPES, ArraySpec, Mesh, P,
                     Program, Sharding, bf16_from_float, bf16_to_float, replicated, split)

__version__ = _ffi.string(_lib.pw_version_string()).decode()

__all__ = [
    "Backend", "CompileCache", "CpuBackend", "SIM_NEVER", "SIM_NOW", "SimBackend", "SimEvent",
    "SimFailure", "compile_key", "PLUGIN_ABI_VERSION", "Plugin", "PluginBackend", "load_plugin",
    "plugin_dir", "GRAPH_FORMAT_VERSION", "GraphFileInfo",
    "canonical_graph_file", "check_graph_file", "graph_file_hash", "graph_file_json",
    "ALL", "DTYPES", "NUMPY_NAMES", "REPLICATED", "VIEW_DTYPES", "ArmedGraph", "ArraySpec", "Attr", "Buffer", "Client",
    "Device", "Elastic", "ElasticEvent", "Event", "Executable", "Execution", "Graph", "HostTaskCall", "KernelCall",
    "MetricsServer", "Mesh", "P",
    "Param", "Program", "SnapshotTake", "Snapshotter", "StateBuffer", "TopologyEvent",
    "VSliceInfo",
    "Runtime", "Sharding", "Slice", "Trace", "VSlice", "Value", "bf16_from_float",
    "bf16_to_float", "replicated", "split",
    "HOST_SEMANTICS", "HostRead", "create_empty", "fill_from_host", "from_host_async",
    "to_host_async",
    "PathwaysError", "CancelledError", "UnknownError", "InvalidArgumentError",
    "DeadlineExceededError", "NotFoundError", "AlreadyExistsError",
    "PermissionDeniedError", "ResourceExhaustedError", "FailedPreconditionError",
    "AbortedError", "OutOfRangeError", "UnimplementedError", "InternalError",
    "UnavailableError", "DataLossError", "UnauthenticatedError", "error_class",
]
