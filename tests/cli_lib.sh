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
  env ${vars[@]+"${vars[@]}"} "$COPSE" "$@" >"$out" 2>"$err"
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "${vars[*]:-} copse $* exited $rc, expected $want; stderr: $(head -c 400 "$err")"
    return 1
  fi
  if [ "$want" -ne 0 ]; then
    local lines
    lines=$(wc -l <"$err")
    if [ "$lines" -ne 1 ] || ! grep -q '^copse: ' "$err"; then
      fail "copse $* must print exactly one line starting 'copse: ' on stderr, got $lines: $(head -c 400 "$err")"
      return 1
    fi
  fi
  return 0
}

# json_check EXPR [DESCRIPTION]: EXPR is a Python expression over d, the JSON
# that the last command printed on stdout, and s = d["settings"]; it must be true.
json_check() {
  checks=$((checks + 1))
  local message
  if ! message=$(python3 - "$out" "$1" 2>&1 <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("stdout is not JSON: %s" % e)
    sys.exit(1)
try:
    ok = eval(sys.argv[2], {"d": d, "s": d.get("settings", {}) if isinstance(d, dict) else {}})
except Exception as e:
    print("%s: %r" % (type(e).__name__, e))
    sys.exit(1)
if not ok:
    print("false; JSON was: %s" % json.dumps(d)[:600])
    sys.exit(1)
EOF
  ); then
    fail "${2:-$1}: $message"
  fi
}

stdout_has() {
  checks=$((checks + 1))
  grep -qF -- "$1" "$out" || fail "stdout lacks '$1'"
}

stderr_has() {
  checks=$((checks + 1))
  grep -qF -- "$1" "$err" || fail "stderr lacks '$1': $(head -c 400 "$err")"
}

finish() {
  echo "$CLI_TEST_NAME: $checks checks, $failures failed"
  [ "$failures" -eq 0 ]
}
