"""``gradops vectors export DIR`` and ``gradops vectors check DIR [--backend ...]``.

``check`` prints one line per case and exits with the number of failing cases (capped at
100, so that it never wraps to 0); bad arguments or an unreadable corpus exit with 2 through
the ``gradops: error:`` path of the CLI.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

MAX_EXIT_STATUS = 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="vectors_command", required=True)
    p = sub.add_parser("export", help="write the corpus (manifest.json, <family>/<case>.json and .bin buffers)")
    p.add_argument("directory", type=Path, help="target directory: absent, empty or a previous corpus")
    p.add_argument("--family", action="append", dest="families", metavar="NAME",
                   help="only this operator family (relu, resample, depthwise); repeatable")
    p = sub.add_parser("check", help="replay a corpus against gradops; exit status = number of failures")
    p.add_argument("directory", type=Path)
    p.add_argument("--backend", action="append", choices=("auto", "fast", "reference"), dest="backends",
                   help="backend to replay with (default auto); repeat to check several")
    p.add_argument("--only", action="append", default=[], metavar="TEXT",
                   help="only cases whose id contains TEXT; repeatable")
    p.add_argument("-q", "--quiet", action="store_true", help="print failing cases and the summary only")


def main(args: argparse.Namespace) -> int:
    if args.vectors_command == "export":
        return _export(args)
    return _check(args)


def _export(args: argparse.Namespace) -> int:
    from .vectors import export

    start = time.perf_counter()
    manifest = export(args.directory, args.families)
    size = sum(p.stat().st_size for p in Path(args.directory).rglob("*") if p.is_file())
    families = ", ".join(f"{name} {count}" for name, count in manifest["families"].items())
    print(f"wrote {manifest['case_count']} cases ({families}) to {args.directory}: {size / 1e6:.2f} MB, "
          f"format version {manifest['format_version']}, {time.perf_counter() - start:.1f} s")
    return 0


def _check(args: argparse.Namespace) -> int:
    from .vectors import check

    failures = 0
    for backend in args.backends or ["auto"]:
        start = time.perf_counter()
        results = check(args.directory, backend, args.only)
        for result in results:
            if result.status != "pass" or not args.quiet:
                line = f"{result.status.upper():5} {result.id}"
                print(f"{line}  {result.message}" if result.message else line)
        bad = sum(r.status != "pass" for r in results)
        failures += bad
        print(f"backend {backend}: {len(results) - bad} of {len(results)} cases pass "
              f"({time.perf_counter() - start:.1f} s)")
    sys.stdout.flush()
    return min(failures, MAX_EXIT_STATUS)
