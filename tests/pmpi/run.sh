#!/usr/bin/env bash
# One MPI test of libcopse_mpi.so, run as one mpirun and checked:
#
#   run.sh collectives NP [K [FORM]]
#                               tests/pmpi/collectives.c under LD_PRELOAD on NP
#                               processes (on virtual nodes of K ranks, one
#                               collective not served, when K is given; in
#                               hierarchy.form FORM when given -- lanes on
#                               sub-communicators of uneven nodes then run
#                               as leader, CommOptions::form_falls_back): its
#                               own result checks, then its COPSE_MPI_STATS
#                               lines against the calls it expected copse to
#                               serve and to pass (one node: with
#                               COPSE_MPI_CMA=on, and bytes read so)
#   run.sh table NP [K]         collectives.c with a decision table (mpi.table)
#                               that leaves every bcast to MPI and names the
#                               hierarchy form of allreduce (lanes), reduce
#                               (multi-leader) and allgather (flat), on virtual
#                               nodes of K ranks when given: the results are
#                               right (a form that cannot plan a call, such as
#                               lanes on a sub-communicator's uneven nodes,
#                               keeps the configured one), the stats show
#                               bcast passed, each row counting its
#                               collective's calls, and the other served calls
#                               counted as matching no row
#   run.sh fortran NP           tests/pmpi/fortran.f90 under LD_PRELOAD, and its
#                               stats: the Fortran bindings' calls were served,
#                               the nonblocking and persistent ones too
#   run.sh c-api NP             tests/pmpi/c_api.c, linked with libcopse_mpi.so
#   run.sh errors NP            tests/pmpi/errors.c under LD_PRELOAD: copse's
#                               error in a served call through MPI_ERRORS_RETURN
#                               and a handler of the program's own; then under
#                               MPI_ERRORS_ARE_FATAL, the job stops with copse's
#                               "copse: MPI_Allreduce failed on rank ..." line
#   run.sh heap NP              tests/pmpi/heap.c under LD_PRELOAD: a block of
#                               16 MiB after MPI_Init comes from the heap
#                               (mpi.keep_heap, the default), and is mmapped
#                               with COPSE_MPI_KEEP_HEAP=false
#   run.sh bench-native NP      bench/mpi_collectives with --native (copse and the
#                               library's own calls timed in one run): every
#                               case has each side's line, verified, with the
#                               same repetitions, and copse's stats count
#                               exactly the copse side's calls -- the PMPI_
#                               sides never reached it; and the report holds
#                               each label against the library's calls timed
#                               in that label's own launches
#   run.sh config-errors NP     a bad COPSE_* value, a misspelt variable and
#                               settings that differ between processes: each
#                               stops the job with exactly one "copse:" line
#
# CTest sets PMPI_LIB, PMPI_COLLECTIVES, PMPI_C_API, PMPI_ERRORS, PMPI_HEAP, PMPI_BENCH, PMPI_FORTRAN (when
# a Fortran compiler was found; otherwise the Fortran test exits 77, skipped)
# and MPIEXEC. Exit status 0 when every check passed.
#
# Across hosts: MPI_LAUNCHER names a command that stands in for mpirun and
# takes its options (tests/multihost/mh-mpirun.sh), and MPI_RANK_HOSTS the
# host of each rank in rank order ("h1 h1 h2"); expectations that hold only
# among processes of one host (bytes read by cross-memory attach) then apply
# to the ranks that share their host with another.
set -uo pipefail

what=${1:?usage: run.sh collectives|fortran|c-api|config-errors NP [K]}
np=${2:?NP missing}
k=${3:-0}
form=${4:-}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Only the settings each run gives: none inherited.
for name in $(compgen -e); do
  case "$name" in COPSE_*) unset "$name" ;; esac
done
export COPSE_CONFIG=  # and no ./copse.toml
# No decision table: these runs test the serving paths, which the built-in
# table could leave to MPI; the `table` case tests the table.
export COPSE_MPI_TABLE=none
# Open MPI as root, on a machine with fewer cores than ranks.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=("${MPIEXEC:-mpirun}" --oversubscribe --mca btl self,vader --mca mpi_yield_when_idle 1)
[[ -z ${MPI_LAUNCHER:-} ]] || read -ra mpirun <<<"$MPI_LAUNCHER"

# Under AddressSanitizer the sanitizer's runtime is preloaded first
# (preload.sh); the C API program links libcopse_mpi.so and preloads the
# runtime alone.
source "$(dirname "${BASH_SOURCE[0]}")/preload.sh"
runtime=$asan

# mpirun with libcopse_mpi.so preloaded in the MPI processes (not in mpirun)
# and the given COPSE_* variables passed on.
preloaded() {
  local args=(-x LD_PRELOAD="$preload") name
  for name in $(compgen -e); do
    case "$name" in COPSE_*) args+=(-x "$name") ;; esac
  done
  "${mpirun[@]}" "${args[@]}" "$@"
}

# The stats lines: one per rank 0..NP-1, each of size NP; then, per rank,
# served and passed equal to the expectation (a file of lines, or one object
# that holds for every rank). With COPSE_MPI_CMA=on and NP > 1, also that
# every rank with a node peer (every rank, on one host) read bytes of its node
# peers by cross-memory attach, unless the kernel refused it (the note names
# process_vm_readv).
check_stats() {
  python3 - "$tmp/stats.jsonl" "$np" "$1" "${COPSE_MPI_CMA:-}" "${MPI_RANK_HOSTS:-}" <<'EOF'
import json, sys
stats_path, np, expected, cma, rank_hosts = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
host_of = rank_hosts.split() or ["this host"] * np
lines = [json.loads(l) for l in open(stats_path)]
bad = []
if sorted(l["rank"] for l in lines) != list(range(np)):
    bad.append(f"ranks in the stats file: {sorted(l['rank'] for l in lines)}, expected 0..{np - 1}")
bad += [f"rank {l['rank']}: size {l['size']}, expected {np}" for l in lines if l["size"] != np]
try:
    expect = {e["rank"]: e for e in map(json.loads, open(expected))}
except OSError:
    one = json.loads(expected)
    expect = {r: one for r in range(np)}
for l in lines:
    e = expect.get(l["rank"])
    for kind in ("served", "passed"):
        if e is None or l[kind] != e[kind]:
            bad.append(f"rank {l['rank']} {kind}: {l[kind]}, expected {e and e[kind]}")
    c = l["cma"]
    shares_host = host_of.count(host_of[l["rank"]]) > 1 if l["rank"] < len(host_of) else np > 1
    if cma == "on" and shares_host and not (c["teams"] >= 1 and c["bytes"] > 0) and "process_vm_readv" not in c["note"]:
        bad.append(f"rank {l['rank']} cma: {c}, expected bytes read by cross-memory attach (or the kernel's refusal)")
    if cma == "on" and "process_vm_readv" in c["note"]:
        print(f"note: rank {l['rank']}: no cross-memory attach here ({c['note']})")
for b in bad:
    print("FAIL", b)
if not bad:
    print(f"stats: {len(lines)} lines, as expected")
sys.exit(1 if bad else 0)
EOF
}

case "$what" in
  collectives)
    export COPSE_MPI_STATS="$tmp/stats.jsonl" COPSE_MPI_MAX_BYTES=8MiB
    extra=()
    if ((k > 0)); then
      # Virtual nodes take the inter-node path; reduce_scatter is left to MPI.
      export COPSE_HIERARCHY_RANKS_PER_NODE=$k
      export COPSE_MPI_SERVE=allreduce,reduce,bcast,barrier,allgather,reduce_scatter_block,scatter,gather,alltoall,allgatherv,gatherv,scatterv,alltoallv
      extra=(--not-served reduce_scatter)
      [[ -z $form ]] || export COPSE_HIERARCHY_FORM=$form
    else
      # One node: large messages by cross-memory attach wherever the kernel
      # allows it, whether or not it pays here (auto may decline it).
      export COPSE_MPI_CMA=on
    fi
    preloaded -np "$np" "$PMPI_COLLECTIVES" "$tmp/expect.jsonl" --max-bytes $((8 << 20)) "${extra[@]}" ||
      { echo "FAIL the program reported wrong results (or did not finish)"; exit 1; }
    check_stats "$tmp/expect.jsonl"
    ;;
  table)
    export COPSE_MPI_STATS="$tmp/stats.jsonl" COPSE_MPI_MAX_BYTES=8MiB COPSE_MPI_TABLE="$tmp/table.toml"
    ((k > 0)) && export COPSE_HIERARCHY_RANKS_PER_NODE=$k
    printf 'default = "copse"\n[[row]]\ncollective = "bcast"\nuse = "mpi"\n' >"$tmp/table.toml"
    # An alltoall is decided by its block, the size copse tune measures it
    # by: the program's alltoalls move blocks of 8 bytes (8 x p in all).
    printf '[[row]]\ncollective = "alltoall"\nmax_bytes = 8\nuse = "mpi"\n' >>"$tmp/table.toml"
    # COLLECTIVE:FORM[:BLOCKS]: the rows name a form, and some a block count.
    for row in allreduce:lanes:5 reduce:multi-leader:3 allgather:flat; do
      IFS=: read -r collective form blocks <<<"$row"
      printf '[[row]]\ncollective = "%s"\nuse = "copse"\nhierarchy = "%s"\n' "$collective" "$form"
      [[ -n $blocks ]] && printf 'blocks = %s\n' "$blocks"
    done >>"$tmp/table.toml"
    preloaded -np "$np" "$PMPI_COLLECTIVES" "$tmp/expect.jsonl" --max-bytes $((8 << 20)) --not-served bcast --not-served alltoall ||
      { echo "FAIL the program reported wrong results (or did not finish)"; exit 1; }
    check_stats "$tmp/expect.jsonl" || exit 1
    python3 - "$tmp/stats.jsonl" "$tmp/table.toml" <<'EOF'
import json, sys
bad = []
for line in map(json.loads, open(sys.argv[1])):
    t = line.get("table")
    if t is None:
        bad.append(f"rank {line['rank']}: no table counts in its stats line")
        continue
    # Every bcast the table saw went to MPI by its first row, every alltoall
    # by its second; the allreduces, reduces and allgathers were served by
    # theirs; every other call copse served passed the table unmatched (the
    # default, copse).
    if t.get("source") != sys.argv[2]:
        bad.append(f"rank {line['rank']}: the counts name the table {t.get('source')!r}, not {sys.argv[2]!r}")
    served = line["served"]
    formed = [served["allreduce"], served["reduce"], served["allgather"]]
    if len(t["rows"]) != 5 or not 0 < t["rows"][0] <= line["passed"]["bcast"] or t["rows"][2:] != formed \
            or 0 in formed or not 0 < t["rows"][1] <= line["passed"]["alltoall"] or served["alltoall"] != 0:
        bad.append(f"rank {line['rank']}: row counts {t['rows']}, bcasts passed {line['passed']['bcast']}, "
                   f"alltoalls passed {line['passed']['alltoall']} and served {served['alltoall']}, "
                   f"allreduce, reduce, allgather served {formed}")
    if t["unmatched"] != sum(served.values()) - sum(formed):
        bad.append(f"rank {line['rank']}: {t['unmatched']} calls matched no row, {sum(served.values())} served")
print("\n".join(bad) if bad else "table: the first rows deferred the bcasts and the alltoalls (by block), the rows naming forms (and block "
      "counts) served theirs, "
      "the default served the rest")
sys.exit(1 if bad else 0)
EOF
    ;;
  fortran)
    [[ -n "${PMPI_FORTRAN:-}" ]] || { echo "no Fortran compiler with MPI: skipped"; exit 77; }
    export COPSE_MPI_STATS="$tmp/stats.jsonl"
    preloaded -np "$np" "$PMPI_FORTRAN" || { echo "FAIL the Fortran program reported wrong results"; exit 1; }
    if ((np > 1)); then
      served='{"allreduce": 5, "reduce": 1, "bcast": 1, "barrier": 1, "allgather": 0, "reduce_scatter_block": 0, "reduce_scatter": 0, "scatter": 1, "gather": 1, "alltoall": 2, "allgatherv": 1, "gatherv": 0, "scatterv": 0, "alltoallv": 0}'
      passed='{"allreduce": 1, "reduce": 0, "bcast": 0, "barrier": 0, "allgather": 0, "reduce_scatter_block": 0, "reduce_scatter": 0, "scatter": 0, "gather": 0, "alltoall": 0, "allgatherv": 0, "gatherv": 0, "scatterv": 0, "alltoallv": 0}'
      check_stats "{\"served\": $served, \"passed\": $passed}" || exit 1
      # The nonblocking and persistent calls, through the Fortran spellings:
      # every one served (the collectives not named: none, served or passed).
      python3 - "$tmp/stats.jsonl" <<'EOF'
import json, sys
expect = {"nonblocking": {"allreduce": 4, "reduce": 1, "bcast": 2, "barrier": 4, "allgather": 1, "reduce_scatter_block": 1,
                          "scatter": 1, "gather": 1, "alltoall": 1, "allgatherv": 1, "gatherv": 1, "scatterv": 1,
                          "alltoallv": 1},
          "persistent": {"allreduce": 1, "bcast": 1, "barrier": 1, "allgatherv": 1}}
bad = []
for line in map(json.loads, open(sys.argv[1])):
    for form, served in expect.items():
        for kind, want in (("served", served), ("passed", {})):
            got = {name: n for name, n in line[form][kind].items() if n}
            if got != want:
                bad.append(f"rank {line['rank']} {form} {kind}: {got}, expected {want}")
print("\n".join("FAIL " + b for b in bad) if bad else "stats: every nonblocking and persistent call served")
sys.exit(1 if bad else 0)
EOF
    fi
    ;;
  c-api)
    "${mpirun[@]}" ${runtime:+-x LD_PRELOAD="$runtime"} -np "$np" "$PMPI_C_API" ||
      { echo "FAIL the C API program reported errors"; exit 1; }
    echo "C API: every check passed"
    ;;
  errors)
    preloaded -np "$np" "$PMPI_ERRORS" return || { echo "FAIL errors through MPI_ERRORS_RETURN or a handler"; exit 1; }
    preloaded -np "$np" "$PMPI_ERRORS" fatal >"$tmp/out" 2>"$tmp/err" </dev/null
    status=$?
    # Each process that fails may say why before MPI_Abort ends the job:
    # at least one line, and every copse line names the call and the mismatch.
    said=$(grep -c '^copse: ' "$tmp/err")
    named=$(grep -cE '^copse: MPI_Allreduce failed on rank [0-9]* of its communicator: .*(mismatched calls|size mismatch)' "$tmp/err")
    if ((status == 0)) || ((said == 0 || said != named)) || grep -q 'returned under' "$tmp/err"; then
      echo "FAIL MPI_ERRORS_ARE_FATAL: exit $status, $said copse lines ($named as expected); stderr:"
      sed 's/^/  /' "$tmp/err"
      exit 1
    fi
    echo "errors: returned, handled, and fatal: $(grep -m1 '^copse: ' "$tmp/err")"
    ;;
  heap)
    # AddressSanitizer's allocator replaces malloc: there is no glibc heap to keep.
    [[ -z $asan ]] || { echo "heap: skipped under AddressSanitizer"; exit 77; }
    preloaded -np "$np" "$PMPI_HEAP" heap || { echo "FAIL mpi.keep_heap: the block was not on the heap"; exit 1; }
    preloaded -np "$np" -x COPSE_MPI_KEEP_HEAP=false "$PMPI_HEAP" mmap ||
      { echo "FAIL COPSE_MPI_KEEP_HEAP=false: the block was not mmapped"; exit 1; }
    echo "heap: kept by default, malloc's own with mpi.keep_heap = false"
    ;;
  bench-native)
    export COPSE_MPI_STATS="$tmp/stats.jsonl"
    preloaded -np "$np" "$PMPI_BENCH" --quick --sync p2p --collectives allreduce,bcast --forms blocking,persistent \
      --label copse --native tuned,tuned2 --json "$tmp/bench.jsonl" >"$tmp/out" 2>&1 ||
      { echo "FAIL the benchmark failed:"; sed 's/^/  /' "$tmp/out"; exit 1; }
    # The cases' sides, and from them what copse's stats must say: each
    # blocking call of the copse side served (the first verified call, 2
    # warm-ups, the repetitions, the last verified call), nothing passed on.
    expected=$(python3 - "$tmp/bench.jsonl" "$tmp/stats.jsonl" <<'EOF'
import collections, json, sys
cases = collections.defaultdict(dict)
for d in map(json.loads, open(sys.argv[1])):
    cases[(d["collective"], d["form"], d["bytes"])][d["label"]] = d
bad = [] if len(cases) == 12 else [f"{len(cases)} cases, expected 2 collectives x 2 forms x 3 sizes"]
served = collections.Counter()
for (c, form, size), sides in sorted(cases.items()):
    if sorted(sides) != ["copse", "tuned", "tuned2"] or len({d["reps"] for d in sides.values()}) != 1 \
            or not all(d["verified"] for d in sides.values()) \
            or [d.get("beside") for k, d in sorted(sides.items())] != [None, "copse", "copse"]:
        bad.append(f"{c} {form} {size}: " + ", ".join(f"{k} reps {d['reps']} verified {d['verified']}"
                                                      for k, d in sides.items()))
    elif form == "blocking":
        served[c] += sides["copse"]["reps"] + 4
if bad:
    sys.exit("FAIL " + "\nFAIL ".join(bad))
names = json.loads(open(sys.argv[2]).readline())["served"]
print(json.dumps({"served": {c: served[c] for c in names}, "passed": {c: 0 for c in names}}))
EOF
    ) || exit 1
    check_stats "$expected"
    # The report holds each label against the library's calls timed beside
    # it: here tuned took 1 us beside copse and 4 us beside copse-lanes, so
    # copse (1 us) is level and copse-lanes (2 us) twice as fast -- pooled
    # over both launches tuned's median (2.5 us) would say 2.5 and 1.25.
    python3 - "$tmp/paired.jsonl" <<'EOF'
import json, sys
with open(sys.argv[1], "w") as out:
    for label, beside, us in [("copse", None, 1), ("tuned", "copse", 1), ("copse-lanes", None, 2),
                              ("tuned", "copse-lanes", 4)]:
        line = {"config": "np2", "label": label, "collective": "allreduce", "form": "blocking", "sync": "p2p",
                "root": None, "np": 2, "bytes": 8, "verified": True, "times": [us * 1e-6] * 3}
        if beside:
            line["beside"] = beside
        print(json.dumps(line), file=out)
EOF
    "$PMPI_BENCH" --report "$tmp/paired.jsonl" --csv "$tmp/paired.csv" >"$tmp/out" 2>&1 ||
      { echo "FAIL the report failed:"; sed 's/^/  /' "$tmp/out"; exit 1; }
    ratios=$(awk -F, '$6 != "tuned" && NR > 1 { printf "%s %s;", $6, $13 }' "$tmp/paired.csv")
    [[ $ratios == "copse 1.0000;copse-lanes 2.0000;" ]] ||
      { echo "FAIL paired ratios: $ratios"; sed 's/^/  /' "$tmp/paired.csv"; exit 1; }
    echo "bench-native: copse's stats count the copse side's calls; the report pairs each label with its own launches"
    ;;
  config-errors)
    failures=0
    # stop_with LABEL TEXT COMMAND...: the job fails, and its stderr has
    # exactly one "copse:" line, which contains TEXT.
    stop_with() {
      local label=$1 text=$2
      shift 2
      "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
      local status=$? lines
      lines=$(grep -c '^copse: ' "$tmp/err")
      if ((status == 0)) || [[ $lines != 1 ]] || ! grep -qF -- "$text" "$tmp/err"; then
        echo "FAIL $label: exit $status, $lines copse lines; stderr:"
        sed 's/^/  /' "$tmp/err"
        failures=$((failures + 1))
      else
        echo "ok $label: $(grep '^copse: ' "$tmp/err")"
      fi
    }
    # The collectives program with one more variable set.
    with() { (export "$1" && preloaded -np "$np" "$PMPI_COLLECTIVES" "$tmp/expect.jsonl"); }
    stop_with "a bad value" 'copse: mpi.min_bytes = "lots" (from env COPSE_MPI_MIN_BYTES): not a size' \
      with COPSE_MPI_MIN_BYTES=lots
    stop_with "a misspelt variable" 'unknown environment variable COPSE_MPI_SERV (did you mean COPSE_MPI_SERVE?)' \
      with COPSE_MPI_SERV=all
    # MPMD: the first process serves nothing, the others everything.
    stop_with "settings that differ" "the processes' configurations differ" \
      "${mpirun[@]}" -np 1 env LD_PRELOAD="$preload" COPSE_MPI_SERVE=none "$PMPI_COLLECTIVES" "$tmp/expect.jsonl" \
      : -np $((np - 1)) env LD_PRELOAD="$preload" "$PMPI_COLLECTIVES" "$tmp/expect.jsonl"
    ((failures == 0)) || exit 1
    ;;
  *)
    echo "run.sh: unknown test '$what'" >&2
    exit 2
    ;;
esac
