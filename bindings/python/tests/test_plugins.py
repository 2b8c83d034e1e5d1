"""Plugins from shared objects: the bundled cpu and sim modules loaded by
name and by path and run in a Runtime; a library with another ABI version
or without the entry point is refused with an error naming the file."""

import os
import shutil
import subprocess

import numpy as np
import pytest

import pathways as pw
from test_sim import sim_program

# A plugin library whose factory says another ABI version, and one with no
# entry point: written as an outside author would, without our headers (the
# factory's v1 layout spelled out).
BAD_ABI = r"""
#include <stddef.h>
#include <stdint.h>
typedef struct { size_t struct_size; uint32_t abi_version; int kind; const char* name;
                 const char* version; const char* description; const char* args_help;
                 void* create_backend; void* create_transport; void* create_store; } factory_t;
static const factory_t f = {sizeof(factory_t), 99u, 1, "future", "9", 0, 0, 0, 0, 0};
__attribute__((visibility("default"))) const factory_t* pw_plugin_entry(uint32_t abi) {
  (void)abi;
  return &f;
}
"""
NO_ENTRY = "int pw_not_the_entry_point(void) { return 1; }\n"


def build_so(tmp_path, name, source):
    cc = os.environ.get("PW_TEST_CC") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler (PW_TEST_CC) to build a test plugin")
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / f"lib{name}.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return str(out)


def test_bundled_cpu_plugin_runs_a_graph():
    p = pw.load_plugin("cpu")
    assert (p.name, p.kind, p.abi_version) == ("cpu", "backend", pw.PLUGIN_ABI_VERSION)
    assert os.path.dirname(p.path) == os.path.realpath(pw.plugin_dir())
    assert "devices=N" in p.args_help
    again = pw.load_plugin(p.path)  # by path: the same library
    assert again.path == p.path
    with pw.Runtime("4", backends=p.backend("devices=4,workers=1")) as rt:
        assert rt.slice(0).backend == "cpu"
        c = rt.client()
        vs = c.vslice("4")
        x = vs.put(np.arange(4, dtype=np.float32), pw.split(0))
        exe = vs.compile(pw.Program("scale", ["f32[4] split(0,all)"], ["f32[4] split(0,all)"],
                                    {"alpha": 10}))
        g = c.graph()
        g.output(g.compute(exe, g.parameter(vs, x.spec)))
        np.testing.assert_array_equal(g.run(x, timeout=10).numpy(), [0, 10, 20, 30])
        c.close()


def test_sim_plugin_and_its_operations():
    sim = pw.load_plugin("sim").backend("slices=1,devices_per_slice=4,mode=manual")
    with pw.Runtime("4", backends=[sim]) as rt:
        c = rt.client()
        vs = c.vslice("4")
        exe = vs.compile(sim_program("p"))
        g = c.graph()
        g.output(g.compute(exe))
        ex = g.submit()
        assert sim.stats()["queued"] == 4
        assert sim.run_all() == 4
        ex.wait(10)
        assert sim.clock == 10000
        c.close()


def test_plugin_errors_name_the_file(tmp_path):
    with pytest.raises(pw.NotFoundError, match="no-such-plugin"):
        pw.load_plugin("no-such-plugin")
    missing = str(tmp_path / "libmissing.so")
    with pytest.raises(pw.NotFoundError, match="libmissing.so"):
        pw.load_plugin(missing)
    junk = tmp_path / "libjunk.so"
    junk.write_bytes(b"not an ELF file")
    with pytest.raises(pw.InvalidArgumentError, match="libjunk.so"):
        pw.load_plugin(str(junk))
    bad_abi = build_so(tmp_path, "future", BAD_ABI)
    with pytest.raises(pw.FailedPreconditionError) as e:
        pw.load_plugin(bad_abi)
    assert "libfuture.so" in str(e.value) and "99" in str(e.value)
    assert str(pw.PLUGIN_ABI_VERSION) in str(e.value)
    no_entry = build_so(tmp_path, "noentry", NO_ENTRY)
    with pytest.raises(pw.NotFoundError, match="libnoentry.so.*pw_plugin_entry"):
        pw.load_plugin(no_entry)


def test_plugin_misuse():
    with pytest.raises(TypeError):
        pw.load_plugin(None)
    with pytest.raises(ValueError):
        pw.load_plugin("")
    with pytest.raises(pw.FailedPreconditionError, match="store plugin, not a backend"):
        pw.load_plugin("dir").backend()
    cpu = pw.load_plugin("cpu")
    with pytest.raises(TypeError):
        cpu.backend(8)
    with pytest.raises(pw.InvalidArgumentError, match="devices"):
        pw.Runtime("4", backends=cpu.backend("devices=many"))
    with pytest.raises(pw.InvalidArgumentError, match="colour"):
        pw.Runtime("4", backends=cpu.backend("colour=blue"))
    with pw.Runtime("4", backends=cpu.backend("devices=4")) as rt:
        with pytest.raises(pw.InvalidArgumentError):
            rt.backends[0].stats()  # not a sim
