"""``gradops check [--op ...] [--framework ...]``: gradops against the installed frameworks.

Prints a table operator x framework x convention -> agrees / differs / known divergence /
skipped, and exits with the number of unexplained differences (capped at 100).
"""

from __future__ import annotations

import argparse

from .peers import FRAMEWORKS

MAX_EXIT_STATUS = 100


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--op", action="append", default=[], metavar="NAME",
                        help="only operators whose name contains NAME (e.g. relu_grad, resample, "
                             "DepthwiseConv2dNativeBackpropInput); repeatable")
    parser.add_argument("--framework", action="append", default=[], choices=FRAMEWORKS,
                        help="only this framework; repeatable")
    parser.add_argument("--backend", choices=("auto", "fast", "reference"), default=None,
                        help="gradops backend (default auto)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random cases (default 0)")


def main(args: argparse.Namespace) -> int:
    from ..errors import DescriptorError
    from .check import print_report, probes, run_checks

    operators = sorted({probe.operator for probe in probes()})
    for name in args.op:
        if not any(name.lower() in operator.lower() for operator in operators):
            raise DescriptorError.expected("--op", f"part of an operator name: {', '.join(operators)}", name)
    rows = run_checks(ops=args.op, frameworks=args.framework, backend=args.backend, seed=args.seed)
    unexplained = print_report(rows)
    return min(unexplained, MAX_EXIT_STATUS)
