#!/usr/bin/python3
"""Python overhead of the pathways bindings on the hot path.

Prints JSON lines:
  {"metric": "us_per_trivial_call", ...}  baseline: one API-mode cffi call
                                          into libpathways (pw_clock_now)
  {"metric": "us_per_submit", ...}        Graph.submit of an already-built
                                          graph: the C submit plus wrapping
                                          its outputs and done event
  {"metric": "us_per_submit_armed", ...}  ArmedGraph.submit of the same
                                          graph armed (Graph.arm())
  {"metric": "us_per_submit_c", ...}      the same submit made straight
                                          through the private cffi module
                                          (no Python objects): the C cost
  {"metric": "us_python_per_submit", ...} the difference: Python's overhead
  {"metric": "us_per_release", ...}       dropping one execution's Python
                                          objects (outputs' handles, event)
  {"metric": "us_per_wait", ...}          Event.wait on a done event that has
                                          completed (the wait's own overhead)
  {"metric": "us_per_step", ...}          submit + wait, one at a time
                                          (includes the CPU backend's work)
  {"summary": ...}                        the headline figures
Each figure is the median over --repeats rounds of --iterations calls, all
measured in this one run. The graph: one parameter, one `copy` kernel of
f32[8] on a one-device slice, so the C work is as small as it gets.

    PYTHONPATH=bindings/python:build/dev/bindings/python \\
        /usr/bin/python3 bindings/python/bench_submit.py
"""

import argparse
import gc
import json
import statistics
import sys
import time

import numpy as np

import pathways as pw
from pathways import _lowlevel


def timed(fn, iterations):
    t0 = time.perf_counter_ns()
    fn(iterations)
    return (time.perf_counter_ns() - t0) / iterations / 1e3


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=11)
    ap.add_argument("--quick", action="store_true", help="a short smoke run (tests)")
    args = ap.parse_args(argv)
    if args.quick:
        args.iterations, args.repeats = 200, 3

    lib = _lowlevel.lib
    with pw.Runtime("1", workers=1) as rt:
        client = rt.client("bench")
        vs = client.vslice("1")
        x = vs.put(np.arange(8, dtype=np.float32))
        exe = vs.compile(pw.Program("copy", [x.spec], [x.spec]))
        g = client.graph("copy")
        g.output(g.compute(exe, g.parameter(vs, x.spec)))
        g.finalize()

        def trivial(n):
            now = lib.pw_clock_now
            for _ in range(n):
                now()

        def submit(n):
            # Submit n executions, keeping them so none is waited for or
            # freed inside the timed loop; freed below, untimed.
            keep = [None] * n
            sub = g.submit
            for i in range(n):
                keep[i] = sub(x)
            submit.keep = keep

        armed = g.arm()

        def submit_armed(n):
            keep = [None] * n
            sub = armed.submit
            for i in range(n):
                keep[i] = sub(x)
            submit_armed.keep = keep

        cptr, gh, bid = client._box.ptr, g._h[0], x.id

        def submit_c(n):
            ffi = _lowlevel.ffi
            cargs, couts = ffi.new("pw_buffer_t[1]"), ffi.new("pw_buffer_t[1]")
            cdone = ffi.new("pw_event_t**")
            cargs[0].id = bid
            keep = [None] * n
            sub = lib.pw_graph_submit
            for i in range(n):
                if sub(cptr, gh, cargs, 1, ffi.NULL, couts, 1, cdone):
                    raise RuntimeError("submit failed")
                keep[i] = (couts[0].id, cdone[0])
            submit_c.keep = keep

        def release_c(keep):
            lib.pw_event_wait(keep[-1][1], _lowlevel.INFINITE_FUTURE)
            for out, ev in keep:
                lib.pw_status_free(lib.pw_buffer_release(cptr, (out,)))
                lib.pw_event_release(ev)

        def release(n):
            del release.keep[:]

        def wait(n):
            evs = wait.events
            for i in range(n):
                evs[i].wait()

        def step(n):
            sub = g.submit
            for _ in range(n):
                sub(x).done.wait()

        results = {"us_per_trivial_call": [], "us_per_submit": [], "us_per_submit_armed": [],
                   "us_per_submit_c": [],
                   "us_python_per_submit": [], "us_per_release": [], "us_per_wait": [],
                   "us_per_step": []}
        gc.disable()
        try:
            for _ in range(args.repeats):
                results["us_per_trivial_call"].append(timed(trivial, args.iterations))
                c_cost = timed(submit_c, args.iterations)
                release_c(submit_c.keep)
                del submit_c.keep
                py_cost = timed(submit, args.iterations)
                results["us_per_submit_c"].append(c_cost)
                results["us_per_submit"].append(py_cost)
                results["us_python_per_submit"].append(py_cost - c_cost)
                results["us_per_submit_armed"].append(timed(submit_armed, args.iterations))
                submit_armed.keep[-1].wait()
                del submit_armed.keep
                wait.events = [ex.done for ex in submit.keep]
                wait.events[-1].wait()
                for ev in wait.events:  # all complete: time only the wait call
                    ev.wait()
                results["us_per_wait"].append(timed(wait, args.iterations))
                del wait.events
                release.keep = submit.keep
                del submit.keep
                results["us_per_release"].append(timed(release, args.iterations))
                gc.collect()
                results["us_per_step"].append(timed(step, max(1, args.iterations // 4)))
        finally:
            gc.enable()
        armed.close()
        leaked = client.live_handles - 4  # vslice, x, exe, graph
        client.close()

    config = {"iterations": args.iterations, "repeats": args.repeats,
              "graph": "1 parameter, 1 copy f32[8] on a 1-device slice",
              "python": sys.version.split()[0], "pathways": pw.__version__}
    summary = {}
    for metric, values in results.items():
        med = statistics.median(values)
        summary[metric] = round(med, 3)
        print(json.dumps({"metric": metric, "median": round(med, 3),
                          "min": round(min(values), 3), "max": round(max(values), 3),
                          **config}))
    summary["python_submit_over_trivial_call"] = round(
        summary["us_python_per_submit"] / summary["us_per_trivial_call"], 1)
    summary["leaked_handles"] = leaked
    print(json.dumps({"summary": summary}))
    return 0 if leaked == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
