#!/usr/bin/env bash
# Measures a decision table (mpi.table; config/decision_table.hpp) on this
# machine with the release build: builds copse, libcopse_mpi.so and the
# benchmark mpi_collectives (build/release), then runs `copse tune` with the
# arguments given (see `build/release/copse tune --help`; the rules are in
# config/tune.hpp). For the table copse ships, measure on a quiet machine
# and merge into it:
#
#   scripts/tune-table.sh --out config/default_decisions.toml --shapes np2,np4,np4-vn2,np8
#
# (merged: a shape measured again replaces its rows, and the rows without a
# shape -- written by hand, with a comment each -- stay first; --replace
# would write the file anew without them).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target copse_cli copse_mpi mpi_collectives
exec build/release/copse tune "$@"
