"""The sim backend from Python: options, manual stepping, statistics, the
trace (events and hash), failure injection, and misuse."""

import numpy as np
import pytest

import pathways as pw


def sim_program(name, time="10us", inputs=(), outputs=("f32[4] split(0,all)",), kind=None):
    lines = [f"op {name}", f"time {time}"]
    if kind:
        lines.append(f"kind {kind}")
    lines += [f"input {s}" for s in inputs] + [f"output {s}" for s in outputs]
    return "\n".join(lines) + "\n"


def run_once(rt, name="step", time="10us", mesh="4"):
    """One compute op with no inputs on a |mesh| virtual slice; returns the
    Execution (not waited for)."""
    c = rt.client(name)
    vs = c.vslice(mesh)
    exe = vs.compile(sim_program(name, time, outputs=(f"f32[{vs.device_count}] split(0,all)",)))
    g = c.graph(name)
    g.output(g.compute(exe))
    return c, g.submit()


def test_inline_runs_in_virtual_time():
    sim = pw.SimBackend()
    with pw.Runtime("4", backends=sim) as rt:
        assert rt.backends == [sim] and rt.backend(0) is sim
        assert rt.slice(0).backend == "sim"
        c, ex = run_once(rt, time="25us")
        ex.wait(10)
        st = sim.stats()
        assert st["events"] == 4 and st["failed"] == 0
        assert st["clock"] == 25000 and st["busy_ns"] == 4 * 25000
        d = sim.device_state(2)
        assert (d["slice"], d["chip"], d["events"], d["busy_until"]) == (0, 2, 1, 25000)
        assert d["fail_at"] is None and d["health"] == "healthy"
        c.close()


def test_manual_mode_waits_for_steps():
    sim = pw.SimBackend(mode="manual", trace=True)
    with pw.Runtime("4", backends=[sim]) as rt:
        c, ex = run_once(rt)
        assert not ex.ready
        assert sim.stats()["queued"] == 4
        assert sim.step() == 1
        assert sim.run_all() == 3
        ex.wait(10)
        events = sim.events()
        assert sorted(e.device for e in events) == [0, 1, 2, 3]
        assert all(e.kind == "done" and e.op == "step" and e.time == 10000 for e in events)
        assert sim.run_until(50000) == 0 and sim.clock == 50000
        c.close()


def test_close_delivers_what_a_manual_sim_holds():
    sim = pw.SimBackend(mode="manual")
    rt = pw.Runtime("4", backends=sim)
    c, ex = run_once(rt)
    rt.close()  # runs the queue, or destroying the client would wait for it
    assert ex.ready
    with pytest.raises(ValueError, match="closed"):
        sim.stats()


def test_trace_hash_repeats_and_tells_workloads_apart():
    def hash_of(time):
        sim = pw.SimBackend(mode="manual")
        with pw.Runtime("2x4", backends=sim) as rt:
            c, ex = run_once(rt, time=time, mesh="2x4")
            sim.run_all()
            ex.wait(10)
            h = sim.trace_hash
            assert h == sim.stats()["trace_hash"]
            c.close()
            return h
    assert hash_of("10us") == hash_of("10us")
    assert hash_of("10us") != hash_of("11us")


def test_trace_callable_and_its_errors():
    seen = []

    def fn(ev):
        seen.append(ev)
        if ev.device == 1:
            raise RuntimeError("trace callback failed on purpose")

    sim = pw.SimBackend(trace=fn)
    with pw.Runtime("4", backends=sim) as rt:
        c, ex = run_once(rt)
        ex.wait(10)  # the exception did not reach C, the run completed
        assert sorted(e.device for e in seen) == [0, 1, 2, 3]
        count, last = sim.trace_errors
        assert count == 1 and isinstance(last, RuntimeError)
        with pytest.raises(ValueError, match="trace=True"):
            sim.events()
        c.close()


def test_scheduled_chip_failure_fails_the_op():
    sim = pw.SimBackend(failures=[("chip", 1, 5000)])
    with pw.Runtime("4", backends=sim) as rt:
        assert sim.device_state(1)["fail_at"] == 5000
        c, ex = run_once(rt)
        with pytest.raises(pw.UnavailableError, match="device 1"):
            ex.wait(10)
        assert sim.stats()["failed"] >= 1
        c.close()


def test_fail_and_repair_now():
    sim = pw.SimBackend(slices=2, devices_per_slice=4)
    with pw.Runtime(["4", "4"], backends=sim) as rt:
        sim.fail("slice", 1)
        assert sim.device_state(5)["health"] == "failed"
        assert sim.device_state(1)["health"] == "healthy"
        sim.repair("slice", 1)
        assert sim.device_state(5)["health"] == "healthy"
        rt.set_device_health(0, 2, "failed")  # the sim's chip 2, now
        assert sim.device_state(2)["health"] == "failed"
        rt.set_device_health(0, 2, "healthy")
        assert sim.device_state(2)["health"] == "healthy"
        with pytest.raises(ValueError, match="healthy or failed"):
            rt.set_device_health(0, 2, "degraded")


def test_data_effects_on_host_memory():
    sim = pw.SimBackend(memory="host")
    with pw.Runtime("4", backends=sim) as rt:
        c = rt.client()
        vs = c.vslice("4")
        spec = "f32[4] split(0,all)"
        copy = vs.compile(sim_program("copy", "1us", inputs=(spec,), outputs=(spec,), kind="copy"))
        g = c.graph()
        g.output(g.compute(copy, g.parameter(vs, spec)))
        x = vs.put(np.arange(4, dtype=np.float32), pw.split(0))
        np.testing.assert_array_equal(g.run(x, timeout=10).numpy(), np.arange(4))
        c.close()


def test_a_dropped_runtime_is_closed_at_once():
    sim = pw.SimBackend()
    rt = pw.Runtime("4", backends=sim)
    life = rt._life
    del rt  # the backend does not keep its runtime alive: no cycle to wait for
    assert life.ptr is None
    with pytest.raises(ValueError, match="closed"):
        sim.stats()


def test_bad_options_are_python_errors():
    with pytest.raises(ValueError, match="mode must be one of"):
        pw.SimBackend(mode="fast")
    with pytest.raises(ValueError, match="memory must be one of"):
        pw.SimBackend(memory="disk")
    with pytest.raises(TypeError, match="seed must be an int"):
        pw.SimBackend(seed="1")
    with pytest.raises(ValueError, match="chip_flops_per_s"):
        pw.SimBackend(chip_flops_per_s=float("nan"))
    with pytest.raises(TypeError, match=r"failures\[0\]"):
        pw.SimBackend(failures=[("chip", 1)])
    with pytest.raises(ValueError, match=r"failures\[0\].kind"):
        pw.SimBackend(failures=[("host", 1, 0)])
    with pytest.raises(TypeError, match="trace must be"):
        pw.SimBackend(trace="yes")
    # The library's own check: a failure naming a chip that does not exist.
    with pytest.raises(pw.InvalidArgumentError):
        pw.Runtime("4", backends=pw.SimBackend(failures=[("chip", 99, 0)]))


def test_misuse_of_a_sim_backend():
    sim = pw.SimBackend()
    with pytest.raises(ValueError, match="not part of a Runtime"):
        sim.stats()
    with pw.Runtime("4", backends=sim) as rt:
        with pytest.raises(ValueError, match="already belongs to a runtime"):
            pw.Runtime("4", backends=sim)
        with pytest.raises(pw.InvalidArgumentError):
            sim.device_state(4)  # 4 chips: 0..3
        with pytest.raises(ValueError, match="kind must be one of"):
            sim.fail("rack", 0)
        with pytest.raises(TypeError):
            sim.run_until(-1.5)
        with pytest.raises(pw.FailedPreconditionError, match="CPU backend"):
            rt.register_kernel("k", lambda call: None, inputs=0, outputs=1)
    with pytest.raises(ValueError, match="closed"):
        sim.run_all()


def test_threaded_mode_stepping_is_refused():
    sim = pw.SimBackend(mode="threaded")
    with pw.Runtime("4", backends=sim) as rt:
        c, ex = run_once(rt)
        ex.wait(10)
        assert sim.wait_idle(10)
        with pytest.raises(pw.FailedPreconditionError):
            sim.run_all()
        c.close()
