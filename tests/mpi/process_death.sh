#!/usr/bin/env bash
# A process of a node dies in the middle of a collective (copse_mpi_tests
# death: np 4 on virtual nodes of 3, MPI rank 1 killed with SIGKILL while it
# waits in an allreduce). Checks that every other process fails within 10 s
# with an error naming the dead process (its MPI rank and pid) -- its node
# peers find it dead themselves (pidfd), the process on the other node learns
# it from their failure notice -- and that /dev/shm holds no copse segment of
# the job afterwards.
#
# Open MPI's runtime ends the whole job when a process dies by a signal
# unless orte_abort_on_non_zero_status is 0: with it, the survivors run on,
# and what is checked is copse's own detection. (mpirun still ends the job
# when the first survivor leaves without MPI_Finalize, so survivors wait a
# little before they leave; mpirun's own exit status is not checked.)
#
# With `direct`: copse_mpi_tests death-direct, np 3 on one node, where the
# allreduce is small enough for the direct reduce (its waits must notice the
# death as the link engine's do).
#   tests/mpi/process_death.sh PATH/TO/copse_mpi_tests [direct]
set -uo pipefail
program=$1
mode=death np=4 survivors="0 2 3"
if [[ "${2:-}" == direct ]]; then
  mode=death-direct np=3 survivors="0 2"
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# (mpirun.sh: this host, or MPI_LAUNCHER's hosts.)
timeout 60 bash "$(dirname "$0")/mpirun.sh" "$np" --mca orte_abort_on_non_zero_status 0 "$program" "$mode" >"$out" 2>&1
bad=0
fail() {
  echo "process_death: $*"
  bad=1
}
dead_pid=$(sed -n 's/^copse-death: pid \([0-9]*\) is MPI rank 1$/\1/p' "$out")
[[ -n "$dead_pid" ]] || fail "rank 1 never said its pid"
for rank in $survivors; do
  line=$(grep "^copse-death: MPI rank $rank " "$out")
  if [[ -z "$line" ]]; then
    fail "MPI rank $rank said nothing"
    continue
  fi
  echo "$line"
  [[ "$line" == *"failed after"* ]] || fail "MPI rank $rank did not fail"
  [[ "$line" == *"(MPI rank 1, pid $dead_pid) has died"* ]] || fail "MPI rank $rank's error does not name the dead process"
  seconds=$(sed -n 's/.* failed after \([0-9.]*\) s:.*/\1/p' <<<"$line")
  [[ -n "$seconds" ]] && awk -v s="$seconds" 'BEGIN { exit !(s < 10) }' || fail "MPI rank $rank took $seconds s"
done
for pid in $(sed -n 's/^copse-death: pid \([0-9]*\) is MPI rank [0-9]*$/\1/p' "$out"); do
  leftovers=$(ls /dev/shm 2>/dev/null | grep "^copse-$pid-")
  [[ -z "$leftovers" ]] || fail "left in /dev/shm: $leftovers"
done
if ((bad)); then
  echo "---- mpirun's output"
  cat "$out"
  exit 1
fi
echo "process_death: every survivor named MPI rank 1 (pid $dead_pid) within 10 s; nothing of copse left in /dev/shm"
