#!/usr/bin/env bash
# copse's interposition library against Open MPI's own collectives, on one
# unmodified MPI program, side by side in one run (issue 7, item 7). The same
# binary, bench/mpi_collectives.cpp, runs twice per configuration and round:
#
#   tuned  mpirun -np P ... mpi_collectives                      (Open MPI's default, coll/tuned)
#   copse  mpirun -np P ... -x LD_PRELOAD=libcopse_mpi.so mpi_collectives
#
# ten collectives (allreduce, reduce, bcast, barrier, allgather,
# reduce_scatter_block, reduce_scatter, scatter, gather, alltoall), float32 (sum where an operator applies), 8 B and
# 16 B .. 64 MiB in powers of 4, mpicroscope method (barrier, time each call,
# slowest rank per repetition, min and median over repetitions), every result
# verified. Rounds run with the order of the two sides rotated and are pooled:
# on a shared, noisy machine the ratios measured together matter more than the
# absolute times. The report gives per configuration, collective and size both
# sides' min and median and the ratio tuned/copse (above 1: copse is faster),
# and the calls copse served and passed to Open MPI (its COPSE_MPI_STATS lines).
#
# Configurations (--configs): npP is P processes on this machine; npP-vnK is
# the same with copse splitting them into virtual nodes of K consecutive ranks
# (COPSE_HIERARCHY_RANKS_PER_NODE=K: transfers between virtual nodes go over
# MPI point to point, so the inter-node path runs; the tuned side ignores the
# setting; a copse that does not know it yet skips the configuration, saying
# so); hNxK is N real hosts of K processes each, made by
# ../shared/multihost/mh (a network namespace per host, TCP between hosts;
# needs root), each host's processes pinned to one core, round robin
# (h1=0 h2=1 h3=0 on 2 cores), as a batch system's cpuset pins a job; the
# hosts are made once for the run and removed at its end. Open MPI uses
# --mca btl self,vader; with more ranks than cores also --oversubscribe
# --bind-to none --mca mpi_yield_when_idle 1.
#
# Usage: scripts/bench-mpi.sh [--quick] [--configs "np2 np4 np8 np4-vn2"] [--rounds N]
#                             [--collectives LIST] [--forms LIST] [--roots LIST] [--sizes LIST] [--timeout SECONDS]
#                             [--sync barrier|p2p]
#                             [--out FILE] [--no-copse] [--noise] [--paired] [--han] [--against LIB]
#   --quick    three sizes (8 B, 16 KiB, 1 MiB) and a tenth of the time per
#              size: a smoke run of about a minute once built
#   --configs  the configurations, default "np2 np4 np8 np4-vn2"
#   --rounds   rounds per configuration (default 2); the sides' order alternates
#   --collectives  those to time, e.g. "scatter,gather,alltoall" (default: all)
#   --forms    call forms, e.g. "blocking,nonblocking" (MPI_I<collective> +
#              MPI_Wait; persistent: MPIX_<collective>_init, then MPI_Start +
#              MPI_Wait); default blocking
#   --roots    roots of reduce, bcast, scatter and gather, e.g. "0,last" (default 0)
#   --sync     how the ranks line up before each timed call (mpi_collectives
#              --sync): barrier, MPI_Barrier -- on the copse side copse's own,
#              whose exit order moves time into or out of the next call -- or
#              p2p, point-to-point messages the same on every side (default
#              barrier)
#   --sizes    bytes per rank, e.g. "8,16KiB,4MiB" (default: the full sweep)
#   --timeout  seconds one mpirun may take before it is killed and counted as
#              failed (default 1800; --quick 300)
#   --out      the report (default build/bench-mpi-<date>.txt); next to it
#              .jsonl (every run's results, with per-repetition times), .csv
#              (the pooled figures), .log (each run's output) and, for copse,
#              .stats-<config>.jsonl (COPSE_MPI_STATS: calls served and passed)
#   --no-copse both sides plain Open MPI ("tuned" and "tuned2"), without
#              libcopse_mpi.so: the ratios then show the noise floor
#   --noise    a further side, "tuned2": plain Open MPI again, so that every
#              cell's tuned/tuned2 (the noise floor of that cell, in the same
#              run) stands beside tuned/copse; under oversubscription the
#              small sizes' medians swing by 2x between launches of the same
#              program, and a ratio below 0.95 means something only where
#              tuned/tuned2 stays near 1
#   --paired   the tuned (and tuned2) sides timed inside the copse side's
#              own runs instead of runs of their own: each call the program
#              makes through MPI_ (copse's under LD_PRELOAD) alternates with
#              the same call through PMPI_ (Open MPI's own, which copse does
#              not replace; mpi_collectives --native), so both sides meet the
#              same launch -- on this VM copse's copies through shared
#              memory ran 2-4x faster or slower from launch to launch while
#              Open MPI's held, and runs of their own compared such launches
#              as if they were the code. Rounds are
#              then launches of the copse side; with --no-copse, tuned and
#              tuned2 share launches. han and before stay runs of their own
#   --han      a further side, "han": plain Open MPI with --mca
#              coll_han_priority 100 (its hierarchical component; Open MPI
#              4.1 declines it for a communicator of one host, so on the npP
#              configurations it runs as tuned does)
#   --against  a further side, "before": the same program with LD_PRELOAD=LIB,
#              another build of libcopse_mpi.so (e.g. an older commit's, built
#              in a worktree with the release preset), with copse's environment:
#              a regression run, this build against that one in the same
#              rotation; the report's tuned/before beside tuned/copse
# COPSE_* variables in the environment reach the copse side, e.g.
# COPSE_MPI_SERVE=allreduce,reduce,bcast,allgather,reduce_scatter_block times
# copse's collectives between Open MPI's barriers (the timing loop's barrier
# is otherwise copse's, and how far apart it lets ranks leave is charged to
# the next call).
# It builds what it needs with the release preset (build/release) and stops if
# libcopse_mpi.so cannot be built (CMake defines it only when it finds MPI).
# Exits non-zero if a build or run fails, a run times out, or a result is wrong.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=""
configs="np2 np4 np8 np4-vn2"
rounds=2
roots=""
collectives=""
forms=""
sync=""
sizes=""
timeout_s=""
out=""
copse=1
noise=0
paired=0
han=0
against=""
need_value() { (($# >= 2)) || { echo "bench-mpi.sh: $1 needs a value (try --help)" >&2; exit 2; }; }
while (($#)); do
  case "$1" in
    --quick) quick="--quick" ;;
    --configs) need_value "$@"; configs="$2"; shift ;;
    --rounds) need_value "$@"; rounds="$2"; shift ;;
    --roots) need_value "$@"; roots="$2"; shift ;;
    --collectives) need_value "$@"; collectives="$2"; shift ;;
    --forms) need_value "$@"; forms="$2"; shift ;;
    --sync) need_value "$@"; sync="$2"; shift ;;
    --sizes) need_value "$@"; sizes="$2"; shift ;;
    --timeout) need_value "$@"; timeout_s="$2"; shift ;;
    --out) need_value "$@"; out="$2"; shift ;;
    --no-copse) copse=0 ;;
    --noise) noise=1 ;;
    --paired) paired=1 ;;
    --han) han=1 ;;
    --against) need_value "$@"; against="$2"; shift ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-mpi.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench-mpi.sh: --rounds wants a whole number >= 1, not '$rounds'" >&2; exit 2; }
[[ -z "$timeout_s" || "$timeout_s" =~ ^[1-9][0-9]*$ ]] || { echo "bench-mpi.sh: --timeout wants seconds, not '$timeout_s'" >&2; exit 2; }
if [[ -n "$against" ]]; then
  [[ -f "$against" ]] || { echo "bench-mpi.sh: --against: no library '$against'" >&2; exit 2; }
  ((copse)) || { echo "bench-mpi.sh: --against compares two builds of copse; it cannot go with --no-copse" >&2; exit 2; }
  against=$(realpath "$against")
fi
[[ -z "$sync" || "$sync" == barrier || "$sync" == p2p ]] || { echo "bench-mpi.sh: --sync wants barrier or p2p, not '$sync'" >&2; exit 2; }
timeout_s=${timeout_s:-$([[ -n "$quick" ]] && echo 300 || echo 1800)}
hosts_needed=0
for c in $configs; do
  [[ "$c" =~ ^(np[1-9][0-9]*(-vn[1-9][0-9]*)?|h([1-9][0-9]?)x[1-9][0-9]*)$ ]] ||
    { echo "bench-mpi.sh: bad configuration '$c' (npP, npP-vnK or hNxK)" >&2; exit 2; }
  [[ -n "${BASH_REMATCH[3]}" ]] && ((BASH_REMATCH[3] > hosts_needed)) && hosts_needed=${BASH_REMATCH[3]}
done

bin=build/release
lib=$PWD/$bin/libcopse_mpi.so
targets=(mpi_collectives)
((copse)) && targets+=(copse_mpi copse_cli)
cmake --preset release >/dev/null
if ! cmake --build --preset release --target "${targets[@]}"; then
  if ((copse)); then
    echo "bench-mpi.sh: cannot build ${targets[*]}. CMake defines mpi_collectives and copse_mpi" >&2
    echo "  (libcopse_mpi.so) only when it finds MPI: see 'cmake --preset release'. Without the" >&2
    echo "  library, --no-copse runs both sides on plain Open MPI." >&2
  else
    echo "bench-mpi.sh: cannot build mpi_collectives (CMake defines it only when it finds MPI)" >&2
  fi
  exit 1
fi
if ((copse)) && [[ ! -f "$lib" ]]; then
  echo "bench-mpi.sh: $lib was not built" >&2
  exit 1
fi

stamp=$(date +%Y%m%d-%H%M%S)
out=${out:-build/bench-mpi-$stamp.txt}
mkdir -p "$(dirname "$out")"
out=$(realpath "$out")  # absolute: the MPI processes write the stats file next to it
base="${out%.txt}"
raw="$base.jsonl"
log="$base.log"
: >"$raw"
: >"$log"
rm -f "$base".stats-*.jsonl "$base".before-stats-*.jsonl

if [[ $(id -u) == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
cores=$(nproc)
failed=0
sides=(tuned copse)
((copse)) || sides=(tuned tuned2)
((copse && noise)) && sides+=(tuned2)
# --paired: the library's sides are timed within another side's launches.
natives=""
if ((paired)); then
  if ((copse)); then
    sides=(copse) natives=tuned
    ((noise)) && natives+=",tuned2"
  else
    sides=(tuned) natives=tuned2
  fi
fi
((han)) && sides+=(han)
[[ -n "$against" ]] && sides+=(before)

# hNxK configurations run on mh's hosts (made once, removed at the end
# whatever happens), through the launcher the multi-host tests use.
mh_mpirun=$PWD/tests/multihost/mh-mpirun.sh
if ((hosts_needed)); then
  export MH=${MH:-$(realpath -m "$PWD/../shared/multihost/mh")}
  [[ -x $MH ]] || { echo "bench-mpi.sh: hNxK needs the mh script (no $MH; set MH=PATH)" >&2; exit 2; }
  "$MH" down >/dev/null 2>&1 || true
  trap '"$MH" down >/dev/null 2>&1 || true' EXIT
  "$MH" up "$hosts_needed" >/dev/null || { echo "bench-mpi.sh: mh up $hosts_needed failed" >&2; exit 2; }
fi

# Does this copse know the virtual-node setting? (copse refuses a COPSE_*
# variable it does not know, so the copse side of npP-vnK would fail.)
vn_known=1
if ((copse)) && ! COPSE_HIERARCHY_RANKS_PER_NODE=2 "$bin/copse" config >/dev/null 2>&1; then
  vn_known=0
fi

run() {  # run CONFIG SIDE ROUND: one side's sweep, its output to the log
  local config=$1 side=$2 np=${1#np} vn="" rc=0 start=$SECONDS
  [[ "$np" == *-vn* ]] && { vn=${np#*-vn}; np=${np%%-vn*}; }
  local mpirun=(mpirun)
  if [[ "$config" =~ ^h([0-9]+)x([0-9]+)$ ]]; then  # mh's hosts, each pinned to a core
    local n=${BASH_REMATCH[1]} k=${BASH_REMATCH[2]} h
    np=$((n * k))
    MH_HOSTS="" MH_CPUS=""
    for ((h = 1; h <= n; h++)); do MH_HOSTS+="h$h:$k " MH_CPUS+="h$h=$(((h - 1) % cores)) "; done
    export MH_HOSTS MH_CPUS MH_TIMEOUT=$timeout_s
    mpirun=("$mh_mpirun")
  fi
  mpirun+=(-np "$np" --mca btl "self,vader")
  # (mh runs its hosts oversubscribed and yielding itself, and refuses the
  # parameter twice.)
  ((np > cores)) && [[ "$config" != h* ]] && mpirun+=(--oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
  [[ "$side" == han ]] && mpirun+=(--mca coll_han_priority 100)
  if [[ "$side" == copse || "$side" == before ]]; then
    local preload=$lib stats=$base.stats-$config.jsonl
    [[ "$side" == before ]] && preload=$against stats=$base.before-stats-$config.jsonl
    mpirun+=(-x "LD_PRELOAD=$preload" -x "COPSE_MPI_STATS=$stats")
    [[ -n "$vn" ]] && mpirun+=(-x "COPSE_HIERARCHY_RANKS_PER_NODE=$vn")
  fi
  local program=("$bin/mpi_collectives" --label "$side" --config "$config" --json "$raw")
  [[ -n "$natives" && ( "$side" == copse || "$side" == tuned ) ]] && program+=(--native "$natives")
  [[ -n "$quick" ]] && program+=(--quick)
  [[ -n "$roots" ]] && program+=(--roots "$roots")
  [[ -n "$collectives" ]] && program+=(--collectives "$collectives")
  [[ -n "$forms" ]] && program+=(--forms "$forms")
  [[ -n "$sync" ]] && program+=(--sync "$sync")
  [[ -n "$sizes" ]] && program+=(--sizes "$sizes")
  {
    echo "== $config $side round $3: ${mpirun[*]} ${program[*]}"
    timeout --kill-after=10 "$timeout_s" "${mpirun[@]}" "${program[@]}"
  } >>"$log" 2>&1 || rc=$?
  local verdict=ok
  ((rc == 124)) && verdict="TIMED OUT after ${timeout_s}s (see $log)"
  ((rc != 0 && rc != 124)) && verdict="FAILED (exit $rc, see $log)"
  printf '  %-9s %-6s round %d %5ds  %s\n' "$config" "$side" "$3" $((SECONDS - start)) "$verdict"
  ((rc == 0)) || failed=1
}

main() {
  echo "# mpi_collectives: Open MPI's collectives (tuned) vs the same program with LD_PRELOAD=libcopse_mpi.so (copse)"
  ((copse)) || echo "# --no-copse: both sides plain Open MPI (tuned, tuned2): an A/A run, the ratios are noise"
  ((copse && noise)) && echo "# --noise: a side tuned2, plain Open MPI again: tuned/tuned2 is each cell's noise floor"
  ((paired)) && echo "# --paired: $natives timed in the ${sides[0]} side's own processes (PMPI_, call by call interleaved)"
  ((han)) && echo "# --han: a side han, Open MPI's HAN (--mca coll_han_priority 100)"
  [[ -n "$against" ]] && echo "# --against: a side before, LD_PRELOAD=$against"
  ((hosts_needed)) && echo "# hosts:    hNxK on mh's hosts (TCP between them), each host pinned to one core"
  echo "# date:     $(date -Is)"
  echo "# commit:   $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (working tree differs)')"
  echo "# machine:  $(hostname), $cores cores, $(lscpu | sed -n 's/^Model name: *//p'), $(free -g | awk '/^Mem:/{print $2}') GiB"
  echo "# load:     $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
  echo "# mpi:      $(mpirun --version | head -1), --mca btl self,vader"
  echo "# configs:  $configs; rounds: $rounds${quick:+; quick}${roots:+; roots $roots}${sizes:+; sizes $sizes}${forms:+; forms $forms}${sync:+; sync $sync}"
  local env_copse
  env_copse=$(env | grep '^COPSE_' | tr '\n' ' ' || true)
  [[ -n "$env_copse" ]] && echo "# copse environment (the copse side inherits it): $env_copse"
  echo
  for config in $configs; do
    if [[ "$config" == *-vn* ]] && ((copse && !vn_known)); then
      echo "  $config: skipped: this copse does not know COPSE_HIERARCHY_RANKS_PER_NODE (virtual nodes) yet"
      continue
    fi
    for ((r = 0; r < rounds; r++)); do
      for ((k = 0; k < ${#sides[@]}; k++)); do run "$config" "${sides[(k + r) % ${#sides[@]}]}" $((r + 1)); done
    done
  done
  local stats=()
  ((copse)) && stats=(--stats "$base".stats-*.jsonl)
  [[ -e "${stats[1]:-/nonexistent}" ]] || stats=()
  "$bin/mpi_collectives" --report "$raw" --csv "$base.csv" "${stats[@]}" || failed=1
  echo
  echo "raw results (JSON lines): $raw; pooled figures (CSV): $base.csv; each run's output: $log"
  if ((failed)); then
    echo "bench-mpi.sh: a run FAILED or TIMED OUT, or a result was wrong" >&2
    return 1
  fi
}

set +e
main 2>&1 | tee "$out"
status=${PIPESTATUS[0]}
echo "report: $out"
exit "$status"
