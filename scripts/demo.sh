#!/usr/bin/env bash
# Quick start, part one: install what is missing, build the release preset,
# and run `copse demo`: every allreduce algorithm on an emulated cluster of
# 8 nodes x 4 ranks with 1 MiB per rank and auto-tuned block counts, printed
# as a table of block count, virtual time, wall time (min/median) and whether
# the result was verified. Extra arguments go to `copse demo`
# (e.g. scripts/demo.sh --nodes 16 --bytes 4MiB).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release --parallel "$(nproc)"
./build/release/copse demo "$@"
