#!/usr/bin/env bash
# `copse tune`, checked by running the binary without MPI (--from: the rules
# only; tests/cli_tune.sh does not measure): it writes the same rows as
# scripts/decision-table.py did for the same CSV (tests/tune/expected.toml),
# merges with an existing table (a shape measured again replaces its rows, the
# others keep theirs with rank ranges recomputed, hand-written rows stay
# first), names file, line and reason for malformed input (exit 2), refuses an
# unverified result (exit 1); and `copse config --stats` shows the calls each
# row decided.
#
# Run by CTest with COPSE=<path to the copse binary>; by hand:
#   COPSE=build/default/copse bash tests/cli_tune.sh

CLI_TEST_NAME=cli_tune
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
fixture="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/tune"

for name in $(compgen -e); do
  case "$name" in COPSE_*) unset "$name" ;; esac
done
export COPSE_CONFIG=
cd "$tmp" || exit 1

# rows FILE: the table's blocking rows (and rows without a form) without its
# comments, shape and form keys (what decision-table.py wrote had none: it
# measured the blocking calls only).
rows() {
  awk 'BEGIN { RS = ""; ORS = "\n\n" } !/form = "/ || /form = "blocking"/' "$1" |
    grep -v -e '^#' -e '^shape = ' -e '^form = '
}
same_rows() {  # same_rows GOT WANT DESCRIPTION
  checks=$((checks + 1))
  diff <(rows "$1") <(rows "$2") >"$tmp/diff" || fail "$3: $(head -20 "$tmp/diff")"
}
# table_json FILE: copse config --json's decision table, read back through the reader.
table_json() { COPSE_MPI_TABLE=$1 "$COPSE" config --json >"$out"; }

# ------------------------------------------------------------------ help
expect 0 tune --help
for opt in --out --replace --shapes --sizes --forms --sync --hierarchy-forms --rounds --paired --refine --threshold --noise --unmeasured --from --mpirun \
  --host --hostfile --bench --library --work --timeout; do stdout_has "$opt"; done
stdout_has "blocking,nonblocking"
stdout_has "npP-vnK"

# ------------------------------------------------------------------ the rules, as the Python script had them
# (it had no noise rule: --noise 1 turns it off)
# Its CSV measured the blocking calls: 64 blocking rows, and as many nonblocking and
# persistent rows again, made from the blocking ratios (the unmeasured forms' rule).
expect 0 tune --from "$fixture/bench.csv" --out t.toml --noise 1 && stdout_has "rows"
same_rows t.toml "$fixture/expected.toml" "copse tune --from --noise 1 writes decision-table.py's rows"
# With the noise rule (the default) lone bands near the threshold follow their neighbours: fewer rows.
expect 0 tune --from "$fixture/bench.csv" --out smooth.toml && stdout_has "rows"
checks=$((checks + 1))
(($(rows smooth.toml | grep -c '^\[\[row\]\]') < 64)) || fail "the noise rule merged no lone band of bench.csv"
checks=$((checks + 1))
grep -q "a lone size within the noise, 0.8, of that follows its two" smooth.toml || fail "the header does not state the noise rule"
expect 2 tune --from "$fixture/bench.csv" --out bad.toml --noise 1.5 && stderr_has "--noise: expected a ratio in (0, 1]"
table_json t.toml
json_check '[r["form"] for r in d["decision_table"]["rows"]].count("blocking") == 64 and d["decision_table"]["default"] == "mpi"' "the table reads back"
json_check '[r["shape"] for r in d["decision_table"]["rows"] if r["form"] == "blocking"].count("np4") == 19 and all(r["shape"] and r["form"] for r in d["decision_table"]["rows"])' \
  "every row names its shape and form"
json_check 'all(("not measured: the blocking call" in r["note"]) == (r["form"] != "blocking") for r in d["decision_table"]["rows"])' \
  "the unmeasured forms' rows say they come from the blocking call's ratios"
# Where the blocking call deferred within threshold * 0.7 of the threshold, the unmeasured forms go to copse;
# far below, they defer as the blocking call does.
json_check 'all(n["use"] == "copse" for b in d["decision_table"]["rows"] if b["form"] == "blocking" and b["use"] == "copse" for n in d["decision_table"]["rows"] if n["form"] == "nonblocking" and (n["shape"], n["collective"]) == (b["shape"], b["collective"]) and n["min_bytes"] <= (b["max_bytes"] if b["max_bytes"] is not None else 2**64) and b["min_bytes"] <= (n["max_bytes"] if n["max_bytes"] is not None else 2**64))' \
  "the unmeasured nonblocking form goes to copse wherever the blocking call did"
json_check 'any(n["use"] == "copse" and b["use"] == "mpi" and n["min_bytes"] == b["min_bytes"] and (n["shape"], n["collective"]) == (b["shape"], b["collective"]) for b in d["decision_table"]["rows"] if b["form"] == "blocking" for n in d["decision_table"]["rows"] if n["form"] == "nonblocking")' \
  "and somewhere the blocking call deferred (within the unmeasured factor) too"
# A higher threshold gives fewer calls to copse.
expect 0 tune --from "$fixture/bench.csv" --out strict.toml --threshold 1.5 --noise 1
checks=$((checks + 1))
(($(grep -c '^use = "copse"' strict.toml) < $(grep -c '^use = "copse"' t.toml))) || fail "--threshold 1.5 gave copse no fewer rows"

# ------------------------------------------------------------------ merging
# np4 measured again (every ratio 2): its rows are replaced, np2's and np4-vn2's kept.
awk -F, 'NR == 1 || $1 == "np4" { if (NR > 1 && $6 == "copse") $13 = "2.0000"; print }' OFS=, \
  "$fixture/bench.csv" >np4.csv
cp t.toml merged.toml
# Each shape's provenance line, with words added by hand, travels with its rows.
sed -i 's/^# measured np2: .*/& (quiet host, said by hand)/' merged.toml
expect 0 tune --from np4.csv --out merged.toml && stdout_has "kept np2, np4-vn2"
table_json t.toml
cp "$out" before.json
table_json merged.toml
json_check '[dict(r, line=0) for r in d["decision_table"]["rows"] if r["shape"] != "np4"] == [dict(r, line=0) for r in __import__("json").load(open("'"$tmp"'/before.json"))["decision_table"]["rows"] if r["shape"] != "np4"]' \
  "merging np4 kept the other shapes' rows as they were"
json_check 'all(r["use"] == "copse" for r in d["decision_table"]["rows"] if r["shape"] == "np4")' "np4's rows replaced"
json_check '[r["shape"] for r in d["decision_table"]["rows"]].count("np4") == 21' "np4: one row per collective and form now"
grep -q "Shapes kept from the earlier table (measured before): np2, np4-vn2" merged.toml ||
  fail "the header does not say which shapes were kept"
checks=$((checks + 1))
grep -q '^# measured np2: .*--from .*bench.csv.*(quiet host, said by hand)$' merged.toml &&
  grep -q '^# measured np4-vn2: .*--from .*bench.csv' merged.toml ||
  fail "the kept shapes' provenance lines were not carried over: $(grep '^# measured' merged.toml)"
checks=$((checks + 1))
[ "$(grep -c '^# measured np4: ' merged.toml)" = 1 ] && grep -q '^# measured np4: .*--from np4.csv' merged.toml ||
  fail "np4's provenance is not this run's alone: $(grep '^# measured' merged.toml)"
# A new shape np8: np4's rows now end at 7 ranks, np8's start at 8.
sed 's/^np4,4,/np8,8,/' np4.csv >np8.csv
expect 0 tune --from np8.csv --out merged.toml
table_json merged.toml
json_check 'all(r["max_ranks"] == 7 for r in d["decision_table"]["rows"] if r["shape"] == "np4")' "np4 ends below np8"
json_check 'all(r["min_ranks"] == 8 and r["max_ranks"] is None for r in d["decision_table"]["rows"] if r["shape"] == "np8")' \
  "np8 covers 8 ranks and more"
json_check 'all(r["max_ranks"] == 3 for r in d["decision_table"]["rows"] if r["shape"] == "np2")' "np2 unchanged"
# Hand-written rows and the default stay, first.
printf 'default = "copse"\n[[row]]\ncollective = "bcast"\nmax_bytes = 64\nuse = "mpi"\nnote = "mine"\n' >hand.toml
expect 0 tune --from np4.csv --out hand.toml
table_json hand.toml
json_check 'd["decision_table"]["default"] == "copse" and d["decision_table"]["rows"][0]["note"] == "mine" and d["decision_table"]["rows"][0]["shape"] == ""' \
  "a hand-written row and the default are kept, first"
expect 0 tune --from np4.csv --out hand.toml --replace
table_json hand.toml
json_check 'd["decision_table"]["default"] == "mpi" and all(r["shape"] == "np4" for r in d["decision_table"]["rows"])' \
  "--replace writes the table anew"

# ------------------------------------------------------------------ forms measured
# bench.csv with a form column, and np2's allreduce measured nonblocking too (copse 3x
# faster everywhere): its nonblocking rows are its own, persistent repeats them.
awk -F, 'NR == 1 { print $0 ",form"; next } { print $0 ",blocking" }
  NR > 1 && $1 == "np2" && $3 == "allreduce" { if ($6 == "copse") $13 = "3.0000"; print $0 ",nonblocking" }' OFS=, \
  "$fixture/bench.csv" >forms.csv
expect 0 tune --from forms.csv --out forms.toml --noise 1
same_rows forms.toml "$fixture/expected.toml" "a form column of blocking rows: the same blocking rows"
table_json forms.toml
json_check '[(r["form"], r["use"], r["note"]) for r in d["decision_table"]["rows"] if r["shape"] == "np2" and r["collective"] == "allreduce" and r["form"] != "blocking"] == [("nonblocking", "copse", "np2: tuned/copse 3.00, 3.00, 3.00, 3.00, 3.00, 3.00, 3.00 by median"), ("persistent", "copse", "np2: tuned/copse 3.00, 3.00, 3.00, 3.00, 3.00, 3.00, 3.00 by median; persistent not measured: nonblocking'"'"'s")]' \
  "np2 allreduce: nonblocking as measured, persistent repeats it"
# ------------------------------------------------------------------ hierarchy forms measured
# np4-vn2's bcast also measured in lanes, 3x tuned at every size: its rows name
# lanes and serve; a form only within the noise of the configured one is not
# named. Its allgather also measured with 16 blocks, 9x tuned: one row with blocks = 16.
awk -F, 'NR == 1 { print; next } { print }
  $1 == "np4-vn2" && $3 == "bcast" && $6 == "copse" { $6 = "copse-lanes"; $13 = "3.0000"; print }
  $1 == "np4-vn2" && $3 == "allreduce" && $6 == "copse" { $6 = "copse-auto"; $13 = $13 * 1.1; print }
  $1 == "np4-vn2" && $3 == "allgather" && $6 == "copse" { $6 = "copse-b16"; $13 = "9.0000"; print }' OFS=, \
  "$fixture/bench.csv" >hier.csv
expect 0 tune --from hier.csv --out hier.toml
table_json hier.toml
json_check '[(r["use"], r["hierarchy"]) for r in d["decision_table"]["rows"] if r["shape"] == "np4-vn2" and r["collective"] == "bcast" and r["form"] == "blocking"] == [("copse", "lanes")]' \
  "np4-vn2 bcast: one row, served in lanes"
json_check 'all(r["hierarchy"] is None for r in d["decision_table"]["rows"] if r["collective"] != "bcast")' \
  "auto 1.1x the configured form, within the noise: no row names it"
json_check '[(r["use"], r["blocks"], r["hierarchy"]) for r in d["decision_table"]["rows"] if r["shape"] == "np4-vn2" and r["collective"] == "allgather" and r["form"] == "blocking"] == [("copse", 16, None)]' \
  "np4-vn2 allgather: one row, served with 16 blocks"
json_check 'all(r["blocks"] is None for r in d["decision_table"]["rows"] if r["collective"] != "allgather")' \
  "no block count where none was measured"
checks=$((checks + 1))
grep -q 'hierarchy = "lanes"' hier.toml && grep -q 'by median in lanes (the configured form: ' hier.toml ||
  fail "the table does not name lanes with its ratios: $(grep -m3 lanes hier.toml)"
sed '3s/,copse,/,copse-tree,/' "$fixture/bench.csv" >badlabel.csv
expect 2 tune --from badlabel.csv --out x.toml && stderr_has "line 3: label 'copse-tree': unknown hierarchy form"

sed '2s/,blocking$/,immediate/' forms.csv >badform.csv
expect 2 tune --from badform.csv --out x.toml && stderr_has "line 2: unknown form 'immediate'"

# ------------------------------------------------------------------ mistakes: file, line, reason
sed '5s/,copse,2,100,true,\([^,]*\),.*/,copse,2,100,true,\1/' "$fixture/bench.csv" >short.csv
expect 2 tune --from short.csv --out x.toml && stderr_has "measurements short.csv, line 5:" && stderr_has "fields"
sed '3s/,[^,]*$/,fast/' "$fixture/bench.csv" >ratio.csv
expect 2 tune --from ratio.csv --out x.toml && stderr_has "line 3: ratio 'fast' is not a positive number"
sed '3s/^np2,2,allreduce/np2,2,alltoallw/' "$fixture/bench.csv" >coll.csv
expect 2 tune --from coll.csv --out x.toml && stderr_has "line 3: unknown collective 'alltoallw'"
sed '3s/^np2,/two,/' "$fixture/bench.csv" >shape.csv
expect 2 tune --from shape.csv --out x.toml && stderr_has "shape 'two'"
sed '3s/,true,/,false,/' "$fixture/bench.csv" >wrong.csv
expect 1 tune --from wrong.csv --out x.toml && stderr_has "line 3: np2 allreduce 8 B was not verified"
echo "config,np" >nocol.csv
expect 2 tune --from nocol.csv --out x.toml && stderr_has "no column collective"
expect 2 tune --from missing.csv --out x.toml && stderr_has "missing.csv"
printf 'default = "mpi"\n[[row]]\nuse = "fast"\n' >bad.toml
expect 2 tune --from np4.csv --out bad.toml && stderr_has "decision table bad.toml, line 3"
printf '[[row]]\nuse = "mpi"\nshape = "big"\n' >badshape.toml
expect 2 tune --from np4.csv --out badshape.toml && stderr_has "badshape.toml, line 1: shape 'big'"
checks=$((checks + 1))
[[ ! -e x.toml ]] || fail "a failed tune wrote its table"
expect 2 tune --from np4.csv --shapes np2
expect 2 tune --from np4.csv --threshold 0 && stderr_has "--threshold"
expect 2 tune --shapes np2,big && stderr_has "shape 'big'"
expect 2 tune --shapes np4-h2 && stderr_has "--host"
expect 2 tune --sizes 8,6 && stderr_has "6 is not a positive multiple of 4"
expect 2 tune --rounds 0 && stderr_has "--rounds"
expect 2 tune --forms blocking,immediate && stderr_has "--forms: 'immediate' is not a form"
expect 2 tune --sync fence && stderr_has "--sync: 'fence' is not barrier or p2p"
expect 2 tune --hierarchy-forms lanes,tree && stderr_has "--hierarchy-forms" && stderr_has "unknown hierarchy form \"tree\""
expect 2 tune --block-counts 4,4KiB && stderr_has "--block-counts: expected a whole number >= 1, got \"4KiB\""
expect 2 tune --block-counts 0 && stderr_has "--block-counts: the block count must be at least 1"
expect 2 tune --block-counts 2000000 && stderr_has "--block-counts: 2000000 is more than 1048576 blocks"
expect 2 tune --from "$fixture/bench.csv" --out x.toml --unmeasured 0 && stderr_has "--unmeasured: expected a ratio in (0, 1]"
expect 2 tune --mpirun /nonexistent/mpirun && stderr_has "cannot find the launcher"
expect 2 tune --mpirun true --bench /nonexistent/bench && stderr_has "cannot find the benchmark mpi_collectives at /nonexistent/bench"
# A launcher that runs nothing: the run is a failure (exit 1) naming the log,
# which holds the command: one host's options, more ranks than cores oversubscribed.
expect 1 tune --mpirun true --bench "$(type -P true)" --library "$fixture/bench.csv" --shapes np512 --sizes 8 \
  --rounds 1 --work "$tmp/w" --out x.toml && stderr_has "np512 tuned wrote no results" && stderr_has "$tmp/w/runs.log"
checks=$((checks + 1))
grep -q -- "^== np512 tuned round 1: true -np 512 --mca btl self,vader --oversubscribe .* --label tuned --config np512 --json $tmp/w/raw.jsonl --sizes 8 --forms blocking,nonblocking --sync p2p$" \
  "$tmp/w/runs.log" || fail "the log lacks the tuned side's command: $(head -c 400 "$tmp/w/runs.log")"
# Paired, the library's calls are timed within copse's runs: no run of its own.
expect 1 tune --mpirun true --bench "$(type -P true)" --library "$fixture/bench.csv" --shapes np512 --sizes 8 \
  --rounds 1 --paired --work "$tmp/wp" --out x.toml && stderr_has "np512 copse wrote no results"
checks=$((checks + 1))
grep -q -- "^== np512 copse round 1: true -np 512 .* -x COPSE_MPI_TABLE=none .* --label copse --config np512 --json $tmp/wp/raw.jsonl --native tuned " \
  "$tmp/wp/runs.log" && ! grep -q "^== np512 tuned" "$tmp/wp/runs.log" ||
  fail "the paired run is not copse's with the library's calls in it: $(head -c 400 "$tmp/wp/runs.log")"

# ------------------------------------------------------------------ a real measurement, small
# Where mpirun and the benchmark and interposer beside copse exist: two
# sizes, one round, np2 and np4-vn2 with lanes as copse's further form and 4
# blocks from the larger size. Only the several-node shape gets the
# copse-lanes and copse-b4 sides, with hierarchy.form and collectives.blocks
# set, the block count at the larger size only; the provenance lines say
# what each shape ran with.
bindir=$(dirname "$COPSE")
if type -P mpirun >/dev/null && [[ -x $bindir/mpi_collectives && -f $bindir/libcopse_mpi.so ]]; then
  expect OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MH_PROBE="two words" 0 tune --shapes np2,np4-vn2 --sizes 8,64KiB \
    --rounds 1 --refine 0 --forms blocking --hierarchy-forms lanes --block-counts 4 --block-counts-from 64KiB \
    --out real.toml --work real-runs
  checks=$((checks + 1))
  grep -q -- "^== np4-vn2 copse-lanes round 1: .* -x COPSE_HIERARCHY_FORM=lanes .*--label copse-lanes " real-runs/runs.log &&
    ! grep -q "^== np2 copse-lanes" real-runs/runs.log ||
    fail "the copse-lanes side is not np4-vn2's alone: $(grep '^==' real-runs/runs.log | cut -c1-120)"
  checks=$((checks + 1))
  grep -q -- "^== np4-vn2 copse-b4 round 1: .* -x COPSE_COLLECTIVES_BLOCKS=4 .*--label copse-b4 .* --min-size 65536$" \
    real-runs/runs.log && ! grep -q "^== np2 copse-b4" real-runs/runs.log &&
    grep -q '^np4-vn2,.*,65536,copse-b4,' real-runs/pooled.csv && ! grep -q '^np4-vn2,.*,8,copse-b4,' real-runs/pooled.csv ||
    fail "the copse-b4 side is not np4-vn2's alone, at 64 KiB: $(grep '^==' real-runs/runs.log | cut -c1-160)"
  checks=$((checks + 1))
  grep -q '^# measured np2: .* (line-up p2p; with MH_PROBE="two words")$' real.toml &&
    grep -q '^# measured np4-vn2: .* (line-up p2p; copse in its configured form, lanes; 4 blocks from 64 KiB; with MH_PROBE="two words")$' \
      real.toml ||
    fail "the provenance lines do not say what the shapes ran with: $(grep '^# measured' real.toml)"
else
  echo "cli_tune: no mpirun, or no mpi_collectives and libcopse_mpi.so beside $COPSE: the real measurement is skipped"
fi

# ------------------------------------------------------------------ copse config --stats: the calls per row
printf 'default = "mpi"\n[[row]]\ncollective = "bcast"\nuse = "mpi"\n[[row]]\ncollective = "*"\nuse = "copse"\n' >s.toml
stats_line() {  # stats_line RANK SOURCE ROWS UNMATCHED
  printf '{"rank": %s, "size": 2, "served": {}, "passed": {}, "cma": {}, "table": {"source": "%s", "rows": %s, "unmatched": %s}}\n' "$@"
}
{ stats_line 0 s.toml "[3, 5]" 1; stats_line 1 s.toml "[4, 6]" 0; } >stats.jsonl
expect COPSE_MPI_TABLE=s.toml 0 config --stats stats.jsonl
stdout_has "row 1 (line 2), 7 calls: bcast -> mpi"
stdout_has "row 2 (line 5), 11 calls: every collective -> copse"
stdout_has "no row matches, 1 call -> mpi"
expect COPSE_MPI_TABLE=s.toml 0 config --stats stats.jsonl --stats stats.jsonl --json
json_check '[r["calls"] for r in d["decision_table"]["rows"]] == [14, 22] and d["decision_table"]["unmatched_calls"] == 2' \
  "--stats twice: summed"
stats_line 0 other.toml "[1, 1]" 0 >other.jsonl
expect COPSE_MPI_TABLE=s.toml 2 config --stats other.jsonl && stderr_has "stats file other.jsonl, line 1: its counts are the decision table other.toml's"
stats_line 0 s.toml "[1]" 0 >short.jsonl
expect COPSE_MPI_TABLE=s.toml 2 config --stats short.jsonl && stderr_has "1 rows counted, the table s.toml has 2"
echo '{"rank": 0}' >notable.jsonl
expect COPSE_MPI_TABLE=s.toml 2 config --stats notable.jsonl && stderr_has "line 1: no decision table counts"
echo 'garbage' >garbage.jsonl
expect COPSE_MPI_TABLE=s.toml 2 config --stats garbage.jsonl && stderr_has "garbage.jsonl, line 1: not a stats line"
expect COPSE_MPI_TABLE=none 2 config --stats stats.jsonl && stderr_has "mpi.table is none"

finish
