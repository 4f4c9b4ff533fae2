#!/usr/bin/env bash
# The house limits: no source file over 600 lines and no function over 120
# lines, tables excepted. Checks every C, C++, Fortran and shell file git
# knows of (tracked, or new and not ignored) in every folder, tests and bench
# included. Function extents come from universal-ctags (scripts/install-deps.sh
# installs it) for C and C++; for what ctags gives only a start line (shell
# functions, Fortran units) and what it does not see (Catch2's TEST_CASE),
# the end is the first line after the start that closes at the start's
# indentation (clang-format and the scripts' style keep it so).
# Prints every violation; exit 1 if any.
set -uo pipefail
cd "$(dirname "$0")/.."
max_file=600
max_function=120

# What may exceed a limit, and why: tables, whose length is their content.
# One entry a line: a path (the file's length) or path:function (a function's).
# None today: the algorithm registry (algorithms/registry.cpp) is well within
# both. An entry would read
#   "algorithms/registry.cpp:registry"  # the algorithm table: one row per algorithm
allowed=()

if ! command -v ctags >/dev/null || ! ctags --version 2>/dev/null | grep -q "Universal Ctags"; then
  echo "sizes.sh: universal-ctags is not installed (scripts/install-deps.sh installs it)" >&2
  exit 1
fi
is_allowed() {
  local entry
  for entry in "${allowed[@]}"; do [[ $entry == "$1" ]] && return 0; done
  return 1
}
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.h' '*.c' '*.f90' '*.sh' \
  2>/dev/null || find . -path ./build -prune -o \( -name '*.[ch]pp' -o -name '*.[ch]' -o -name '*.f90' -o -name '*.sh' \) -print)
files=("${files[@]#./}")
bad=0

# A handful of processes for the whole tree, not several per file or per
# function (this ran 19 s of CPU as a loop of wc, grep and awk).
mapfile -t present < <(for f in "${files[@]}"; do [[ -f $f ]] && printf '%s\n' "$f"; done)
while read -r lines f; do
  [[ $f == total ]] && continue
  if ((lines > max_file)) && ! is_allowed "$f"; then
    echo "sizes: $f has $lines lines (at most $max_file)"
    bad=$((bad + 1))
  fi
done < <(printf '%s\0' "${present[@]}" | xargs -0 wc -l)

# Functions: "start end file name" for each, end 0 where it is to be found.
functions() {
  printf '%s\n' "${present[@]}" | ctags -L - --fields=+ne --kinds-C++=+f -x \
    --_xformat='%{line}|%{end}|%{kind}|%{input}|%{name}' 2>/dev/null |
    awk -F'|' '$3 ~ /^(function|subroutine|program)$/ && $5 !~ /=$/ { print $1, ($2 == "" ? 0 : $2), $4, $5 }'
  # (ctags's shell parser also reads an array assignment, `name=()`, as a
  # function: the awk above drops those.) Catch2 test cases, which ctags
  # reads as calls:
  local cpp=()
  for f in "${present[@]}"; do [[ $f == *.cpp ]] && cpp+=("$f"); done
  ((${#cpp[@]})) && grep -H -n -E '^(TEST_CASE|TEST_CASE_METHOD|SCENARIO|TEMPLATE_TEST_CASE)\(' "${cpp[@]}" |
    awk -F: '{ print $2, 0, $1, "TEST_CASE" }'
}

# Each unit's length, "length file start name", in one awk pass over the
# files that hold units. Where ctags gave no end, the end is the start line
# itself where it closes what it opens, else the first later line that, at
# the start line's indentation, closes it (`}` or Fortran's `end`).
lengths() {
  local list
  list=$(mktemp)
  functions >"$list"
  mapfile -t holders < <(awk '{ print $3 }' "$list" | sort -u)
  ((${#holders[@]})) && awk '
    FNR == NR {  # several units may start on one line (a lambda inside a call)
      key = $3 SUBSEP $1; k = ++units[key]; want[key, k] = $2
      n = $0; sub(/^[^ ]+ [^ ]+ [^ ]+ /, "", n); name[key, k] = n; next
    }
    FNR == 1 { n_open = 0 }
    {
      for (i = 1; i <= n_open; ++i) {  # open units waiting for their end
        if (done[i] || index($0, ind[i]) != 1) continue
        rest = substr($0, length(ind[i]) + 1)
        if (rest ~ /^}/ || tolower(rest) ~ /^end[ \t]*(subroutine|function|program)?([ \t!]|$)/) {
          print FNR - st[i] + 1, FILENAME, st[i], nm[i]; done[i] = 1
        }
      }
      key = FILENAME SUBSEP FNR
      for (k = 1; k <= units[key]; ++k) {
        if (want[key, k] > 0) { print want[key, k] - FNR + 1, FILENAME, FNR, name[key, k]; continue }
        line = $0; opens = gsub(/{/, "", line); closes = gsub(/}/, "", line)
        if (opens > 0 && opens == closes) { print 1, FILENAME, FNR, name[key, k]; continue }  # f() { ...; } on one line
        match($0, /^[ \t]*/)
        ++n_open; st[n_open] = FNR; ind[n_open] = substr($0, 1, RLENGTH); nm[n_open] = name[key, k]; done[n_open] = 0
      }
    }' "$list" "${holders[@]}"
  rm -f "$list"
}

while read -r length file start name; do
  if [[ -n ${SIZES_DEBUG:-} ]] && echo "debug $length $file:$start $name"
  ((length > max_function)) && ! is_allowed "$file:$name"; then
    echo "sizes: $file:$start: $name has $length lines (at most $max_function)"
    bad=$((bad + 1))
  fi
done < <(lengths)

echo "sizes: ${#files[@]} files checked, $bad over a limit"
((bad == 0))
