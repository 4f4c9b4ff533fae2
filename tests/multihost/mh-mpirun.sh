#!/usr/bin/env bash
# mpirun across mh's hosts (../shared/multihost/mh, a network namespace per
# host): the launcher the MPI tests take in place of mpirun (MPI_LAUNCHER in
# tests/mpi/mpirun.sh and tests/pmpi/run.sh). Takes mpirun's options as
# those scripts pass them and runs `mh run` with the layout of the
# environment:
#
#   MH          the mh script
#   MH_HOSTS    hosts and ranks on each, e.g. "h1:2 h2:2" (rank order by host)
#   MH_MAP_BY   node or slot (default slot)
#   MH_CPUS     cores of each host, e.g. "h1=0 h2=1" (default: not pinned)
#   MH_TIMEOUT  seconds before the job is killed (default 120)
#
#   mh-mpirun.sh -np N [-x NAME[=VALUE]]... [--mca K V]... PROGRAM [ARGS...]
#
# -np must equal the ranks of MH_HOSTS. Hosts start with a clean
# environment: COPSE_*, ASAN_OPTIONS and UBSAN_OPTIONS go to the ranks, as
# mpirun on one host would have let them inherit. mh itself runs with
# --oversubscribe --bind-to none and yield-when-idle, over shared memory
# within a host and TCP between hosts; --oversubscribe, --bind-to and
# --mca btl given here are dropped (mh's own stand). Exits 2 on bad usage.
set -euo pipefail
die() { echo "mh-mpirun: $*" >&2; exit 2; }
[[ -x ${MH:-} ]] || die "MH must name the mh script (have '${MH:-}')"
[[ -n ${MH_HOSTS:-} ]] || die "MH_HOSTS is not set"
np="" opts=()
while (($#)); do
  case $1 in
    -np | -n) np=$2; shift 2 ;;
    -x) opts+=(-x "$2"); shift 2 ;;
    --mca)
      [[ $2 == btl ]] || opts+=(--mca "$2" "$3")
      shift 3 ;;
    --oversubscribe) shift ;;
    --bind-to) shift 2 ;;
    :) die "MPMD jobs (':') are not supported" ;;
    -*) die "unknown mpirun option $1" ;;
    *) break ;;
  esac
done
(($#)) || die "no program"
slots=0
for hs in $MH_HOSTS; do slots=$((slots + ${hs#*:})); done
[[ $np == "$slots" ]] || die "-np ${np:-(none)}, but MH_HOSTS='$MH_HOSTS' holds $slots ranks"
for name in $(compgen -e); do
  case $name in COPSE_* | ASAN_OPTIONS | UBSAN_OPTIONS) opts+=(-x "$name") ;; esac
done
exec "$MH" run --hosts "$MH_HOSTS" --map-by "${MH_MAP_BY:-slot}" ${MH_CPUS:+--cpus "$MH_CPUS"} \
  --timeout "${MH_TIMEOUT:-120}" "${opts[@]}" -- "$@"
