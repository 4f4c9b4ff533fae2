#!/usr/bin/env bash
# The limits a user meets (issue 20): runs that cannot fit, or would take
# far beyond two minutes, are refused at once with one line naming the
# estimate and the largest rank count that fits (exit 2), also under `ulimit
# -v`; --force skips the checks. Self-contained (no cli_lib.sh) so it can run
# in a few seconds.
set -uo pipefail
: "${COPSE:?set COPSE to the copse binary}"
# The estimate reads glibc's malloc statistics, and the checks set ulimit -v:
# a sanitizer's allocator keeps its own books and reserves terabytes of
# address space for its shadow, so under ASan/TSan neither means anything.
# Exit 77: CTest reports the test skipped (the default build runs it).
# (ldd's output whole: piped into grep -q under pipefail, grep's early exit
# can fail ldd with SIGPIPE and the check with it.)
libraries=$(ldd "$COPSE" 2>/dev/null || true)
if [[ $libraries == *libasan* || $libraries == *libtsan* ]]; then
  echo "cli_limits: skipped in a sanitizer build (its allocator and shadow memory defeat the memory checks)"
  exit 77
fi
failures=0
checks=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# The one-line refusals: memory that cannot fit, or a run that fits but
# would take far beyond two minutes.
memory_line='^copse: [a-z]+: [0-9]+ ranks need about .* B per rank\); .* is available \(.*\); at most [0-9]+ ranks fit'
time_line='^copse: sim: [0-9]+ ranks would take about .* to simulate; at most about [0-9]+ ranks run within .* \(--force runs anyway\)$'

# refused KIND SECONDS ULIMIT_KB ARGS...: copse exits 2 within SECONDS under
# `ulimit -v ULIMIT_KB` (0: none) with the one-line estimate on stderr, of
# KIND memory, time or either.
refused() {
  local kind=$1 seconds=$2 limit=$3
  shift 3
  local line
  case $kind in
    memory) line=$memory_line ;;
    time) line=$time_line ;;
    *) line="$memory_line|$time_line" ;;
  esac
  checks=$((checks + 1))
  local start end rc
  start=$(date +%s.%N)
  (
    [ "$limit" -gt 0 ] && ulimit -v "$limit"
    exec timeout 20 "$COPSE" "$@"
  ) >"$tmp/out" 2>"$tmp/err"
  rc=$?
  end=$(date +%s.%N)
  if [ "$rc" -ne 2 ]; then
    fail "copse $* (ulimit -v $limit) exited $rc, expected 2; stderr: $(head -c 300 "$tmp/err")"
    return
  fi
  if [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -Eq "$line" "$tmp/err"; then
    fail "copse $*: expected one line with the $kind estimate and the largest p; got: $(cat "$tmp/err")"
  fi
  if python3 -c "import sys; sys.exit(0 if $end - $start < $seconds else 1)"; then :; else
    fail "copse $* took $(python3 -c "print(round($end - $start, 2))") s to refuse (at most $seconds)"
  fi
}

# The commands the issue found growing until the machine ran out. The ring
# runs as one shift profile, 8 bytes a rank (its finish time): at p = 2^31
# that may fit in memory, but its 2^32 steps would take minutes.
refused either 1 0 sim --ranks 2147483647 --algorithm ring --bytes 1
refused memory 1 0 sim --ranks 100000000 --algorithm auto --bytes 1MiB
# p = 10^8 on the ring needs some 0.9 GB and 20 s here: it runs (still going
# after a second, by when a refusal would have come), but 500 MB of address
# space cannot hold its 800 MB of finish times.
checks=$((checks + 1))
timeout 1 "$COPSE" sim --ranks 100000000 --algorithm ring --bytes 1MiB >/dev/null 2>"$tmp/err"
rc=$?
if [ "$rc" -ne 124 ] && [ "$rc" -ne 0 ]; then fail "ring at p = 10^8 exited $rc: $(cat "$tmp/err")"; fi
refused memory 1 500000 sim --ranks 100000000 --algorithm ring --bytes 1MiB
# Under an address-space limit: 120 MB cannot hold two million ranks'
# schedules (dual-root's lockstep run: some 85 bytes a rank).
refused memory 1 120000 sim --ranks 2097152 --algorithm dual-root --bytes 1MiB --blocks 16
refused memory 1 120000 emulate --nodes 1024 --ranks-per-node 4 --bytes 1MiB --algorithm dual-root
# Late arrivals take the ring off its shift profile, rank by rank, 2(p - 1)
# steps each: at p = 2^18 some 150 MB, but hours.
refused time 1 0 sim --ranks 262144 --algorithm ring --bytes 1MiB --arrival rand-late:1us

# The largest p it names fits: a run of it under the same limit succeeds
# (nine tenths of it: the estimate is the fit of measured peaks plus a margin).
checks=$((checks + 1))
(ulimit -v 120000 && exec "$COPSE" sim --ranks 2097152 --algorithm dual-root --bytes 1MiB --blocks 16) 2>"$tmp/err"
fit=$(sed -n 's/.*at most \([0-9]*\) ranks fit.*/\1/p' "$tmp/err")
if [ -z "$fit" ] || [ "$fit" -lt 10000 ]; then
  fail "expected a largest p of at least 10000 under ulimit -v 120000, got '${fit}' from: $(cat "$tmp/err")"
elif ! (ulimit -v 120000 && exec "$COPSE" sim --ranks $((fit * 9 / 10)) --algorithm dual-root --bytes 1MiB --blocks 16 >/dev/null); then
  fail "copse sim --ranks $((fit * 9 / 10)) under ulimit -v 120000 failed"
fi

# --force skips the check: the run itself then fails for want of memory
# (any non-zero status but 2), rather than being refused up front.
checks=$((checks + 1))
(ulimit -v 120000 && exec timeout 20 "$COPSE" sim --force --ranks 2097152 --algorithm dual-root --bytes 1MiB \
  --blocks 16) >/dev/null 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 2 ] && grep -q 'ranks need about' "$tmp/err"; then fail "--force still refused: $(cat "$tmp/err")"; fi
if [ "$rc" -eq 0 ]; then fail "--force under ulimit -v 120000 ran two million ranks (the estimate is too high)"; fi

# --blocks auto at alpha = 0 (a bandwidth-only study) is bounded: it took
# minutes and chose 2 blocks; now under a second, says which bound it hit,
# and its block count is faster than 2 blocks (8.51 ms).
checks=$((checks + 1))
start=$(date +%s.%N)
"$COPSE" sim --collective reduce --algorithm uni-greedy --blocks auto --ranks 64 --bytes 1000000 --alpha 0 \
  --beta 1e-9 --gamma 1e-9 --ports uni --json >"$tmp/out" 2>"$tmp/err" || fail "alpha = 0 search: $(cat "$tmp/err")"
end=$(date +%s.%N)
python3 -c "import sys; sys.exit(0 if $end - $start < 1 else 1)" ||
  fail "alpha = 0 block search took $(python3 -c "print(round($end - $start, 2))") s (at most 1)"
python3 - "$tmp/out" <<'PY' || fail "alpha = 0 block search: $(cat "$tmp/out" | head -c 300)"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["blocks_bound"] == "model gain flattens", d["blocks_bound"]
assert d["blocks"] <= d["blocks_cap"], (d["blocks"], d["blocks_cap"])
assert d["time_ps"] < 8508500000, d["time_ps"]
PY

# --algorithm auto on nodes ranks forms as well as algorithms (issue 16), as
# `copse demo` does: on demo's cluster (4 nodes x 8, 1 MiB, the configured
# model) both rank the same form and algorithm first.
checks=$((checks + 1))
"$COPSE" demo --json --model config --gantt '' --repetitions 1 >"$tmp/demo" 2>"$tmp/err" || fail "demo: $(cat "$tmp/err")"
"$COPSE" sim --algorithm auto --ranks 32 --ranks-per-node 8 --bytes 1MiB --json >"$tmp/sim" 2>"$tmp/err" ||
  fail "sim --algorithm auto on nodes: $(cat "$tmp/err")"
python3 - "$tmp/demo" "$tmp/sim" <<'PY' || fail "sim --algorithm auto and demo disagree on the winner"
import json, sys
demo, sim = (json.load(open(f)) for f in sys.argv[1:3])
w = demo["winner"]
print("demo:", w["form"], w["algorithm"], "sim:", sim["form"], sim["algorithm"], file=sys.stderr)
assert sim["selected"] and (sim["form"], sim["algorithm"]) == (w["form"], w["algorithm"])
PY

echo "cli_limits: $checks checks, $failures failures"
[ "$failures" -eq 0 ]
