#!/usr/bin/env bash
# Quick start, part two: install what is missing, build the default preset
# (RelWithDebInfo, warnings as errors), and run the tests through CTest: the
# Catch2 suites and the command line's contract scripts (tests/cli_*.sh).
# By default every test except those labelled `slow` (the emulated
# acceptance matrix's full p sweep and its 2^20+3 column); --full runs those
# too. Exits non-zero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
usage: scripts/test.sh [--full]

Installs missing packages, builds the `default` preset and runs CTest.
  (no option)  the default suite: every test except the `slow` label
               (ctest --preset default)
  --full       every test, the `slow` label included (ctest --preset full)
  -h, --help   print this help and exit
EOF
}

preset=default
for arg in "$@"; do
  case "$arg" in
    --full) preset=full ;;
    -h | --help) usage; exit 0 ;;
    *) echo "scripts/test.sh: unknown argument '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default --parallel "$(nproc)"
ctest --preset "$preset"
