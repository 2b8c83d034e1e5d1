"""Several backends in one runtime, slices laid out on them, virtual slices
spanning physical slices of the sim, and misuse of the layout."""

import numpy as np
import pytest

import pathways as pw
from test_sim import sim_program


def test_cpu_and_sim_in_one_runtime():
    cpu, sim = pw.CpuBackend(workers=1), pw.SimBackend(trace=True)
    slices = [{"name": "host", "mesh": "4", "backend": "cpu"},
              {"name": "fleet", "mesh": "2x4", "backend": sim}]
    with pw.Runtime(slices, backends=[cpu, sim]) as rt:
        assert [s.backend for s in rt.slices] == ["cpu", "sim"]
        assert rt.backend("host") is cpu and rt.backend("fleet") is sim
        assert "cpu+sim" in repr(rt)
        c = rt.client()
        # The CPU slice computes for real.
        v = c.vslice("4")
        assert v.slice.name == "host"
        x = v.put(np.arange(4, dtype=np.float32), pw.split(0))
        dbl = v.compile(pw.Program("scale", ["f32[4] split(0,all)"], ["f32[4] split(0,all)"],
                                   {"alpha": 2}))
        g = c.graph()
        g.output(g.compute(dbl, g.parameter(v, x.spec)))
        np.testing.assert_array_equal(g.run(x, timeout=10).numpy(), [0, 2, 4, 6])
        # The sim slice runs in virtual time.
        w = c.vslice("2x4")
        assert w.slice.name == "fleet"
        op = w.compile(sim_program("fleet_op", outputs=("f32[8] split(0,all)",)))
        g2 = c.graph()
        g2.output(g2.compute(op))
        g2.run(timeout=10)
        assert {e.op for e in sim.events()} == {"fleet_op"} and len(sim.events()) == 8
        c.close()


def test_explicit_first_device():
    sim = pw.SimBackend(slices=1, devices_per_slice=8)
    with pw.Runtime([{"mesh": "4", "first_device": 4}, {"mesh": "4", "first_device": 0}],
                    backends=sim) as rt:
        assert rt.slice(0).device(0).backend_device == 4
        assert rt.slice(1).device(3).backend_device == 3


def test_spanning_vslice_over_two_sim_slices():
    sim = pw.SimBackend(slices=2, devices_per_slice=4, trace=True)
    with pw.Runtime(["4", "4"], backends=sim) as rt:
        c = rt.client()
        vs = c.vslice("8", slices=2)
        assert [s.index for s in vs.slices] == [0, 1]
        spec = "f32[8] split(0,all)"
        ar = vs.compile(sim_program("allreduce", "1us", inputs=(spec,), outputs=(spec,),
                                    kind="all_reduce_sum"))
        g = c.graph()
        g.output(g.compute(ar, g.parameter(vs, spec)))
        x = vs.put(np.arange(8, dtype=np.float32), pw.split(0))
        out = g.run(x, timeout=10).numpy()
        np.testing.assert_array_equal(out, np.full(8, 28.0))  # 0 + 1 + ... + 7, everywhere
        gangs = {e.gang_id for e in sim.events() if e.op == "allreduce"}
        assert len(gangs) == 1  # one gang across both slices
        assert sorted(e.device for e in sim.events() if e.op == "allreduce") == list(range(8))
        c.close()


def test_layout_errors():
    with pytest.raises(ValueError, match="out of range"):
        pw.Runtime([{"mesh": "4", "backend": 1}], backends=pw.CpuBackend())
    with pytest.raises(ValueError, match="names 2 of the runtime's backends"):
        pw.Runtime([{"mesh": "4", "backend": "cpu"}],
                   backends=[pw.CpuBackend(), pw.CpuBackend()])
    with pytest.raises(ValueError, match="not in the runtime's backends"):
        pw.Runtime([{"mesh": "4", "backend": pw.SimBackend()}], backends=pw.CpuBackend())
    with pytest.raises(TypeError, match="not a Backend"):
        pw.Runtime("4", backends=["cpu"])
    with pytest.raises(TypeError, match="CpuBackend options"):
        pw.Runtime("4", backends=pw.CpuBackend(), workers=4)
    with pytest.raises(TypeError, match="first_device"):
        pw.Runtime([{"mesh": "4", "first_device": -1}])
    b = pw.CpuBackend()
    with pytest.raises(ValueError, match="listed twice"):
        pw.Runtime(["4", "4"], backends=[b, b])
    # The library's own checks: two slices on the same devices.
    with pytest.raises(pw.InvalidArgumentError):
        pw.Runtime([{"mesh": "4", "first_device": 0}, {"mesh": "4", "first_device": 2}],
                   backends=pw.CpuBackend(devices=8))
    # A backend made for a runtime that then failed can be used again.
    cpu = pw.CpuBackend(devices=2)
    with pytest.raises(pw.PathwaysError):
        pw.Runtime("4", backends=cpu)  # 4 devices on a 2-device backend
    with pw.Runtime("2", backends=cpu) as rt:
        assert rt.slice(0).device_count == 2


def test_placement_by_attribute_and_share_own():
    cpu, sim = pw.CpuBackend(workers=1), pw.SimBackend(slices=1, devices_per_slice=4)
    slices = [{"name": "c0", "mesh": "2", "backend": "cpu"},
              {"name": "s0", "mesh": "2", "backend": sim},
              {"name": "s1", "mesh": "2", "backend": sim, "first_device": 2}]
    with pw.Runtime(slices, backends=[cpu, sim]) as rt:
        c = rt.client()
        assert c.vslice("2", backend="sim").slice.name == "s0"
        assert c.vslice("2", slice_name="s1").slice.name == "s1"
        with pytest.raises(pw.NotFoundError, match=r"backend 'tpu'.*c0 \(2, backend cpu"):
            c.vslice("2", backend="tpu")
        a = c.vslice("2", backend="cpu")
        with pytest.raises(pw.ResourceExhaustedError, match="already bound to this client"):
            c.vslice("2", backend="cpu")
        b = c.vslice("2", backend="cpu", share_own=True)
        assert a.slice.name == b.slice.name == "c0"
        for v, base in ((a, 1.0), (b, 10.0)):
            x = v.put(np.arange(2, dtype=np.float32) + base, pw.split(0))
            dbl = v.compile(pw.Program("scale", ["f32[2] split(0,all)"], ["f32[2] split(0,all)"],
                                       {"alpha": 2}))
            g = c.graph()
            g.output(g.compute(dbl, g.parameter(v, x.spec)))
            np.testing.assert_array_equal(g.run(x, timeout=10).numpy(), [2 * base, 2 * base + 2])
        with pytest.raises(TypeError):
            c.vslice("2", backend=3)
        with pytest.raises(ValueError):
            c.vslice("2", host=-1)
        with pytest.raises(ValueError):
            c.vslice("2", backend="sim", slices=2)
        c.close()
