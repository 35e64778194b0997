"""Run a benchmark suite: one worker process per (contender, workload, round), collected into one report dict.

Per workload: a ``reference`` worker saves gradops' reference-backend result to a temporary
``.npy`` (computed once), then gradops and each selected peer run in turn, each in a fresh
process with 2 threads, and check themselves against that file. With several ``rounds`` the
contenders run again, in reverse order every other round, and each variant keeps its fastest
round: this machine's speed drifts by up to 1.5x for seconds at a time, and alternating rounds
give every contender the same chances at a quiet stretch. The machine's bandwidth and matmul
rate are measured before and after the workloads, in the same run, and the best is kept.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from .._cpuinfo import cpu_model
from .isa import host_tier, tier_env
from .report import summarise
from .runners import GRADOPS, PEERS, RUNNERS, THREADS
from .suite import SUITES, all_workloads

# Thread pools of BLAS, OpenMP and numba (the env vars are read when each library loads).
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


@dataclass(frozen=True)
class Options:
    workloads: Sequence[str]
    peers: Sequence[str]
    reps: int = 7
    rounds: int = 1
    quick: bool = False
    timeout_s: float = 1800.0
    tier: str = "native"  # a resolved tier (isa.resolve_tier): the host's, or avx2 on an AVX-512 host


def worker_env(peer: str, tier: str = "native") -> dict[str, str]:
    env = dict(os.environ)
    env.update({name: str(THREADS) for name in THREAD_ENV_VARS})
    env.update(tier_env(tier))
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["GRADOPS_FIRST_CALLS"] = "compile"  # a timed call must run the kernel, never the NumPy tier
    if peer in RUNNERS:
        env.update(RUNNERS[peer].env)
    return env


def run_worker(peer: str, options: Options, *, workload: str | None = None,
               ref: Path | None = None) -> dict[str, Any]:
    """Run one worker process and return its JSON record (or an ``error`` record saying why not)."""
    command = [sys.executable, "-m", "gradops.bench.worker", "--peer", peer, "--reps", str(options.reps)]
    if workload:
        command += ["--workload", workload]
    if ref is not None:
        command += ["--ref", str(ref)]
    if options.quick:
        command.append("--quick")
    try:
        process = subprocess.run(command, capture_output=True, text=True, env=worker_env(peer, options.tier),
                                 timeout=options.timeout_s)
    except subprocess.TimeoutExpired:
        return {"status": "error", "reason": f"worker timed out after {options.timeout_s:.0f} s"}
    lines = process.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        errors = [line for line in process.stderr.strip().splitlines() if line.strip()]
        tail = errors[-1] if errors else "no output"
        return {"status": "error", "reason": f"worker exited with status {process.returncode}: {tail}"}


def run_suite(options: Options, progress: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    workloads = all_workloads(options.quick)
    progress("measuring memory bandwidth and matmul rate")
    first_machine = run_worker("machine", options)
    report: dict[str, Any] = {
        "suite": "+".join(name for name, make in SUITES.items()
                          if {w.id for w in make(True)} & set(options.workloads)),
        "quick": options.quick, "reps": options.reps, "rounds": options.rounds, "threads": THREADS,
        "created": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "platform": {"python": platform.python_version(), "machine": platform.machine(),
                     "processor": cpu_model(), "cpus": os.cpu_count(),
                     # The vector tier every contender ran (--isa) and the host's widest one.
                     "tier": options.tier, "host_tier": host_tier(),
                     # Other processes on the machine: 1-, 5- and 15-minute load averages.
                     "load_average_start": list(os.getloadavg())},
        "machine": first_machine,  # replaced by the best of both measurements at the end
        "peers": {name: {"label": peer.label, "installed": peer.installed(), "selected": name in options.peers}
                  for name, peer in PEERS.items()},
        "workloads": [],
    }
    for workload_id in options.workloads:
        workload = workloads[workload_id]
        entry: dict[str, Any] = workload.describe() | {"bytes_moved": workload.bytes_moved(),
                                                       "flops": workload.flops(),
                                                       "tolerance": workload.tolerance}
        with tempfile.TemporaryDirectory(prefix="gradops-bench-") as tmp:
            ref = Path(tmp) / "reference.npy"
            progress(f"{workload_id}: reference")
            entry["reference"] = run_worker("reference", options, workload=workload_id, ref=ref)
            checked_against = ref if entry["reference"]["status"] == "ok" else None
            contenders = [GRADOPS.name, *options.peers]
            runnable = [name for name in contenders if RUNNERS[name].installed()]
            merged: dict[str, dict[str, Any]] = {}
            for round_index in range(options.rounds):
                for name in runnable if round_index % 2 == 0 else runnable[::-1]:
                    progress(f"{workload_id}: {name}" + (f" (round {round_index + 1})" if options.rounds > 1 else ""))
                    record = run_worker(name, options, workload=workload_id, ref=checked_against)
                    merged[name] = fastest_rounds(merged.get(name), record)
            entry["results"] = {name: merged.get(name, {"status": "skipped", "reason": "not installed"})
                                for name in contenders}
        report["workloads"].append(entry)
    report["platform"]["load_average_end"] = list(os.getloadavg())
    progress("measuring memory bandwidth and matmul rate again")
    report["machine"] = machine = best_machine(first_machine, run_worker("machine", options))
    for entry in report["workloads"]:
        entry["summary"] = summarise(entry, machine)
    return report


def fastest_rounds(kept: dict[str, Any] | None, record: dict[str, Any]) -> dict[str, Any]:
    """One contender's worker records of successive rounds merged: each variant keeps its timed
    round with the lowest median and lists every timed round's median (``round_medians_s``). A
    round whose worker failed counts only while no round has succeeded."""
    if record.get("status") != "ok":
        return kept or record
    first = kept is None or kept.get("status") != "ok"
    earlier = [None] * len(record["variants"]) if first else kept["variants"]
    variants = []
    for old, new in zip(earlier, record["variants"], strict=True):
        timed = [v for v in (old, new) if v is not None and v["status"] == "ok"]
        best = min(timed, key=lambda v: v["median_s"], default=old or new)
        variants.append(best | {"round_medians_s": (old or {}).get("round_medians_s", []) + _medians(new)})
    return (record if first else kept) | {"variants": variants}


def _medians(variant: dict[str, Any]) -> list[float]:
    return [variant["median_s"]] if variant["status"] == "ok" else []


def best_machine(*measurements: dict[str, Any]) -> dict[str, Any]:
    """The highest rates of several ``machine`` measurements (a busy machine only lowers them, and a
    lower bound needs the best the machine can do); each measurement is kept under ``runs``."""
    ok = [m for m in measurements if m.get("status") == "ok"]
    if not ok:
        return {"status": "error", "reason": "; ".join(str(m.get("reason")) for m in measurements),
                "runs": list(measurements)}
    return {"status": "ok", "bandwidth": max((m["bandwidth"] for m in ok), key=lambda b: b["bytes_per_s"]),
            "matmul": max((m["matmul"] for m in ok), key=lambda m: m["flops_per_s"]), "runs": list(measurements)}
