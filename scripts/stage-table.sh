#!/usr/bin/env bash
# Issue 14 item 4: each stage ALONE on one program, under /usr/bin/time -v, one line per stage:
# wall s, user s, peak RSS (MB), exit status, and the first error/budget line.
# Usage: scripts/stage-table.sh BIN FILE [TIMEOUT [run args...]], e.g.
#   scripts/stage-table.sh target/release/cotangent /tmp/shapes/chain-100000.cot 90 --max-mb 4000
# (programs from scripts/shapes.sh's `gen`; TIMEOUT per stage, default 90 s).
set -u
BIN=$1; F=$2; T=${3:-90}; shift 2; shift || true
tmp=$(mktemp -d)
printf '%-22s %8s %8s %6s %4s  %s\n' stage wall_s user_s rss_MB exit message
for s in $("$BIN" stages | grep -v '^#' | grep -v '^$' | cut -f1); do
  timeout "$T" /usr/bin/time -v -o "$tmp/t" "$BIN" run "$F" --stage "$s" "$@" > "$tmp/o" 2> "$tmp/e"; rc=$?
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$tmp/t")
  user=$(awk -F': ' '/User time/ {print $2}' "$tmp/t")
  rss=$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2 / 1024}' "$tmp/t")
  ((rc == 124)) && wall=">$T"
  msg=$(grep -h -m1 -E 'error|stopped|budget' "$tmp/e" "$tmp/o" | head -1 | cut -c1-160)
  printf '%-22s %8s %8s %6s %4s  %s\n' "$s" "${wall:-?}" "${user:-?}" "${rss:-?}" "$rc" "$msg"
done
rm -rf "$tmp"
