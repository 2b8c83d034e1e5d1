"""A runtime's metrics (include/pathways/metrics.h): read as a dict,
written as Prometheus text, served over HTTP."""

from ._errors import check
from ._lowlevel import ffi, lib

_TYPES = {lib.PW_METRIC_COUNTER: "counter", lib.PW_METRIC_GAUGE: "gauge",
          lib.PW_METRIC_HISTOGRAM: "histogram"}


def _text(p):
    return ffi.string(p).decode("utf-8", "replace")


@ffi.def_extern()
def pwpy_metric_sample(user, sample):
    families = ffi.from_handle(user)
    name = _text(sample.family)
    family = families.get(name)
    if family is None:
        family = families[name] = {"type": _TYPES.get(sample.type, str(sample.type)),
                                   "help": _text(sample.help), "samples": []}
    labels = {_text(sample.labels[i].name): _text(sample.labels[i].value)
              for i in range(sample.label_count)}
    if sample.type == lib.PW_METRIC_HISTOGRAM:
        buckets = [(sample.bucket_bounds[i], sample.bucket_counts[i])
                   for i in range(sample.bucket_count)]
        family["samples"].append({"labels": labels, "sum": sample.value,
                                  "count": sample.count, "buckets": buckets})
    else:
        value = sample.value
        family["samples"].append({"labels": labels,
                                  "value": int(value) if value.is_integer() else value})
    return ffi.NULL


@ffi.def_extern()
def pwpy_metrics_text(user, data, size):
    ffi.from_handle(user).append(ffi.unpack(data, size))
    return ffi.NULL


def enable(ptr):
    options = ffi.new("pw_metrics_options_t*")
    options.struct_size = ffi.sizeof("pw_metrics_options_t")
    check(lib.pw_runtime_metrics_enable(ptr, options))


def read(ptr):
    families = {}
    handle = ffi.new_handle(families)
    check(lib.pw_runtime_metrics_visit(ptr, lib.pwpy_metric_sample, handle))
    return families


def prometheus_text(ptr):
    pieces = []
    handle = ffi.new_handle(pieces)
    check(lib.pw_runtime_metrics_write_prometheus(ptr, lib.pwpy_metrics_text, handle))
    return b"".join(pieces).decode("utf-8")


class MetricsServer:
    """The runtime's metrics over HTTP (GET /metrics, Prometheus text),
    made by Runtime.serve_metrics(). Stopped by stop(), at the end of a
    ``with`` block, or with its runtime."""

    def __init__(self, runtime, port=0, address=None):
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int in [0, 65535], not {port!r}")
        if address is not None and not isinstance(address, str):
            raise TypeError(f"address must be a str or None, not {type(address).__name__}")
        self._runtime = runtime
        options = ffi.new("pw_metrics_server_options_t*")
        options.struct_size = ffi.sizeof("pw_metrics_server_options_t")
        address_c = ffi.new("char[]", address.encode("utf-8")) if address is not None else ffi.NULL
        options.address = address_c
        options.port = port
        out = ffi.new("pw_metrics_server_t**")
        with runtime._life:
            check(lib.pw_metrics_server_start(runtime._ptr, options, out))
        self._server = out[0]
        self.port = lib.pw_metrics_server_port(self._server)
        self.address = address or "127.0.0.1"

    @property
    def url(self):
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}/metrics"

    def stop(self):
        """Stops serving. Idempotent; a no-op once the runtime is closed
        (its close stopped the server)."""
        server, self._server = self._server, None
        if server is None or self._runtime.closed:
            return
        with self._runtime._life:
            lib.pw_metrics_server_stop(server)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def __repr__(self):
        state = "serving" if self._server is not None else "stopped"
        return f"<pathways.MetricsServer {self.url} {state}>"
