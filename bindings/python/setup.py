"""setup.py of the `pathways` package: the pure-Python package plus the cffi
extension module _pathways_ffi, compiled from the C that build_ffi.py
generates and linked against libpathways.

Where libpathways comes from, in this order:
  PATHWAYS_BUILD_DIR=<build dir>   a configured and built CMake tree of this
                                   repository (headers from the source and
                                   build trees, the library from <build>/lib)
  pkg-config pathways              an installed prefix (set PKG_CONFIG_PATH
                                   to <prefix>/lib/pkgconfig for one outside
                                   the default search path)
The module records the library directory as its rpath, so no
LD_LIBRARY_PATH is needed afterwards. Offline: nothing is downloaded.
"""

import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_ffi  # noqa: E402  (next to this file)


def _pkg_config(*args):
    cmd = ["pkg-config", *args, "pathways"]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        raise SystemExit("pathways: pkg-config not found (apt-get install pkg-config), "
                         "or set PATHWAYS_BUILD_DIR to a libpathways build tree") from None
    except subprocess.CalledProcessError as exc:
        raise SystemExit(
            f"pathways: `{' '.join(cmd)}` failed: {exc.stderr.strip()}\n"
            "Install libpathways (cmake --install <build> --prefix <prefix>) and set "
            "PKG_CONFIG_PATH=<prefix>/lib/pkgconfig, or set PATHWAYS_BUILD_DIR to a "
            "libpathways build tree.") from None
    return out.strip()


def _library():
    """(version, include_dirs, library_dirs, libraries) of libpathways."""
    build = os.environ.get("PATHWAYS_BUILD_DIR")
    if build:
        build = os.path.abspath(build)
        source = os.path.abspath(os.path.join(HERE, "..", ".."))
        version_h = os.path.join(build, "include", "pathways", "version.h")
        if not os.path.exists(version_h):
            raise SystemExit(f"pathways: PATHWAYS_BUILD_DIR={build} is not a configured "
                             f"libpathways build tree (no {version_h})")
        version = None
        with open(version_h, encoding="utf-8") as f:
            for line in f:
                if line.startswith("#define PW_VERSION_STRING"):
                    version = line.split('"')[1]
        return (version or "0", [os.path.join(source, "include"), os.path.join(build, "include")],
                [os.path.join(build, "lib")], ["pathways"])
    version = _pkg_config("--modversion")
    incs = [a[2:] for a in shlex.split(_pkg_config("--cflags-only-I"))]
    libdirs = [a[2:] for a in shlex.split(_pkg_config("--libs-only-L"))]
    libs = [a[2:] for a in shlex.split(_pkg_config("--libs-only-l"))]
    libdir = _pkg_config("--variable=libdir")
    if libdir and libdir not in libdirs:
        libdirs.append(libdir)
    return version, incs, libdirs, libs


class BuildFfi(build_ext):
    """Generates the module's C (cffi, API mode) before compiling it."""

    def build_extensions(self):
        os.makedirs(self.build_temp, exist_ok=True)
        generated = os.path.join(self.build_temp, "_pathways_ffi.c")
        build_ffi.main(["--cdef", os.path.join(HERE, "pathways_cdef.h"), "--out", generated])
        for ext in self.extensions:
            ext.sources = [generated if s == "<generated>" else s for s in ext.sources]
        super().build_extensions()


VERSION, INCLUDE_DIRS, LIBRARY_DIRS, LIBRARIES = _library()

setup(
    version=VERSION,
    ext_modules=[Extension(
        "_pathways_ffi",
        sources=["<generated>", "src/pwpy_support.c"],
        include_dirs=["src", *INCLUDE_DIRS],
        library_dirs=LIBRARY_DIRS,
        libraries=LIBRARIES,
        runtime_library_dirs=LIBRARY_DIRS,
        extra_compile_args=["-std=c11"],
    )],
    cmdclass={"build_ext": BuildFfi},
)
