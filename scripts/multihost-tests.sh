#!/usr/bin/env bash
# The MPI tests across real hosts (issue 17, item 1): `mh up` makes hosts on
# this machine (../shared/multihost/mh: a network namespace each, with its
# own hostname and /dev/shm, optionally its own cores; TCP between hosts,
# shared memory within one), and the tests run across them through
# tests/multihost/mh-mpirun.sh, the launcher tests/mpi/mpirun.sh and
# tests/pmpi/run.sh take in place of mpirun (MPI_LAUNCHER):
#
#   the Comm matrix (copse_mpi_tests all) at 2 x 2, 3 x 2, 2 + 1 and 2 x 2
#     --map-by node; 3 x 2 and 2 + 1 with each host pinned to a core (as a
#     batch system's cpuset pins a job; hosts h1 and h3 share core 0)
#   an 8-byte allreduce loop at 2 x 2 with the hosts not pinned
#     (tests/multihost/shared_cores.sh: hosts that share the machine's cores)
#   hybrid MPI + threads (processes of 3 and 3, and of 1, 3 and 2 threads)
#   the interposer's tests (tests/pmpi/run.sh): collectives with their stats
#     (cross-memory attach expected of the ranks that share a host: by
#     MPI_RANK_HOSTS), Fortran, the C API, errors in served calls; its
#     nonblocking, persistent and nonblocking v-variant calls
#     (tests/pmpi/nonblocking.sh), under MPI_THREAD_MULTIPLE too
#   the death tests (tests/mpi/process_death.sh): SIGKILL of a node leader,
#     a non-leader and a rank alone on its node (--map-by node cut into
#     virtual nodes of 3) at 2 x 2 and 3 x 2, each with Open MPI's abort on
#     exit on and off, and of a rank alone on its host at 2 + 1 (watched
#     over TCP only) with it off: every survivor fails within 10 s naming
#     the dead rank and its host
#
# and after each test, that no host's /dev/shm holds a copse segment.
# `mh down` runs at the end whatever happens (trap: failure, interrupt).
# Tests that need a single host (the direct reduce's death, the
# configuration errors' MPMD job) stay in the CTest suite.
#
#   scripts/multihost-tests.sh [BUILD_DIR]    default build/default, built
#
# Needs root, iproute2, util-linux and Open MPI. The mh script: $MH, else
# ../shared/multihost/mh beside the repository. MULTIHOST=off skips
# everything (exit 0, saying so). Exits 1 if any test failed, 2 if the hosts
# cannot be made (the reason printed).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
build=$(realpath "${1:-build/default}")

if [[ ${MULTIHOST:-} == off ]]; then
  echo "multihost: MULTIHOST=off: skipped"
  exit 0
fi
MH=${MH:-$(realpath -m "$repo/../shared/multihost/mh")}
[[ -x $MH ]] || { echo "multihost: no mh script at $MH (set MH=PATH, or MULTIHOST=off)" >&2; exit 2; }
[[ $EUID == 0 ]] || { echo "multihost: mh needs root (network and mount namespaces)" >&2; exit 2; }
if ! command -v ip >/dev/null && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iproute2 >/dev/null
fi
for program in copse_mpi_tests pmpi_collectives pmpi_c_api pmpi_errors pmpi_nonblocking libcopse_mpi.so; do
  [[ -e $build/$program ]] || { echo "multihost: $build/$program is missing (build the preset first)" >&2; exit 2; }
done
export MH
export MH_STATE=${MH_STATE:-/run/copse-mh}

"$MH" down >/dev/null 2>&1 || true  # what an interrupted run left
trap '"$MH" down >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
"$MH" up 3 || { echo "multihost: mh up failed (see above)" >&2; exit 2; }

# The layout of the next tests: hosts and their ranks ("h1:2 h2:1"), Open
# MPI's placement (slot: consecutive ranks per host; node: round robin) and
# each host's cores ("h1=0 h2=1", or none). MPI_RANK_HOSTS: each rank's host.
layout() {
  export MH_HOSTS=$1 MH_MAP_BY=${2:-slot} MH_CPUS=${3:-}
  local -A left
  local hosts=() hs h placed=()
  for hs in $MH_HOSTS; do
    hosts+=("${hs%%:*}")
    left[${hs%%:*}]=${hs#*:}
  done
  for ((more = 1; more;)); do
    more=0
    for h in "${hosts[@]}"; do
      while ((left[$h] > 0)); do
        placed+=("$h")
        left[$h]=$((left[$h] - 1))
        more=1
        [[ $MH_MAP_BY == node ]] && break
      done
    done
  done
  export MPI_RANK_HOSTS="${placed[*]}"
}

export MPI_LAUNCHER="$repo/tests/multihost/mh-mpirun.sh"
pmpi_env=(PMPI_LIB="$build/libcopse_mpi.so" PMPI_COLLECTIVES="$build/pmpi_collectives"
          PMPI_C_API="$build/pmpi_c_api" PMPI_ERRORS="$build/pmpi_errors")
[[ -e $build/pmpi_fortran ]] && pmpi_env+=(PMPI_FORTRAN="$build/pmpi_fortran")
pmpi_env+=(PMPI_NONBLOCKING="$build/pmpi_nonblocking")
passed=0 failed=() skipped=0 log=$(mktemp) logs=$build/multihost-logs logged=0
rm -rf "$logs" && mkdir -p "$logs"

# check NAME COMMAND...: runs one test in the current layout; its output is
# shown only when it fails. Then no copse segment may be left on any host.
check() {
  local map=""
  [[ $MH_MAP_BY == node ]] && map=", map-by node"
  local name="$1 [$MH_HOSTS$map${MH_CPUS:+, cpus $MH_CPUS}]" start=$SECONDS status
  shift
  # In the background: a signal then ends this script (and its trap takes
  # the hosts down, their processes with them) without waiting for the test.
  "$@" >"$log" 2>&1 &
  wait $!
  status=$?
  local left
  left=$(find "$MH_STATE"/shm -name 'copse-*' 2>/dev/null)
  if ((status == 77)); then
    skipped=$((skipped + 1))
    echo "multihost: skipped $name: $(tail -n 1 "$log")"
  elif ((status != 0)) || [[ -n $left ]]; then
    failed+=("$name")
    echo "multihost: FAIL $name (exit $status, $((SECONDS - start)) s); its output in $logs/$((++logged)).log"
    cp "$log" "$logs/$logged.log"
    grep -m 20 -iE 'fail|error|timed out|not ' "$log" | sed 's/^/    /'
    echo "    ..."
    tail -n 30 "$log" | sed 's/^/    /'
    [[ -z $left ]] || { echo "    left in the hosts' /dev/shm:"; echo "$left" | sed 's/^/      /'; }
    find "$MH_STATE"/shm -name 'copse-*' -delete 2>/dev/null
  else
    passed=$((passed + 1))
    echo "multihost: ok $name ($((SECONDS - start)) s)"
  fi
}
matrix() { MH_TIMEOUT=150 check "Comm matrix np $1" bash tests/mpi/mpirun.sh "$1" "$build/copse_mpi_tests" all; }
hybrid() { MH_TIMEOUT=150 check "hybrid, threads $2" bash tests/mpi/mpirun.sh "$1" "$build/copse_mpi_tests" hybrid --threads "$2"; }
pmpi() { MH_TIMEOUT=120 check "interposer: $*" env "${pmpi_env[@]}" bash tests/pmpi/run.sh "$@"; }
# nonblocking NP [K] [threads]: tests/pmpi/nonblocking.sh (threads: under MPI_THREAD_MULTIPLE).
nonblocking() {
  MH_TIMEOUT=120 check "interposer: nonblocking and persistent np $1${2:+, virtual nodes of $2}${3:+, $3}" \
    env "${pmpi_env[@]}" ${3:+NONBLOCKING_THREADS=1} bash tests/pmpi/nonblocking.sh "$1" "${2:-}"
}
# death WHO VICTIM [K [ABORTS]]: MPI rank VICTIM (WHO: its role) killed in
# the current layout, on virtual nodes of K (0, the default: the hosts),
# with Open MPI's abort on exit on and off (ABORTS: "on off", the default).
death() {
  local np abort
  np=$(wc -w <<<"$MPI_RANK_HOSTS")
  for abort in ${4:-on off}; do
    MH_TIMEOUT=40 check "death of $1 (MPI rank $2), abort on exit $abort" bash tests/mpi/process_death.sh \
      "$build/copse_mpi_tests" --np "$np" --victim "$2" --ranks-per-node "${3:-0}" --abort "$abort"
  done
}

layout "h1:2 h2:2"
matrix 4
MH_TIMEOUT=60 check "hosts sharing the machine's cores: an 8-byte allreduce loop" \
  bash tests/multihost/shared_cores.sh "$build/libcopse_mpi.so" "$build/mpi_allreduce_loop" 4
pmpi collectives 4 2
pmpi fortran 4
nonblocking 4
death "a node leader" 2
death "a non-leader" 1
layout "h1:2 h2:2" slot "h1=0 h2=1"
pmpi collectives 4
layout "h1:2 h2:2 h3:2" slot "h1=0 h2=1 h3=0"
matrix 6
nonblocking 6
layout "h1:2 h2:1" slot "h1=0 h2=1"
matrix 3
hybrid 3 1,3,2
pmpi collectives 3
pmpi errors 3
nonblocking 3 "" threads
layout "h1:2 h2:2" node
matrix 4
death "a rank alone on its node" 1 3
layout "h1:2 h2:2 h3:2"
death "a node leader" 2
death "a non-leader" 3
layout "h1:2 h2:2 h3:2" node
death "a rank alone on its node" 1 3
layout "h1:2 h2:1"
death "a rank alone on its host" 2 0 off  # (on: the runtime ends the job before its watcher waits)
layout "h1:1 h2:1"
hybrid 2 3,3
pmpi c-api 2

rm -f "$log"
echo "multihost: $passed passed, ${#failed[@]} failed, $skipped skipped, in $SECONDS s"
for name in "${failed[@]}"; do echo "multihost: failed: $name"; done
((${#failed[@]} == 0))
