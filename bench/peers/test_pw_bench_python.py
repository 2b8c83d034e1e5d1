#!/usr/bin/python3
"""Tests of pw_bench_python.py (libpathways from Python on the shapes): the
verified runs pass on every shape through the real bindings, the checks
catch a wrong order, a missing device call and a lost spawn task, a
failing task body fails its row without stopping the others, and the rows
carry every field. Usage (PYTHONPATH reaching the bindings):
test_pw_bench_python.py PATH/TO/pw-bench [unittest options]."""

import contextlib
import io
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pw_bench_python as drv  # noqa: E402
import pyshapes  # noqa: E402

import pathways as pw  # noqa: E402

PW_BENCH = None


def quiet():
    return contextlib.redirect_stderr(io.StringIO())


class VerifiedRuns(unittest.TestCase):
    def test_every_shape_passes_at_one_and_two_workers(self):
        driver = drv.PwDriver(pw)
        for shape in pyshapes.SHAPES:
            dag = pyshapes.load_dag(PW_BENCH, shape, 0.01)
            for threads in (1, 2):
                self.assertTrue(driver.checked_run(dag, threads), "%s T=%d" % (shape, threads))

    def test_a_task_stamped_before_its_predecessor_fails(self):
        dag = pyshapes.load_dag(PW_BENCH, "chain", 0.01)
        stamps = pyshapes.Stamps(dag["tasks"])
        for i in reversed(range(dag["tasks"])):
            stamps.task(i)()
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertFalse(stamps.verify(dag, "t"))
        self.assertIn("ran before its predecessor", err.getvalue())

    def test_gang_stamps_catch_a_missing_device_and_a_step_out_of_order(self):
        dag = pyshapes.load_dag(PW_BENCH, "spmd", 0.01)
        ops = drv.gang_steps(dag) * drv.GANG_SLICES

        def stamped(order, skip=None):
            s = drv.GangStamps(ops)
            for op in order:
                for m in range(drv.GANG_MESH):
                    if (op, m) != skip:
                        s.task(op)()
            return s

        self.assertTrue(stamped(range(ops)).verify(dag, "t"))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            self.assertFalse(stamped(range(ops), skip=(5, 3)).verify(dag, "t"))
            self.assertFalse(stamped(reversed(range(ops))).verify(dag, "t"))
        self.assertIn("ran on 7 devices", err.getvalue())
        self.assertIn("before the previous step's", err.getvalue())

    def test_a_lost_spawn_task_fails(self):
        dag = pyshapes.load_dag(PW_BENCH, "spawn", 0.01)
        driver = drv.PwDriver(pw)
        real = drv.PwShape.run

        def short_run(shape):  # submits one task fewer than the DAG has
            last = None
            for _ in range(shape.dag["tasks"] - 1):
                last = shape.armed.submit()
            last.wait(30)

        drv.PwShape.run = short_run
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                self.assertFalse(driver.checked_run(dag, 1))
        finally:
            drv.PwShape.run = real
        self.assertIn("spawn ran %d tasks in 1 runs of %d" % (dag["tasks"] - 1, dag["tasks"]),
                      err.getvalue())


class Measure(unittest.TestCase):
    def args(self, *extra):
        return drv.parse(["--quick", "--no-check", "--reps", "2", "--latency-samples", "20",
                          "--pw-bench", PW_BENCH] + list(extra))

    def test_rows_have_every_field(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), quiet():
            for shape in ("layered", "spawn", "step"):
                self.assertTrue(pyshapes.measure_shape(drv.PwDriver(pw), self.args(),
                                                           shape, 1))
        rows = [json.loads(line) for line in out.getvalue().splitlines()]
        self.assertEqual([r["shape"] for r in rows], ["layered", "spawn", "step"])
        pyshapes.check_rows(self, rows, "libpathways-py")
        self.assertIsNone(rows[1]["build_ns"])  # spawn builds no graph of tasks
        self.assertGreater(rows[2]["p99_us"], 0)
        self.assertIn("gang ops", rows[2]["note"])

    def test_a_failing_task_fails_its_row_and_the_others_still_run(self):
        class Failing(drv.PwDriver):
            def make(self, dag, threads, body_of):
                def boom(*_):
                    raise ValueError("task body failed on purpose")
                bad = dag["shape"] == "chain"
                return drv.PwShape(self.pw, dag, threads,
                                   (lambda i: boom) if bad else body_of, per_task=False)

        args = self.args("--shape", "chain,one", "--threads", "1", "--no-metg")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            self.assertEqual(pyshapes.run_all(Failing(pw), args), 1)
        self.assertIn("chain at 1 threads failed", err.getvalue())
        self.assertIn("task body failed on purpose", err.getvalue())
        rows = [json.loads(line) for line in out.getvalue().splitlines()]
        self.assertEqual([r["shape"] for r in rows], ["one"])

    def test_bad_options_are_refused(self):
        for argv in (["--shape", "nosuch"], ["--threads", "0"], ["--scale", "0"],
                     ["--pw-bench", "/nonexistent"]):
            with self.assertRaises(SystemExit) as e, quiet():
                drv.parse(argv + (["--pw-bench", PW_BENCH] if "--pw-bench" not in argv else []))
            self.assertEqual(e.exception.code, 2, argv)


if __name__ == "__main__":
    pyshapes.test_main(globals(), "test_pw_bench_python.py")
