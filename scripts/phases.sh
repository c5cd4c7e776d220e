#!/usr/bin/env bash
# Live heap (MiB) of each stage's phases on one program: after its transform, the largest at a check
# while its output is type-checked, after printing (the check comes first since session 33), and the
# process's max RSS (MB), one line a stage,
# from `COTANGENT_TRACE_MEMORY=1` (issue 14 item 4). Usage: scripts/phases.sh BIN FILE STAGE...
set -u
BIN=$1; F=$2; shift 2
tmp=$(mktemp)
for s in "$@"; do
  COTANGENT_TRACE_MEMORY=1 /usr/bin/time -f 'RSS %M' "$BIN" run "$F" --stage "$s" > /dev/null 2> "$tmp"
  awk -v s="$s" '
    index($0, "`" s "` starts type-checking") {tr=$2; inck=1; mx=$2; next}
    inck && /while type-checking/ {if ($2>mx) mx=$2}
    index($0, "`" s "` starts printing") {inck=0}
    index($0, "`" s "` starts lowering") {pr=$2}
    /^RSS/ {rss=$2}
    /error/ {err=substr($0,1,60)}
    END {printf "%s | after transform %s | check max %s | after printing %s | RSS %d MB %s\n", s, tr, mx, pr, rss/1024, err}' "$tmp"
done
rm -f "$tmp"
