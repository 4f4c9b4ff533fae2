#!/usr/bin/env bash
# Runs a copse MPI test program under Open MPI's mpirun on this machine:
#   tests/mpi/mpirun.sh NP PROGRAM [ARGS...]
# As root (CI, containers) mpirun needs its two opt-in variables. More ranks
# than cores: --oversubscribe, and mpi_yield_when_idle so that polling ranks
# give their core away (Open MPI PR 8998). Shared memory and self only: the
# tests are about one host -- unless MPI_LAUNCHER names a command that stands
# in for mpirun and takes its options (tests/multihost/mh-mpirun.sh runs the
# job across several hosts); it then gets "-np NP PROGRAM ARGS...".
set -euo pipefail
np=$1
shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Built with AddressSanitizer (the asan preset): Open MPI keeps allocations
# until exit by design, many of them from components it has already unloaded
# (LeakSanitizer cannot name them, so no suppression can match them); leak
# checking stays on for copse's own code in the thread and emulator tests,
# and every other AddressSanitizer check stays on here.
# (ldd's output whole, not piped into grep -q: under pipefail, grep's early
# exit could fail ldd with SIGPIPE and the test would see no ASan.)
libraries=$(ldd "$1" 2>/dev/null || true)
if [[ $libraries == *libasan* ]]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
if [[ -n ${MPI_LAUNCHER:-} ]]; then
  read -ra launcher <<<"$MPI_LAUNCHER"
  exec "${launcher[@]}" -np "$np" "$@"
fi
exec mpirun -np "$np" --oversubscribe --bind-to none --mca btl self,vader --mca mpi_yield_when_idle 1 "$@"
