#!/usr/bin/env bash
# Builds a sanitizer preset and runs its tests; any sanitizer report fails the
# run (the sanitizers are told to stop at the first report, and a stopped test
# is a failed test).
#
#   scripts/sanitize.sh asan   AddressSanitizer + UndefinedBehaviorSanitizer
#                              (Debug -O1), the default test suite but for
#                              the labels 'slow', 'source' (checks of the
#                              source text), 'install' (packaging), 'cli'
#                              (the copse program's contract scripts) and
#                              'exhaustive' (sweeps over every p and the
#                              further MPI shapes)
#   scripts/sanitize.sh tsan   ThreadSanitizer (Debug -O1), the tests named
#                              "concurrency: ..." (threads and processes) but
#                              for the label 'exhaustive'
#
# Either builds only the programs its tests run (CMake target
# copse_test_programs; tsan: copse_tests), not the copse program.
#
# Build trees: build/asan, build/tsan (CMakePresets.json). Run
# scripts/install-deps.sh first on a fresh machine (scripts/test.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
case "${1:-}" in
  asan | tsan) preset=$1 ;;
  -h | --help) usage; exit 0 ;;
  *) echo "sanitize.sh: expected asan or tsan, got '${1:-}' (try --help)" >&2; exit 2 ;;
esac

# halt_on_error: the first report ends the process with a failure status.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"

cmake --preset "$preset" >/dev/null
if [[ $preset == asan ]]; then
  cmake --build --preset asan --parallel "$(nproc)" --target copse_test_programs
  ctest --preset asan
else
  cmake --build --preset tsan --parallel "$(nproc)" --target copse_tests
  ctest --preset tsan
fi
