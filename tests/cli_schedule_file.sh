#!/usr/bin/env bash
# Schedule files on the command line (README, "Schedule files"): the 8W
# example files verify, simulate and emulate with --schedule-file and through
# the configuration (collectives.allreduce = "file:PATH"); every bad file
# exits 2 with one line naming FILE:LINE -- a cycle, a missing rank, a rank
# that receives the same block twice, a syntax error, the wrong rank count.
#
# Run by CTest with COPSE=<path to the copse binary>; by hand:
#   COPSE=build/default/copse bash tests/cli_schedule_file.sh

CLI_TEST_NAME=cli_schedule_file
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
examples="$(cd "$(dirname "${BASH_SOURCE[0]}")/../examples/schedules" && pwd)"

for sub in sim emulate verify; do expect 0 $sub --help && stdout_has "--schedule-file"; done

# ------------------------------------------------------------------ the 8W files
for f in "$examples"/8w-*.txt; do
  expect 0 verify --schedule-file "$f" && stdout_has "proven: allreduce file:$f on 32 ranks"
  expect 0 verify --schedule-file "$f" --collective bcast --root 9 --blocks 3 && stdout_has "proven: bcast"
  expect 0 sim --schedule-file "$f" --bytes 4KiB --ranks-per-node 8 --json
  json_check 'd["ranks"] == 32 and d["time_ps"] > 0' "sim $f"
  expect 0 emulate --schedule-file "$f" --nodes 4 --ranks-per-node 8 --bytes 4KiB --op affine --dtype int16 \
    --repetitions 1 --json
  json_check 'd["verified"] and d["matches_simulator"] and d["ranks"] == 32' "emulate $f"
done
expect 0 sim --schedule-file "$examples/recursive-doubling-4.txt" --bytes 1KiB && stdout_has "allreduce file:"

# Through the configuration: the name file:PATH wherever an algorithm name goes.
four="$examples/8w-groups-of-four.txt"
expect 0 sim --algorithm "file:$four" --ranks 32 --bytes 1KiB
expect COPSE_COLLECTIVES_ALLREDUCE="file:$four" 0 config --json
json_check "s['collectives.allreduce']['value'] == 'file:$four'" "config keeps file:PATH"
printf 'collectives.bcast = "file:%s"\n' "$tmp/missing.txt" >"$tmp/bad.toml"
expect 2 config --config "$tmp/bad.toml" && stderr_has "$tmp/missing.txt: cannot open"

# ------------------------------------------------------------------ bad files
bad() {  # bad NAME LINE WHAT TEXT: the file NAME holding TEXT exits 2 with NAME:LINE: WHAT...
  printf '%b' "$4" >"$tmp/$1"
  expect 2 verify --schedule-file "$tmp/$1" && stderr_has "$tmp/$1:$2: $3"
  expect 2 emulate --schedule-file "$tmp/$1" --nodes 2 --ranks-per-node 2 --bytes 64 --repetitions 1 &&
    stderr_has "$tmp/$1:$2: $3"
}
bad cycle.txt 5 "cycle: 2 -> 3 -> 2" 'ranks 4\ntree\n0: 1\n2: 3\n3: 2\n'
bad missing.txt 1 "rank 3 is missing" 'ranks 4\ntree\n0: 1 2\n'
bad twice.txt 3 "rank 0 receives from rank 1 twice" 'ranks 4\ntree\n0: 1 2 1 3\n'
bad twoparents.txt 4 "rank 2 already sends to rank 0" 'ranks 4\ntree\n0: 1 2 3\n1: 2\n'
bad syntax.txt 2 "unknown keyword 'tre'" 'ranks 4\ntre\n'
bad garbage.txt 1 "unknown keyword" '\x01\xff\x00\n'
bad steps-twice.txt 6 "the schedule is wrong: rank 0 step 1 combines" \
  'ranks 4\ncollective allreduce\nsteps\n0: send 1, recv 1 combine\n1: send 0, recv 0 combine\n0: recv 1 combine\n1: send 0\n2: send 3, recv 3 combine\n3: send 2, recv 2 combine\n'
bad deadlock.txt 4 "the schedule is wrong: deadlock" \
  'ranks 4\ncollective allreduce\nsteps\n0: recv 1 combine\n1: recv 0 combine\n2:\n3:\n'
# The wrong rank count for the run: the `ranks` line is to blame.
expect 2 emulate --schedule-file "$four" --nodes 2 --ranks-per-node 8 --bytes 64 --repetitions 1 &&
  stderr_has "$four:6: the schedule is written for 32 ranks, but is run on 16"
expect 2 sim --schedule-file "$four" --ranks 31 --bytes 64 && stderr_has "$four:6:"
expect 2 verify --schedule-file "$tmp/nonexistent.txt" && stderr_has "cannot open"
expect 2 verify --schedule-file "$tmp" && stderr_has "not a regular file"
mkfifo "$tmp/fifo" && expect 2 verify --schedule-file "$tmp/fifo" && stderr_has "not a regular file"  # no wait
expect 2 verify --schedule-file "$four" --collective allgather && stderr_has "serves allreduce, reduce, bcast"
expect 2 verify --schedule-file "$four" --algorithm ring && stderr_has "not both"
expect 2 verify --ranks 4 && stderr_has "--schedule-file"
# A tree out of rank order serves commutative operators only.
printf 'ranks 3\ntree\n0: 2 1\n' >"$tmp/shuffled.txt"
expect 0 emulate --schedule-file "$tmp/shuffled.txt" --nodes 3 --ranks-per-node 1 --bytes 64 --repetitions 1
expect 2 emulate --schedule-file "$tmp/shuffled.txt" --nodes 3 --ranks-per-node 1 --bytes 64 --repetitions 1 \
  --op affine --dtype int16 && stderr_has "needs a commutative operator"

finish
