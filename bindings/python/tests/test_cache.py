"""The compile cache from Python: memory and dir-store tiers, sharing
across runtimes, statistics, keys, lifetime and misuse."""

import os

import pytest

import pathways as pw

PROGRAM = pw.Program("scale", ["f32[8] split(0,all)"], ["f32[8] split(0,all)"], {"alpha": 3})


def compile_on(rt, program=PROGRAM):
    c = rt.client()
    vs = c.vslice("8")
    exe = vs.compile(program)
    data = exe.bytes()
    c.close()
    return data


def test_dir_store_serves_a_second_runtime(tmp_path):
    d = tmp_path / "cache"
    cache = pw.CompileCache(d)
    with pw.Runtime("8", compile_cache=cache) as rt:
        assert rt.compile_cache is cache
        first = compile_on(rt)
        s = cache.stats()
        assert (s["lookups"], s["misses"], s["store_writes"]) == (1, 1, 1)
        assert compile_on(rt) == first
        assert cache.stats()["memory_hits"] == 1
    cache.close()
    assert len(os.listdir(d)) == 1  # one entry, named by its key

    # Another cache over the same directory (another process would do the same).
    cache2 = pw.CompileCache(str(d))
    with pw.Runtime("8") as rt:
        rt.set_compile_cache(cache2)
        assert compile_on(rt) == first
        s = cache2.stats()
        assert (s["store_hits"], s["misses"]) == (1, 0)
        rt.set_compile_cache(None)
        compile_on(rt)
        assert cache2.stats()["lookups"] == 1  # not through the cache any more
    cache2.close()


def test_memory_only_cache_shared_by_two_runtimes():
    with pw.CompileCache(memory_bytes=1 << 20) as cache:
        with pw.Runtime("8", compile_cache=cache) as a, pw.Runtime("8", compile_cache=cache) as b:
            compile_on(a)
            compile_on(b)
        s = cache.stats()
        assert (s["misses"], s["memory_hits"], s["store_writes"]) == (1, 1, 0)
        assert "memory only" in repr(cache)


def test_a_runtime_keeps_a_closed_cache_alive(tmp_path):
    cache = pw.CompileCache(tmp_path / "c")
    with pw.Runtime("8", compile_cache=cache) as rt:
        cache.close()
        assert cache.closed
        compile_on(rt)  # the runtime's reference keeps the C cache
        compile_on(rt)
    with pytest.raises(ValueError, match="closed CompileCache"):
        cache.stats()
    with pytest.raises(ValueError, match="closed CompileCache"):
        pw.Runtime("8", compile_cache=cache)
    cache.close()  # idempotent


def test_compile_key():
    k = pw.compile_key("cpu", 1, "2x4", "kernel scale\n")
    assert len(k) == 32 and int(k, 16) >= 0
    assert k == pw.compile_key("cpu", 1, (2, 4), b"kernel scale\n", "")
    assert k != pw.compile_key("cpu", 2, "2x4", "kernel scale\n")
    assert k != pw.compile_key("cpu", 1, "8", "kernel scale\n")
    assert k != pw.compile_key("cpu", 1, "2x4", "kernel scale\n", "fast")


def test_misuse(tmp_path):
    with pytest.raises(TypeError, match="directory"):
        pw.CompileCache(42)
    with pytest.raises(ValueError, match="give a directory"):
        pw.CompileCache(max_bytes=10)
    with pytest.raises(TypeError, match="memory_bytes"):
        pw.CompileCache(memory_bytes="big")
    with pytest.raises(pw.PathwaysError, match="nonexistent"):
        pw.CompileCache(tmp_path / "nonexistent" / "deeper")  # its parent must exist
    with pytest.raises(TypeError, match="CompileCache"):
        pw.Runtime("8", compile_cache="dir")
    with pw.Runtime("8") as rt:
        with pytest.raises(TypeError, match="CompileCache or None"):
            rt.set_compile_cache(str(tmp_path))
    with pytest.raises(TypeError):
        pw.compile_key(None, 1, "8", "x")
