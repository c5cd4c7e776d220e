#!/usr/bin/env bash
# Live heap (MiB) of each stage's phases on one program: after its transform, after printing, the
# largest at a check while its output is type-checked, and the process's max RSS (MB), one line a stage,
# from `COTANGENT_TRACE_MEMORY=1` (issue 14 item 4). Usage: scripts/phases.sh BIN FILE STAGE...
set -u
BIN=$1; F=$2; shift 2
tmp=$(mktemp)
for s in "$@"; do
  COTANGENT_TRACE_MEMORY=1 /usr/bin/time -f 'RSS %M' "$BIN" run "$F" --stage "$s" > /dev/null 2> "$tmp"
  awk -v s="$s" '
    index($0, "`" s "` starts printing") {pr=$2}
    index($0, "`" s "` starts type-checking") {ck=$2; inck=1; mx=$2; next}
    inck && /while type-checking/ {if ($2>mx) mx=$2}
    index($0, "`" s "` starts lowering") {inck=0}
    /^RSS/ {rss=$2}
    /error/ {err=substr($0,1,60)}
    END {printf "%s | after transform %s | after printing %s | check max %s | RSS %d MB %s\n", s, pr, ck, mx, rss/1024, err}' "$tmp"
done
rm -f "$tmp"
