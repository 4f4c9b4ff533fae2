#!/usr/bin/env bash
# Installs a copse build tree into a temporary prefix and builds programs
# against it from outside the source tree, as a user would (the CTest test
# "install: ..."):
#   tests/install/run.sh BUILD_DIR [CXX_COMPILER]
# The compiler (default c++) and $CXXFLAGS should be the build's: a sanitizer
# build's library links only into programs built with the same flags. $CMAKE
# names the cmake to use (default: the one on PATH).
# 1. cmake --install BUILD_DIR --prefix P (P a fresh temporary folder);
# 2. tests/install/CMakeLists.txt with find_package(copse): consumer
#    (copse::copse), a source including every installed header and, when the
#    package has copse::mpi, mpi_consumer, run under mpirun -np 2;
# 3. the same programs built with pkg-config (copse.pc, copse-mpi.pc) instead
#    of CMake, and run.
# The consumers check their results. No network; P is removed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [CXX_COMPILER]}" && pwd)
cxx=${2:-c++}
cmake=${CMAKE:-cmake}
work=$(mktemp -d "${TMPDIR:-/tmp}/copse-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
step() { printf 'install test: %s\n' "$*"; }
# The programs read copse's configuration: none from the caller's environment
# or a ./copse.toml.
for name in $(compgen -e); do
  case "$name" in COPSE_*) unset "$name" ;; esac
done
export COPSE_CONFIG=
# Under AddressSanitizer (the asan preset) Open MPI's allocations, never freed
# by design, are not ours to report: no leak check for the MPI programs.
mpirun_2() { ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" bash "$here/../mpi/mpirun.sh" 2 "$@"; }

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }
[[ -x "$prefix/bin/copse" ]] || { echo "install test: no bin/copse under the prefix" >&2; exit 1; }
"$prefix/bin/copse" algorithms >/dev/null

config=$(find "$prefix" -path '*/cmake/copse/copseConfig.cmake')
[[ -n "$config" ]] || { echo "install test: no copseConfig.cmake under the prefix" >&2; exit 1; }
libdir=${config%/cmake/copse/copseConfig.cmake}
mpi=OFF
[[ -f "$libdir/cmake/copse/copseMpiTargets.cmake" ]] && mpi=ON
components=""
[[ $mpi == ON ]] && components=" COMPONENTS mpi"
step "find_package(copse$components): $here"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# CMAKE_BUILD_TYPE stays empty: the consumer's flags are $CXXFLAGS alone, as for the pkg-config build.
"$cmake" -S "$here" -B "$work/consumer" "${generator[@]}" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCOPSE_CONSUMER_MPI=$mpi >"$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/consumer" -j "$(nproc)" >"$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/consumer/consumer" "$work/scratch.toml"
if [[ $mpi == ON ]]; then
  step "mpirun -np 2 mpi_consumer"
  mpirun_2 "$work/consumer/mpi_consumer"
fi

step "pkg-config: $cxx consumer.cpp \$(pkg-config --cflags --libs copse)"
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
[[ "$(pkg-config --variable=libdir copse)" -ef "$libdir" ]] ||
  { echo "install test: copse.pc's libdir is $(pkg-config --variable=libdir copse), not $libdir" >&2; exit 1; }
# shellcheck disable=SC2046,SC2086  # flags are meant to be split
"$cxx" -std=c++20 ${CXXFLAGS:-} "$here/consumer.cpp" -o "$work/consumer_pc" $(pkg-config --cflags --libs copse)
"$work/consumer_pc" "$work/scratch.toml"
if [[ $mpi == ON ]]; then
  step "pkg-config: $cxx mpi_consumer.cpp \$(pkg-config --cflags --libs copse-mpi), mpirun -np 2"
  # shellcheck disable=SC2046,SC2086
  "$cxx" -std=c++20 ${CXXFLAGS:-} "$here/mpi_consumer.cpp" -o "$work/mpi_consumer_pc" \
    $(pkg-config --cflags --libs copse-mpi) -Wl,-rpath,"$libdir"
  mpirun_2 "$work/mpi_consumer_pc"
fi
step "ok"
