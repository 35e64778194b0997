"""Interleaved in-process A/B of benchmark workloads (any suite: S1, S2, the sweep) between this
tree's gradops (B) and another copy of the package loaded under another name (A), e.g. the code
before a change:

    cp -r OLD/src/gradops /tmp/ab/gradops_base
    python benchmarks/ab_inprocess.py --base /tmp/ab --rounds 7 L1 L3 D1

Both packages run in the same process with the same inputs and thread count (NUMBA_NUM_THREADS);
each round times A and B (median of --calls calls each) in alternating order. Prints the median
of the per-round ratios B / A (below 1: B is faster) and checks that A and B agree bit for bit.
"""

import argparse
import importlib
import os
import statistics
import sys
import time

import numpy as np

# Timed calls run the kernels, never the NumPy tier that answers while one compiles (first_calls).
os.environ["GRADOPS_FIRST_CALLS"] = "compile"

import gradops
from gradops.bench import suite, workloads


def timed(call, calls: int) -> float:
    # Each package has its own helper threads, which linger 0.2 ms after a call: let the other
    # package's stop before timing this one, so that no third thread spins on the two cores.
    time.sleep(0.005)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="directory holding the A package")
    parser.add_argument("--name", default="gradops_base", help="the A package's name there")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=9)
    parser.add_argument("workloads", nargs="+")
    args = parser.parse_args()
    sys.path.insert(0, args.base)
    base = importlib.import_module(args.name)
    every = suite.all_workloads()
    for wid in args.workloads:
        workload = every[wid]
        inputs = workload.inputs()
        calls = {}
        for label, package in (("A", base), ("B", gradops)):
            # the workloads look their operator up through this module-level function
            workloads.gradops_function = lambda name, package=package: getattr(package, name)
            calls[label] = workload.gradops_call(inputs, backend="fast")
        same = np.array_equal(np.asarray(calls["A"]()).view(np.uint8), np.asarray(calls["B"]()).view(np.uint8))
        ratios = []
        for r in range(args.rounds):
            order = ("A", "B") if r % 2 == 0 else ("B", "A")
            result = {label: timed(calls[label], args.calls) for label in order}
            ratios.append(result["B"] / result["A"])
        print(f"{wid}: B/A {statistics.median(ratios):.3f} (rounds {min(ratios):.3f}-{max(ratios):.3f}), "
              f"A {result['A'] * 1e3:.2f} ms, B {result['B'] * 1e3:.2f} ms, same bits: {same}", flush=True)


if __name__ == "__main__":
    main()
