#!/bin/sh
# Full suite S1 run: tables on stdout, every measurement in results/s1-DATE.json, the README's table
# in results/s1-DATE.md, the ratio chart in results/s1-DATE.png. Extra arguments go to `gradops bench`
# (e.g. --only D1 D2, --peers torch jax).
# Runs one process at a time; on a shared machine, run it once and quote medians and ratios from that run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
gradops=${GRADOPS:-"$here/../.venv/bin/gradops"}
stamp=$(date +%Y%m%d-%H%M)
mkdir -p "$here/results"
"$gradops" bench --json "$here/results/s1-$stamp.json" --markdown "$here/results/s1-$stamp.md" --png "$here/results/s1-$stamp.png" "$@" \
    | tee "$here/results/s1-$stamp.txt"
