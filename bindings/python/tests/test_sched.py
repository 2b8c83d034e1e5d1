"""The scheduler's policy and window from Python: with a window of one op,
which client's op enters the slice next is the policy's choice (observed in
the order the sim runs them)."""

import pytest

import pathways as pw
from test_sim import sim_program


def admission_order(policy):
    """Client "lo" (priority 0) submits two ops, then "hi" (priority 5) one,
    while the window (1) is full; returns the ops in the order they ran."""
    sim = pw.SimBackend(mode="manual", trace=True)
    with pw.Runtime("4", backends=sim, sched_policy=policy, sched_window=1) as rt:
        assert (rt.sched_policy, rt.sched_window) == (policy or "fifo", 1)
        runs = []
        for name, prio, count in (("lo", 0, 2), ("hi", 5, 1)):
            c = rt.client(name, priority=prio)
            vs = c.vslice("4")
            exe = vs.compile(sim_program(name))
            g = c.graph(name)
            g.output(g.compute(exe))
            runs += [g.submit() for _ in range(count)]
        sim.run_all()
        for ex in runs:
            ex.wait(10)
        return [e.op for e in sim.events() if e.device == 0]


def test_fifo_admits_in_submission_order():
    assert admission_order(None) == ["lo", "lo", "hi"]
    assert admission_order("fifo") == ["lo", "lo", "hi"]


def test_priority_admits_the_higher_priority_first():
    assert admission_order("priority") == ["lo", "hi", "lo"]


def test_fair_share_runs():
    assert sorted(admission_order("fair_share")) == ["hi", "lo", "lo"]


def test_bad_scheduler_options():
    with pytest.raises(ValueError, match="sched_policy must be one of"):
        pw.Runtime("4", sched_policy="lottery")
    with pytest.raises(TypeError, match="sched_window"):
        pw.Runtime("4", sched_window=-1)
    with pytest.raises(TypeError, match="sched_window"):
        pw.Runtime("4", sched_window="2")
