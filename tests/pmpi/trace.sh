#!/usr/bin/env bash
# The trace file (mpi.trace, mpi/trace.hpp) and `copse replay` of it:
#
#   trace.sh NP [K]    tests/pmpi/trace_app.c under LD_PRELOAD=libcopse_mpi.so
#                      on NP processes (virtual nodes of K), COPSE_MPI_TRACE set
#
# Checks, from the program's known sequence of calls: one line per call and
# process, each key with the call's collective, communicator size, count,
# datatype size, operator and root; calls numbered 0.. per process; the
# same site for the same call everywhere and a different one per call in the
# source; gaps at least the computation the program did before each call
# (a causal bound, not a timing guess); t = previous t + previous duration +
# gap. A second run replaces the file. Then `copse replay` of the trace on
# 4 x 4 ranks succeeds and reports every call, and a broken copy of the
# trace exits 2 naming file:line.
#
# CTest sets PMPI_LIB, PMPI_TRACE_APP, PMPI_COPSE_CLI and MPIEXEC.
set -uo pipefail

np=${1:?NP missing}
k=${2:-0}
iterations=3

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for name in $(compgen -e); do
  case "$name" in COPSE_*) unset "$name" ;; esac
done
export COPSE_CONFIG=
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
source "$(dirname "${BASH_SOURCE[0]}")/preload.sh"
cd "$tmp" || exit 1

run_app() {
  local vn=()
  [[ $k -gt 0 ]] && vn=(-x COPSE_HIERARCHY_RANKS_PER_NODE="$k")
  "${MPIEXEC:-mpirun}" --oversubscribe --mca btl self,vader --mca mpi_yield_when_idle 1 -np "$np" \
    -x LD_PRELOAD="$preload" -x COPSE_CONFIG= -x COPSE_MPI_TABLE=none -x COPSE_MPI_TRACE="$tmp/trace.jsonl" "${vn[@]}" \
    "$PMPI_TRACE_APP" "$iterations" 4096 >"$tmp/app.out" 2>&1
}

for round in 1 2; do  # the second run must replace the first's lines
  if ! run_app; then
    echo "trace_app failed (round $round):"
    cat "$tmp/app.out"
    exit 1
  fi
done

python3 - "$tmp/trace.jsonl" "$np" "$iterations" <<'EOF' || exit 1
import json, sys
path, np, iterations = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lines = [json.loads(l) for l in open(path)]
keys = ["rank", "size", "call", "collective", "comm_size", "comm_rank", "count", "type_size", "op", "root",
        "served", "site", "t", "gap", "duration"]
bad = []
half = lambda r: (np + 1 - r % 2) // 2  # processes of rank r's parity
# (collective, comm_size(r), count, type_size, op, root, computation before it)
def expected(r):
    seq = []
    for _ in range(iterations):
        seq += [("allreduce", np, 4096, 8, "sum", -1, (1 + r % 4) * 1e-3),
                ("allreduce", np, 1, 8, "max", -1, 0.5e-3),
                ("bcast", np, 1000, 4, "", 1 if np > 1 else 0, 0),
                ("reduce", np, 1024, 4, "sum", 0, 0),
                ("allgather", np, 16, 4, "", -1, 0),
                ("allreduce", half(r), 256, 4, "sum", -1, 0)]
    return seq + [("barrier", np, 0, 0, "", -1, 0)]
per_rank = {}
for l in lines:
    if list(l) != keys:
        bad.append(f"keys {list(l)}")
        break
    per_rank.setdefault(l["rank"], []).append(l)
if sorted(per_rank) != list(range(np)):
    bad.append(f"ranks {sorted(per_rank)}, expected 0..{np - 1}")
sites = {}
for r, calls in per_rank.items():
    calls.sort(key=lambda l: l["call"])
    want = expected(r)
    if [l["call"] for l in calls] != list(range(len(want))):
        bad.append(f"rank {r}: calls {[l['call'] for l in calls]}, expected 0..{len(want) - 1}")
        continue
    prev_end = 0.0
    for l, (coll, comm, count, tsize, op, root, busy) in zip(calls, want):
        got = (l["collective"], l["comm_size"], l["count"], l["type_size"], l["op"], l["root"])
        if got != (coll, comm, count, tsize, op, root):
            bad.append(f"rank {r} call {l['call']}: {got}, expected {(coll, comm, count, tsize, op, root)}")
        if l["size"] != np or not l["served"] and np > 1:
            bad.append(f"rank {r} call {l['call']}: size {l['size']}, served {l['served']}")
        if l["gap"] < busy:
            bad.append(f"rank {r} call {l['call']}: gap {l['gap']} below the {busy} s computed before it")
        if abs(prev_end + l["gap"] - l["t"]) > 1e-8:
            bad.append(f"rank {r} call {l['call']}: t {l['t']} != {prev_end} + gap {l['gap']}")
        prev_end = l["t"] + l["duration"]
        if not l["site"].startswith("pmpi_trace_app+0x"):
            bad.append(f"rank {r} call {l['call']}: site {l['site']}")
        sites.setdefault(l["call"] % 6 if l["collective"] != "barrier" else "b", set()).add(l["site"])
for where, s in sites.items():
    if len(s) != 1:
        bad.append(f"call position {where}: sites {s} differ between processes or iterations")
if len(set().union(*sites.values())) != len(sites):
    bad.append(f"calls from different lines share a site: {sites}")
for b in bad[:20]:
    print("trace:", b)
sys.exit(1 if bad else 0)
EOF

# The replay: every call, on another shape, under two allreduce algorithms.
for alg in ring dual-root; do
  if ! "$PMPI_COPSE_CLI" replay "$tmp/trace.jsonl" --nodes 4 --ranks-per-node 4 --algorithm "$alg" --json \
    >"$tmp/replay.json" 2>"$tmp/replay.err"; then
    echo "copse replay --algorithm $alg failed:"
    cat "$tmp/replay.err"
    exit 1
  fi
  python3 - "$tmp/replay.json" "$np" "$iterations" "$alg" <<'EOF' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
np, iterations, alg = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
calls = 6 * iterations + 1
ok = (r["ranks"] == 16 and r["processes"] == np and r["calls"] == calls
      and sum(s["calls"] for s in r["sites"]) == calls and len(r["sites"]) == 7
      and all(s["algorithm"] == alg for s in r["sites"] if s["collective"] == "allreduce" and s["group"] > 1)
      and r["total"]["time_ps"] == sum(s["time_ps"] for s in r["sites"])
      and r["total"]["end_ps"] >= r["total"]["compute_ps"] > 0)
if not ok:
    print("replay output unexpected:", json.dumps(r)[:2000])
sys.exit(0 if ok else 1)
EOF
done

# A broken trace: exit 2, one line naming file and line.
{ head -n 2 "$tmp/trace.jsonl"; echo '{"rank": 0, "size": '"$np"', "call": 99'; } >"$tmp/broken.jsonl"
"$PMPI_COPSE_CLI" replay "$tmp/broken.jsonl" >"$tmp/out" 2>"$tmp/err"
status=$?
if [[ $status -ne 2 || $(wc -l <"$tmp/err") -ne 1 ]] || ! grep -q "^copse: $tmp/broken.jsonl:3: " "$tmp/err"; then
  echo "broken trace: exit $status, stderr:"
  cat "$tmp/err"
  exit 1
fi
echo "trace and replay: ok"
