"""Virtual slices spanning several physical slices, and transfer nodes."""

import numpy as np
import pytest

import pathways as pw

from conftest import program


@pytest.fixture
def trio():
    with pw.Runtime([{"name": f"s{i}", "mesh": "4"} for i in range(3)], workers=1) as rt:
        with rt.client("span") as c:
            yield c


def test_spanning_vslice_binds_slices_in_index_order(trio):
    with trio.vslice("2x4", slices=[2, 0]) as wide:
        assert [s.index for s in wide.slices] == [0, 2]
        assert wide.slice.index == 0 and wide.device_count == 8
    with trio.vslice("12", slices=3) as every:
        assert [s.index for s in every.slices] == [0, 1, 2]
    with trio.vslice("4") as one:
        assert len(one.slices) == 1


@pytest.mark.parametrize("slices,error,needle", [
    ([0, 0], pw.InvalidArgumentError, "are both slice 0"),
    ([0, 9], pw.InvalidArgumentError, "does not exist"),
    (4, pw.InvalidArgumentError, "exceeds the runtime's 3 slices"),
    (3, pw.InvalidArgumentError, "does not divide"),
    ([], ValueError, "slice indices"),
])
def test_spanning_requests_that_cannot_be_met(trio, slices, error, needle):
    with pytest.raises(error, match=needle):
        trio.vslice("8", slices=slices)
    with trio.vslice("8", slices=2):  # the client is still usable
        pass


def test_all_reduce_across_two_slices_through_transfers(trio):
    rows = "f32[8,3] split(0,all)"
    with trio.vslice("4") as local, trio.vslice("2x4", slices=2) as wide:
        reduce = wide.compile(program("all_reduce_sum", [rows], ["f32[3] replicated"]))
        g = trio.graph("cross")
        x = g.parameter(local, rows)
        spread = g.transfer(x, wide, "split(0,all)", name="spread")
        total = g.compute(reduce, spread, name="sum")
        home = g.transfer(total, local, "replicated", name="home")
        g.output(total, home)
        assert "transfer(%0)" in repr(g)
        data = np.arange(24, dtype=np.float32).reshape(8, 3)
        with local.put(data, "split(0,all)") as arg:
            for _ in range(2):
                a, b = g.run(arg, timeout=10)
                np.testing.assert_allclose(a.numpy(), data.sum(axis=0))
                np.testing.assert_allclose(b.numpy(), data.sum(axis=0))
                a.release()
                b.release()
        with pytest.raises(TypeError):
            g.transfer("not a value", wide, "replicated")
        g.release()
        reduce.release()
