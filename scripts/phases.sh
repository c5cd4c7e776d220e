#!/usr/bin/env bash
# Live heap (MiB) of each stage's phases on one program: after its transform, the largest at a check
# while its output is type-checked, the peak while it is printed (the allocator's, between the phase's
# start and the next line), and the process's max RSS (MB), one line a stage, from
# `COTANGENT_TRACE_MEMORY=1` (issue 14 item 4). The pipeline printed before the check until session 33
# and prints after it since; the columns read either order. Usage: scripts/phases.sh BIN FILE STAGE...
set -u
BIN=$1; F=$2; shift 2
tmp=$(mktemp)
for s in "$@"; do
  COTANGENT_TRACE_MEMORY=1 /usr/bin/time -f 'RSS %M' "$BIN" run "$F" --stage "$s" > /dev/null 2> "$tmp"
  awk -v s="$s" '
    function peak(l) { sub(/.*\(peak /, "", l); sub(/ MiB.*/, "", l); return l + 0 }
    inpr && /\(peak / {if (peak($0)>pp) pp=peak($0)}
    inpr && /starts/ {inpr=0}
    index($0, "`" s "` starts printing") {if (tr=="") tr=$2; inpr=1}
    index($0, "`" s "` starts type-checking") {if (tr=="") tr=$2; inck=1; mx=$2; next}
    inck && /while type-checking/ {if ($2>mx) mx=$2; next}
    inck && /starts/ {inck=0}
    /^RSS/ {rss=$2}
    /error/ {err=substr($0,1,60)}
    END {printf "%s | after transform %s | check max %s | printing peak %s | RSS %d MB %s\n", s, tr, mx, pp, rss/1024, err}' "$tmp"
done
rm -f "$tmp"
