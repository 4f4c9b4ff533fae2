#!/usr/bin/env bash
# copse study depth | bjorndalen | flat-hier | traff (issue 20 item 6), at
# small sizes: each prints a table of the expected shape, the same rows as
# --json, and a plot that parses as SVG (when gnuplot is installed); bad
# options exit 2 with one line. `copse study proficz` has its Catch2 test
# (test_arrival.cpp); its run is too long for this script.
CLI_TEST_NAME=cli_study
source "$(dirname "$0")/cli_lib.sh"
have_gnuplot=0
command -v gnuplot >/dev/null && have_gnuplot=1

# svg_parses FILE: FILE is an SVG document (recorded with the JSON checks'
# Python run: one interpreter for all).
svgs=()
svg_parses() {
  checks=$((checks + 1))
  svgs+=("$1")
}

# --help names every study and tells each one's options.
expect 0 study --help
for name in proficz depth bjorndalen flat-hier traff; do stdout_has "$name"; done
stdout_has "COPSE_PROGRESS_AFTER"
expect 0 study depth --help
for option in --nodes --ranks-per-node --bytes --forms --model --out --json; do stdout_has "$option"; done
expect 0 study flat-hier --help
for option in --clusters --bytes --forms --emulate-up-to --model; do stdout_has "$option"; done
expect 0 study traff --help
for option in --nodes --ranks-per-node --counts --block-elements --model; do stdout_has "$option"; done
expect 0 study bjorndalen --help
for option in --intra-latency --inter-latency --overhead --no-sweep; do stdout_has "$option"; done

# depth: 2 node counts x 2 sizes x 4 forms, the chain stopped beyond 8 ranks.
depth=(study depth --nodes 2,4 --ranks-per-node 4 --bytes 8,4KiB --forms binomial,chain,groups-2,lanes
  --linear-limit 8 --out "$tmp/depth")
expect 0 "${depth[@]}" --json
json_check 'd["study"] == "depth" and len(d["rows"]) == 14' "depth: 16 points less the chain's 2 beyond 8 ranks"
json_check 'all(r["time_ps"] > 0 and r["blocks"] >= 1 for r in d["rows"])' "depth: times and blocks"
json_check 'sorted({r["ranks"] for r in d["rows"]}) == [8, 16] and {r["bytes"] for r in d["rows"]} == {8, 4096}'
json_check '(d["plot"] != "") == bool('"$have_gnuplot"')' "depth: a plot exactly when gnuplot is installed"
[ "$have_gnuplot" -eq 1 ] && svg_parses "$tmp/depth/depth.svg"
expect 0 "${depth[@]}"
# Per size: a heading, the p line and a line per form; the chain's p = 16 is "-".
checks=$((checks + 1))
[ "$(grep -c '^form \\ p  *8  *16$' "$out")" -eq 2 ] || fail "depth: two tables with columns p = 8, 16: $(cat "$out")"
checks=$((checks + 1))
[ "$(grep -cE '^(flat|groups|lanes)' "$out")" -eq 8 ] || fail "depth: 4 forms in each of 2 tables"
checks=$((checks + 1))
grep -qE '^flat chain .* -  *$' "$out" || fail "depth: the chain beyond --linear-limit is not run"
stdout_has "Wrote $tmp/depth/depth.dat"

# flat-hier: the 2x4 cluster emulated (verified), 4x4 simulated.
expect 0 study flat-hier --clusters 2x4,4x4 --bytes 8 --forms flat:ring,leader:rabenseifner:2,lanes:ring \
  --emulate-up-to 8 --out "$tmp/fh" --json
json_check 'd["study"] == "flat-hier" and len(d["rows"]) == 6' "flat-hier: 2 clusters x 3 forms"
json_check '[r["emulated"] for r in d["rows"]] == [True] * 3 + [False] * 3 and all(r["ok"] for r in d["rows"])'
json_check '[r["form"] for r in d["rows"][:3]] == ["flat:ring", "leader:rabenseifner:2", "lanes:ring"]'
[ "$have_gnuplot" -eq 1 ] && svg_parses "$tmp/fh/flat_hier.svg"
expect 0 study flat-hier --clusters 2x4 --bytes 8,64 --forms flat:ring,lanes:ring --out "$tmp/fh2"
stdout_has "2x4, 8 B per rank:"
stdout_has "2x4, 64 B per rank:"
checks=$((checks + 1))
[ "$(grep -c 'emulated, ok' "$out")" -eq 4 ] || fail "flat-hier: 4 emulated rows: $(cat "$out")"
checks=$((checks + 1))
[ "$(grep -c 'best flat flat ring' "$out")" -eq 2 ] || fail "flat-hier: a best line per size"

# traff: one row per count, and the gamma-0 line.
expect 0 study traff --nodes 4 --ranks-per-node 2 --counts 0,100,40000 --model cluster --out "$tmp/tr" --json
json_check 'd["study"] == "traff" and [r["count"] for r in d["rows"]] == [0, 100, 40000]' "traff: a row per count"
json_check 'd["rows"][2]["tree_paper"]["blocks"] == 3 and d["rows"][1]["dual_paper"]["blocks"] == 1' \
  "traff: his blocks, ceil(count / 16000)"
json_check 'd["rows"][0]["native_algorithm"] in ("recursive-doubling", "rabenseifner", "ring")'
json_check 'all(r[k]["time_ps"] > 0 for r in d["rows"][1:] for k in ("native", "tree_auto", "dual_auto"))'
json_check 'd["gamma0"]["count"] == 40000 and d["gamma0"]["dual_auto"]["time_ps"] > 0'
[ "$have_gnuplot" -eq 1 ] && svg_parses "$tmp/tr/traff.svg"
expect 0 study traff --nodes 4 --ranks-per-node 2 --counts 1,100 --out "$tmp/tr2"
checks=$((checks + 1))
[ "$(grep -cE '^ +(1|100) ' "$out")" -eq 2 ] || fail "traff: a table line per count: $(cat "$out")"
stdout_has "gamma 0 at 100"

# bjorndalen: the paper's four configurations under each model, no sweep.
expect 0 study bjorndalen --no-sweep --out "$tmp/bj" --json
json_check 'd["study"] == "bjorndalen" and len(d["rows"]) == 8 and d["sweeps"] == []' "bjorndalen: 2 x 4 rows"
json_check 'all(r["ok"] and r["emulated_ps"] == r["simulated_ps"] for r in d["rows"])' "bjorndalen: emulated = simulated"
json_check '[r["paper_us"] for r in d["rows"][:4]] == [2618, 1444, 1322, 1534]'
[ "$have_gnuplot" -eq 1 ] && svg_parses "$tmp/bj/bjorndalen.svg"

# Bad input: one line, exit 2.
expect 2 study depth --forms binomial,nosuch --out "$tmp/x"
stderr_has "unknown form 'nosuch'"
expect 2 study depth --bytes 6 --out "$tmp/x"
stderr_has "--bytes: 6 is not"
expect 2 study depth --nodes 2,0 --out "$tmp/x"
stderr_has "--nodes: 0 is not"
expect 2 study depth --model fast --out "$tmp/x"
expect 2 study flat-hier --clusters 4 --out "$tmp/x"
expect 2 study flat-hier --forms lanes:ring:4 --out "$tmp/x"
expect 2 study traff --counts 1,x --out "$tmp/x"
expect 2 study bjorndalen --overhead fast --out "$tmp/x"
expect 2 study nosuch

if [ "${#svgs[@]}" -gt 0 ]; then
  python3 - "${svgs[@]}" <<'PY' || failures=$((failures + 1))
import sys, xml.etree.ElementTree as ET
bad = 0
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
        if not root.tag.endswith("svg"): raise ValueError("root element " + root.tag)
    except Exception as e:
        print("FAIL: %s does not parse as SVG: %s" % (path, e), file=sys.stderr)
        bad += 1
sys.exit(1 if bad else 0)
PY
fi
finish
