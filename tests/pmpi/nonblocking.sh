#!/usr/bin/env bash
# tests/pmpi/nonblocking.c under LD_PRELOAD on NP processes (on virtual
# nodes of K ranks when K is given): its own result checks, then its
# expectations against the COPSE_MPI_STATS lines -- every nonblocking and
# persistent call it expected copse to serve was served.
#
#   nonblocking.sh NP [K]
#
# NONBLOCKING_THREADS=1 in the environment: the program under
# MPI_THREAD_MULTIPLE, with two threads at once at its end.
# CTest sets PMPI_LIB, PMPI_NONBLOCKING and MPIEXEC. Exit status 0 when every
# check passed. Across hosts (scripts/multihost-tests.sh), MPI_LAUNCHER names
# the command that stands in for mpirun and takes its options, as for
# tests/pmpi/run.sh.
set -uo pipefail
np=${1:?usage: nonblocking.sh NP [K]}
k=${2:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for name in $(compgen -e); do
  case "$name" in COPSE_*) unset "$name" ;; esac
done
export COPSE_CONFIG= COPSE_MPI_TABLE=none COPSE_MPI_STATS="$tmp/stats.jsonl"
((k == 0)) || export COPSE_HIERARCHY_RANKS_PER_NODE=$k
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source "$(dirname "${BASH_SOURCE[0]}")/preload.sh"
# The program counts operator new by defining it over malloc, so the
# sanitizer's operator delete sees malloc's blocks: not a mismatch here.
[[ -z $asan ]] || export ASAN_OPTIONS="$ASAN_OPTIONS:alloc_dealloc_mismatch=0"
args=(-x LD_PRELOAD="$preload")
[[ -z ${NONBLOCKING_THREADS:-} ]] || args+=(-x NONBLOCKING_THREADS)
[[ -z $asan ]] || args+=(-x ASAN_OPTIONS)
for name in $(compgen -e); do
  case "$name" in COPSE_*) args+=(-x "$name") ;; esac
done
mpirun=("${MPIEXEC:-mpirun}" --oversubscribe --bind-to none --mca btl self,vader --mca mpi_yield_when_idle 1)
[[ -z ${MPI_LAUNCHER:-} ]] || read -ra mpirun <<<"$MPI_LAUNCHER"
"${mpirun[@]}" "${args[@]}" -np "$np" "$PMPI_NONBLOCKING" "$tmp/expect.jsonl" ||
  { echo "FAIL the program reported wrong results (or did not finish)"; exit 1; }
python3 - "$tmp/stats.jsonl" "$tmp/expect.jsonl" "$np" <<'PY'
import json, sys
stats = {l["rank"]: l for l in map(json.loads, open(sys.argv[1]))}
expect = {l["rank"]: l for l in map(json.loads, open(sys.argv[2]))}
np, bad = int(sys.argv[3]), []
if sorted(stats) != list(range(np)) or sorted(expect) != list(range(np)):
    bad.append(f"ranks: stats {sorted(stats)}, expectations {sorted(expect)}")
for r, e in expect.items():
    s = stats.get(r)
    if s is None:
        continue
    for name, n in e["nonblocking"].items():
        if s["nonblocking"]["served"][name] != n:
            bad.append(f"rank {r} nonblocking {name}: served {s['nonblocking']['served'][name]}, expected {n}")
    for name, n in e["persistent"].items():
        if s["persistent"]["served"][name] != n:
            bad.append(f"rank {r} persistent {name}: served {s['persistent']['served'][name]}, expected {n}")
print("\n".join("FAIL " + b for b in bad) if bad else f"stats: {len(stats)} lines, every expected call served")
sys.exit(1 if bad else 0)
PY
