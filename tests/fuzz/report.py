"""Sum a fuzz campaign's counts file (``GRADOPS_FUZZ_COUNTS``: JSON lines, the last of each process
holding its totals): calls and
outcomes per target, the slowest call, and every exception other than GradopsError. Exit status 1
if there was any such exception."""

from __future__ import annotations

import collections
import json
import sys


def main(path: str) -> int:
    calls: collections.Counter = collections.Counter()
    outcomes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    slowest: dict[str, float] = {}
    escapes: list[str] = []
    last: dict[int, dict] = {}  # each process's last line holds its totals
    with open(path) as file:
        for line in file:
            record = json.loads(line)
            last[record["pid"]] = record
    for record in last.values():
        calls.update(record["counts"])
        for key, count in record["outcomes"].items():
            target, outcome = key.split("|")
            outcomes[target][outcome] += count
        for target, seconds in record.get("slowest", {}).items():
            slowest[target] = max(slowest.get(target, 0.0), seconds)
        escapes += record.get("escapes", [])
    print(f"{'target':45} {'calls':>7} {'slowest s':>9}  outcomes")
    for target in sorted(calls):
        detail = ", ".join(f"{o} {n}" for o, n in outcomes[target].most_common())
        print(f"{target:45} {calls[target]:7} {slowest.get(target, 0):9.2f}  {detail}")
    print(f"{'total':45} {sum(calls.values()):7}")
    print(f"{len(escapes)} exceptions other than GradopsError")
    for escape in escapes:
        print("  " + escape)
    return 1 if escapes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
