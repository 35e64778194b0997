"""How long a first call answered in NumPy takes on data of real size (issue 23): each benchmark
workload (any suite: S1, S2, the sweep) run by its family's NumPy tier (``first_calls``: what a
call runs while its kernel compiles) and by its compiled kernel, in one process, with the bits
compared:

    python benchmarks/numpy_tier.py [--calls N] WORKLOAD ...

Prints per workload the median time of the tier and of the kernel, their ratio and whether the
bits agree (NaN payloads aside). ReLU has no tier (its kernels compile in about 2 s).
"""

import argparse
import os
import statistics
import time

import numpy as np

os.environ["GRADOPS_FIRST_CALLS"] = "compile"  # the kernel runs compile here, before timing

from gradops._fast import first_calls
from gradops.bench import suite


def timed(call, calls: int) -> tuple[float, np.ndarray]:
    result, times = None, []
    for _ in range(calls):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), np.asarray(result)


def tier_only(compute, arguments, numpy_tier, tier_fits, tier_arguments) -> None:
    """``first_calls.run_gated`` as it runs when the kernel is missing and the tier fits."""
    numpy_tier(*tier_arguments)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    nan = np.isnan(a.astype(np.float32))
    return bool(np.array_equal(nan, np.isnan(b.astype(np.float32)))
                and np.array_equal(a[~nan].view(np.uint8), b[~nan].view(np.uint8)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("workloads", nargs="+")
    args = parser.parse_args()
    every = suite.all_workloads()
    kernel_gate = first_calls.run_gated
    for wid in args.workloads:
        workload = every[wid]
        call = workload.gradops_call(workload.inputs(), backend="fast")
        call()  # compiles the kernel (or loads it from the cache)
        kernel, by_kernel = timed(call, args.calls)
        first_calls.run_gated = tier_only
        try:
            tier, by_tier = timed(call, args.calls)
        finally:
            first_calls.run_gated = kernel_gate
        print(f"{wid}: NumPy tier {tier * 1e3:9.1f} ms, kernel {kernel * 1e3:8.2f} ms, tier / kernel "
              f"{tier / kernel:6.0f}, same bits: {same_bits(by_tier, by_kernel)}", flush=True)


if __name__ == "__main__":
    main()
