#!/usr/bin/env bash
# Measures a decision table (mpi.table; config/decision_table.hpp) on this
# machine with the release build: builds copse, libcopse_mpi.so and the
# benchmark mpi_collectives (build/release), then runs `copse tune` with the
# arguments given (see `build/release/copse tune --help`; the rules are in
# config/tune.hpp). For the table copse ships, measure every shape at once and
# write it anew on a quiet machine:
#
#   scripts/tune-table.sh --out config/default_decisions.toml --replace
#
# (without --replace an existing table is merged: a shape measured again
# replaces its rows, and rows without a shape -- the table shipped before
# copse tune wrote one -- stay first).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target copse_cli copse_mpi mpi_collectives
exec build/release/copse tune "$@"
