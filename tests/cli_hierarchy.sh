#!/usr/bin/env bash
# The hierarchical side of `copse emulate`: every collective, grouping policy,
# multi-leader and uneven nodes run verified with virtual time equal to the
# simulator's; bad hierarchy options exit 2 with one line.
set -uo pipefail
: "${COPSE:?set COPSE to the copse binary}"
passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
runs=0 failed_runs=0
# check DESCRIPTION PYTHON-CONDITION -- ARGS...: the run must succeed; its JSON
# and the condition are kept for `evaluate_checks`, which reads them all in
# one Python process (one per check cost more than the runs).
check() {
  local what=$1 cond=$2; shift 3
  runs=$((runs + 1))
  if "$COPSE" emulate "$@" --json >"$tmp/run.$runs" 2>&1; then
    printf '%s\0%s\0%s\0' "$tmp/run.$runs" "$cond" "$what: $*" >>"$tmp/checks"
  else
    failed=$((failed + 1)) failed_runs=$((failed_runs + 1)); echo "FAIL $what: $*"; head -5 "$tmp/run.$runs"
  fi
}
# Prints a FAIL line for each recorded check whose condition is false, then
# the number that held.
evaluate_checks() {
  [[ -s "$tmp/checks" ]] || { echo 0; return; }
  python3 - "$tmp/checks" <<'EOF'
import json, sys
fields = open(sys.argv[1], "rb").read().decode().split("\0")[:-1]
held = 0
for i in range(0, len(fields), 3):
    path, cond, what = fields[i:i + 3]
    text = open(path).read()
    try:
        ok = eval(cond, {"d": json.loads(text)})
    except Exception as e:
        ok, text = False, "%s: %r\n%s" % (type(e).__name__, e, text)
    if ok:
        held += 1
    else:
        print("FAIL %s\n%s" % (what, "\n".join(text.splitlines()[:5])))
print(held)
EOF
}
refuse() {  # refuse DESCRIPTION ARGS...: exit status 2 and one line on stderr
  local what=$1; shift
  local err status
  err=$("$COPSE" emulate "$@" 2>&1 >/dev/null); status=$?
  if [[ $status -eq 2 && $(wc -l <<<"$err") -eq 1 ]]; then passed=$((passed + 1)); else
    failed=$((failed + 1)); echo "FAIL $what (exit $status): $err"; fi
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
report=$(evaluate_checks) || report=0
held=$(tail -n 1 <<<"$report")
sed '$d' <<<"$report"
passed=$((passed + held)); failed=$((failed + runs - held - failed_runs))
echo "cli_hierarchy: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
