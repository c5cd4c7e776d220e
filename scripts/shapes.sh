#!/usr/bin/env bash
# Issue 14 item 4's hostile shapes: writes each program to $OUT (default /tmp/shapes) and runs the
# release CLI on it under /usr/bin/time -v, printing one line per case: wall seconds, peak RSS (MB),
# exit status, and the first line of stderr. Usage: scripts/shapes.sh [BIN] [CASE...]
# (BIN defaults to target/release/cotangent; CASEs filter by name prefix; TIMEOUT per case, default 120 s).
set -u
BIN=${1:-target/release/cotangent}; shift || true
OUT=${OUT:-/tmp/shapes}; TIMEOUT=${TIMEOUT:-120}
mkdir -p "$OUT"

gen() { # name → program text
  case $1 in
  plus-*) local n=${1#plus-}; { echo "input 1.5"; printf 'def main x = x'; for ((i = 1; i < n; i++)); do printf ' + x'; done; echo; } ;;
  sin-*) local n=${1#sin-}; { echo "input 0.5"; printf 'def main x = '; for ((i = 0; i < n; i++)); do printf 'sin ('; done; printf 'x'; for ((i = 0; i < n; i++)); do printf ')'; done; echo; } ;;
  lambda-*) local n=${1#lambda-}; { echo "input 1.5"; printf 'def main x = (\\p0'; for ((i = 1; i < n; i++)); do printf ' -> \\p%d' $i; done; printf ' -> p0 * 2.0)'; for ((i = 0; i < n; i++)); do printf ' x'; done; echo; } ;;
  unused-*) local n=${1#unused-}; { echo "input 1.5"; printf 'def g'; for ((i = 0; i < n; i++)); do printf ' p%d' $i; done; echo ' = 1.0'; echo 'def main x = x * 2.0'; } ;;
  repeated-*) local n=${1#repeated-}; { echo "input 1.5"; printf 'def g'; for ((i = 0; i < n; i++)); do printf ' p'; done; echo ' = 1.0'; echo 'def main x = x * 2.0'; } ;;
  tuple-*) local n=${1#tuple-}; { echo "input 1.5"; printf 'def main x = '; for ((i = 0; i < n; i++)); do printf '(x, '; done; printf 'x'; for ((i = 0; i < n; i++)); do printf ')'; done; echo; } ;;
  pairs-*) local n=${1#pairs-}; { echo "input 1.5"; printf 'def main x = '; for ((i = 0; i < n; i++)); do printf '('; done; printf 'x'; for ((i = 0; i < n; i++)); do printf ', 1.0)'; done; echo; } ;;
  badinput-*) local n=${1#badinput-}; { printf 'input '; for ((i = 0; i < n; i++)); do printf '(1.0, '; done; printf '1.0'; for ((i = 0; i < n; i++)); do printf ')'; done; echo; echo 'def main x = x * 2.0'; } ;;
  elseif-*) local n=${1#elseif-}; { echo "input 0.5"; printf 'def main x =\n  if x < 0.0 then 0.0\n'; for ((i = 1; i < n; i++)); do printf '  else if x < %d.0 then x * %d.0\n' $i $i; done; echo '  else x'; } ;;
  chain-*) local n=${1#chain-}; { echo "input 1.5"; echo "def main x ="; echo "  let v0 = x * 1.01 + 0.5 in"; for ((i = 1; i < n; i++)); do printf '  let v%d = v%d * 1.01 + 0.5 in\n' $i $((i - 1)); done; echo "  v$((n - 1))"; } ;;
  twice-*) local n=${1#twice-}; { echo "input 1.5"; echo "def twice f x = f (f x)"; echo "def double x = 2.0 * x"; printf 'def main x = '; for ((i = 0; i < n; i++)); do printf 'twice ('; done; printf 'double'; for ((i = 0; i < n; i++)); do printf ')'; done; echo ' x'; } ;;
  esac
}

# name | arguments after the file
CASES=(
  "plus-3000|--stage forward"
  "plus-10000|--stage forward"
  "plus-3000|"
  "plus-10000|--stage forward --json"
  "plus-10000|"
  "plus-10000|--json"
  "sin-10000|--stage forward"
  "sin-10000|--stage forward --json"
  "sin-10000|"
  "sin-3000|"
  "lambda-100|--stage forward"
  "lambda-400|--stage forward"
  "lambda-400|"
  "unused-600|--stage forward"
  "unused-600|"
  "repeated-1000|--stage forward"
  "tuple-400|--stage forward"
  "tuple-400|"
  "pairs-4000|--stage forward"
  "pairs-16000|--stage forward"
  "pairs-4000|"
  "badinput-1000|--stage forward"
  "elseif-1000|--json"
  "elseif-1000|"
  "chain-1000|"
  "chain-3000|"
  "chain-10000|"
  "chain-100000|"
  "twice-20|--stage forward"
  "twice-20|"
)

printf '%-16s %-28s %8s %8s %4s  %s\n' case args wall_s rss_MB exit message
for c in "${CASES[@]}"; do
  name=${c%%|*}; args=${c#*|}
  if (($# > 0)); then keep=0; for f in "$@"; do [[ $name == $f* ]] && keep=1; done; ((keep)) || continue; fi
  f="$OUT/$name.cot"; [[ -f $f ]] || gen "$name" > "$f"
  # shellcheck disable=SC2086
  timeout "$TIMEOUT" /usr/bin/time -v -o "$OUT/time.txt" "$BIN" run "$f" $args > "$OUT/out.txt" 2> "$OUT/err.txt"
  rc=$?
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$OUT/time.txt" 2>/dev/null)
  rss=$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2 / 1024}' "$OUT/time.txt" 2>/dev/null)
  ((rc == 124)) && wall=">$TIMEOUT"
  msg=$(grep -m1 -E 'error|stopped|budget' "$OUT/err.txt" "$OUT/out.txt" 2>/dev/null | cut -c1-110 | sed 's/^[^:]*\.txt://')
  printf '%-16s %-28s %8s %8s %4s  %s\n' "$name" "${args:-all stages}" "${wall:-?}" "${rss:-?}" "$rc" "$msg"
done
