#!/usr/bin/env bash
# The progress line of long runs (issue 20 item 3): under a pseudo-terminal
# (script(1)) it appears on stderr and is erased at the end; never with
# --json, never when stderr is not a terminal, and not for a run shorter than
# COPSE_PROGRESS_AFTER (default 2 s). The short runs here set
# COPSE_PROGRESS_AFTER=0 to see it at once; one longer run checks the timer.
# A few seconds in all.
CLI_TEST_NAME=cli_progress
source "$(dirname "$0")/cli_lib.sh"
if ! script -qec true /dev/null </dev/null >/dev/null 2>&1; then
  echo "cli_progress: skipped: script(1) from util-linux is needed for a pseudo-terminal"
  exit 77
fi

# on_terminal FILE [NAME=VALUE...] ARGS...: copse ARGS with stdout and stderr
# on a pseudo-terminal, everything it drew into FILE; the exit status is copse's.
on_terminal() {
  local file=$1
  shift
  local command="env"
  local word
  for word in "$@" ; do command+=" $(printf '%q' "$word")"; done
  script -qec "$command" /dev/null </dev/null >"$file" 2>&1
}

# shows FILE WHAT: the line was drawn ("copse WHAT: ...") and its last drawing erased.
shows() {
  checks=$((checks + 1))
  grep -qa "copse $2: " "$1" || fail "no progress line for $2: $(head -c 300 "$1" | cat -v)"
  checks=$((checks + 1))
  # After the last drawing of the line comes the erase (\r ESC [K), then the output.
  python3 - "$1" "copse $2: " <<'PY' || fail "the progress line of $2 is not erased at the end: $(cat -v "$1" | head -c 400)"
import sys
text = open(sys.argv[1], "rb").read()
last = text.rfind(sys.argv[2].encode())
sys.exit(0 if last >= 0 and text.find(b"\r\x1b[K", last) > last else 1)
PY
}
# quiet FILE WHAT: no progress line.
quiet() {
  checks=$((checks + 1))
  if grep -qa "copse $2: " "$1"; then fail "a progress line for $2 where none belongs: $(cat -v "$1" | head -c 300)"; fi
}

sim=(sim --algorithm dual-root --ranks 16384 --bytes 1MiB --blocks 16)
checks=$((checks + 1))
on_terminal "$tmp/sim" COPSE_PROGRESS_AFTER=0 "$COPSE" "${sim[@]}" || fail "copse sim on a terminal failed"
shows "$tmp/sim" sim
checks=$((checks + 1))
grep -qa "allreduce dual-root: 16384 ranks" "$tmp/sim" || fail "sim's output is missing: $(cat -v "$tmp/sim" | head -c 300)"

# --json: machine output, no line even on a terminal; the JSON intact.
on_terminal "$tmp/json" COPSE_PROGRESS_AFTER=0 "$COPSE" "${sim[@]}" --json || fail "copse sim --json failed"
quiet "$tmp/json" sim
checks=$((checks + 1))
tr -d '\r' <"$tmp/json" | python3 -c 'import json, sys; json.load(sys.stdin)' || fail "sim --json on a terminal is not JSON"

# stderr not a terminal: nothing on it.
checks=$((checks + 1))
COPSE_PROGRESS_AFTER=0 "$COPSE" "${sim[@]}" >/dev/null 2>"$tmp/err" || fail "copse sim to a pipe failed"
[ ! -s "$tmp/err" ] || fail "stderr to a file holds: $(cat -v "$tmp/err")"

# The default threshold: a run shorter than 2 s shows nothing.
start=$(date +%s.%N)
on_terminal "$tmp/short" "$COPSE" sim --algorithm ring --ranks 64 --bytes 1MiB
short=$(python3 -c "print($(date +%s.%N) - $start < 1.5)")
[ "$short" = True ] && quiet "$tmp/short" sim

# A study counts its points: the line shows their total as soon as it is
# known (the study may end before the quarter second of the next redraw).
on_terminal "$tmp/study" COPSE_PROGRESS_AFTER=0 "$COPSE" study depth --nodes 2,8,32,128,512 --bytes 1MiB \
  --forms binomial,dual-root --out "$tmp/depth" || fail "copse study depth on a terminal failed"
shows "$tmp/study" "study depth"
checks=$((checks + 1))
grep -qa " of 10 points" "$tmp/study" || fail "study depth does not count its points: $(cat -v "$tmp/study" | head -c 400)"

# A malformed threshold is bad input, like any configuration variable.
checks=$((checks + 1))
COPSE_PROGRESS_AFTER=soon "$COPSE" "${sim[@]}" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^copse: COPSE_PROGRESS_AFTER' "$tmp/err" ||
  fail "COPSE_PROGRESS_AFTER=soon: exit $rc, stderr $(cat "$tmp/err")"

# The honest check: the timer, not COPSE_PROGRESS_AFTER=0, brings the line
# up for a run longer than the threshold (half a second here, to keep the
# check cheap: the rank-by-rank binomial tree on 2^20 ranks, 16 blocks, takes 1.5-3 s).
# If a faster simulator makes the run short, the check says so and fails:
# a check that skips itself is no check.
start=$(date +%s.%N)
on_terminal "$tmp/long" COPSE_PROGRESS_AFTER=0.5s "$COPSE" sim --algorithm binomial --ranks 1048576 --bytes 1MiB --blocks 16
seconds=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
checks=$((checks + 1))
if python3 -c "import sys; sys.exit(0 if $seconds > 1.0 else 1)"; then
  shows "$tmp/long" sim
else
  fail "the long simulation took only $seconds s; its check needs more than 1 s: choose a longer one"
fi

finish
