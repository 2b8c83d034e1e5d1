"""The measuring harness of bench/shapes.c, in Python, for the drivers that
run the shapes from Python (pw_bench_dask.py, pw_bench_python.py).

A driver is an object with
  name                      the "runtime" of its JSON rows
  make(dag, threads, body)  a prepared shape: build() (untimed here; the
                            harness times it) and runs(n) -> ns for n
                            back-to-back runs; |body(i)| is task i's body
                            (a Python callable of the task's inputs)
  checked_run(dag, threads) one first run and one rerun of |dag| with
                            bodies that stamp their order; True when every
                            task ran after its predecessors
  notes(dag)                extra notes for a row (a list of strings)
  close(shape)              optional: frees what make() made

The DAG comes from `pw-bench dag` (the C generator, its seed and scale), so
every driver runs identical work. Measures as shapes.c: build, first run,
median rerun over --reps; one and step: a rep is n back-to-back runs, n
calibrated to ~20 us a rep, and p50/p99 are single runs; METG(50%): the
layered shape at 5% scale with task bodies that spin on the clock for
0.25-10 us (Python cannot run the C drivers' calibrated multiply-add loop),
efficiency = tasks * spin / (threads * wall)."""

import argparse
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import time
import unittest

SHAPES = ["chain", "fan", "layered", "spmd", "pipeline", "spawn", "one", "step"]
METG_GRID_US = [0.25, 0.5, 1, 2, 4, 8, 10]
BATCH_TARGET_NS = 20000.0
BATCH_MAX = 4096


def noop(*_):
    return None


def spinner(ns):
    """A task body that spins on the clock for |ns| nanoseconds."""
    clock = time.perf_counter_ns

    def spin(*_):
        end = clock() + ns
        while clock() < end:
            pass
        return None
    return spin


class Stamps:
    """Verification: every task records when it ran (a counter under the
    GIL), and the check compares those with the DAG's edges."""

    def __init__(self, tasks):
        self.stamp = [0] * tasks
        self.counter = itertools.count(1)

    def task(self, i):
        def body(*_):
            self.stamp[i] = next(self.counter)
        return body

    def reset(self):
        self.stamp = [0] * len(self.stamp)

    def verify(self, dag, who):
        for i in range(dag["tasks"]):
            if self.stamp[i] == 0:
                print("%s: %s task %d did not run" % (who, dag["shape"], i), file=sys.stderr)
                return False
            for k in range(dag["pred_begin"][i], dag["pred_begin"][i + 1]):
                p = dag["preds"][k]
                if self.stamp[p] >= self.stamp[i]:
                    print("%s: %s task %d ran before its predecessor %d"
                          % (who, dag["shape"], i, p), file=sys.stderr)
                    return False
        return True


class Shape:
    """Base of a driver's prepared shape: runs(n) times n back-to-back
    run()s."""

    def runs(self, n):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            self.run()
        return time.perf_counter_ns() - t0


def load_dag(pw_bench, shape, scale):
    proc = subprocess.run([pw_bench, "dag", "--shape", shape, "--scale", repr(scale)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError("pw-bench dag --shape %s failed: %s" % (shape, proc.stderr.strip()))
    dag = json.loads(proc.stdout)
    if dag.get("bench") != "dag" or len(dag["pred_begin"]) != dag["tasks"] + 1:
        raise RuntimeError("pw-bench dag --shape %s: malformed output" % shape)
    return dag


def preds_of(dag, i):
    return dag["preds"][dag["pred_begin"][i]:dag["pred_begin"][i + 1]]


def sinks(dag):
    has_succ = bytearray(dag["tasks"])
    for p in dag["preds"]:
        has_succ[p] = 1
    return [i for i in range(dag["tasks"]) if not has_succ[i]]


def calibrate_batch(shape):
    """As pw_bench_calibrate_batch: runs per timed rep of one and step."""
    n = 1
    for rnd in range(8):
        batch = min(shape.runs(n) for _ in range(3))
        per_run = batch / n
        fit = max(1, min(BATCH_MAX, int(BATCH_TARGET_NS / max(per_run, 1) + 0.5)))
        if rnd > 0 and (batch >= BATCH_TARGET_NS / 2 or n == BATCH_MAX):
            return fit
        n = fit if fit < 16 * n else min(BATCH_MAX, 16 * n)
    return n


def percentile(values, p):
    s = sorted(values)
    if not s:
        return None
    k = (len(s) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


# The fields every driver's rows carry (the list; more may follow).
ROW_FIELDS = ("bench", "runtime", "shape", "threads", "tasks", "edges", "build_ns",
              "first_ns", "rerun_ns", "p50_us", "p99_us")


def check_rows(test, rows, runtime):
    """unittest helper: every row has ROW_FIELDS, |runtime| and a rerun."""
    for r in rows:
        for field in ROW_FIELDS:
            test.assertIn(field, r)
        test.assertEqual(r["runtime"], runtime)
        test.assertGreater(r["rerun_ns"], 0)


def row(runtime, shape, threads, tasks, edges, reps, **fields):
    r = {"bench": "shapes", "runtime": runtime, "shape": shape, "threads": threads,
         "tasks": tasks, "edges": edges, "build_ns": None, "first_ns": None,
         "rerun_ns": None, "p50_us": None, "p99_us": None, "metg_us": None,
         "reps": reps, "runs_per_rep": 1, "note": None}
    r.update(fields)
    return r


def emit(r):
    print(json.dumps(r), flush=True)

    def f(v):
        return "%9.4g" % v if v is not None else "      nan"
    print("%-14s %-9s %2d %8d %s %s %s %s %s %s %4d" % (
        r["runtime"], r["shape"], r["threads"], r["tasks"], f(r["build_ns"]),
        f(r["first_ns"]), f(r["rerun_ns"]), f(r["p50_us"]), f(r["p99_us"]),
        f(r["metg_us"]), r["runs_per_rep"]), file=sys.stderr, flush=True)


def header():
    print("%-14s %-9s %2s %8s %9s %9s %9s %9s %9s %9s %4s" % (
        "runtime", "shape", "T", "tasks", "build_ns", "first_ns", "rerun_ns", "p50_us",
        "p99_us", "metg_us", "runs"), file=sys.stderr)


def _close(driver, shape):
    close = getattr(driver, "close", None)
    if close is not None:
        close(shape)


def measure_shape(driver, args, name, threads):
    dag = load_dag(args.pw_bench, name, args.scale)
    if args.check:
        small = load_dag(args.pw_bench, name, min(args.scale, 0.02))
        if not driver.checked_run(small, threads):
            print("%s: verified run of %s failed" % (driver.name, name), file=sys.stderr)
            return False
    latency = name in ("one", "step")
    per = 1.0 / max(dag["tasks"], 1)
    shape = driver.make(dag, threads, lambda i: noop)
    try:
        t0 = time.perf_counter_ns()
        shape.build()
        build_ns = None if dag["independent"] else (time.perf_counter_ns() - t0) * per
        first = shape.runs(1)
        want = args.reps
        if want * first > args.time_budget * 1e9:
            want = max(1, int(args.time_budget * 1e9 / first))
        runs_per_rep = calibrate_batch(shape) if latency else 1
        reps = [shape.runs(runs_per_rep) * per / runs_per_rep for _ in range(want)]
        notes = []
        if want < args.reps:
            notes.append("%d reps (--time-budget %.0f s)" % (want, args.time_budget))
        if args.scale != 1.0 and not latency:
            notes.append("scale %g" % args.scale)
        notes += driver.notes(dag)
        r = row(driver.name, name, threads, dag["tasks"], dag["edges"], want,
                build_ns=build_ns, first_ns=first * per, rerun_ns=statistics.median(reps),
                runs_per_rep=runs_per_rep, note="; ".join(notes) or None)
        if latency:
            us = [shape.runs(1) / 1000.0 for _ in range(args.latency_samples)]
            r["p50_us"] = percentile(us, 50)
            r["p99_us"] = percentile(us, 99)
    finally:
        _close(driver, shape)
    emit(r)
    return True


def measure_metg(driver, args, threads):
    dag = load_dag(args.pw_bench, "layered", args.metg_scale)
    r = row(driver.name, "metg", threads, dag["tasks"], dag["edges"], 3)
    prev_eff = prev_us = None
    for us in METG_GRID_US:
        shape = driver.make(dag, threads, lambda i, b=spinner(int(us * 1000)): b)
        try:
            shape.build()
            shape.runs(1)  # warm-up
            wall = statistics.median([shape.runs(1) for _ in range(3)])
        finally:
            _close(driver, shape)
        eff = dag["tasks"] * us * 1000.0 / (threads * wall)
        print("%-14s metg      %2d spin %5.2f us: efficiency %.2f" % (driver.name, threads, us,
                                                                      eff),
              file=sys.stderr, flush=True)
        if eff >= 0.5:
            if prev_eff is None or prev_eff >= 0.5:
                r["metg_us"] = us
            else:
                f = (0.5 - prev_eff) / (eff - prev_eff)
                r["metg_us"] = math.exp(math.log(prev_us) + f * (math.log(us) - math.log(prev_us)))
            break
        prev_eff, prev_us = eff, us
    if r["metg_us"] is None:
        r["note"] = "efficiency below 50% even at 10 us"
    emit(r)


def parse(prog, description, argv):
    """The C drivers' options (shapes.h) plus --pw-bench PATH (the pw-bench
    binary; default: the build/release one next to this source tree)."""
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--shape", default="all")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--latency-samples", type=int, default=None)
    ap.add_argument("--scale", type=float, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-metg", action="store_true")
    ap.add_argument("--metg-only", action="store_true")
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--time-budget", type=float, default=60)
    ap.add_argument("--pw-bench", default=os.path.join(here, "..", "..", "build", "release",
                                                       "bench", "pw-bench"))
    args = ap.parse_args(argv)
    try:
        args.threads = [int(t) for t in args.threads.split(",") if t]
    except ValueError:
        ap.error("--threads expects a comma-separated list of counts")
    if not args.threads or any(t < 1 or t > 64 for t in args.threads):
        ap.error("--threads: counts from 1 to 64")
    args.shapes = SHAPES if args.shape == "all" else [s for s in args.shape.split(",") if s]
    for s in args.shapes:
        if s not in SHAPES:
            ap.error("--shape: unknown shape %r (one of %s)" % (s, " ".join(SHAPES)))
    if args.reps is None:
        args.reps = 3 if args.quick else 7
    if args.latency_samples is None:
        args.latency_samples = 200 if args.quick else 2000
    # As shapes.c: --quick is scale 0.02 with METG at 0.01; --scale X puts
    # METG at 5% of X.
    args.metg_scale = 0.01 if args.quick else 0.05
    if args.scale is None:
        args.scale = 0.02 if args.quick else 1.0
    else:
        args.metg_scale = args.scale * 0.05
    if not (0 < args.scale <= 100):
        ap.error("--scale expects a number in (0, 100]")
    if args.reps < 1 or args.latency_samples < 1 or args.time_budget <= 0:
        ap.error("--reps, --latency-samples and --time-budget must be positive")
    args.check = not args.no_check
    if not os.access(args.pw_bench, os.X_OK):
        ap.error("--pw-bench: %s is not an executable (build the release preset, or pass "
                 "the path)" % args.pw_bench)
    return args


def run_all(driver, args):
    """Every shape at every thread count, then METG; a failure names itself
    and the rest go on. Returns the exit status: 0, or 1 when a run failed."""
    header()
    ok = True
    for threads in args.threads:
        if not args.metg_only:
            for name in args.shapes:
                try:
                    ok &= measure_shape(driver, args, name, threads)
                except Exception as e:
                    print("%s: %s at %d threads failed: %s" % (driver.name, name, threads, e),
                          file=sys.stderr)
                    ok = False
        if not args.no_metg:
            try:
                measure_metg(driver, args, threads)
            except Exception as e:
                print("%s: metg at %d threads failed: %s" % (driver.name, threads, e),
                      file=sys.stderr)
                ok = False
    return 0 if ok else 1


def test_main(module_globals, script):
    """Entry point of the drivers' unit tests: `script PATH/TO/pw-bench
    [unittest options]`; the path goes to the test module's PW_BENCH."""
    if len(sys.argv) < 2 or not os.access(sys.argv[1], os.X_OK):
        sys.exit("usage: %s PATH/TO/pw-bench [unittest options]" % script)
    module_globals["PW_BENCH"] = sys.argv.pop(1)
    unittest.main()
