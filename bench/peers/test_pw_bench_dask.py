#!/usr/bin/python3
"""Unit tests for pw_bench_dask.py's own parts, without Dask: the DAG it
reads from `pw-bench dag`, the graph it builds from it, and the
verification that a run respected every edge (which must catch a wrong
order). Usage: test_pw_bench_dask.py PATH/TO/pw-bench [unittest options]."""

import contextlib
import io
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pw_bench_dask as drv  # noqa: E402
import pyshapes  # noqa: E402

PW_BENCH = None


def run_in_order(order):
    """A stand-in for dask.threaded.get that runs a graph's tasks in the
    order |order| gives (a function of the graph), passing each task its
    dependencies' results as Dask would."""
    def get(graph, keys, num_workers=1):
        results = {}
        for key in order(graph):
            fn, *deps = graph[key]
            results[key] = fn(*[results.get(d) for d in deps])
        return [results.get(k) for k in keys]
    return get


def topological(graph):
    return sorted(graph)  # tasks are numbered in a topological order


def reversed_order(graph):
    return sorted(graph, reverse=True)


class Dag(unittest.TestCase):
    def test_every_shape_loads_with_its_edges(self):
        for shape in drv.SHAPES:
            dag = drv.load_dag(PW_BENCH, shape, 0.01)
            self.assertEqual(dag["shape"], shape)
            self.assertEqual(len(dag["pred_begin"]), dag["tasks"] + 1)
            self.assertEqual(len(dag["preds"]), dag["edges"])
            for i in range(dag["tasks"]):
                for k in range(dag["pred_begin"][i], dag["pred_begin"][i + 1]):
                    self.assertLess(dag["preds"][k], i, "%s: task %d" % (shape, i))
        self.assertTrue(drv.load_dag(PW_BENCH, "spawn", 0.01)["independent"])

    def test_a_bad_shape_is_named(self):
        with self.assertRaisesRegex(RuntimeError, "--shape nosuch"):
            drv.load_dag(PW_BENCH, "nosuch", 1.0)

    def test_the_graph_has_the_dags_edges_and_its_sinks_as_keys(self):
        dag = drv.load_dag(PW_BENCH, "layered", 0.01)
        graph = drv.build_graph(dag, lambda i: drv.noop)
        self.assertEqual(len(graph), dag["tasks"])
        edges = sum(len(v) - 1 for v in graph.values())
        self.assertEqual(edges, dag["edges"])
        chain = drv.load_dag(PW_BENCH, "chain", 0.01)
        self.assertEqual(drv.sinks(chain), [chain["tasks"] - 1])
        self.assertEqual(len(drv.sinks(drv.load_dag(PW_BENCH, "spawn", 0.01))), 1000)


class Verification(unittest.TestCase):
    def test_a_run_in_topological_order_passes(self):
        for shape in ("chain", "fan", "layered", "pipeline", "spawn", "step"):
            dag = drv.load_dag(PW_BENCH, shape, 0.01)
            self.assertTrue(drv.checked_run(run_in_order(topological), dag, 1), shape)

    def test_a_run_out_of_order_fails(self):
        dag = drv.load_dag(PW_BENCH, "chain", 0.01)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertFalse(drv.checked_run(run_in_order(reversed_order), dag, 1))
        self.assertIn("ran before its predecessor", err.getvalue())

    def test_a_task_left_out_fails(self):
        dag = drv.load_dag(PW_BENCH, "fan", 0.01)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertFalse(drv.checked_run(run_in_order(lambda g: sorted(g)[:-1]), dag, 1))
        self.assertIn("did not run", err.getvalue())


class Measure(unittest.TestCase):
    """The harness on the stand-in scheduler: the rows a compare reads."""

    def test_rows_have_every_field(self):
        args = drv.parse(["--quick", "--no-check", "--pw-bench", PW_BENCH])
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            self.assertTrue(drv.measure_shape(run_in_order(topological), args, "layered", 1))
            self.assertTrue(drv.measure_shape(run_in_order(topological), args, "one", 1))
        rows = [drv.json.loads(line) for line in out.getvalue().splitlines()]
        self.assertEqual([r["shape"] for r in rows], ["layered", "one"])
        pyshapes.check_rows(self, rows, "dask")
        self.assertIsNone(rows[0]["p50_us"])
        self.assertGreater(rows[1]["p99_us"], 0)

    def test_bad_options_are_refused(self):
        for argv in (["--shape", "nosuch"], ["--threads", "0"], ["--threads", "x"],
                     ["--scale", "0"], ["--reps", "0"], ["--pw-bench", "/nonexistent"]):
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()):
                drv.parse(argv + (["--pw-bench", PW_BENCH] if "--pw-bench" not in argv else []))
            self.assertEqual(e.exception.code, 2, argv)


if __name__ == "__main__":
    pyshapes.test_main(globals(), "test_pw_bench_dask.py")
