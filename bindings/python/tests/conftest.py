"""Shared fixtures: a runtime with one 2x4 slice and one 1-device slice, a
client, and virtual slices on them. Every fixture closes what it made, and
the client fixture checks that the test left no handle behind."""

import gc

import numpy as np
import pytest

import pathways as pw


@pytest.fixture
def runtime():
    rt = pw.Runtime([{"name": "island", "mesh": "2x4"}, {"name": "solo", "mesh": "1"}],
                    workers=2)
    yield rt
    rt.close()


@pytest.fixture
def client(runtime):
    c = runtime.client("test")
    yield c
    c.close()


@pytest.fixture
def vs(client):
    v = client.vslice("2x4")
    yield v
    v.release()


@pytest.fixture
def vs1(client):
    v = client.vslice("1")
    yield v
    v.release()


def collect():
    """Runs the garbage collector until nothing more is freed."""
    while gc.collect():
        pass


def program(kernel, inputs, outputs, **attrs):
    return pw.Program(kernel, inputs, outputs, attrs)


def one_node_graph(client, vslice, exe, *specs, name=None):
    """A graph running |exe| once over parameters of |specs|."""
    g = client.graph(name or exe.name)
    params = [g.parameter(vslice, s) for s in specs]
    out = g.compute(exe, *params)
    g.output(*(out if isinstance(out, tuple) else (out,)))
    return g


def f32(*shape, start=0.0):
    n = int(np.prod(shape)) if shape else 1
    return (np.arange(n, dtype=np.float32) + np.float32(start)).reshape(shape)
