"""Runtime, Slice, Device, Client and VSlice."""

import threading

import pytest

import pathways as pw

from conftest import collect, f32


def test_runtime_topology_and_reprs(runtime):
    slices = runtime.slices
    assert [s.name for s in slices] == ["island", "solo"]
    island = runtime.slice("island")
    assert island == slices[0] and runtime.slice(1).name == "solo"
    assert island.mesh == (2, 4) and island.device_count == 8
    assert island.backend == "cpu" and island.health == "healthy" and island.host == 0
    devices = island.devices
    assert [d.mesh_index for d in devices] == list(range(8))
    assert [d.backend_device for d in devices] == list(range(8))
    assert runtime.slice("solo").device(0).backend_device == 8  # laid out after island
    assert devices[0].kind == "cpu" and devices[0].health == "healthy"
    assert devices[0].memory_bytes > 0
    assert "'island' 2x4" in repr(runtime) and "Slice 0 'island' 2x4 cpu healthy" in repr(island)
    assert "Device cpu:0" in repr(devices[0])
    with pytest.raises(KeyError):
        runtime.slice("nope")
    with pytest.raises(IndexError):
        runtime.slice(5)


@pytest.mark.parametrize("slices,meshes", [
    ("2x4", [(2, 4)]), (8, [(8,)]), ((2, 2), [(2, 2)]),
    (["2", {"mesh": "1x2", "name": "b", "host": 3}], [(2,), (1, 2)]),
])
def test_runtime_slice_arguments(slices, meshes):
    with pw.Runtime(slices, workers=1, device_memory=1 << 20) as rt:
        assert [s.mesh for s in rt.slices] == meshes
        assert rt.slice(0).device(0).memory_bytes == 1 << 20
    assert rt.closed and repr(rt) == "<Runtime closed>"
    with pytest.raises(ValueError, match="closed Runtime"):
        rt.slices


def test_runtime_rejects_bad_options():
    with pytest.raises(pw.InvalidArgumentError):
        pw.Runtime("2x4", workers=100000)
    with pytest.raises(ValueError):
        pw.Runtime([])
    with pytest.raises(ValueError):
        pw.Runtime("2", logger=print, log_level="loud")


def test_logger_receives_library_messages_from_c():
    lines = []
    with pw.Runtime("2", logger=lambda *a: lines.append(a), log_level="debug") as rt:
        with rt.client("logged") as c:
            c.vslice("2").release()
    assert any(sub == "resource" and "logged" in msg for level, sub, msg in lines), lines
    assert all(level in ("debug", "info", "warn", "error") for level, _, _ in lines)


def test_client_vslice_binding_and_reprs(runtime, client):
    assert client.name == "test" and not client.closed
    v = client.vslice("2x4")
    assert v.mesh == (2, 4) and v.device_count == 8
    assert v.slice == runtime.slice("island")
    assert runtime.slice("island").bound_vslices == 1
    assert repr(v) == "<VSlice 2x4 of client 'test' on slice 'island'>"
    # Same device count, other layout: bound row-major to the 2x4 slice.
    other = runtime.client("other")
    v8 = other.vslice(8)
    assert v8.slice.name == "island" and runtime.slice("island").bound_vslices == 2
    with pytest.raises(pw.ResourceExhaustedError, match="exclusive"):
        runtime.client("third").vslice("2x4", exclusive=True)
    v.release()
    v.release()  # idempotent
    assert "released" in repr(v)
    with pytest.raises(ValueError, match="released VSlice"):
        v.put(f32(2))
    other.close()
    collect()
    assert runtime.slice("island").bound_vslices == 0


def test_client_default_names_and_options(runtime):
    a = runtime.client()
    b = runtime.client(weight=3, priority=-1)
    assert a.name != b.name and a.name.startswith("client")
    assert "live handle" in repr(a)
    a.close()
    b.close()
    assert repr(a).endswith("closed>")


def test_closing_a_client_frees_its_objects_and_invalidates_them(runtime):
    c = runtime.client("short")
    v = c.vslice("1")
    b = v.put(f32(4))
    assert c.live_handles == 2
    c.close()
    c.close()
    assert c.closed and c.live_handles == 0
    with pytest.raises(ValueError, match="closed client"):
        b.numpy()
    assert "closed client" in repr(b)
    b.release()  # no-op, no crash
    del b, v
    collect()


def test_closing_the_runtime_closes_its_clients():
    rt = pw.Runtime("2", workers=1)
    c = rt.client()
    b = c.vslice("2").put(f32(2))
    rt.close()
    assert c.closed and rt.closed
    with pytest.raises(ValueError):
        b.numpy()
    with pytest.raises(ValueError):
        rt.client()


def test_context_managers_free_deterministically(runtime):
    with runtime.client("ctx") as c:
        with c.vslice("1") as v:
            with v.put(f32(3)) as b:
                assert c.live_handles == 2
                assert b.numpy().tolist() == [0, 1, 2]
            assert c.live_handles == 1
        assert c.live_handles == 0
    assert c.closed


def test_clients_work_from_several_threads(runtime):
    errors = []

    def work(i):
        try:
            with runtime.client(f"t{i}") as c, c.vslice("1") as v:
                for k in range(20):
                    with v.put(f32(16, start=k)) as b:
                        assert b.numpy()[0] == k
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
