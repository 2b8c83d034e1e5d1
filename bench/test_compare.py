#!/usr/bin/python3
"""Unit tests for bench/compare's pure parts: pinning, medians, paired
ratios, tables. Standard library only; run by ctest (bench_compare_unit)."""

import importlib.machinery
import importlib.util
import argparse
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
_loader = importlib.machinery.SourceFileLoader("pw_compare", os.path.join(HERE, "compare"))
_spec = importlib.util.spec_from_loader("pw_compare", _loader)
compare = importlib.util.module_from_spec(_spec)
_loader.exec_module(compare)


def row(runtime, shape, threads, rnd, rerun, **extra):
    r = {"bench": "shapes", "runtime": runtime, "shape": shape, "threads": threads,
         "tasks": 100, "edges": 99, "round": rnd, "rerun_ns": rerun}
    r.update(extra)
    return r


class RoundCpus(unittest.TestCase):
    def test_rounds_take_the_cpus_in_turn(self):
        allowed = sorted(os.sched_getaffinity(0))
        n = len(allowed)
        for rnd in range(2 * n):
            self.assertEqual(compare.round_cpus(rnd, 1), [allowed[rnd % n]])
        self.assertEqual(sorted(compare.round_cpus(1, n)), allowed)
        # Every runtime of a round gets the same CPUs: a pure function.
        self.assertEqual(compare.round_cpus(3, 1), compare.round_cpus(3, 1))

    def test_more_threads_than_cpus_is_not_pinned(self):
        n = len(os.sched_getaffinity(0))
        self.assertIsNone(compare.round_cpus(0, n + 1))


class RunDriver(unittest.TestCase):
    """run_driver pins the child to the CPUs given and reads its rows."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        os.makedirs(os.path.join(self.dir.name, "bench"))
        exe = os.path.join(self.dir.name, "bench", "pw-bench")
        with open(exe, "w") as f:
            f.write("#!%s\nimport json, os\n"
                    "print('noise')\n"
                    "print(json.dumps({'bench': 'shapes', 'runtime': 'libpathways', "
                    "'shape': 'chain', 'threads': 1, 'rerun_ns': 1.0, "
                    "'seen': sorted(os.sched_getaffinity(0))}))\n" % sys.executable)
        os.chmod(exe, 0o755)
        self.args = argparse.Namespace(build=self.dir.name, reps=1, shape="chain", quick=True,
                                       scale=None, no_metg=True, time_budget=1,
                                       run_timeout=60)

    def tearDown(self):
        self.dir.cleanup()

    def test_pinned_and_unpinned(self):
        allowed = sorted(os.sched_getaffinity(0))
        logged = []
        rows, cmd, _, rc = compare.run_driver(self.args, "libpathways", 1, logged.append,
                                              [allowed[-1]])
        self.assertEqual(rc, 0, logged)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["seen"], [allowed[-1]])
        self.assertIn("--threads 1", cmd)
        rows, _, _, _ = compare.run_driver(self.args, "libpathways", 1, logged.append, None)
        self.assertEqual(rows[0]["seen"], allowed)


class PairedRatios(unittest.TestCase):
    def test_each_round_pairs_with_its_own_best_peer(self):
        results = [
            # Round 0 on a slow CPU: everything 1.5x.
            row("libpathways", "chain", 1, 0, 30.0), row("onetbb", "chain", 1, 0, 60.0),
            row("openmp", "chain", 1, 0, 240.0),
            # Round 1 fast.
            row("libpathways", "chain", 1, 1, 20.0), row("onetbb", "chain", 1, 1, 40.0),
            row("openmp", "chain", 1, 1, 45.0),
            # Round 2: the best peer changes.
            row("libpathways", "chain", 1, 2, 21.0), row("onetbb", "chain", 1, 2, 50.0),
            row("openmp", "chain", 1, 2, 42.0),
        ]
        paired = compare.paired_ratios(results)
        self.assertEqual(list(paired), [("chain", 1)])
        self.assertEqual(paired[("chain", 1)], [0.5, 0.5, 0.5])

    def test_rounds_without_libpathways_or_a_peer_are_left_out(self):
        results = [
            row("libpathways", "spawn", 1, 0, 60.0),          # no peer in round 0
            row("onetbb", "spawn", 1, 1, 40.0),               # no libpathways in round 1
            row("libpathways", "spawn", 2, 0, 30.0), row("openmp", "spawn", 2, 0, 60.0),
            row("libpathways", "one", 1, 0, None), row("onetbb", "one", 1, 0, 100.0),
        ]
        paired = compare.paired_ratios(results)
        self.assertEqual(paired, {("spawn", 2): [0.5]})

    def test_a_baseline_pairs_before_and_after_and_is_not_a_peer(self):
        # --baseline: another build's pw-bench, run in the same rounds.
        results = [
            row("libpathways", "chain", 1, 0, 30.0), row(compare.BASE, "chain", 1, 0, 20.0),
            row("onetbb", "chain", 1, 0, 60.0),
            row("libpathways", "chain", 1, 1, 22.0), row(compare.BASE, "chain", 1, 1, 20.0),
            row("onetbb", "chain", 1, 1, 44.0),
        ]
        self.assertEqual(compare.paired_ratios(results), {("chain", 1): [0.5, 0.5]})
        self.assertEqual(compare.paired_ratios(results, against=compare.BASE),
                         {("chain", 1): [1.5, 1.1]})

    def test_the_table_shows_median_and_range(self):
        paired = {("chain", 1): [0.5, 0.4, 0.6], ("chain", 2): [0.25]}
        text = compare.paired_table(paired, [1, 2], ["chain", "fan"])
        self.assertIn("| chain | 0.50x (0.40-0.60) | 0.25x (0.25-0.25) |", text)
        self.assertNotIn("| fan", text)
        self.assertIn("same round (same CPUs)", text)
        unpinned = compare.paired_table(paired, [1], ["chain"], pinned=False)
        self.assertNotIn("same CPUs", unpinned)


class Medians(unittest.TestCase):
    def test_medians_and_the_ratio_of_medians(self):
        results = [row("libpathways", "fan", 1, k, v) for k, v in enumerate((40.0, 44.0, 90.0))]
        results += [row("onetbb", "fan", 1, k, v) for k, v in enumerate((100.0, 102.0, 104.0))]
        medians = compare.aggregate(results)
        by = {m["runtime"]: m for m in medians}
        self.assertEqual(by["libpathways"]["rerun_ns"], 44.0)
        self.assertEqual(by["libpathways"]["rounds"], 3)
        self.assertEqual(compare.best_peer(medians, "fan", 1, "rerun_ns"), ("onetbb", 102.0))
        text = compare.table(medians, ["libpathways", "onetbb"], [1], "rerun_ns", ["fan"])
        self.assertIn("| fan | 44 | 102 | 0.43x (onetbb) |", text)


class FromPython(unittest.TestCase):
    """libpathways-py (libpathways driven from Python) is never a peer: not
    in the best peer, not in the paired ratios; its own table sets it
    against Dask."""

    def test_it_is_not_a_peer(self):
        results = [row("libpathways", "chain", 1, 0, 20.0), row("onetbb", "chain", 1, 0, 40.0),
                   row("libpathways-py", "chain", 1, 0, 5.0), row("dask", "chain", 1, 0, 4e4)]
        medians = compare.aggregate(results)
        self.assertEqual(compare.best_peer(medians, "chain", 1, "rerun_ns"), ("onetbb", 40.0))
        self.assertEqual(compare.paired_ratios(results), {("chain", 1): [0.5]})

    def test_its_table_against_dask(self):
        results = [row("libpathways-py", "layered", 1, 0, 6000.0),
                   row("dask", "layered", 1, 0, 48000.0),
                   row("libpathways-py", "one", 1, 0, None, p50_us=40.0),
                   row("dask", "one", 1, 0, None, p50_us=80.0),
                   row("libpathways-py", "metg", 1, 0, None, metg_us=None),
                   row("dask", "metg", 1, 0, None, metg_us=None)]
        text = compare.python_table(compare.aggregate(results), [1], ["layered", "one", "metg"])
        self.assertIn("| layered | 6000 | 48000 | 0.12x |", text)
        self.assertIn("| one | 40.00 | 80.00 | 0.50x |", text)
        self.assertNotIn("| metg", text)  # neither measured one


if __name__ == "__main__":
    sys.exit(unittest.main())
