#!/usr/bin/env bash
# Every C++ file git tracks is formatted as .clang-format says. Prints the
# files that are not and exits 1; `tests/format.sh --fix` formats them in place.
# The style is checked with clang-format 14 (Debian 12's, installed by
# scripts/install-deps.sh); another major version formats some constructs
# differently, so with one the check is skipped (CTest shows it as skipped),
# never passed.
set -uo pipefail
cd "$(dirname "$0")/.."
fix=0
case "${1:-}" in
  --fix) fix=1 ;;
  "") ;;
  *) echo "format.sh: unknown argument '$1' (only --fix)" >&2; exit 2 ;;
esac
tool=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z "$tool" ]]; then
  echo "format.sh: clang-format is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
major=$("$tool" --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [[ "$major" != 14 ]]; then
  echo "format.sh: $tool is version $major, the style is checked with 14: skipped"
  exit 77
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' 2>/dev/null || find . -name '*.[ch]pp' -not -path './build/*')
if ((fix)); then
  "$tool" -i --style=file "${files[@]}"
  exit 0
fi
# One clang-format process for every file (one per file cost five times the
# CPU, most of it start-up); it names each unformatted file in its diagnostics
# ("FILE:LINE:COL: error: code should be clang-formatted").
report=$("$tool" --style=file --dry-run --Werror "${files[@]}" 2>&1 >/dev/null)
status=$?
mapfile -t bad < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$report" | sort -u)
if ((status != 0 && ${#bad[@]} == 0)); then
  echo "format.sh: $tool failed (exit $status) without naming a file:" >&2
  printf '%s\n' "$report" | head -20 >&2
  exit 1
fi
echo "format.sh: ${#files[@]} files checked, ${#bad[@]} not formatted"
if ((${#bad[@]})); then
  printf '  %s\n' "${bad[@]}"
  echo "format.sh: run tests/format.sh --fix (clang-format 14) to format them"
  exit 1
fi
