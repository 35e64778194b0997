"""``gradops bench``: suites S1 and S2 against PyTorch, TensorFlow and JAX (benchmarks/README.md).

Imports nothing heavy: workers do the work in their own processes.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import GradopsError


def write_report(path: str, report: dict) -> None:
    """``report`` as JSON at ``path``, gzip-compressed when the name ends in ``.gz`` (an S2 report
    is about 18 MB of JSON, 3 MB compressed)."""
    import gzip

    with (gzip.open(path, "wt") if str(path).endswith(".gz") else open(path, "w")) as handle:
        json.dump(report, handle, indent=1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from .runners import PEERS
    from .suite import SUITES, WORKLOAD_IDS

    parser.add_argument("--suite", choices=tuple(SUITES), default="S1",
                        help="S1 (shared/bench/SUITE.md, default), S2 (layers of real networks) or sweep "
                        "(each op family from 16 KiB to 256 MiB; --png draws ratio against size)")
    parser.add_argument("--only", nargs="+", metavar="ID", choices=WORKLOAD_IDS,
                        help=f"only these workloads, of any suite ({' '.join(WORKLOAD_IDS)})")
    parser.add_argument("--peers", nargs="*", metavar="PEER", choices=tuple(PEERS), default=None,
                        help=f"peers to run (default: all installed of {' '.join(PEERS)}); "
                        "--peers with no names: gradops only")
    parser.add_argument("--reps", type=int, default=7, help="timed calls per variant, at least (default 7); "
                        "short calls repeat for 0.3 s after 0.2 s of warm-up")
    parser.add_argument("--rounds", type=int, default=None, metavar="N",
                        help="runs of every contender per workload, alternating their order; each variant "
                        "keeps its fastest round (default 2; 1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="small shapes with the same parameters, no "
                        "minimum times (tests, smoke runs)")
    parser.add_argument("--json", metavar="FILE", help="write the full results (every variant, every call)")
    parser.add_argument("--png", metavar="FILE", help="bar chart of gradops / fastest peer (needs matplotlib)")
    parser.add_argument("--markdown", metavar="FILE", help="the timing tables as one Markdown table")
    parser.add_argument("--timeout", type=float, default=1800.0, metavar="S", help="per worker process")
    parser.add_argument("--isa", choices=("native", "avx2", "avx512"), default="native",
                        help="CPU tier of every contender: native (default), or avx2 on an AVX-512 host "
                        "(numba codegen for znver3 on AMD, x86-64-v3 elsewhere; PyTorch/oneDNN/XLA capped at AVX2)")


def selected_workloads(args: argparse.Namespace) -> tuple[str, ...]:
    """The ids to run: ``--only``'s, else the suite's (``--quick`` keeps the sweep's four smallest
    sizes; without it the sweep goes to 256 MiB)."""
    from .suite import suite

    return tuple(args.only) if args.only else tuple(suite(quick=args.quick, name=args.suite))


def main(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .isa import resolve_tier
    from .orchestrate import Options, run_suite
    from .report import chart, markdown, notes, sweep_chart, tables
    from .runners import PEERS

    if args.reps < 1:
        raise GradopsError("--reps", f"expected at least 1, got {args.reps}")
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 2)
    if rounds < 1:
        raise GradopsError("--rounds", f"expected at least 1, got {rounds}")
    options = Options(workloads=selected_workloads(args),
                      peers=list(PEERS) if args.peers is None else list(dict.fromkeys(args.peers)),
                      reps=args.reps, rounds=rounds, quick=args.quick, timeout_s=args.timeout,
                      tier=resolve_tier(args.isa))
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    status = Console(stderr=True, highlight=False)
    report = run_suite(options, progress=lambda message: status.print(f"[dim]bench: {message}[/dim]"))
    for table in tables(report):
        console.print(table)
    for line in notes(report):
        console.print(line, markup=False)
    if args.json:
        write_report(args.json, report)
        console.print(f"wrote {args.json}")
    if args.markdown:
        with open(args.markdown, "w") as handle:
            handle.write(markdown(report))
        console.print(f"wrote {args.markdown}")
    if args.png:
        (sweep_chart if report["suite"] == "sweep" else chart)(report, args.png)
        console.print(f"wrote {args.png}")
    return 0
