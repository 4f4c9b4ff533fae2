#!/usr/bin/env bash
# A process dies in the middle of a collective (copse_mpi_tests death: np 4
# on virtual nodes of 3, MPI rank 1 killed with SIGKILL while it waits in an
# allreduce). Checks that every other process fails within 10 s with an
# error naming the dead process (its MPI rank, pid and host) -- the
# processes of its host find it dead themselves (pidfd), one process of the
# next host watches it over TCP (runtime/process_watch.hpp), the others
# learn it from their failure notice or their node's failure record -- that
# a survivor waiting longer than the wait report interval (2 s in the test)
# said whom it waits for, and that /dev/shm holds no copse segment of the
# job afterwards.
#
# Open MPI's runtime ends the whole job about a second after a process dies
# by a signal unless orte_abort_on_non_zero_status is 0 (`--abort on`, its
# default, keeps it; `--abort off`, the default here, which resilient
# applications set, turns it off). With it off the survivors run on, and
# what is checked is copse's own detection. With it on, each survivor must
# either have said so before the runtime ended it, or have been ended by the
# runtime (a rank not yet waiting when the runtime acts), whose message then
# names the dead rank, its pid and host, the whole job within 15 s
# (start-up, the death, 10 s). (With it off mpirun still ends the job when
# the first survivor leaves without MPI_Finalize, so survivors wait a little
# before they leave; mpirun's own exit status is not checked.)
#
# With `direct`: copse_mpi_tests death-direct, np 3 on one node, where the
# allreduce is small enough for the direct reduce (its waits must notice the
# death as the link engine's do).
#
#   tests/mpi/process_death.sh PROGRAM [direct] [--np N] [--victim R]
#                              [--ranks-per-node K] [--abort on|off]
#
# --np, --victim and --ranks-per-node go to the program (K 0: the hosts' own
# nodes). Across hosts, MPI_LAUNCHER (tests/mpi/mpirun.sh) runs the job;
# /dev/shm is then checked by the caller (scripts/multihost-tests.sh).
set -uo pipefail
program=$1
shift
mode=death np=4 victim=1 abort=off args=()
while (($#)); do
  case $1 in
    direct) mode=death-direct np=3 ;;
    --np) np=$2; shift ;;
    --victim) victim=$2; args+=(--victim "$2"); shift ;;
    --ranks-per-node) args+=(--ranks-per-node "$2"); shift ;;
    --abort) abort=$2; shift ;;
    *) echo "process_death: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
mca=()
[[ $abort == off ]] && mca=(--mca orte_abort_on_non_zero_status 0)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# (mpirun.sh: this host, or MPI_LAUNCHER's hosts.)
start=$SECONDS
timeout 60 bash "$(dirname "$0")/mpirun.sh" "$np" "${mca[@]}" "$program" "$mode" "${args[@]}" >"$out" 2>&1
elapsed=$((SECONDS - start))
bad=0
fail() {
  echo "process_death: $*"
  bad=1
}
read -r dead_pid dead_host < <(sed -n "s/^copse-death: pid \([0-9]*\) is MPI rank $victim on host \(.*\)$/\1 \2/p" "$out")
[[ -n "${dead_pid:-}" ]] || fail "MPI rank $victim never said its pid and host"
for ((rank = 0; rank < np; rank++)); do
  ((rank == victim)) && continue
  line=$(grep "^copse-death: MPI rank $rank " "$out")
  if [[ -z "$line" && $abort == on ]] &&
    grep -q "process rank $victim with PID ${dead_pid:-?} on node ${dead_host:-?} exited on signal 9" "$out"; then
    # Ended by the runtime before it noticed (it was not yet waiting): the
    # runtime's message names the dead rank and host.
    echo "MPI rank $rank: ended by Open MPI's runtime, which names MPI rank $victim on $dead_host"
    ((elapsed < 15)) || fail "the job took $elapsed s to end"
    continue
  fi
  if [[ -z "$line" ]]; then
    fail "MPI rank $rank said nothing"
    continue
  fi
  echo "$line"
  [[ "$line" == *"failed after"* ]] || fail "MPI rank $rank did not fail"
  [[ "$line" == *"MPI rank $victim (pid ${dead_pid:-?} on host ${dead_host:-?})"*" has died"* ]] ||
    fail "MPI rank $rank's error does not name the dead process"
  seconds=$(sed -n 's/.* failed after \([0-9.]*\) s:.*/\1/p' <<<"$line")
  [[ -n "$seconds" ]] && awk -v s="$seconds" 'BEGIN { exit !(s < 10) }' || fail "MPI rank $rank took $seconds s"
  # Past the report interval a wait says whom it waits for.
  if awk -v s="${seconds:-0}" 'BEGIN { exit !(s >= 2.5) }' && ! grep -q "still blocked" "$out"; then
    fail "MPI rank $rank waited $seconds s and no wait said whom it waits for"
  fi
done
if [[ -z ${MPI_LAUNCHER:-} ]]; then
  for pid in $(sed -n 's/^copse-death: pid \([0-9]*\) is MPI rank [0-9]* .*$/\1/p' "$out"); do
    leftovers=$(ls /dev/shm 2>/dev/null | grep "^copse-$pid-")
    [[ -z "$leftovers" ]] || fail "left in /dev/shm: $leftovers"
  done
fi
if ((bad)); then
  echo "---- mpirun's output"
  cat "$out"
  exit 1
fi
echo "process_death: every survivor named MPI rank $victim (pid $dead_pid on host $dead_host) within 10 s," \
  "or was ended by Open MPI's runtime (abort on exit $abort)"
