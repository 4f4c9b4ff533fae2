#!/usr/bin/env bash
# Quick start, part two: install what is missing, build the default preset
# (RelWithDebInfo, warnings as errors), and run every test through CTest: the
# Catch2 suites and the command line's contract (tests/cli_contract.sh).
# Exits non-zero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake --preset default
cmake --build --preset default --parallel "$(nproc)"
ctest --preset default
