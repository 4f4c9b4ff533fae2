#!/usr/bin/env bash
# Hosts that share one machine's cores without knowing it (issue 17,
# item 2): mh's hosts not pinned (each sees every core of the machine), as
# containers or network namespaces on one machine do. Each host counted its
# own ranks against the cores its mask shows, found that they fit, and its
# waits spun for 2 ms on cores the other host's ranks needed: an 8-byte
# MPI_Allreduce loop at 2 x 2 took 2.0-5.4 ms per call under copse against
# 31-57 us plain. The set-up now counts every rank of the machine (the
# kernel's boot id, common/cores.hpp), whatever its host. The loop
# (tests/mpi/allreduce_loop.c), plain and under LD_PRELOAD=libcopse_mpi.so,
# side by side in one run (two rounds, the better of each): copse may cost
# at most a generous factor times Open MPI's time.
#   MPI_LAUNCHER=tests/multihost/mh-mpirun.sh MH_HOSTS="h1:2 h2:2" \
#     tests/multihost/shared_cores.sh LIBCOPSE_MPI ALLREDUCE_LOOP NP
set -uo pipefail
lib=$1 program=$2 np=$3
mpirun_sh="$(dirname "$0")/../mpi/mpirun.sh"
factor=4
libraries=$(ldd "$lib" 2>/dev/null || true)
if [[ $libraries == *libasan* || $libraries == *libtsan* ]]; then
  echo "shared cores: built with a sanitizer, whose costs the timings would measure: skipped"
  exit 77
fi
[[ -z ${MH_CPUS:-} ]] || { echo "shared cores: the hosts must not be pinned (MH_CPUS='$MH_CPUS')" >&2; exit 2; }

# run SIDE: the loop's time per call in us.
run() {
  local preload=(); [[ $1 == copse ]] && preload=(-x LD_PRELOAD="$lib")
  local out
  out=$(bash "$mpirun_sh" "$np" "${preload[@]}" "$program" 2>&1) ||
    { echo "shared cores: the loop failed ($1):" >&2; echo "$out" >&2; return 1; }
  sed -n 's/^allreduce-loop: \([0-9.]*\) us per call$/\1/p' <<<"$out"
}

declare -A best
for sides in "plain copse" "copse plain"; do
  for side in $sides; do
    t=$(run "$side") || exit 1
    [[ -n $t ]] || { echo "shared cores: no time from the loop ($side)" >&2; exit 1; }
    echo "$side: $t us per call"
    if [[ -z ${best[$side]:-} ]] || awk -v a="$t" -v b="${best[$side]}" 'BEGIN { exit !(a < b) }'; then
      best[$side]=$t
    fi
  done
done
echo "best: plain ${best[plain]} us, copse ${best[copse]} us per call (at most $factor times plain)"
awk -v c="${best[copse]}" -v p="${best[plain]}" -v f="$factor" 'BEGIN { exit !(c <= f * p) }' ||
  { echo "shared cores: copse ${best[copse]} us per call, more than $factor times Open MPI's ${best[plain]}" >&2; exit 1; }
