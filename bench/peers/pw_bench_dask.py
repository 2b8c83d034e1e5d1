#!/usr/bin/python3
"""pw-bench-dask: Dask on the shapes of bench/shapes.h, measured as
bench/shapes.c measures the C drivers, for a user who would pick Dask
(Python) instead.

The DAG comes from `pw-bench dag` (the C generator, seed and scale every
driver uses), so the work is identical. A task is a Python function of its
predecessors' results, in a Dask graph (a dict of key -> (function,
*dependency keys)) built once and computed again for every rerun with
Dask's threaded scheduler (`dask.threaded.get`, num_workers = threads),
the local scheduler Dask uses for dask.delayed by default. Dask analyses
the graph again on every call; that is its rerun. spawn builds and
computes a graph of independent tasks per run (Dask has no submission of
single tasks outside dask.distributed, whose per-task cost is higher).
one and step: a rep is n back-to-back runs, n calibrated as in shapes.c
(about 20 us a rep, so n = 1 for Dask); p50/p99 are single runs.
METG(50%): the layered shape at 5% scale with task bodies that spin on
the clock for 0.25-10 us (Python cannot run the C drivers' calibrated
multiply-add loop); efficiency = tasks * spin / (threads * wall).

The harness (measures, options, output) is pyshapes.py's, shared with
pw_bench_python.py. Options as the C drivers (shapes.h): --threads 1,2
--shape LIST|all --reps R --latency-samples N --scale X --quick --no-metg
--metg-only --no-check --time-budget S, plus --pw-bench PATH (the pw-bench
binary; default: the build/release one next to this source tree).

Output: one JSON object per result on stdout, fields as the C drivers'
(runtime "dask"); a table on stderr. Exit status 0, 1 when a run failed,
2 for bad options, 3 when Dask is not installed (python3-dask).
"""

import json  # noqa: F401 (the tests read rows with drv.json)
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyshapes  # noqa: E402
from pyshapes import SHAPES, Stamps, load_dag, noop, sinks  # noqa: E402,F401


def build_graph(dag, body_of):
    """The Dask graph: task i -> (body, *its predecessors)."""
    pb, preds = dag["pred_begin"], dag["preds"]
    return {i: (body_of(i),) + tuple(preds[pb[i]:pb[i + 1]]) for i in range(dag["tasks"])}


class DaskShape(pyshapes.Shape):
    """One shape prepared for Dask at |threads| workers."""

    def __init__(self, get, dag, threads, body_of):
        self.get = get
        self.dag = dag
        self.threads = threads
        self.body_of = body_of
        self.keys = sinks(dag)
        self.graph = None

    def build(self):
        if not self.dag["independent"]:
            self.graph = build_graph(self.dag, self.body_of)

    def run(self):
        graph = self.graph
        if graph is None:  # spawn: a graph of independent tasks per run
            graph = build_graph(self.dag, self.body_of)
        self.get(graph, self.keys, num_workers=self.threads)


class DaskDriver:
    """pyshapes' driver interface over a Dask scheduler's get."""

    name = "dask"

    def __init__(self, get):
        self.get = get

    def make(self, dag, threads, body_of):
        return DaskShape(self.get, dag, threads, body_of)

    def checked_run(self, dag, threads):
        stamps = Stamps(dag["tasks"])
        shape = DaskShape(self.get, dag, threads, stamps.task)
        shape.build()
        for _ in range(2):  # a first run and a rerun
            stamps.reset()
            shape.run()
            if not stamps.verify(dag, "dask"):
                return False
        return True

    def notes(self, dag):
        return ["a graph of independent tasks built and computed per run"] \
            if dag["independent"] else []


def checked_run(get, dag, threads):
    return DaskDriver(get).checked_run(dag, threads)


def measure_shape(get, args, name, threads):
    return pyshapes.measure_shape(DaskDriver(get), args, name, threads)


def parse(argv):
    return pyshapes.parse("pw-bench-dask", __doc__.split("\n")[0], argv)


def main(argv):
    args = parse(argv)
    try:
        import dask
        import dask.threaded
    except ImportError:
        print("pw-bench-dask: Dask is not installed (apt install python3-dask, or "
              "scripts/deps.sh --bench)", file=sys.stderr)
        return 3
    print("dask %s: threaded scheduler; scale %g, %d reps" % (dask.__version__, args.scale,
                                                              args.reps), file=sys.stderr)
    return pyshapes.run_all(DaskDriver(dask.threaded.get), args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
