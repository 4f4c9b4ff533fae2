#!/usr/bin/env bash
# Installs the Debian packages copse needs to build, test and run, skipping
# those already installed (so a prepared machine needs no network).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libhwloc-dev hwloc libtbb-dev libboost-dev libboost-context-dev  # Boost.Context: the emulator's fibers
  catch2 libopenmpi-dev openmpi-bin
  gfortran  # the Fortran test of libcopse_mpi.so (tests/pmpi/fortran.f90)
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev libbenchmark-dev clang-format
  universal-ctags  # tests/sizes.sh: function lengths
  graphviz python3 gnuplot-nox  # gnuplot: the studies' SVG plots
  clang-14 libclang-rt-14-dev  # libFuzzer for fuzz/run.sh (CTest fuzz_schedule_file)
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
"${sudo[@]}" apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
