"""First calls from an empty kernel cache (issue 23, "Cold start"): each case in a new process
with NUMBA_CACHE_DIR set to a new empty folder, timing every call of the case's
gradops.warmup.WarmupCase (the first one pays numba's import and the compile of what it uses),
then `gradops examples`.

    python benchmarks/cold_start.py [--src SRC] [--first-calls numpy|compile] [--examples] [--all | CASE ...]
    (CASE: "op dtype layout")

``--all``: every case ``gradops warmup`` knows (each operator with each dtype and layout it takes).
``--first-calls``: ``GRADOPS_FIRST_CALLS`` of the processes: ``compile`` (the default here) times
the compiles; ``numpy`` the answers a user gets first (a family with a NumPy tier answers with it
while its kernels compile in another process).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_CASES = [
    "relu_grad float32 NCHW",
    "relu_grad float16 NCHW",
    "resample_grad float32 NCHW",
    "resample_grad float16 NCHW",
    "resample float32 NCHW",
    "depthwise_conv2d_native_backprop_input float32 NHWC",
    "depthwise_conv2d_native_backprop_input float32 NCHW",
    "depthwise_conv2d_native_backprop_input float16 NHWC",
    "depthwise_conv2d_native float32 NHWC",
    "depthwise_conv2d_native_backprop_filter float32 NHWC",
]

CHILD = """
import sys, time
start = time.perf_counter()
import gradops
from gradops.warmup import WarmupCase
print(f"import {time.perf_counter() - start:.2f}")
for call in WarmupCase(*sys.argv[1:4]).calls():
    start, cpu = time.perf_counter(), time.process_time()
    call()
    print(f"call {time.perf_counter() - start:.2f} {time.process_time() - cpu:.2f}", flush=True)
"""


def fresh_env(src: Path, cache: str, first_calls: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), NUMBA_CACHE_DIR=cache, NUMBA_NUM_THREADS="2",
               GRADOPS_FIRST_CALLS=first_calls)
    env.pop("GRADOPS_BACKEND", None)
    return env


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--examples", action="store_true")
    parser.add_argument("--all", action="store_true", help="every (op, dtype, layout) of gradops.warmup.cases()")
    parser.add_argument("--first-calls", choices=("numpy", "compile"), default="compile")
    parser.add_argument("cases", nargs="*")
    args = parser.parse_args()
    src = Path(args.src)
    if args.all:
        sys.path.insert(0, str(src))
        from gradops.warmup import cases

        args.cases = [str(case) for case in cases()]
    for case in args.cases or DEFAULT_CASES:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
            start = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", CHILD, *case.split()],
                                 env=fresh_env(src, cache, args.first_calls),
                                 capture_output=True, text=True)
            total = time.perf_counter() - start
        calls = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith("call")]
        status = "" if out.returncode == 0 else f"  FAILED {out.stderr.strip().splitlines()[-1:]}"
        first = calls[0] if calls else ["nan", "nan"]
        print(f"{case:56s} first call {first[0]:>7s} s (CPU {first[1]:>7s} s)   later calls (wall, CPU) "
              f"{calls[1:]}   process {total:6.1f} s{status}", flush=True)
    if args.examples:
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as cache:
            start, children = time.perf_counter(), os.times()
            out = subprocess.run([sys.executable, "-m", "gradops.cli", "examples"],
                                 env=fresh_env(src, cache, args.first_calls),
                                 capture_output=True, text=True)
            after = os.times()
            cpu = after.children_user + after.children_system - children.children_user - children.children_system
            print(f"{'gradops examples':56s} {time.perf_counter() - start:7.1f} s (CPU {cpu:.1f} s)  exit "
                  f"{out.returncode}  {out.stdout.strip().splitlines()[-1]}", flush=True)


if __name__ == "__main__":
    main()
