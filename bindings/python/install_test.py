"""The Python package installs and imports with no PYTHONPATH (ctest
py_install_venv; docs/python.md, "Install").

    python3 install_test.py --build <build dir> --work <scratch dir>

1. `cmake --install` of the build tree into a scratch prefix (libpathways,
   its headers and pathways.pc).
2. pip: a fresh `python3 -m venv --system-site-packages`, then
   `pip install --no-build-isolation --no-index` of a copy of this directory,
   built against the scratch prefix through pkg-config (PKG_CONFIG_PATH).
3. cmake --install: a second fresh venv as the install prefix of the build
   tree (the package for the configured interpreter lands in its
   site-packages).
After each, the venv's interpreter runs a small graph with PYTHONPATH
unset, from a directory outside the trees, and checks that `pathways` and
its module came from that venv, then loads the installed sim plugin by
name (found beside the installed libpathways) and runs a graph on it.
4. The example backend plugin (examples/plugin_backend) is built out of
   the tree against the cmake-installed venv prefix (find_package), and the
   venv's interpreter loads it by path and runs a graph on it.
Offline: nothing is downloaded.
"""

import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CHECK = r"""
import os, sys
import pathways as pw
import _pathways_ffi
venv = os.path.realpath(sys.argv[1])
for what, path in (("pathways", pw.__file__), ("_pathways_ffi", _pathways_ffi.__file__)):
    if not os.path.realpath(path).startswith(venv + os.sep):
        sys.exit(f"{what} was imported from {path}, not from {venv}")
with pw.Runtime("4", workers=1) as rt:
    c = rt.client("install")
    vs = c.vslice("4")
    x = vs.put([1.0, 2.0, 3.0, 4.0], pw.split(0), dtype="f32")
    exe = vs.compile(pw.Program("scale", ["f32[4] split(0,all)"], ["f32[4] split(0,all)"],
                                {"alpha": 3}))
    g = c.graph("triple")
    g.output(g.compute(exe, g.parameter(vs, x.spec)))
    got = g.run(x).numpy().tolist()
    if got != [3.0, 6.0, 9.0, 12.0]:
        sys.exit(f"unexpected result {got}")
    c.close()
# The installed bundled plugins, found beside the installed libpathways.
work = os.path.realpath(sys.argv[2])
sim = pw.load_plugin("sim")
if not os.path.realpath(sim.path).startswith(work + os.sep):
    sys.exit(f"plugin 'sim' was loaded from {sim.path}, not from the installed prefix")
backend = sim.backend("devices_per_slice=4,mode=manual")
with pw.Runtime("4", backends=backend) as rt:
    c = rt.client("plugin")
    vs = c.vslice("4")
    g = c.graph("sim")
    g.output(g.compute(vs.compile("op tick\ntime 5us\noutput f32[4] split(0,all)\n")))
    ex = g.submit()
    backend.run_all()
    ex.wait(10)
    if backend.clock != 5000:
        sys.exit(f"sim plugin clock {backend.clock}, expected 5000")
    c.close()
print(f"import ok: pathways {pw.__version__} from {os.path.dirname(pw.__file__)}, "
      f"plugins from {os.path.dirname(sim.path)}")
"""


EXAMPLE = r"""
import sys
import numpy as np
import pathways as pw
plugin = pw.load_plugin(sys.argv[1])
if plugin.kind != "backend" or plugin.name != "example":
    sys.exit(f"loaded {plugin.kind} plugin '{plugin.name}', not the example backend")
with pw.Runtime("2", backends=plugin.backend("devices=2")) as rt:
    c = rt.client("example")
    vs = c.vslice("2")
    x = vs.put(np.arange(4, dtype=np.float32) + 0.5, pw.split(0))
    exe = vs.compile("example-copy f32[4]\n")
    g = c.graph("copy")
    g.output(g.compute(exe, g.parameter(vs, x.spec)))
    got = g.run(x, timeout=10).numpy().tolist()
    if got != [0.5, 1.5, 2.5, 3.5]:
        sys.exit(f"unexpected result {got}")
    c.close()
print(f"example plugin ok: {plugin.path}")
"""


def run(cmd, env=None, cwd=None):
    print("+", " ".join(c if "\n" not in c else "<script>" for c in cmd), flush=True)
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}")
    return proc.stdout


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
                        "PKG_CONFIG_PATH", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")}
    env["PIP_NO_INDEX"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.update(extra)
    return env


def check_import(venv, work):
    python = os.path.join(venv, "bin", "python")
    out = run([python, "-c", CHECK, venv, work], env=clean_env(), cwd=work)
    if "import ok" not in out:
        sys.exit(f"no 'import ok' from {python}:\n{out}")
    print(out.strip())


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="the configured, built CMake tree")
    parser.add_argument("--work", required=True, help="scratch directory (emptied)")
    parser.add_argument("--cmake", default="cmake")
    args = parser.parse_args(argv)
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    prefix = os.path.join(work, "prefix")
    run([args.cmake, "--install", args.build, "--prefix", prefix], env=clean_env())
    pcdirs = [os.path.join(prefix, d, "pkgconfig") for d in sorted(os.listdir(prefix))
              if d.startswith("lib") and os.path.isdir(os.path.join(prefix, d, "pkgconfig"))]
    if not pcdirs:
        sys.exit(f"no lib*/pkgconfig under {prefix}")

    # 2. pip, against the installed prefix through pkg-config. A copy of the
    # sources: pip builds in place, and the tree stays clean.
    src = os.path.join(work, "src")
    shutil.copytree(HERE, src, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                              "*.egg-info"))
    venv = os.path.join(work, "venv-pip")
    run([sys.executable, "-m", "venv", "--system-site-packages", venv], env=clean_env())
    run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "--no-build-isolation",
         "--no-index", "--no-deps", src], env=clean_env(PKG_CONFIG_PATH=pcdirs[0]), cwd=work)
    check_import(venv, work)

    # 3. cmake --install with the venv as the prefix.
    venv = os.path.join(work, "venv-cmake")
    run([sys.executable, "-m", "venv", "--system-site-packages", venv], env=clean_env())
    run([args.cmake, "--install", args.build, "--prefix", venv], env=clean_env())
    check_import(venv, work)

    # 4. The example backend plugin (examples/plugin_backend) built out of
    # the tree against that prefix, loaded by path from Python, a graph run.
    example_src = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples",
                               "plugin_backend")
    example_build = os.path.join(work, "example-build")
    run([args.cmake, "-S", example_src, "-B", example_build, f"-DCMAKE_PREFIX_PATH={venv}"],
        env=clean_env())
    run([args.cmake, "--build", example_build], env=clean_env())
    out = run([os.path.join(venv, "bin", "python"), "-c", EXAMPLE,
               os.path.join(example_build, "libpathways_example.so")], env=clean_env(), cwd=work)
    if "example plugin ok" not in out:
        sys.exit(f"the example plugin did not run:\n{out}")
    print(out.strip())
    print("OK: installed with pip and with cmake --install; imported without PYTHONPATH")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
