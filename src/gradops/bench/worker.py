"""One benchmark process: ``python -m gradops.bench.worker --peer NAME [--workload ID] ...``.

Prints one JSON object as its last line of stdout. ``--peer`` is a runner (gradops, torch, tf,
tf-onednn, jax) or one of two tasks:

* ``machine``: the 2-thread memory bandwidth and float32 matmul rate (the lower bound's inputs);
* ``reference``: the workload's result on gradops' reference backend, saved to ``--ref``.

A runner regenerates the workload's inputs from its seed, times every variant and checks each
against the reference saved by the ``reference`` task (memory-mapped). The process is pinned to
2 CPUs before any framework starts its thread pools.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from functools import cache
from pathlib import Path
from typing import Any, Sequence

from .runners import RUNNERS, THREADS
from .suite import WORKLOAD_IDS, all_workloads
from .workloads import NotAvailable

TASKS = ("machine", "reference")


def _pin_threads() -> list[int]:
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))[:THREADS]
        os.sched_setaffinity(0, cpus)
        return cpus
    return []


def _machine(quick: bool) -> dict[str, Any]:
    from .measure import matmul_rate, memory_bandwidth

    return {"status": "ok", "bandwidth": memory_bandwidth(quick), "matmul": matmul_rate(quick)}


def _reference(workload_id: str, quick: bool, ref: Path) -> dict[str, Any]:
    import numpy as np

    workload = all_workloads(quick)[workload_id]
    inputs = workload.inputs()
    start = time.perf_counter()
    try:
        result = workload.run_gradops(inputs, backend="reference")
    except NotAvailable as exc:
        return {"status": "n/a", "reason": str(exc)}
    seconds = time.perf_counter() - start
    np.save(ref, result)
    return {"status": "ok", "seconds": seconds, "shape": list(result.shape), "dtype": str(result.dtype)}


def _run(peer: str, workload_id: str, quick: bool, reps: int, ref: Path | None) -> dict[str, Any]:
    import numpy as np

    from .measure import error_reason, time_variant

    module = importlib.import_module(RUNNERS[peer].module)
    try:
        info = module.setup()
    except ImportError as exc:
        return {"status": "skipped", "reason": error_reason(exc)}
    workload = all_workloads(quick)[workload_id]
    reference = np.load(ref, mmap_mode="r") if ref is not None and ref.exists() else None
    inputs = workload.inputs()
    # gradops must match the DirectML model itself; only peers may match their own convention.
    framework_reference = None if peer == "gradops" else cache(lambda: workload.framework_reference(inputs["dy"]))
    results = [time_variant(variant, reps=reps, reference=reference, tolerance=workload.tolerance,
                            framework_reference=framework_reference, settle=not quick)
               for variant in module.variants(workload, inputs)]
    status = "ok" if any(r["status"] == "ok" for r in results) else "n/a"
    record = {"status": status, "info": info, "variants": results}
    if status == "n/a":
        record["reason"] = "; ".join(sorted({r["reason"] for r in results}))
    return record


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gradops.bench.worker")
    parser.add_argument("--peer", required=True, choices=(*RUNNERS, *TASKS))
    parser.add_argument("--workload", choices=WORKLOAD_IDS)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ref", type=Path, help="the reference result (.npy): written by "
                        "--peer reference, read by the runners")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cpus = _pin_threads()
    if args.peer == "machine":
        record = _machine(args.quick)
    elif args.workload is None:
        raise SystemExit("--workload is required with --peer " + args.peer)
    elif args.peer == "reference":
        if args.ref is None:
            raise SystemExit("--ref is required with --peer reference")
        record = _reference(args.workload, args.quick, args.ref)
    else:
        record = _run(args.peer, args.workload, args.quick, args.reps, args.ref)
    record["cpus"] = cpus
    sys.stdout.flush()
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
