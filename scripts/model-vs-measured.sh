#!/usr/bin/env bash
# How far to trust a study (issue 17, item 5): for every collective and size
# an MPI run measured, the time copse's cost model predicts for the plan the
# MPI Comm runs there, beside the measured median, and their ratio.
#
# The measured side is copse's rows of a pooled CSV: `copse tune`'s
# WORK/pooled.csv, or scripts/bench-mpi.sh's CSV (label "copse" by default).
# The predicted side is `copse emulate` of the same call on the same shape
# (NODES x RANKS_PER_NODE, the runtime's configured form and algorithms,
# blocks auto) under the model FILE -- the virtual time, which equals the
# simulator's -- so the plan is the planner's, as the Comms run it.
# Sizes are the benchmark's (mpi_collectives, IMB's counting): per rank; an
# allgather's is each rank's block; a reduce_scatter_block's is the whole
# vector, so its block (the emulator's --bytes) is a 1/P share.
#
# A model for real hosts comes from `copse calibrate --output FILE` (one
# host's level) and, across two hosts, the inter-node level:
#   mh run --hosts "h1:1 h2:1" -- build/release/copse_calibrate_mpi --output FILE
#
# Usage: scripts/model-vs-measured.sh --model FILE --measured CSV --nodes N --ranks-per-node K
#                                     [--label copse] [--config NAME] [--copse PATH]
# Prints one row per (collective, size) and, last, the median and the worst
# ratio predicted/measured (worst: furthest from 1 either way). Exit 2 for bad
# input, 1 when an emulation fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

usage() { sed -n '/^# Usage:/,/^# input/p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "model-vs-measured: $*" >&2; exit 2; }

model="" measured="" nodes="" rpn="" label=copse config="" copse=$root/build/release/copse
while (($#)); do
  case $1 in
    --model) model=${2:?}; shift 2 ;;
    --measured) measured=${2:?}; shift 2 ;;
    --nodes) nodes=${2:?}; shift 2 ;;
    --ranks-per-node) rpn=${2:?}; shift 2 ;;
    --label) label=${2:?}; shift 2 ;;
    --config) config=${2:?}; shift 2 ;;
    --copse) copse=${2:?}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -r $model ]] || die "--model: cannot read '$model'"
[[ -r $measured ]] || die "--measured: cannot read '$measured'"
[[ $nodes =~ ^[1-9][0-9]*$ ]] || die "--nodes: a positive whole number, not '$nodes'"
[[ $rpn =~ ^[1-9][0-9]*$ ]] || die "--ranks-per-node: a positive whole number, not '$rpn'"
[[ -x $copse ]] || die "cannot run '$copse' (build the release preset, or give --copse PATH)"
head -1 "$measured" | grep -q '^config,np,collective,root,bytes,label,' ||
  die "$measured:1: not a pooled CSV (config,np,collective,root,bytes,label,...)"
ranks=$((nodes * rpn))

# The configured form and algorithm of each collective, as the runtime reads
# them (the model file, COPSE_*): one `copse config`, read once.
declare -A algorithm_of
form=""
while read -r key value _; do
  case $key in
    hierarchy.form) form=$value ;;
    collectives.*) algorithm_of[${key#collectives.}]=$value ;;
  esac
done < <(COPSE_CONFIG="$model" "$copse" config)

rows=$(awk -F, -v label="$label" -v config="$config" -v np="$ranks" \
  'NR > 1 && $6 == label && (config == "" || $1 == config) && $2 == np { print $3, ($4 == "" ? "-" : $4), $5, $10, $11 }' "$measured")
[[ -n $rows ]] || die "$measured: no rows labelled '$label' with np $ranks${config:+ and config $config}"

printf '%-22s %10s %14s %14s %14s %10s\n' collective bytes "predicted us" "median us" "min us" pred/med
ratios=()
while read -r collective root bytes min_s median_s; do
  c=$collective emulated=$bytes
  case $collective in
    reduce_scatter_block | reduce_scatter) c=reduce_scatter emulated=$(((bytes / 4 / ranks > 0 ? bytes / 4 / ranks : 1) * 4)) ;;
    barrier) emulated=0 ;;
  esac
  args=(emulate --nodes "$nodes" --ranks-per-node "$rpn" --collective "$c" --bytes "$emulated"
    --algorithm "${algorithm_of[$c]}" --form "$form" --config "$model" --repetitions 1 --json)
  [[ $root != - ]] && args+=(--root "$root")
  ps=$("$copse" "${args[@]}" | awk -F'[:,]' '/"virtual_time_ps"/ { gsub(/ /, "", $2); print $2 }') ||
    { echo "model-vs-measured: copse ${args[*]} failed" >&2; exit 1; }
  [[ -n $ps ]] || { echo "model-vs-measured: copse ${args[*]} printed no virtual time" >&2; exit 1; }
  line=$(awk -v ps="$ps" -v med="$median_s" -v min="$min_s" -v c="$collective" -v b="$bytes" 'BEGIN {
    p = ps * 1e-12; printf "%-22s %10d %14.2f %14.2f %14.2f %10.3f", c, b, p * 1e6, med * 1e6, min * 1e6, p / med }')
  echo "$line"
  ratios+=("${line##* }")
done <<<"$rows"

printf '%s\n' "${ratios[@]}" | sort -g | awk '
  { r[NR] = $1; d = ($1 > 1 ? $1 : 1 / $1); if (d > worst_d) { worst_d = d; worst = $1 } }
  END { m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
        printf "predicted/measured over %d calls: median %.3f, worst %.3f\n", NR, m, worst }'
