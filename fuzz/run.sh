#!/usr/bin/env bash
# Builds fuzz/schedule_file_fuzzer.cpp with clang's libFuzzer (AddressSanitizer
# and UBSan on) and runs it for a bounded time, seeded with
# examples/schedules; any crash, sanitizer report or hang fails. Exits 77
# (CTest: skipped) when clang or its libFuzzer runtime is not installed
# (scripts/install-deps.sh installs clang-14 and libclang-rt-14-dev).
#
#   bash fuzz/run.sh [WORKDIR [SECONDS]]     (default: /tmp/copse-fuzz, 20)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/copse-fuzz}
seconds=${2:-20}
mkdir -p "$work/corpus"

cxx=$(command -v clang++-14 || command -v clang++ || true)
if [[ -z "$cxx" ]]; then
  echo "fuzz: clang++ is not installed (scripts/install-deps.sh installs clang-14): skipped"
  exit 77
fi
# libFuzzer is a compiler-rt library; probe for it with an empty target.
probe="$work/probe"
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe.cpp"
if ! "$cxx" -fsanitize=fuzzer "$probe.cpp" -o "$probe" 2>"$probe.log"; then
  echo "fuzz: $cxx cannot link libFuzzer (libclang-rt-14-dev): skipped"
  exit 77
fi

# The parser and the two small files it needs from common/: built in seconds.
binary="$work/schedule_file_fuzzer"
sources=("$src/fuzz/schedule_file_fuzzer.cpp" "$src/algorithms/schedule_file.cpp" "$src/common/error.cpp"
  "$src/common/schedule.cpp")
newest=$(ls -t "${sources[@]}" "$src/algorithms/schedule_file.hpp" "$binary" 2>/dev/null | head -1)
if [[ "$newest" != "$binary" ]]; then
  # One compiler per source, side by side, then the link.
  flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$src")
  pids=() objects=()
  for source in "${sources[@]}"; do
    object="$work/$(basename "$source" .cpp).o"
    objects+=("$object")
    "$cxx" "${flags[@]}" -c "$source" -o "$object" &
    pids+=($!)
  done
  built=1
  for pid in "${pids[@]}"; do wait "$pid" || built=0; done
  ((built)) && "$cxx" "${flags[@]}" "${objects[@]}" -o "$binary" ||
    { echo "fuzz: the fuzz target does not build" >&2; exit 1; }
fi

cp "$src"/examples/schedules/*.txt "$work/corpus/"
# -max_total_time bounds the run; -timeout fails any single input that runs
# longer than 5 s (a hang); -rss_limit_mb fails runaway memory.
"$binary" "$work/corpus" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=1024 -max_len=4096 \
  -print_final_stats=1 -artifact_prefix="$work/" 2>"$work/log"
status=$?
tail -n 12 "$work/log"
if [[ $status -ne 0 ]]; then
  echo "fuzz: FAILED (status $status); the input is in $work/crash-* / timeout-* / oom-*" >&2
  exit 1
fi
echo "fuzz: no finding in ${seconds} s"
