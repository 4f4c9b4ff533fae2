#!/usr/bin/env bash
# The pictures' command-line contract: `copse sim --gantt` writes an SVG that
# parses as XML with a row per rank and send bars; `copse tree --dot` writes
# Graphviz that dot renders, with the expected edges (binomial reduce, p = 8:
# seven edges into the tree); `copse emulate --trace` writes Chrome-trace
# JSON that passes a schema check; `copse demo` writes its winner's Gantt chart.
CLI_TEST_NAME=cli_pictures
source "$(dirname "$0")/cli_lib.sh"

# py CHECK-DESCRIPTION SCRIPT ARGS...: a Python check (exit 0 = pass).
py() {
  checks=$((checks + 1))
  local what=$1 script=$2
  shift 2
  local message
  message=$(python3 -c "$script" "$@" 2>&1) || fail "$what: $message"
}

svg_check='
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ranks, sends = int(sys.argv[2]), int(sys.argv[3])
ns = "{http://www.w3.org/2000/svg}"
rows = [g for g in root.iter(ns + "g") if g.get("class") == "rank"]
bars = [r for r in root.iter(ns + "rect") if r.get("class") == "send"]
assert root.tag == ns + "svg", root.tag
assert len(rows) == ranks, "%d rows, expected %d" % (len(rows), ranks)
assert len(bars) >= sends, "%d send bars, expected at least %d" % (len(bars), sends)
'

# ------------------------------------------------------------------ sim --gantt
expect 0 sim --algorithm ring --ranks 6 --bytes 6KiB --gantt "$tmp/ring.svg" &&
  py "sim --gantt: XML, 6 rows, send bars" "$svg_check" "$tmp/ring.svg" 6 6
expect 0 sim --algorithm dual-root --ranks 12 --bytes 1MiB --blocks 8 --ranks-per-node 4 --gantt "$tmp/dr.svg" &&
  py "sim --gantt with nodes: XML, 12 rows" "$svg_check" "$tmp/dr.svg" 12 11
expect 0 sim --algorithm binomial --ranks 200 --bytes 8 --gantt "$tmp/big.svg" &&
  py "sim --gantt at p=200: 64 rows" "$svg_check" "$tmp/big.svg" 64 1 &&
  { checks=$((checks + 1)); grep -q "showing ranks 0-63 only" "$tmp/big.svg" || fail "the capped Gantt does not say so"; }
expect 2 sim --algorithm ring --ranks 4 --bytes 1KiB --gantt "$tmp/no/such/dir/x.svg"
stderr_has "--gantt"

# ------------------------------------------------------------------ tree --dot
expect 0 tree --algorithm binomial --collective reduce --ranks 8 --dot "$tmp/binomial.dot"
stdout_has "7 edges"
py "binomial reduce p=8: 7 edges into the tree" '
import re, sys
edges = re.findall(r"^\s*(\d+) -> (\d+) \[dir=(\w+)", open(sys.argv[1]).read(), re.M)
assert len(edges) == 7, edges
# Drawn parent -> child with the arrow back (data flows child to parent).
pairs = {(int(b), int(a)) for a, b, d in edges if d == "back"}
assert pairs == {(c, c & (c - 1)) for c in range(1, 8)}, pairs
' "$tmp/binomial.dot"
expect 0 tree --algorithm two-tree --ranks 8 --blocks 2 --dot "$tmp/two-tree.dot"
py "two-tree: both trees coloured" '
import sys; t = open(sys.argv[1]).read()
assert "#1f77b4" in t and "#d62728" in t and "part 2 of 2" in t
' "$tmp/two-tree.dot"
expect 0 tree --algorithm ring --ranks 5 --json &&
  json_check 'd["parts"] == 1 and len(d["edges"]) == 5 and all(len(e["steps"]) == 8 for e in d["edges"])' \
    "ring p=5: 5 edges of 8 messages"
expect 0 tree --schedule-file "$(cd "$(dirname "$0")/.." && pwd)/examples/schedules/8w-groups-of-four.txt" \
  --collective reduce --dot "$tmp/file.dot"
expect 2 tree --algorithm nope --ranks 4
stderr_has "nope"
expect 2 tree --algorithm ring
if command -v dot >/dev/null; then
  for f in binomial two-tree file; do
    checks=$((checks + 1))
    dot -Tsvg "$tmp/$f.dot" -o "$tmp/$f.svg" 2>"$tmp/dot.err" || fail "dot cannot render $f.dot: $(head -c 300 "$tmp/dot.err")"
    py "dot's SVG of $f parses" 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$tmp/$f.svg"
  done
else
  echo "cli_pictures: Graphviz dot is not installed: the render check is skipped (scripts/install-deps.sh installs it)"
fi

# ------------------------------------------------------------------ emulate --trace
expect 0 emulate --algorithm dual-root --nodes 2 --ranks-per-node 3 --bytes 64KiB --repetitions 2 \
  --timing loggp --inter-overhead 0.5us --nic-beta 40ps --trace "$tmp/trace.json" --json &&
  cp "$out" "$tmp/emulate.json" &&
  py "emulate --trace: Chrome-trace schema, both clocks" '
import json, sys
t = json.load(open(sys.argv[1])); run = json.load(open(sys.argv[2]))
ev = t["traceEvents"]
assert isinstance(ev, list) and ev
last, pids, end = {}, set(), 0
for e in ev:
    assert isinstance(e["name"], str) and isinstance(e["ph"], str), e
    assert isinstance(e["pid"], int) and isinstance(e["tid"], int), e
    assert isinstance(e["ts"], (int, float)), e
    if e["ph"] == "M":
        continue
    assert e["ph"] == "X", e
    assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
    k = (e["pid"], e["tid"])
    assert e["ts"] >= last.get(k, 0), ("ts not monotone", e)
    last[k] = e["ts"]
    pids.add(e["pid"])
    if e["pid"] == 1:
        end = max(end, e["args"]["end_ps"])
assert pids == {1, 2}, pids
assert end == run["virtual_time_ps"], (end, run["virtual_time_ps"])
names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
assert any("virtual" in n for n in names) and any("wall" in n for n in names), names
' "$tmp/trace.json" "$tmp/emulate.json"
expect 2 emulate --algorithm ring --nodes 2 --ranks-per-node 2 --bytes 1KiB --trace "$tmp/no/such/dir/t.json"

# ------------------------------------------------------------------ demo --gantt
(cd "$tmp" && "$COPSE" demo --nodes 2 --ranks-per-node 4 --bytes 64KiB --repetitions 1 --json >"$out" 2>"$err")
rc=$?
checks=$((checks + 1))
[ "$rc" -eq 0 ] || fail "demo exited $rc: $(head -c 300 "$err")"
json_check 'd["gantt"] == "demo-winner.svg" and d["winner"]["virtual_time_ps"] > 0' "demo names its winner and Gantt"
json_check '{r["form"] for r in d["results"]} == {"flat", "single-leader", "multi-leader", "lanes"}' "demo's forms"
[ -f "$tmp/demo-winner.svg" ] && py "demo's Gantt: XML, 8 rows" "$svg_check" "$tmp/demo-winner.svg" 8 1

finish
