"""Runtime.trace (include/pathways/trace.h) and Runtime.dump."""

import json

import numpy as np
import pytest

import pathways as pw

from conftest import f32, program

ROWS = "f32[8,4] split(0,all)"


def _run_steps(client, vs, steps):
    exe = vs.compile(program("scale", [ROWS], [ROWS], alpha=2))
    g = client.graph("step")
    x = g.parameter(vs, ROWS)
    g.output(g.compute(exe, g.compute(exe, x)))
    a = vs.put(f32(8, 4), pw.split(0))
    for _ in range(steps):
        out = g.run(a, timeout=30)
        np.testing.assert_array_equal(out.numpy(), f32(8, 4) * 4)
    exe.release()


def test_trace_writes_a_chrome_trace(runtime, client, vs, tmp_path):
    path = tmp_path / "step.json"
    with runtime.trace(path) as t:
        assert "recording" in repr(t)
        _run_steps(client, vs, 3)
    # 3 runs of 2 ops on 8 devices: 48 launches, each with its completion.
    assert t.stats["events"] >= 2 * 48 and t.stats["dropped"] == 0
    assert t.stats["recording"] is False and t.stats["threads"] >= 1
    doc = json.loads(path.read_text())
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(ops) == 48
    flows = [e for e in doc["traceEvents"] if e["ph"] == "s"]
    assert len(flows) == 3 * 8  # the second op reads the first, per device
    names = {e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert "controller" in names and any("island" in n for n in names)


def test_trace_ring_drops_the_oldest(runtime, client, vs, tmp_path):
    with runtime.trace(tmp_path / "small.json", events_per_thread=64) as t:
        _run_steps(client, vs, 5)
    assert t.stats["events"] <= 64 * t.stats["threads"] and t.stats["dropped"] > 0


def test_trace_misuse(runtime, tmp_path):
    with pytest.raises(ValueError, match="events_per_thread"):
        runtime.trace(tmp_path / "x.json", events_per_thread=-1)
    with pytest.raises(ValueError, match="events_per_thread"):
        runtime.trace(tmp_path / "x.json", events_per_thread=(1 << 24) + 1)
    with pytest.raises(TypeError, match="path"):
        runtime.trace(42)
    with pytest.raises(ValueError, match="empty"):
        runtime.trace("")
    with runtime.trace(tmp_path / "a.json"):
        with pytest.raises(pw.FailedPreconditionError, match="recording already"):
            with runtime.trace(tmp_path / "b.json"):
                pass
    with pytest.raises(pw.UnavailableError, match="no-such-dir"):
        with runtime.trace(tmp_path / "no-such-dir" / "c.json"):
            pass
    runtime.close()
    with pytest.raises(ValueError, match="closed"):
        with runtime.trace(tmp_path / "d.json"):
            pass


def test_clients_have_no_runtime_calls(client):
    assert not hasattr(client, "trace") and not hasattr(client, "dump")


def test_dump_names_every_device(runtime):
    lines = runtime.dump()
    assert lines[0].startswith("runtime: 2 slices")
    assert any("slice 'island'" in line for line in lines)
    assert sum("idle" in line for line in lines) == 9  # 8 + 1 devices
