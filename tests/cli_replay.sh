#!/usr/bin/env bash
# `copse replay`, checked by running the binary on hand-written traces: the
# JSON report (every call, the chosen algorithms, totals that add up), and
# the errors -- a broken line, a missing file, an unknown algorithm or
# collective -- each exit 2 with one line, the first naming FILE:LINE.
#
# Run by CTest with COPSE=<path to the copse binary>; by hand:
#   COPSE=build/default/copse bash tests/cli_replay.sh

CLI_TEST_NAME=cli_replay
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

line() {  # RANK CALL COLLECTIVE COUNT ROOT GAP
  echo "{\"rank\": $1, \"size\": 2, \"call\": $2, \"collective\": \"$3\", \"comm_size\": 2, \"count\": $4," \
    "\"type_size\": 4, \"op\": \"sum\", \"root\": $5, \"site\": \"app+0x$2\", \"gap\": $6, \"duration\": 0.001}"
}
trace="$tmp/trace.jsonl"
{
  line 0 0 allreduce 65536 -1 0.001
  line 1 0 allreduce 65536 -1 0.002
  line 0 1 bcast 100 1 0
  line 1 1 bcast 100 1 0
  line 0 2 allreduce 65536 -1 0.001
  line 1 2 allreduce 65536 -1 0.001
} >"$trace"

expect 0 replay --help && for opt in --nodes --ranks-per-node --algorithm --blocks --compute-scale --json; do
  stdout_has "$opt"
done
for alg in ring dual-root; do
  expect 0 replay "$trace" --nodes 4 --ranks-per-node 2 --algorithm "$alg" --algorithm bcast=chain --json &&
    json_check "d['ranks'] == 8 and d['processes'] == 2 and d['calls'] == 3 and len(d['sites']) == 3" \
      "$alg: 8 ranks, 3 calls at 3 sites" &&
    json_check "d['algorithms']['allreduce'] == '$alg' and d['sites'][1]['algorithm'] == 'chain'" \
      "$alg: the algorithms asked for" &&
    json_check "d['total']['time_ps'] == sum(x['time_ps'] for x in d['sites']) > 0" "$alg: totals add up" &&
    json_check "d['total']['compute_ps'] == 2500000000" "$alg: mean computation 2.5 ms" &&
    json_check "d['total']['end_ps'] >= d['total']['compute_ps'] + d['total']['after_last_arrival_ps']" \
      "$alg: the end is after computation and the calls"
done
expect 0 replay "$trace" --nodes 4 --ranks-per-node 2 && stdout_has "predicted" && stdout_has "app+0x0"

{ head -n 2 "$trace"; echo '{"rank": 0, "size": 2, "call": 1, "collective": "bcast"'; } >"$tmp/broken.jsonl"
expect 2 replay "$tmp/broken.jsonl" && stderr_has "$tmp/broken.jsonl:3: not a JSON object"
expect 2 replay "$tmp/absent.jsonl" && stderr_has "$tmp/absent.jsonl: cannot be read"
expect 2 replay "$trace" --algorithm fastest && stderr_has "unknown allreduce algorithm"
expect 2 replay "$trace" --algorithm scan=ring && stderr_has "unknown collective"
expect 2 replay "$trace" --compute-scale -1
expect 2 replay "$trace" --nodes 0
expect 2 replay

finish
