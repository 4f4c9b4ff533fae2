#!/usr/bin/env bash
# Virtual time is deterministic: the same `copse emulate` command gives the
# same virtual times whether the process has two cores or is pinned to one,
# where the ranks' interleaving differs completely. (Across repetitions the
# emulator itself fails a run whose virtual times change.)
set -euo pipefail
: "${COPSE:?set COPSE to the copse binary}"
fail=0
virtual_ps() { python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["verified"], j; print(j["virtual_time_ps"], j["simulated_time_ps"])'; }
for algorithm in dual-root two-tree ring chain; do
  args=(emulate --nodes 6 --ranks-per-node 5 --algorithm "$algorithm" --bytes 300KiB --blocks 9 --repetitions 3 --json)
  free=$("$COPSE" "${args[@]}" | virtual_ps)
  pinned=$(taskset -c 0 "$COPSE" "${args[@]}" | virtual_ps)
  uni=$(taskset -c 0 "$COPSE" "${args[@]}" --ports uni | virtual_ps)
  read -r free_v free_s <<<"$free"
  read -r pinned_v _ <<<"$pinned"
  if [[ "$free_v" != "$pinned_v" || "$free_v" != "$free_s" ]]; then
    echo "FAIL $algorithm: virtual ${free_v} ps on two cores, ${pinned_v} ps pinned, simulator ${free_s} ps"; fail=1
  else
    echo "ok   $algorithm: ${free_v} ps on two cores and pinned to one, equal to the simulator"
  fi
  read -r uni_v uni_s <<<"$uni"
  if [[ "$uni_v" != "$uni_s" || "$uni_v" -lt "$free_v" ]]; then
    echo "FAIL $algorithm: unidirectional ${uni_v} ps, simulator ${uni_s} ps"; fail=1
  fi
done
passed=$(( fail ? 0 : 1 )); echo "determinism: $passed passed, $fail failed"
exit $fail
