#!/usr/bin/env bash
# The command line's contract, checked by running the binary: exit codes
# (0 success, 1 failed run, 2 bad input, with exactly one line on stderr for
# every failure), JSON keys and a few values that tie the subcommands
# together (sizes parse as documented, the emulator's virtual time equals the
# simulator's, every registered algorithm simulates and verifies).
#
# Run by CTest with COPSE=<path to the copse binary>; by hand:
#   COPSE=build/default/copse bash tests/cli_contract.sh
#
# Exit status 1 is only reachable through a genuinely failing run (a wrong
# result, an unproven schedule, a timeout), which a correct build cannot be
# made to produce on demand; the cases below cover 0 and 2.

CLI_TEST_NAME=cli_contract
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

# ------------------------------------------------------------------ help
expect 0 --help && for sub in algorithms sim emulate verify demo; do stdout_has "$sub"; done
stdout_has "Exit status"
expect 0 sim --help && for opt in --algorithm --ranks --bytes --collective --root --blocks --alpha --beta \
  --gamma --ports --ranks-per-node --intra-alpha --intra-beta --json; do stdout_has "$opt"; done
expect 0 emulate --help && for opt in --nodes --ranks-per-node --algorithm --bytes --collective --root --blocks \
  --dtype --op --intra-alpha --intra-beta --inter-alpha --inter-beta --gamma --ports --repetitions --timeout \
  --json; do stdout_has "$opt"; done
expect 0 verify --help && for opt in --algorithm --ranks --collective --root --blocks --count --json; do
  stdout_has "$opt"
done
expect 0 demo --help && for opt in --nodes --ranks-per-node --bytes --dtype --op --repetitions --timeout \
  --model --gantt --json; do stdout_has "$opt"; done
expect 0 algorithms --help

expect 2                       # no subcommand
expect 2 frobnicate && stderr_has "frobnicate"
expect 2 --no-such-flag

# ------------------------------------------------------------------ algorithms
expect 0 algorithms --json
json_check 'isinstance(d, list) and len(d) > 0' "algorithms --json is a non-empty list"
json_check 'all(set(a) >= {"collective", "name", "description", "needs_commutative", "pipelined"} for a in d)' \
  "every algorithm has collective, name, description, needs_commutative, pipelined"
json_check 'all(isinstance(a["needs_commutative"], bool) and isinstance(a["pipelined"], bool) for a in d)' \
  "needs_commutative and pipelined are booleans"
json_check 'all(a["collective"] in ("allreduce", "reduce", "bcast", "barrier", "allgather", "reduce_scatter", "scatter",
  "gather", "alltoall") for a in d)' "known collectives"
json_check 'any(a["collective"] == "allreduce" for a in d)' "at least one allreduce algorithm"
json_check 'len({(a["collective"], a["name"]) for a in d}) == len(d)' "(collective, name) pairs are unique"
cp "$out" "$tmp/algorithms.json"

# Every registered algorithm: in the table, simulates, and verifies.
registered=$(python3 -c 'import json,sys
for a in json.load(open(sys.argv[1])):
    print(a["collective"], a["name"], int(a["needs_commutative"]))' "$tmp/algorithms.json")
expect 0 algorithms
while read -r collective name _; do stdout_has "$name"; done <<<"$registered"
while read -r collective name _; do
  expect 0 sim --collective "$collective" --algorithm "$name" --ranks 7 --root 2 --bytes 1000 --blocks 3 --json &&
    json_check 'd["time"] > 0 and d["steps"] > 0 and d["messages"] > 0' "sim $collective $name"
  expect 0 sim --collective "$collective" --algorithm "$name" --ranks 1 --bytes 100
  expect 0 verify --collective "$collective" --algorithm "$name" --ranks 7 --root 2 --blocks 3 &&
    stdout_has "proven"
  expect 0 verify --collective "$collective" --algorithm "$name" --ranks 6 --root 5 --blocks 2 --count 13 --json &&
    json_check 'd["proven"] is True and d["count"] == 13 and d["blocks"] == 2 and d["ranks"] == 6'
done <<<"$registered"
# Scatter, gather and alltoall (issue 19): flat schedules; the selection picks among them flat.
expect 0 sim --collective alltoall --algorithm auto --ranks 64 --bytes 8 --json &&
  json_check 'd["algorithm"] == "bruck"' "a small alltoall selects bruck"
expect 0 sim --collective gather --algorithm auto --ranks 16 --ranks-per-node 4 --root 3 --bytes 1000 --json &&
  json_check 'd["algorithm"] == "binomial"' "a gather on nodes is chosen flat"
for collective in scatter gather alltoall; do
  expect 0 emulate --collective "$collective" --algorithm auto --nodes 2 --ranks-per-node 2 --root 3 --bytes 40 \
    --repetitions 1 --json &&
    json_check 'd["verified"] is True and d["matches_simulator"] is True' "emulate $collective on two nodes, planned flat"
done
allreduce=$(awk '$1 == "allreduce" { print $2 }' <<<"$registered")
pipelined=$(python3 -c 'import json,sys
print(next(a["name"] for a in json.load(open(sys.argv[1])) if a["collective"] == "allreduce" and a["pipelined"]))' \
  "$tmp/algorithms.json")
noncommutative_ok=$(awk '$1 == "allreduce" && $3 == 0 { print $2; exit }' <<<"$registered")
commutative_only=$(awk '$1 == "allreduce" && $3 == 1 { print $2; exit }' <<<"$registered")

# ------------------------------------------------------------------ sim
expect 0 sim --algorithm "$pipelined" --ranks 8 --bytes 1MiB --json
json_check 'set(d) >= {"algorithm", "collective", "ranks", "bytes", "blocks", "time", "steps", "slowest_rank", "messages"}' \
  "sim --json keys"
json_check 'd["algorithm"] == "'"$pipelined"'" and d["collective"] == "allreduce" and d["ranks"] == 8' "sim echoes its input"
json_check 'd["bytes"] == 1048576 and d["blocks"] == 1' "1MiB is 1048576 bytes; default 1 block"
json_check '0 <= d["slowest_rank"] < 8 and d["steps"] > 0 and d["messages"] > 0' "sim counts"
json_check 'd["time"] > 0 and abs(d["time"] - d["time_ps"] * 1e-12) <= 1e-15 * max(1, d["time"])' "time is seconds"
json_check 'd["alpha"] == 1.5e-6 and d["beta"] == 1e-10 and d["gamma"] == 2.5e-11 and d["ports"] == "bi"' \
  "default cost model: alpha 1.5us, beta 0.1ns, gamma 0.025ns, bidirectional"
base_time=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["time_ps"])' "$out")

expect 0 sim --algorithm "$pipelined" --ranks 8 --bytes 1MiB --alpha 10us --json &&
  json_check 'd["alpha"] == 1e-05 and d["time_ps"] > '"$base_time" "a larger alpha costs more"
expect 0 sim --algorithm "$pipelined" --ranks 8 --bytes 1MiB --gamma 0 --beta 0 --alpha 1s --timing hockney \
  --nic-beta 0 --json &&
  json_check 'd["time_ps"] > 0 and d["time_ps"] % 10**12 == 0' "alpha-only model counts whole seconds"
expect 0 sim --algorithm "$pipelined" --ranks 8 --bytes 1e6 --json && json_check 'd["bytes"] == 1000000' "1e6 bytes"
expect 0 sim --algorithm "$pipelined" --ranks 8 --bytes 4KB --json && json_check 'd["bytes"] == 4000' "4KB is 4000 bytes"
expect 0 sim --algorithm "$pipelined" --ranks 8 --bytes 1.5MiB --json && json_check 'd["bytes"] == 1572864' "1.5MiB"
expect 0 sim --algorithm "$pipelined" --ranks 8 --bytes 1MiB --blocks 8 --json && json_check 'd["blocks"] == 8' "--blocks 8"
expect 0 sim --algorithm "$pipelined" --ranks 8 --bytes 1MiB --blocks auto --json &&
  json_check 'd["blocks"] >= 1 and d["blocks_requested"] == "auto"' "--blocks auto"
expect 0 sim --algorithm "$pipelined" --ranks 8 --bytes 1MiB --ports uni --json && json_check 'd["ports"] == "uni"'
expect 0 sim --algorithm "$pipelined" --ranks 8 --bytes 64KiB --ranks-per-node 4 --intra-alpha 0.2us --json &&
  json_check 'd["ranks_per_node"] == 4 and d["intra_alpha"] == 2e-7 and d["alpha"] == 1.5e-6'
expect 0 sim --algorithm "$pipelined" --ranks 1000 --bytes 1MiB --blocks auto
stdout_has "time"

# --algorithm auto: the selection's choice, named in "algorithm" with "selected": true. Issue 8's acceptance
# for one node of T ranks: at 1 MiB within 1.25x the 2(T-1)/T m traffic bound, at 8 B ceil(log2 T)+1 steps.
for t in 16 32 64; do
  expect 0 sim --algorithm auto --ranks $t --ranks-per-node $t --bytes 1MiB --json &&
    json_check 'd["selected"] is True and d["max_bytes_moved_per_rank"] <= 1.25 * 2 * ('$t' - 1) / '$t' * 1048576' \
      "sim auto, one node of $t, 1 MiB: near the traffic bound"
  expect 0 sim --algorithm auto --ranks $t --ranks-per-node $t --bytes 8 --json &&
    json_check 'd["selected"] is True and d["steps"] <= ('$t' - 1).bit_length() + 1' "sim auto, one node of $t, 8 B: few steps"
done
expect 0 sim --algorithm auto --ranks 8 --bytes 1KiB && stdout_has "(selected)"
expect 0 sim --algorithm "$pipelined" --ranks 8 --bytes 1KiB --json && json_check 'd["selected"] is False'
expect 0 emulate --nodes 1 --ranks-per-node 4 --repetitions 1 --algorithm auto --bytes 4KiB --op affine --dtype int16 --json &&
  json_check 'd["selected"] is True and d["verified"] is True' "emulate auto with a non-commutative operator"
expect 0 algorithms --selection --json &&
  json_check 'len(d["selection"]) == 180 and all(r["algorithm"] for r in d["selection"])' "the selection table"

# Bad input: exit 2, one line.
expect 2 sim --algorithm no-such-algorithm --ranks 4 --bytes 1KiB && stderr_has "no-such-algorithm"
expect 2 sim --algorithm "$pipelined" --collective scatterv --ranks 4 --bytes 1KiB && stderr_has "scatterv"
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1XB && stderr_has "1XB"
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes -5 && stderr_has "negative"
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1.5 && stderr_has "1.5"
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes ""
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 4KiBs
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 99999999999999999999
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1KiB --alpha 3parsecs && stderr_has "3parsecs"
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1KiB --beta -1ns
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1KiB --gamma fast
expect 2 sim --algorithm "$pipelined" --ranks 0 --bytes 1KiB
expect 2 sim --algorithm "$pipelined" --ranks -2 --bytes 1KiB
expect 2 sim --algorithm "$pipelined" --ranks abc --bytes 1KiB
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1KiB --blocks 0
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1KiB --blocks -1
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1KiB --blocks many
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1KiB --ports sideways
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1KiB --ranks-per-node -1
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1KiB --bogus
expect 2 sim --algorithm "$pipelined" --ranks 4 --bytes 1KiB stray
expect 2 sim --algorithm "$pipelined" --ranks 4
expect 2 sim --ranks 4 --bytes 1KiB
reduce_algorithm=$(awk '$1 == "reduce" { print $2; exit }' <<<"$registered")
if [ -n "$reduce_algorithm" ]; then
  expect 2 sim --collective reduce --algorithm "$reduce_algorithm" --ranks 4 --root 4 --bytes 1KiB
  expect 2 sim --collective reduce --algorithm "$reduce_algorithm" --ranks 4 --root -1 --bytes 1KiB
fi

# ------------------------------------------------------------------ emulate
small=(--nodes 2 --ranks-per-node 2 --repetitions 2)
expect 0 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB --json
json_check 'set(d) >= {"algorithm", "nodes", "ranks_per_node", "ranks", "bytes", "count", "dtype", "op", "blocks",
                       "verified", "virtual_time", "wall_time", "repetitions"}' "emulate --json keys"
json_check 'set(d["wall_time"]) >= {"min", "median"}' "wall_time has min and median"
json_check 'd["nodes"] == 2 and d["ranks_per_node"] == 2 and d["ranks"] == 4 and d["repetitions"] == 2' "emulate shape"
json_check 'd["bytes"] == 4096 and d["count"] == 1024 and d["dtype"] == "int32" and d["op"] == "sum"' \
  "default int32 sum: 4KiB is 1024 elements"
json_check 'd["verified"] is True and d["virtual_time"] > 0 and 0 < d["wall_time"]["min"] <= d["wall_time"]["median"]'
json_check 'd["matches_simulator"] is True' "emulator's virtual time equals the simulator's"
json_check 'd["blocks"] >= 1 and d["blocks_requested"] == "auto"' "emulate defaults to --blocks auto"

expect 0 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB && stdout_has "verified"
for name in $allreduce; do
  expect 0 emulate --nodes 3 --ranks-per-node 2 --repetitions 1 --algorithm "$name" --bytes 3000 --blocks 3 --json &&
    json_check 'd["verified"] is True and d["count"] == 750 and d["matches_simulator"] is True' "emulate $name"
done
expect 0 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB --dtype double --op max --json &&
  json_check 'd["count"] == 512 and d["dtype"] in ("double", "float64") and d["op"] == "max" and d["verified"] is True'
expect 0 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB --ports uni --blocks 4 --json &&
  json_check 'd["verified"] is True and d["blocks"] == 4'
if [ -n "$noncommutative_ok" ]; then
  expect 0 emulate "${small[@]}" --algorithm "$noncommutative_ok" --bytes 4KiB --op affine --json &&
    json_check 'd["verified"] is True and d["op"] == "affine"' "affine (non-commutative) on $noncommutative_ok"
fi
if [ -n "$reduce_algorithm" ]; then
  expect 0 emulate "${small[@]}" --collective reduce --root 3 --algorithm "$reduce_algorithm" --bytes 4KiB --json &&
    json_check 'd["verified"] is True'
fi

# The simulator's --ranks-per-node and intra/inter costs mean what the
# emulator's do: with one-byte elements both engines see the same schedule.
expect 0 emulate --nodes 3 --ranks-per-node 2 --repetitions 1 --algorithm "$pipelined" --bytes 999 --blocks 5 \
  --dtype uint8 --op max --intra-alpha 0.3us --intra-beta 0.07ns --inter-alpha 2us --inter-beta 0.2ns \
  --gamma 0.03ns --json
emulated_ps=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["virtual_time_ps"])' "$out")
expect 0 sim --algorithm "$pipelined" --ranks 6 --ranks-per-node 2 --bytes 999 --blocks 5 --intra-alpha 0.3us \
  --intra-beta 0.07ns --alpha 2us --beta 0.2ns --gamma 0.03ns --json &&
  json_check 'd["time_ps"] == '"${emulated_ps:-0}" "sim and emulate agree on the same model ($emulated_ps ps)"

expect 2 emulate "${small[@]}" --algorithm no-such-algorithm --bytes 4KiB
expect 2 emulate "${small[@]}" --algorithm "$pipelined" --bytes 10 && stderr_has "10"
expect 2 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB --dtype quaternion && stderr_has "quaternion"
expect 2 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB --op nope && stderr_has "nope"
expect 2 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB --dtype float32 --op bxor
expect 2 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB --blocks 0
expect 2 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB --gamma slow
expect 2 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB --timeout 0
expect 2 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB --timeout -1s
expect 2 emulate "${small[@]}" --algorithm "$pipelined" --bytes 4KiB --ports sideways
expect 2 emulate --nodes 0 --ranks-per-node 2 --algorithm "$pipelined" --bytes 4KiB
expect 2 emulate --nodes 2 --ranks-per-node 0 --algorithm "$pipelined" --bytes 4KiB
expect 2 emulate --nodes 2 --ranks-per-node 2 --repetitions 0 --algorithm "$pipelined" --bytes 4KiB
if [ -n "$commutative_only" ]; then
  expect 2 emulate "${small[@]}" --algorithm "$commutative_only" --bytes 4KiB --op affine &&
    stderr_has "commutative"
fi

# ------------------------------------------------------------------ verify
expect 0 verify --algorithm "$pipelined" --ranks 9 --blocks 4 --json
json_check 'set(d) >= {"algorithm", "collective", "ranks", "blocks", "count", "proven", "message"} and d["proven"] is True'
expect 2 verify --algorithm no-such-algorithm --ranks 4
expect 2 verify --algorithm "$pipelined" --ranks 0
expect 2 verify --algorithm "$pipelined" --ranks 4 --blocks 0
expect 2 verify --algorithm "$pipelined" --ranks 4 --blocks auto
expect 2 verify --algorithm "$pipelined" --ranks 4 --count -3
expect 2 verify --algorithm "$pipelined"

# ------------------------------------------------------------------ forms (plan/planner.hpp)
expect 0 emulate --nodes 2 --ranks-per-node 2 --form lanes --algorithm ring --bytes 4KiB --repetitions 1 --json &&
  json_check 'd["verified"] is True and d["matches_simulator"] is True' "emulate --form lanes"
expect 0 emulate --nodes 2 --ranks-per-node 2 --form auto --algorithm auto --bytes 4KiB --repetitions 1 --json &&
  json_check 'd["verified"] is True and d["matches_simulator"] is True' "emulate --form auto --algorithm auto"
expect 2 emulate --nodes 2 --ranks-per-node 2 --form sideways --algorithm ring && stderr_has "multi-leader, lanes or auto"
expect 2 emulate --ranks-per-node-list 2,1 --form lanes --algorithm ring --repetitions 1 &&
  stderr_has "lanes form needs nodes of equal size"

# ------------------------------------------------------------------ demo
expect 0 demo --nodes 2 --ranks-per-node 2 --bytes 64KiB --repetitions 1 --gantt "" --json
json_check 'set(d) >= {"nodes", "ranks_per_node", "ranks", "bytes", "results", "winner"} and d["ranks"] == 4'
json_check '{r["form"] for r in d["results"]} == {"flat", "single-leader", "multi-leader", "lanes"}' \
  "demo compares flat, single-leader, multi-leader and lanes"
json_check 'all(r["verified"] is True and r["matches_simulator"] is True for r in d["results"])' "demo all verified"
json_check 'd["gantt"] is None and d["winner"]["virtual_time_ps"] == min(r["virtual_time_ps"] for r in d["results"])' \
  "demo's winner is the fastest row"
expect 0 demo --nodes 2 --ranks-per-node 2 --bytes 64KiB --repetitions 1 --gantt ""
stdout_has "run it: mpirun -np 4 --map-by ppr:2:node -x COPSE_HIERARCHY_FORM=lanes -x COPSE_COLLECTIVES_ALLREDUCE=ring"
for form in "flat ring" "1 leader" "multi-leader" "lanes"; do stdout_has "$form"; done
stdout_has "VERIFIED"
stdout_has "winner: "
expect 0 demo --nodes 2 --ranks-per-node 1 --bytes 64KiB --repetitions 1 --op affine --gantt "" --json &&
  json_check 'all(r.get("verified") is True or "skipped" in r for r in d["results"])' "demo skips what affine cannot use"
expect 2 demo --model nope
expect 2 demo --nodes 0
expect 2 demo --bytes 3
expect 2 demo --op nope

finish
