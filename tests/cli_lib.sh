#!/usr/bin/env bash
# Shared by the CLI contract scripts (cli_contract, cli_topo, cli_config):
# set CLI_TEST_NAME, then source this file. It checks its inputs, makes a temp
# directory ($tmp, removed on exit) and defines the checks below; end the
# script with `finish`, which prints the count and sets the exit status.
set -uo pipefail

: "${COPSE:?set COPSE to the copse binary}"
: "${CLI_TEST_NAME:?set CLI_TEST_NAME before sourcing cli_lib.sh}"
command -v python3 >/dev/null || { echo "$CLI_TEST_NAME: python3 is needed to read JSON" >&2; exit 1; }
case "$COPSE" in /*) ;; *) COPSE="$PWD/$COPSE" ;; esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out="$tmp/out"
err="$tmp/err"
failures=0
checks=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# expect [NAME=VALUE...] RC ARGS...: runs copse with those variables set and
# checks the exit status; on a non-zero status stderr must be exactly one line
# starting "copse: ".
expect() {
  local vars=()
  while [[ "$1" == *=* ]]; do
    vars+=("$1")
    shift
  done
  local want=$1
  shift
  checks=$((checks + 1))
  # Without env(1) when no variable is set: a script runs copse hundreds of
  # times, and every process started costs milliseconds in this VM.
  if ((${#vars[@]})); then
    env "${vars[@]}" "$COPSE" "$@" >"$out" 2>"$err"
  else
    "$COPSE" "$@" >"$out" 2>"$err"
  fi
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "${vars[*]:-} copse $* exited $rc, expected $want; stderr: $(head -c 400 "$err")"
    return 1
  fi
  if [ "$want" -ne 0 ]; then
    # Read by the shell (read -d '' keeps every newline), not by wc and grep.
    local text="" lines
    IFS= read -r -d '' text <"$err" || true
    lines=${text//[!$'\n']/}
    lines=${#lines}
    if [ "$lines" -ne 1 ] || [[ $text != "copse: "* ]]; then
      fail "copse $* must print exactly one line starting 'copse: ' on stderr, got $lines: $(head -c 400 "$err")"
      return 1
    fi
  fi
  return 0
}

# json_check EXPR [DESCRIPTION]: EXPR is a Python expression over d, the JSON
# that the last command printed on stdout, and s = d["settings"]; it must be true.
# The check is recorded (with a copy of stdout) and evaluated by `finish`, all
# of a script's checks in one Python process: one interpreter per check cost
# these scripts most of their time.
json_checks="$tmp/json_checks"
: >"$json_checks"
json_check() {
  checks=$((checks + 1))
  printf '%s' "$(<"$out")" >"$tmp/json.$checks"  # a copy without cp's process (JSON needs no trailing newline)
  # NUL-separated: an expression or description may hold any other character.
  printf '%s\0%s\0%s\0' "$tmp/json.$checks" "$1" "${2:-$1}" >>"$json_checks"
}

# Evaluates the recorded json_checks; prints one FAIL line for each that is
# false and the number of those on its last line.
run_json_checks() {
  python3 - "$json_checks" <<'EOF'
import json, sys
fields = open(sys.argv[1], "rb").read().decode().split("\0")[:-1]
failed = 0
for i in range(0, len(fields), 3):
    path, expr, what = fields[i:i + 3]
    try:
        d = json.load(open(path))
    except Exception as e:
        message = "stdout is not JSON: %s" % e
    else:
        try:
            ok = eval(expr, {"d": d, "s": d.get("settings", {}) if isinstance(d, dict) else {}})
            message = None if ok else "false; JSON was: %s" % json.dumps(d)[:600]
        except Exception as e:
            message = "%s: %r" % (type(e).__name__, e)
    if message is not None:
        print("FAIL: %s: %s" % (what, message), file=sys.stderr)
        failed += 1
print(failed)
EOF
}

# Checks of the text by the shell itself, not grep: no process per check.
stdout_has() {
  checks=$((checks + 1))
  [[ $(<"$out") == *"$1"* ]] || fail "stdout lacks '$1'"
}

stderr_has() {
  checks=$((checks + 1))
  [[ $(<"$err") == *"$1"* ]] || fail "stderr lacks '$1': $(head -c 400 "$err")"
}

finish() {
  local json_failed
  json_failed=$(run_json_checks) || json_failed=1
  failures=$((failures + ${json_failed:-1}))
  echo "$CLI_TEST_NAME: $checks checks, $failures failed"
  [ "$failures" -eq 0 ]
}
