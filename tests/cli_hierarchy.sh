#!/usr/bin/env bash
# The hierarchical side of `copse emulate`: every collective, grouping policy,
# multi-leader and uneven nodes run verified with virtual time equal to the
# simulator's; bad hierarchy options exit 2 with one line.
#
# Run by CTest with COPSE=<path to the copse binary>; by hand:
#   COPSE=build/default/copse bash tests/cli_hierarchy.sh

CLI_TEST_NAME=cli_hierarchy
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

# check DESCRIPTION PYTHON-CONDITION -- ARGS...: `copse emulate ARGS --json`
# succeeds and its JSON (d) meets the condition.
check() {
  local what=$1 cond=$2
  shift 3
  expect 0 emulate "$@" --json && json_check "$cond" "$what"
}
# refuse DESCRIPTION ARGS...: exit status 2 and one line on stderr.
refuse() {
  shift
  expect 2 emulate "$@"
}
ok='d["verified"] and d["matches_simulator"] and "hierarchy" in d'
topo="package:2 l3:2 core:2 pu:1"
for collective in allreduce reduce bcast barrier allgather reduce_scatter; do
  for grouping in auto size:2 size:8 l3 package; do
    check "$collective $grouping" "$ok" -- --collective "$collective" --algorithm binomial --nodes 3 --ranks-per-node 8 \
      --node-topology "$topo" --grouping "$grouping" --bytes 4KiB --root 5 --repetitions 1
  done
  check "$collective multi-leader" "$ok and len(d['hierarchy']['offnode']) == 12" -- --collective "$collective" \
    --algorithm binomial --nodes 3 --ranks-per-node 8 --node-topology "$topo" --multi-leader --bytes 4KiB --repetitions 1
done
for algorithm in dual-root two-tree ring rabenseifner chain; do
  check "uneven $algorithm" "$ok and d['ranks'] == 14 and d['hierarchy']['offnode'] == [0, 5, 13]" -- \
    --algorithm "$algorithm" --ranks-per-node-list 5,8,1 --node-topology "$topo" --grouping size:4 --bytes 8000 \
    --dtype int64 --op "$([[ $algorithm == ring ]] && echo sum || echo affine)" --repetitions 1
done
check "dual-root pipelines across levels" "$ok and d['hierarchy']['pipelined_across_levels']" -- \
  --algorithm dual-root --nodes 4 --ranks-per-node 8 --node-topology "$topo" --bytes 64KiB --repetitions 1
refuse "unknown grouping" --algorithm dual-root --grouping l7 --nodes 2 --ranks-per-node 4
refuse "bad size grouping" --algorithm dual-root --grouping size:0 --nodes 2 --ranks-per-node 4
refuse "bad synthetic topology" --algorithm dual-root --node-topology "banana:2" --nodes 2 --ranks-per-node 4
refuse "bad node list" --algorithm dual-root --ranks-per-node-list 5,x,1
refuse "zero-size node" --algorithm dual-root --ranks-per-node-list 5,0,1
refuse "ring needs a tree for allgather" --collective allgather --algorithm ring --grouping auto --nodes 2 --ranks-per-node 4
finish
