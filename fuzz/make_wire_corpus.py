#!/usr/bin/env python3
"""Regenerates the seed corpus of the wire-message fuzz target.

    python3 fuzz/make_wire_corpus.py

Writes fuzz/corpus/wire/*.cbor: one well-formed message of every type
(lib/wire/wire.c holds the shapes) and a few near misses the decoder must
refuse. Uses the CBOR encoder of fuzz/make_corpus.py.
"""
import os

from make_corpus import enc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus", "wire")
VERSION = 3

# type: (name, unsigned count, blobs (str or bytes samples), list or None)
SHAPES = {
    1: ("hello", 6, [b"secret", "worker-0", "cpu", b"\x01\x02ucx", "cpu"], [1 << 30, 1 << 30]),
    2: ("welcome", 3, ["tcp://127.0.0.1:40001", bytes(range(16))], None),
    3: ("refuse", 0, ["bad token"], None),
    4: ("attach", 1, [bytes(range(16))], None),
    5: ("heartbeat", 1, [], [0, 0, 1, 0]),
    6: ("peer", 1, ["worker-1", b"\xaa" * 40], None),
    7: ("reply", 2, ["", b"payload"], [3, 4]),
    8: ("compile", 1, [b"copy\ninput f32[8] split(0,all)\n", "", "data,model"], [2, 2]),
    9: ("load", 2, [b"\x00executable"], None),
    10: ("unload", 1, [], None),
    11: ("alloc", 3, [], None),
    12: ("free", 1, [], None),
    13: ("write", 3, [b"\x00" * 32], None),
    14: ("read", 4, [], None),
    15: ("launch", 10, [], [0, 1, 10, 11, 12]),
    16: ("done", 5, ["ok"], None),
    17: ("copy", 9, [], [2, 64, 128]),
    18: ("cancel", 1, [], None),
    19: ("bye", 0, ["shutdown"], None),
}


def message(kind, unsigned, blobs, items):
    fields = [VERSION, kind] + [1000 * kind + i for i in range(unsigned)] + list(blobs)
    if items is not None:
        fields.append(items)
    return enc(fields)


def main():
    os.makedirs(CORPUS, exist_ok=True)
    for name in os.listdir(CORPUS):
        os.remove(os.path.join(CORPUS, name))
    cases = {}
    for kind, (name, unsigned, blobs, items) in SHAPES.items():
        cases[name] = message(kind, unsigned, blobs, items)
    hello = SHAPES[1]
    cases["bad_version"] = enc([1, 1] + [0] * 6 + hello[2] + [hello[3]])
    cases["bad_type"] = enc([VERSION, 99])
    # Version 2 COMPILE (no axis names): the version is refused first.
    cases["bad_compile_v2"] = enc([2, 8, 8000, b"copy\n", "", [2, 2]])
    cases["bad_compile_no_axes"] = enc([VERSION, 8, 8000, b"copy\n", "", [2, 2]])
    cases["bad_compile_axes_long"] = enc([VERSION, 8, 8000, b"copy\n", "", "a" * 64, [2, 2]])
    cases["bad_short"] = enc([VERSION, 11, 1, 2])
    cases["bad_blob_kind"] = enc([VERSION, 3, b"reason as bytes"])
    cases["bad_nested_list"] = enc([VERSION, 5, 1, [[1]]])
    cases["bad_trailing"] = cases["free"] + b"\x00"
    cases["bad_indefinite"] = b"\x9f\x02\x0c\x01\xff"
    # Frames: several messages back to back (what a session carries).
    cases["frame_dones"] = cases["done"] * 3
    cases["frame_launch_heartbeat"] = cases["launch"] + cases["heartbeat"] + cases["launch"]
    cases["frame_bad_middle"] = cases["done"] + cases["bad_short"] + cases["done"]
    cases["frame_truncated_tail"] = cases["done"] + cases["launch"][:-2]
    for name, data in sorted(cases.items()):
        with open(os.path.join(CORPUS, name + ".cbor"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
