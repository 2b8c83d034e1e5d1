"""cffi builder for _pathways_ffi (API mode, out of line).

Run by CMake (bindings/python/CMakeLists.txt): it reads the curated
declarations in pathways_cdef.h and writes the C source of the extension
module, which CMake then compiles and links against the built libpathways
(so the compiler flags, the rpath and the dependency tracking are CMake's).

    python3 build_ffi.py --out _pathways_ffi.c

Nothing here touches the network or installs anything.
"""

import argparse
import os
import sys

import cffi

HERE = os.path.dirname(os.path.abspath(__file__))

# The C preamble of the module: the real public headers, so that cffi checks
# every declaration of pathways_cdef.h against them when the module compiles.
SOURCE = """
#include "pathways/pathways.h"
#include "pathways/backends/cpu.h"
#include "pwpy_support.h"
"""


def read_cdef(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # cdef() does not take comments in every position; strip them (the
    # header is plain declarations, with no string literals holding "/*").
    out, i = [], 0
    while True:
        j = text.find("/*", i)
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        k = text.find("*/", j + 2)
        if k < 0:
            raise SystemExit(f"{path}: unterminated comment")
        i = k + 2
    return "".join(out)


def make_ffi(cdef_path):
    ffi = cffi.FFI()
    ffi.cdef(read_cdef(cdef_path))
    ffi.set_source("_pathways_ffi", SOURCE)
    return ffi


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cdef", default=os.path.join(HERE, "pathways_cdef.h"))
    parser.add_argument("--out", required=True, help="C file to write")
    args = parser.parse_args(argv)
    ffi = make_ffi(args.cdef)
    tmp = args.out + ".tmp"
    ffi.emit_c_code(tmp)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
