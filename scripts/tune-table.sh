#!/usr/bin/env bash
# Measures a decision table (mpi.table; config/decision_table.hpp) on this
# machine and writes it: scripts/bench-mpi.sh times Open MPI's own
# collectives and copse's (with no table, so copse serves every call it can)
# side by side, and scripts/decision-table.py turns the ratios into rows --
# copse where it was at least as fast by median, the MPI library elsewhere.
#
# Usage: scripts/tune-table.sh [--out FILE] [--configs "np2 np4 np4-vn2"] [--rounds N]
#                              [--sizes LIST] [--threshold R] [--from CSV]
#   --out        the table (default ./copse-table.toml; use it with
#                COPSE_MPI_TABLE=FILE, or copy it over config/default_decisions.toml
#                to make it the built-in table)
#   --configs    bench-mpi.sh's configurations (default "np2 np4 np4-vn2")
#   --rounds     rounds per configuration (default 2)
#   --sizes      bytes per process (default 8 B to 16 MiB by powers of 4)
#   --threshold  tuned/copse by median at or above which copse serves (default
#                0.95: within the noise of a shared machine, no slower)
#   --from CSV   skip the measurement: a bench-mpi.sh CSV made with COPSE_MPI_TABLE=none
# Exits non-zero if the benchmark fails or a result was wrong.
set -euo pipefail
cd "$(dirname "$0")/.."
out=./copse-table.toml configs="np2 np4 np4-vn2" rounds=2 threshold=0.95 from=""
sizes="8,32,128,512,2KiB,8KiB,32KiB,128KiB,512KiB,2MiB,8MiB,16MiB"
need_value() { (($# >= 2)) || { echo "tune-table.sh: $1 needs a value (try --help)" >&2; exit 2; }; }
while (($#)); do
  case "$1" in
    --out) need_value "$@"; out=$2; shift ;;
    --configs) need_value "$@"; configs=$2; shift ;;
    --rounds) need_value "$@"; rounds=$2; shift ;;
    --sizes) need_value "$@"; sizes=$2; shift ;;
    --threshold) need_value "$@"; threshold=$2; shift ;;
    --from) need_value "$@"; from=$2; shift ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "tune-table.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
command="scripts/tune-table.sh --configs \"$configs\" --rounds $rounds --sizes $sizes --threshold $threshold"
if [[ -z $from ]]; then
  report=build/tune-$(date +%Y%m%d-%H%M%S).txt
  COPSE_MPI_TABLE=none scripts/bench-mpi.sh --configs "$configs" --rounds "$rounds" --sizes "$sizes" --out "$report"
  from=${report%.txt}.csv
else
  command="scripts/tune-table.sh --from $from --threshold $threshold"
fi
python3 scripts/decision-table.py "$from" --threshold "$threshold" --out "$out" --command "$command ($(date -u +%F))"
echo "decision table: $out (check it with: COPSE_MPI_TABLE=$out copse config)"
