#!/usr/bin/env bash
# scripts/model-vs-measured.sh (issue 17, item 5): for a pooled CSV's copse
# rows it prints the emulator's prediction under the model file beside the
# measured median -- the emulator's own virtual time for that call, a ratio
# that is predicted/median, the summary's median and worst ratio -- follows
# the model (a slower network predicts more), reads a reduce_scatter_block's
# size as the whole vector, and refuses bad input with exit 2.
#
# Run by CTest with COPSE=<path to the copse binary>; by hand:
#   COPSE=build/default/copse bash tests/cli_model_check.sh

CLI_TEST_NAME=cli_model_check
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
script="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/scripts/model-vs-measured.sh"

for name in $(compgen -e); do
  case "$name" in COPSE_*) unset "$name" ;; esac
done
cd "$tmp" || exit 1

cat >model.toml <<'EOF'
[model]
inter_alpha = "10us"
inter_beta = "500ps"
intra_alpha = "200ns"
intra_beta = "50ps"
timing = "hockney"
EOF
sed 's/10us/40us/' model.toml >slow.toml
cat >pooled.csv <<'EOF'
config,np,collective,root,bytes,label,runs,repetitions,verified,min_s,median_s,tuned_over_min,tuned_over_median
h,4,allreduce,,8,tuned,2,100,true,1e-05,2e-05,1.0,1.0
h,4,allreduce,,8,copse,2,100,true,1e-05,4e-05,1.0,1.0
h,4,bcast,0,65536,copse,2,100,true,1e-04,2e-04,1.0,1.0
h,4,barrier,,0,copse,2,100,true,1e-05,1e-05,1.0,1.0
h,4,reduce_scatter_block,,4096,copse,2,100,true,1e-05,5e-05,1.0,1.0
h,8,allreduce,,8,copse,2,100,true,1e-05,4e-05,1.0,1.0
EOF

run() {
  bash "$script" --copse "$COPSE" --nodes 2 --ranks-per-node 2 --measured pooled.csv "$@" >"$out" 2>"$err"
  rc=$?
}
check() {  # check CONDITION DESCRIPTION
  checks=$((checks + 1))
  eval "$1" || fail "$2; stdout: $(head -c 600 "$out"); stderr: $(head -c 300 "$err")"
}
# predicted COLLECTIVE: its row's predicted microseconds
predicted() { awk -v c="$1" '$1 == c { print $3 }' "$out"; }
# emulated ARGS...: the emulator's virtual time in microseconds
emulated() {
  "$COPSE" emulate --nodes 2 --ranks-per-node 2 --form leader --config model.toml --repetitions 1 --json "$@" |
    awk -F'[:,]' '/"virtual_time_ps"/ { printf "%.2f", $2 * 1e-6 }'
}

run --model model.toml
check '[ $rc -eq 0 ]' "a good run exits 0"
check '[ "$(grep -c -E "^(allreduce|bcast|barrier|reduce_scatter_block) " "$out")" -eq 4 ]' \
  "one row per copse call of np 4 (not tuned's, not np 8's)"
check '[ "$(predicted allreduce)" = "$(emulated --collective allreduce --algorithm dual-root --bytes 8)" ]' \
  "allreduce's prediction is the emulator's time for the configured algorithm"
check '[ "$(predicted bcast)" = "$(emulated --collective bcast --algorithm binary-tree --bytes 65536 --root 0)" ]' \
  "bcast's prediction is the emulator's, root given"
check '[ "$(predicted reduce_scatter_block)" = "$(emulated --collective reduce_scatter --algorithm binary-tree --bytes 1024)" ]' \
  "a reduce_scatter_block of 4 KiB at np 4 is the emulator's reduce_scatter of 1 KiB blocks"
check 'awk '\''$1 == "allreduce" { r = $3 / $4; exit !(r / $6 > 0.99 && r / $6 < 1.01) }'\'' "$out"' \
  "the ratio is predicted over the median"
check 'grep -q "^predicted/measured over 4 calls: median [0-9.]*, worst [0-9.]*$" "$out"' "the summary line"
fast=$(predicted allreduce)
run --model slow.toml
check 'awk -v a="$fast" -v b="$(predicted allreduce)" "BEGIN { exit !(b > a + 20) }"' \
  "a network 30 us slower per message predicts a slower allreduce ($fast us, then $(predicted allreduce) us)"

for bad in "--model missing.toml" "--model model.toml --nodes 0" "--model model.toml --measured model.toml" \
  "--model model.toml --label none" "--model model.toml --bogus"; do
  # shellcheck disable=SC2086
  run $bad
  check '[ $rc -eq 2 ] && [ "$(wc -l <"$err")" -eq 1 ] && grep -q "^model-vs-measured: " "$err"' \
    "bad input ($bad) exits 2 with one line"
done

finish
