"""Runtime metrics (include/pathways/metrics.h): the dict, the Prometheus
text parsed by prometheus_client, the HTTP endpoint, misuse."""

import urllib.error
import urllib.request

import numpy as np
import pytest

import pathways as pw

from conftest import f32, program

prometheus_parser = pytest.importorskip("prometheus_client.parser")

ROWS = "f32[8,4] split(0,all)"


def _run(client, vs, steps):
    exe = vs.compile(program("scale", [ROWS], [ROWS], alpha=2))
    g = client.graph("step")
    g.output(g.compute(exe, g.compute(exe, g.parameter(vs, ROWS))))
    a = vs.put(f32(8, 4), pw.split(0))
    for _ in range(steps):
        np.testing.assert_array_equal(g.run(a, timeout=30).numpy(), f32(8, 4) * 4)
    exe.release()


def _series(families, name, **labels):
    return [s for s in families[name]["samples"]
            if all(s["labels"].get(k) == v for k, v in labels.items())]


def test_metrics_count_what_ran(runtime, client, vs):
    with pytest.raises(pw.FailedPreconditionError):
        runtime.metrics()
    runtime.enable_metrics()
    with pytest.raises(pw.FailedPreconditionError):
        runtime.enable_metrics()
    _run(client, vs, 4)
    m = runtime.metrics()
    assert m["pathways_executions_submitted_total"]["type"] == "counter"
    assert _series(m, "pathways_executions_submitted_total")[0]["value"] == 4
    (island,) = _series(m, "pathways_ops_completed_total", slice_name="island")
    assert island["value"] == 8  # 4 runs of 2 ops
    (units,) = _series(m, "pathways_unit_launches_total", slice_name="island")
    assert units["value"] == 8 * 8  # every op on 8 devices
    (mine,) = _series(m, "pathways_client_ops_completed_total", client="test")
    assert mine["value"] == 8
    (lat,) = m["pathways_launch_latency_seconds"]["samples"]
    assert lat["count"] == 64 and lat["sum"] > 0
    assert lat["buckets"][-1][1] <= lat["count"]
    assert all(a[1] <= b[1] for a, b in zip(lat["buckets"], lat["buckets"][1:]))
    runtime.disable_metrics()
    with pytest.raises(pw.FailedPreconditionError):
        runtime.disable_metrics()


def test_metrics_text_parses_and_serves(runtime, client, vs):
    runtime.enable_metrics()
    _run(client, vs, 2)
    text = runtime.metrics_text()
    parsed = {f.name: f for f in prometheus_parser.text_string_to_metric_families(text)}
    assert parsed["pathways_executions_submitted"].samples[0].value == 2
    with runtime.serve_metrics() as server:
        assert server.port > 0 and server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url, timeout=10) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            body = response.read().decode()
        scraped = {f.name: f for f in prometheus_parser.text_string_to_metric_families(body)}
        hist = scraped["pathways_launch_latency_seconds"]
        assert hist.type == "histogram"
        count = [s for s in hist.samples if s.name.endswith("_count")][0].value
        assert count == 2 * 2 * 8
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(server.url.replace("/metrics", "/nope"), timeout=10)
        assert e.value.code == 404
    assert "stopped" in repr(server)
    server.stop()  # idempotent


def test_metrics_server_misuse_and_close(runtime):
    with pytest.raises(pw.FailedPreconditionError):
        runtime.serve_metrics()  # metrics off
    runtime.enable_metrics()
    with pytest.raises(ValueError, match="port"):
        runtime.serve_metrics(70000)
    with pytest.raises(TypeError, match="address"):
        runtime.serve_metrics(address=1)
    with pytest.raises(pw.InvalidArgumentError):
        runtime.serve_metrics(address="not-an-address")
    server = runtime.serve_metrics()
    with pytest.raises(pw.UnavailableError, match=str(server.port)):
        runtime.serve_metrics(server.port)  # in use
    runtime.close()  # stops the server with the runtime
    server.stop()  # a no-op now
