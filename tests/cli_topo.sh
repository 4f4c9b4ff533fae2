#!/usr/bin/env bash
# `copse topo`, checked by running the binary: exit codes (0, or 2 with
# exactly one line on stderr starting "copse: "), the printed plan, --json
# that parses, and a --dot file that Graphviz accepts.
#
# Run by CTest with COPSE=<path to the copse binary>; by hand:
#   COPSE=build/default/copse bash tests/cli_topo.sh

CLI_TEST_NAME=cli_topo
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

topo8="package:2 l3:2 core:4 pu:1"

# ------------------------------------------------------------------ success
expect 0 --help && stdout_has "topo"
expect 0 topo --help && for opt in --node-topology --nodes --ranks-per-node --ranks-per-node-list --grouping \
  --max-group --multi-leader --dot --json; do stdout_has "$opt"; done

expect 0 topo && stdout_has "this machine (hwloc)" && stdout_has "level 0" && stdout_has "off-node ranks"

expect 0 topo --node-topology "$topo8" --ranks-per-node 16
stdout_has "level 0 (l3): [0-3] leader 0, [4-7] leader 4, [8-11] leader 8, [12-15] leader 12"
stdout_has "level 1 (package): {0,4} leader 0, {8,12} leader 8"
stdout_has "level 2 (node): {0,8} leader 0"
stdout_has "Core L#15 + PU L#15"

expect 0 topo --node-topology "$topo8" --ranks-per-node-list 5,8,1 --json
json_check 'd["plan"]["offnode"] == [0, 5, 13] and d["ranks_per_node"] == [5, 8, 1]' "uneven nodes: node leaders"
json_check '[n["first_rank"] for n in d["plan"]["nodes"]] == [0, 5, 13] and d["plan"]["ranks"] == 14'
json_check 'd["plan"]["nodes"][2]["levels"] == [{"level": 0, "name": "node", "groups": [{"members": [13], "leader": 13}]}]' \
  "a single-rank node is one group of itself"
json_check 'd["machine"]["pus"] == 16 and d["machine"]["levels"]["l3"] == 4 and d["machine"]["source"] == "'"$topo8"'"'
json_check 'all(len(n["binding"]) == n["ranks"] for n in d["plan"]["nodes"])'

expect 0 topo --node-topology "$topo8" --nodes 4 --ranks-per-node 8 --grouping size:4 --multi-leader --json
json_check 'd["plan"]["offnode"] == [0, 4, 8, 12, 16, 20, 24, 28] and d["plan"]["multi_leader"] is True' \
  "multi-leader size:4 on 4x8: eight off-node leaders"
json_check 'all(len(n["levels"]) == 1 for n in d["plan"]["nodes"])'

expect 0 topo --grouping size:2 --ranks-per-node 8 --json
json_check '[len(l["groups"]) for l in d["plan"]["nodes"][0]["levels"]] == [4, 2, 1]' "size:2 on 8 ranks: 4, 2, 1 groups"

# --dot writes a file that Graphviz reads, with or without --json.
expect 0 topo --node-topology "$topo8" --ranks-per-node-list 5,8,1 --dot "$tmp/plan.dot" &&
  stdout_has "wrote $tmp/plan.dot"
checks=$((checks + 1))
[ -s "$tmp/plan.dot" ] || fail "--dot did not write $tmp/plan.dot"
grep -q "subgraph cluster_node2" "$tmp/plan.dot" || fail "plan.dot lacks node 2's cluster"
expect 0 topo --multi-leader --json --dot "$tmp/multi.dot" && json_check 'd["dot"] is not None'
if command -v dot >/dev/null; then
  for file in "$tmp/plan.dot" "$tmp/multi.dot"; do
    checks=$((checks + 1))
    dot -Tsvg "$file" -o "$tmp/plan.svg" 2>"$tmp/dot.err" || fail "dot rejects $file: $(head -c 400 "$tmp/dot.err")"
  done
else
  echo "cli_topo: graphviz's dot not found; the --dot files were not rendered" >&2
fi

# ------------------------------------------------------------------ bad input: exit 2, one line
expect 2 topo --node-topology "bogus:3" && stderr_has '"bogus:3"'
expect 2 topo --node-topology ""
expect 2 topo --node-topology "pu:100000"
expect 2 topo --grouping l4 && stderr_has "size:K"
expect 2 topo --grouping size:0
expect 2 topo --grouping l3 --node-topology "package:2 core:4 pu:1" && stderr_has "no l3"
expect 2 topo --ranks-per-node 0
expect 2 topo --ranks-per-node 3 --ranks-per-node-list 1,2
expect 2 topo --ranks-per-node-list 5,,1
expect 2 topo --ranks-per-node-list 5,8 --nodes 3
expect 2 topo --nodes 0
expect 2 topo --max-group 0 && stderr_has "--max-group"
expect 2 topo --nodes 100000 --ranks-per-node 100000
expect 2 topo --dot "$tmp/no/such/dir/plan.dot"
expect 2 topo --no-such-flag

finish
