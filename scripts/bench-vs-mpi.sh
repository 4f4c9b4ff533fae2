#!/usr/bin/env bash
# copse's allreduce among T threads of one process against Open MPI's
# MPI_Allreduce among T processes on this machine, side by side in one run
# (issue 3, "Benchmark"). For each T the three sides run back to back, in
# several rounds with the order rotated, and the report pools the rounds: on a
# shared, noisy machine the ratios measured together matter more than the
# absolute times.
#
#   copse  bench_threads_allreduce: Team of T threads, comm.allreduce; the same
#          threads also measure the streaming bound (memcpy and a += b)
#   tuned  mpirun -np T mpi_allreduce                          (Open MPI's default)
#   han    mpirun -np T --mca coll_han_priority 100 mpi_allreduce
#
# float32 sum on both sides; sizes 8 B and 16 B .. 64 MiB in powers of 4;
# mpicroscope method (barrier, time each call, slowest rank per repetition,
# min and median over repetitions). Every size's result is verified.
# Open MPI uses --mca btl self,vader (shared memory); with more ranks than
# cores it runs --oversubscribe --bind-to none (otherwise its default binding,
# one core per rank, which copse's threads mirror).
#
# Usage: scripts/bench-vs-mpi.sh [--quick] [--threads "2 4 8"] [--rounds N] [--out FILE]
#                                [--copse-args "ARGS"]
#   --quick    five sizes, few repetitions, one round (a smoke run of a minute or so)
#   --copse-args  extra options for bench_threads_allreduce, e.g. "--bind none"
#              (threads unbound even when T <= cores) or "--barrier std"
#   --out      the report (default build/bench-vs-mpi-<date>.txt); the raw
#              per-repetition times go next to it as .tsv, each run's own
#              output as .log
# Exits non-zero if a build or run fails or any result is wrong.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=""
threads="2 4 8"
rounds=""
out=""
copse_args=""
while (($#)); do
  case "$1" in
    --quick) quick="--quick" ;;
    --threads) threads="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --out) out="$2"; shift ;;
    --copse-args) copse_args="$2"; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-vs-mpi.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -n "$rounds" ]] || rounds=$([[ -n "$quick" ]] && echo 1 || echo 2)

cmake --preset release >/dev/null
if ! cmake --build --preset release --target bench_threads_allreduce mpi_allreduce; then
  echo "bench-vs-mpi.sh: build failed (CMake defines mpi_allreduce only when it finds MPI for C++," >&2
  echo "  and bench_threads_allreduce only once runtime/comm.cpp, the Comm implementation, exists)" >&2
  exit 1
fi
bin=build/release

stamp=$(date +%Y%m%d-%H%M%S)
out=${out:-build/bench-vs-mpi-$stamp.txt}
mkdir -p "$(dirname "$out")"
raw="${out%.txt}.tsv"
log="${out%.txt}.log"
: >"$raw"
: >"$log"

if [[ $(id -u) == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
cores=$(nproc)
failed=0

mpirun_t() {  # mpirun_t T [mpirun options...] -- program [args...]
  local t=$1
  shift
  local placement=()
  ((t > cores)) && placement=(--oversubscribe --bind-to none)
  mpirun -np "$t" "${placement[@]}" --mca btl self,vader "$@"
}

mpi_run() {  # mpi_run T label [mca args...]
  local t=$1 label=$2
  shift 2
  mpirun_t "$t" "$@" "$bin/mpi_allreduce" $quick --label "$label" --raw "$raw"
}

run() {  # run T side: one side's sweep over every size, output to the log
  local t=$1 side=$2 rc=0 start=$SECONDS
  {
    echo "== T=$t $side"
    case "$side" in
      copse) "$bin/bench_threads_allreduce" $quick $copse_args --threads "$t" --raw "$raw" ;;
      tuned) mpi_run "$t" tuned ;;
      han) mpi_run "$t" han --mca coll_han_priority 100 ;;
    esac
  } >>"$log" 2>&1 || rc=$?
  printf '  T=%d %-5s %4ds  %s\n' "$t" "$side" $((SECONDS - start)) "$([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc, see $log)")"
  ((rc == 0)) || failed=1
}

main() {
  echo "# copse allreduce (T threads) vs Open MPI MPI_Allreduce (T processes), float32 sum"
  echo "# date:     $(date -Is)"
  echo "# commit:   $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (working tree differs)')"
  echo "# machine:  $(hostname), $cores cores, $(lscpu | sed -n 's/^Model name: *//p'), $(free -g | awk '/^Mem:/{print $2}') GiB"
  echo "# load:     $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
  echo "# mpi:      $(mpirun --version | head -1), --mca btl self,vader"
  echo "# threads:  $threads; rounds: $rounds${quick:+; quick}${copse_args:+; copse: $copse_args}"
  # Does HAN accept a communicator whose ranks all share one node?
  local probe
  probe=$(mpirun_t 2 --mca coll_han_priority 100 --mca coll_base_verbose 10 \
            "$bin/mpi_allreduce" --quick --max-bytes 8 2>&1 |
            grep -m1 'coll:han:comm_query (0/MPI_COMM_WORLD)' || true)
  if [[ "$probe" == *disqualif* ]]; then
    echo "# han:      Open MPI's HAN refuses single-node communicators (\"${probe#*: }\"), so the han"
    echo "#           column is MPI_Allreduce with HAN asked for but tuned serving it: a second tuned sample."
  else
    echo "# han:      ${probe:-no HAN selection message seen}"
  fi
  echo
  for t in $threads; do
    for ((r = 0; r < rounds; r++)); do
      local sides=(copse tuned han)
      for ((k = 0; k < 3; k++)); do run "$t" "${sides[(k + r) % 3]}"; done  # rotate the order per round
    done
  done
  "$bin/bench_threads_allreduce" --report "$raw" || failed=1
  echo
  echo "raw times: $raw; each run's output: $log"
  if ((failed)); then
    echo "bench-vs-mpi.sh: a run FAILED or a result was wrong" >&2
    return 1
  fi
}

set +e
main 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
echo "report: $out"
exit "$status"
