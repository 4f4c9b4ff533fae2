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
# NONBLOCKING_FORM_TABLE=1: under a decision table whose rows are keyed by
# call form -- persistent allreduce to the MPI library, nonblocking allreduce
# to copse, blocking by the default (copse) -- and checks that the persistent
# allreduces the program expected copse to serve were passed on by the first
# row instead (its results still checked), the nonblocking ones served and
# counted by the second, the blocking ones served. (Not the blocking calls to
# the library: the program relies on copse's blocking allreduce finishing a
# freed nonblocking one before it.)
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
if [[ -n ${NONBLOCKING_FORM_TABLE:-} ]]; then
  export COPSE_MPI_TABLE="$tmp/forms.toml"
  printf '%s\n' 'default = "copse"' '[[row]]' 'collective = "allreduce"' 'form = "persistent"' 'use = "mpi"' \
    '[[row]]' 'collective = "allreduce"' 'form = "nonblocking"' 'use = "copse"' >"$COPSE_MPI_TABLE"
fi
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
python3 - "$tmp/stats.jsonl" "$tmp/expect.jsonl" "$np" "${NONBLOCKING_FORM_TABLE:-}" <<'PY'
import json, sys
stats = {l["rank"]: l for l in map(json.loads, open(sys.argv[1]))}
expect = {l["rank"]: l for l in map(json.loads, open(sys.argv[2]))}
np, bad = int(sys.argv[3]), []
if sys.argv[4]:  # the table by form: row 1 persistent allreduce -> mpi, row 2 nonblocking allreduce -> copse
    for r, s in stats.items():
        rows, persistent = s["table"]["rows"], s["persistent"]
        want = expect.get(r, {}).get("persistent", {}).pop("allreduce", 0)
        if persistent["served"]["allreduce"] != 0 or persistent["passed"]["allreduce"] != want or rows[0] != want or want == 0:
            bad.append(f"rank {r}: persistent allreduce served {persistent['served']['allreduce']}, passed "
                       f"{persistent['passed']['allreduce']}, row 1 counted {rows[0]}: expected {want} passed by row 1")
        if rows[1] != s["nonblocking"]["served"]["allreduce"] or rows[1] == 0:
            bad.append(f"rank {r}: row 2 counted {rows[1]}, nonblocking allreduce served "
                       f"{s['nonblocking']['served']['allreduce']}: expected the same, above 0")
        if s["served"]["allreduce"] == 0:
            bad.append(f"rank {r}: no blocking allreduce served (the default, copse, decides them)")
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
