#!/usr/bin/env bash
# Quick start, part one: install what is missing, build the release preset,
# and run `copse demo`: allreduce of 1 MiB per rank on an emulated cluster of
# 4 nodes x 8 ranks under the cluster cost model (LogGP, a shared interface
# per node), flat and in the hierarchical forms (one node leader, multi-leader,
# lanes), with auto-tuned block counts, printed as a table of block count,
# virtual time, wall time (min/median) and whether the result was verified,
# then the winner, whose Gantt chart goes to demo-winner.svg (--gantt FILE).
# Extra arguments go to `copse demo` (e.g. scripts/demo.sh --nodes 16 --bytes 4MiB).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset release
cmake --build --preset release --parallel "$(nproc)"
./build/release/copse demo "$@"
