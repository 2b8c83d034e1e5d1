"""The elastic helper from Python (tests/elastic/elastic_test.c's job): a
counter state (x + 1 per step with the CPU 'add' kernel, exact in f32,
split over every device of a mesh spanning the job's slices) survives a
slice failing in a step, restores onto fewer slices, grows back; the final
state is exact; exceptions in the callbacks come back out of run()."""

import numpy as np
import pytest

import pathways as pw

from conftest import collect

PER, SLICES, LEN = 2, 4, 24
SPEC = f"f32[{LEN}] split(0,all)"


@pytest.fixture
def rt4():
    rt = pw.Runtime([{"name": f"s{i}", "mesh": str(PER)} for i in range(SLICES)],
                    workers=2, health_poll=0.001)
    yield rt
    rt.close()


class CounterJob:
    def __init__(self, rt, client):
        self.rt, self.client = rt, client
        self.fail_at = self.repair_at = self.raise_at = None
        self.fail_device = (2, 0)  # slice 2, device 0
        self.setups, self.restoring, self.teardowns, self.counts = 0, 0, 0, []
        self.events = []
        self.parts = ()

    def setup(self, el, slices, restoring):
        self.setups += 1
        self.restoring += restoring
        self.counts.append(len(slices))
        vs = self.client.vslice(str(PER * len(slices)), slices=slices)
        add = vs.compile(pw.Program("add", [SPEC, SPEC], [SPEC]))
        g = self.client.graph("inc")
        g.output(g.compute(add, g.parameter(vs, SPEC), g.parameter(vs, SPEC)))
        ones = vs.put(np.ones(LEN, np.float32), pw.split(0))
        self.vs, self.g, self.ones, self.parts = vs, g, ones, (ones, g, add, vs)
        el.place(0, vs, SPEC)
        if not restoring:
            x0 = vs.put(np.arange(LEN, dtype=np.float32) * 100, pw.split(0))
            el.set_state(0, x0)
            assert x0.id == 0  # taken by the helper

    def step(self, el, i):
        if i == self.raise_at:
            raise KeyError(f"the job's own bug at step {i}")
        if i == self.fail_at:
            self.rt.set_device_health(f"s{self.fail_device[0]}", self.fail_device[1], "failed")
        if i == self.repair_at:
            self.rt.set_device_health(f"s{self.fail_device[0]}", self.fail_device[1], "healthy")
        ex = self.g.submit(el.state(0), self.ones)
        ex.wait(timeout=10)  # UnavailableError on a lost slice: the helper recovers
        el.set_state(0, ex.outputs[0])

    def teardown(self, el):
        self.teardowns += 1
        for p in self.parts:
            p.release()
        self.parts = ()

    def on_event(self, ev):
        self.events.append(ev)


def _elastic(job, **kw):
    return pw.Elastic(job.client, str(PER), ["x"], setup=job.setup, step=job.step,
                      teardown=job.teardown, on_event=job.on_event, **kw)


def _state(el):
    return el.state("x").numpy()


def test_uninterrupted(rt4):
    c = rt4.client("job")
    job = CounterJob(rt4, c)
    with _elastic(job, snapshot_every=4) as el:
        el.run(0, 10)
        np.testing.assert_array_equal(_state(el), np.arange(LEN, dtype=np.float32) * 100 + 10)
        st = el.stats()
        assert st["steps_completed"] == 10 and st["snapshots"] == 3 and st["recoveries"] == 0
        assert el.slice_count == SLICES and job.setups == 1
        el.run(10, 3)
        np.testing.assert_array_equal(_state(el), np.arange(LEN, dtype=np.float32) * 100 + 13)
        assert [e.kind for e in job.events].count("snapshot") >= 3
        assert "Elastic" in repr(el) and "4 slice(s)" in repr(el)
    assert job.teardowns == 1 and el.closed
    c.close()


def test_slice_fails_in_a_step_restores_on_fewer_and_grows_back(rt4):
    c = rt4.client("job")
    job = CounterJob(rt4, c)
    job.fail_at, job.repair_at = 7, 11
    el = _elastic(job, snapshot_every=5)
    el.run(0, 30)
    np.testing.assert_array_equal(_state(el), np.arange(LEN, dtype=np.float32) * 100 + 30)
    st = el.stats()
    # Snapshots are asynchronous: 2 steps are replayed from step 5's snapshot
    # when it had completed before the failure at step 7, all 7 from step 0's
    # when it was still in flight (a loaded machine).
    assert st["recoveries"] == 1 and st["growths"] == 1 and st["steps_replayed"] in (2, 7)
    assert st["slice_count"] == SLICES and el.slice_count == SLICES
    kinds = [e.kind for e in job.events]
    for k in ("slice_lost", "restored", "remeshed", "slice_back", "grown"):
        assert k in kinds, kinds
    lost = next(e for e in job.events if e.kind == "slice_lost")
    assert lost.slice == 2
    assert SLICES - 1 in job.counts and job.restoring == 2
    restored = next(e for e in job.events if e.kind == "restored")
    assert restored.step == (5 if st["steps_replayed"] == 2 else 0) and restored.slice is None
    el.close()
    c.close()


def test_an_exception_in_step_is_reraised_by_run(rt4):
    c = rt4.client("job")
    job = CounterJob(rt4, c)
    job.raise_at = 3
    el = _elastic(job, snapshot_every=2)
    with pytest.raises(KeyError, match="own bug at step 3") as info:
        el.run(0, 6)
    if hasattr(info.value, "__notes__"):
        assert any("step 3" in n for n in info.value.__notes__)
    # The helper is still usable: the state is that of step 2.
    np.testing.assert_array_equal(_state(el), np.arange(LEN, dtype=np.float32) * 100 + 3)
    job.raise_at = None
    el.run(3, 3)
    np.testing.assert_array_equal(_state(el), np.arange(LEN, dtype=np.float32) * 100 + 6)
    el.close()

    # In setup: the run ends with it too.
    def bad_setup(el, slices, restoring):
        raise ValueError("no data for this mesh")

    el = pw.Elastic(c, str(PER), 1, setup=bad_setup, step=job.step)
    with pytest.raises(ValueError, match="no data for this mesh"):
        el.run(0, 1)
    el.close()
    c.close()


def test_too_few_slices_is_unavailable(rt4):
    c = rt4.client("job")
    job = CounterJob(rt4, c)

    def step(el, i):
        job.step(el, i)
        if i == 1:
            rt4.lose_slice(3, "between steps")

    el = pw.Elastic(c, str(PER), 1, setup=job.setup, step=step, teardown=job.teardown,
                    min_slices=4, snapshot_every=2)
    with pytest.raises(pw.UnavailableError, match="min_slices"):
        el.run(0, 6)
    el.close()
    rt4.restore_slice(3)
    c.close()


def test_ownership_and_lifetimes(rt4):
    c = rt4.client("job")
    job = CounterJob(rt4, c)
    before = c.live_handles
    el = _elastic(job)
    el.run(0, 2)
    view = el.state(0)
    assert isinstance(view, pw.StateBuffer) and view.spec == pw.ArraySpec.parse(SPEC)
    view.release()  # forgets the view only
    assert el.state(0).numpy()[1] == 102
    # Handles counted: the setup's parts; the state is the helper's.
    assert c.live_handles == before + 4
    with pytest.raises(ValueError, match="view of a state"):
        el.set_state(0, el.state(0))
    # Client.on_topology is held by the helper.
    with pytest.raises(ValueError, match="Elastic"):
        c.on_topology(print)
    # Closing the client closes the helper first (teardown runs).
    c.close()
    assert el.closed and job.teardowns == 1
    with pytest.raises(ValueError, match="closed Elastic"):
        el.run(2, 1)
    # A client with a topology callback cannot get a helper.
    c2 = rt4.client("topo")
    c2.on_topology(lambda ev: None)
    with pytest.raises(ValueError, match="topology callback"):
        pw.Elastic(c2, str(PER), 1, setup=job.setup, step=job.step)
    c2.on_topology(None)
    job2 = CounterJob(rt4, c2)
    _elastic(job2).run(0, 1)  # dropped: its finalizer closes it
    collect()
    assert job2.teardowns == 1
    c2.on_topology(None)  # the helper gave the callback back
    c2.close()


def test_misuse(rt4):
    c = rt4.client("job")
    job = CounterJob(rt4, c)
    with pytest.raises(TypeError, match="Client"):
        pw.Elastic(None, "2", 1, setup=job.setup, step=job.step)
    with pytest.raises(TypeError, match="step must be callable"):
        pw.Elastic(c, "2", 1, setup=job.setup, step=None)
    with pytest.raises(ValueError, match="1 to 1024"):
        pw.Elastic(c, "2", 0, setup=job.setup, step=job.step)
    with pytest.raises(TypeError, match="states"):
        pw.Elastic(c, "2", "x", setup=job.setup, step=job.step)
    with pytest.raises(TypeError, match="min_slices"):
        pw.Elastic(c, "2", 1, setup=job.setup, step=job.step, min_slices=1.5)
    with pytest.raises(ValueError, match="return_wait"):
        pw.Elastic(c, "2", 1, setup=job.setup, step=job.step, return_wait=-1)
    with pytest.raises(pw.InvalidArgumentError, match="min_slices 3"):
        pw.Elastic(c, "2", 1, setup=job.setup, step=job.step, min_slices=3, max_slices=2)
    el = _elastic(job)
    with pytest.raises(pw.FailedPreconditionError, match="setup"):
        el.place(0, c.vslice("2"), SPEC)
    with pytest.raises(pw.NotFoundError, match="not set"):
        el.state(0)
    with pytest.raises(IndexError, match="out of range"):
        el.state(3)
    with pytest.raises(KeyError, match="no state named"):
        el.state("y")
    with pytest.raises(TypeError, match="Buffer"):
        el.set_state(0, np.zeros(LEN, np.float32))
    with pytest.raises(TypeError, match="first_step"):
        el.run("0", 1)

    def closing_step(e, i):
        e.close()

    el.close()
    el = pw.Elastic(c, str(PER), 1, setup=job.setup, step=closing_step, teardown=job.teardown)
    with pytest.raises(pw.FailedPreconditionError, match="inside a pathways callback"):
        el.run(0, 1)
    el.close()
    c.close()
