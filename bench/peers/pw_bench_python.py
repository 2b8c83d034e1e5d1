#!/usr/bin/python3
"""pw-bench-python: libpathways driven from Python (the `pathways` cffi
bindings) on the shapes of bench/shapes.h, measured as pw_bench_dask.py
measures Dask: the comparison a Python user makes.

The work is the Dask driver's: the same DAG (from `pw-bench dag`), and
every task a Python function called once per run. Here a task is a compute
node whose kernel is a Python CPU kernel (Runtime.register_kernel) calling
the task's body: kernel "pwb_task<k>" for a task with k predecessors, k
inputs and one u8[1] output, on a one-device virtual slice. The graph is
built once (Graph.compute per task, finalize, arm) and every rerun is one
ArmedGraph.submit and a wait for its done event. spawn arms a one-node
graph once and submits it once per task from Python, waiting for the last
(the runs share one device's order, so the last completes last). one and
step as in the other drivers.

Threads: the CPU backend's pool has T workers; the ops share one device,
so they run in the graph's dependency order, one at a time, and a Python
kernel holds the GIL while it runs (as Dask's threaded tasks do).

Verification (the first and a rerun of a 2%-scale instance, untimed): each
task's executable carries its task number as an attribute, the kernel
stamps the order it ran in, and the check compares those with the DAG's
edges; spawn counts its kernel calls.

The harness (measures, options, output) is pyshapes.py's. Options as the C
drivers (shapes.h) plus --pw-bench PATH. PYTHONPATH must reach the
bindings: <src>/bindings/python and <build>/bindings/python. Output: one
JSON object per result on stdout (runtime "libpathways-py"), a table on
stderr. Exit status 0, 1 when a run failed, 2 for bad options, 3 when the
bindings cannot be imported.
"""

import itertools
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyshapes  # noqa: E402

NAME = "libpathways-py"
SPEC = "u8[1] replicated"
MAX_INPUTS = 16          # PW_BACKEND_MAX_PARAMS; the fan's join tree has 16-ary nodes
WAIT_TIMEOUT_S = 600.0   # a run that takes longer has hung


GANG_SHAPES = ("spmd", "step")
GANG_SLICES = 4          # as the C driver: 4 slices x 8 devices, a gang op per slice
GANG_MESH = 8


def gang_steps(dag):
    """spmd and step: how many steps (one barrier task each)."""
    return sum(1 for r in dag["role"] if r == 2)


class GangStamps:
    """Verification of the gang shapes: the order of every device's call of
    every gang op (op = step * GANG_SLICES + slice)."""

    def __init__(self, ops):
        self.ops = ops
        self.reset()

    def reset(self):
        self.calls = [[] for _ in range(self.ops)]
        self.counter = itertools.count(1)

    def task(self, op):
        def body(*_):
            self.calls[op].append(next(self.counter))
        return body

    def verify(self, dag, who):
        for op, calls in enumerate(self.calls):
            if len(calls) != GANG_MESH:
                print("%s: %s gang op %d ran on %d devices, not %d"
                      % (who, dag["shape"], op, len(calls), GANG_MESH), file=sys.stderr)
                return False
            if op >= GANG_SLICES and min(calls) < max(self.calls[op - GANG_SLICES]):
                print("%s: %s gang op %d ran before the previous step's on its slice"
                      % (who, dag["shape"], op), file=sys.stderr)
                return False
        return True


class PwShape(pyshapes.Shape):
    """One shape prepared for libpathways: a runtime, its client and
    virtual slices, the task kernels and their executables. build() makes
    the graph (for spawn, the one-node graph) and arms it.

    Every shape but spmd and step: every task a compute node on one
    one-device slice. spmd and step, as the C driver: 4 slices x 8 devices,
    per step a gang op on each slice depending on the previous step's op on
    that slice (the kernel runs once per device: 32 calls a step; no
    cross-slice barrier node; a run's done event is the barrier)."""

    def __init__(self, pw, dag, threads, body_of, per_task):
        self.pw = pw
        self.dag = dag
        self.armed = None
        self.per_task = per_task
        self.gang = dag["shape"] in GANG_SHAPES
        if self.gang:
            self.rt = pw.Runtime([{"name": "s%d" % k, "mesh": str(GANG_MESH)}
                                  for k in range(GANG_SLICES)], workers=threads)
        else:
            self.rt = pw.Runtime("1", workers=threads)
        try:
            self.client = self.rt.client("pw-bench-python")
            if self.gang:
                self.vslices = [self.client.vslice(str(GANG_MESH), slices=[k])
                                for k in range(GANG_SLICES)]
                arities = {0, 1}
            else:
                self.vslices = [self.client.vslice("1")]
                arities = {len(pyshapes.preds_of(dag, i)) for i in range(dag["tasks"])}
            self._kernels(body_of, arities)
        except BaseException:
            self.rt.close()
            raise

    def _kernels(self, body_of, arities):
        """Kernels pwb_task<k>, k inputs. |per_task|: task i's body is
        body_of(i), found through its executable's "task" attribute (one
        executable per task: the verified runs); else every task runs
        body_of(0), one executable per arity and slice."""
        if max(arities, default=0) > MAX_INPUTS:
            raise ValueError("%s: a task has more than %d predecessors" % (self.dag["shape"],
                                                                          MAX_INPUTS))
        if self.per_task:
            bodies = {}

            def run(call):
                task = int(call.program.attrs["task"])
                body = bodies.get(task)
                if body is None:
                    body = bodies[task] = body_of(task)
                body()
        else:
            body = body_of(0)

            def run(call):
                body()
        self.exes = {}
        for k in sorted(arities):
            self.rt.register_kernel("pwb_task%d" % k, run, inputs=k, outputs=1,
                                    open_attrs=self.per_task)
            if not self.per_task:
                for v in range(len(self.vslices)):
                    self.exes[(v, k)] = self._compile(v, k, {})

    def _compile(self, v, k, attrs):
        return self.vslices[v].compile(self.pw.Program("pwb_task%d" % k, [SPEC] * k, [SPEC],
                                                       attrs))

    def _exe(self, v, k, task):
        if self.per_task:
            return self._compile(v, k, {"task": float(task)})
        return self.exes[(v, k)]

    def build(self):
        dag = self.dag
        g = self.client.graph(dag["shape"])
        if dag["independent"]:  # spawn: one node, submitted once per task
            g.compute(self._exe(0, 0, 0))
        elif self.gang:
            prev = [None] * GANG_SLICES
            for step in range(gang_steps(dag)):
                for k in range(GANG_SLICES):
                    ins = [prev[k]] if prev[k] is not None else []
                    prev[k] = g.compute(self._exe(k, len(ins), step * GANG_SLICES + k), *ins)
        else:
            values = [None] * dag["tasks"]
            for i in range(dag["tasks"]):
                preds = pyshapes.preds_of(dag, i)
                values[i] = g.compute(self._exe(0, len(preds), i), *[values[p] for p in preds])
        g.finalize()
        self.armed = g.arm()

    def run(self):
        armed = self.armed
        if self.dag["independent"]:
            submit = armed.submit
            last = None
            for _ in range(self.dag["tasks"]):
                last = submit()
        else:
            last = armed.submit()
        if last is not None:
            last.wait(WAIT_TIMEOUT_S)

    def close(self):
        if self.armed is not None:
            self.armed.close()
            self.armed = None
        self.rt.close()


class PwDriver:
    """pyshapes' driver interface over the pathways bindings."""

    name = NAME

    def __init__(self, pw):
        self.pw = pw

    def make(self, dag, threads, body_of):
        return PwShape(self.pw, dag, threads, body_of, per_task=False)

    def checked_run(self, dag, threads):
        if dag["independent"]:
            return self._checked_spawn(dag, threads)
        if dag["shape"] in GANG_SHAPES:
            stamps = GangStamps(gang_steps(dag) * GANG_SLICES)
        else:
            stamps = pyshapes.Stamps(dag["tasks"])
        shape = PwShape(self.pw, dag, threads, stamps.task, per_task=True)
        try:
            shape.build()
            for _ in range(2):  # a first run and a rerun
                stamps.reset()
                shape.run()
                if not stamps.verify(dag, NAME):
                    return False
        finally:
            shape.close()
        return True

    def _checked_spawn(self, dag, threads):
        calls = [0]
        lock = threading.Lock()

        def count():
            with lock:
                calls[0] += 1

        shape = PwShape(self.pw, dag, threads, lambda i: count, per_task=False)
        try:
            shape.build()
            for run in (1, 2):
                shape.run()
                if calls[0] != run * dag["tasks"]:
                    print("%s: spawn ran %d tasks in %d runs of %d" % (NAME, calls[0], run,
                                                                       dag["tasks"]),
                          file=sys.stderr)
                    return False
        finally:
            shape.close()
        return True

    def notes(self, dag):
        if dag["shape"] in GANG_SHAPES:
            return ["Python kernels; 4 gang ops of 8 CPU-backend devices a step, no "
                    "cross-slice barrier node"]
        return ["Python kernels on one CPU-backend device"]

    def close(self, shape):
        shape.close()


def parse(argv):
    return pyshapes.parse("pw-bench-python", __doc__.split("\n")[0], argv)


def main(argv):
    args = parse(argv)
    try:
        import pathways as pw
    except ImportError as e:
        print("pw-bench-python: cannot import the pathways bindings (%s); set PYTHONPATH to "
              "<src>/bindings/python:<build>/bindings/python" % e, file=sys.stderr)
        return 3
    print("%s: pathways bindings, CPU backend, Python kernels; scale %g, %d reps"
          % (NAME, args.scale, args.reps), file=sys.stderr)
    return pyshapes.run_all(PwDriver(pw), args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
