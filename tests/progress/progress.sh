#!/bin/sh
# progress.sh KFUSE_OPT: kfuse-opt's progress line (tools/kfuse-opt.c, fed by
# the pass manager's progress callback, core/pass.h): shown on a terminal
# (script(1) gives one) once a pass has run KFUSE_PROGRESS_AFTER seconds
# (0 here, so that a test need not run a second), with the pass, the graph
# and a percentage; never when stderr is not a terminal; never with --quiet.
opt=$1
tmp=${TMPDIR:-/tmp}/kf-progress.$$
trap 'rm -f "$tmp".*' EXIT
command -v script >/dev/null || { echo "SKIP: script(1) is not installed"; exit 77; }
# a chain of 20000 element-wise ops: the fuse pass reports every 4096
awk 'BEGIN { print "graph @chain(%x: f32[64]) -> (f32[64]) {"; p = "x";
	for (i = 0; i < 20000; i++) { printf "  %%v%d = add(%%%s, %%x) : f32[64]\n", i, p; p = "v" i }
	printf "  return %%%s\n}\n", p }' > "$tmp.kf"
fail=0
KFUSE_PROGRESS_AFTER=0 script -qec "$opt $tmp.kf -p fuse -o /dev/null" /dev/null > "$tmp.tty" 2>&1
grep -q 'kfuse-opt: fuse on @chain: *[0-9]*%' "$tmp.tty" || { echo "FAIL: no progress line on a terminal:"; cat "$tmp.tty"; fail=1; }
# the line is erased when the pass ends (carriage return, erase to end of line)
grep -q "$(printf '\r\033\\[K')" "$tmp.tty" || { echo "FAIL: the progress line is not erased"; fail=1; }
KFUSE_PROGRESS_AFTER=0 script -qec "$opt $tmp.kf -p fuse -o /dev/null --quiet" /dev/null > "$tmp.quiet" 2>&1
grep -q 'fuse on @' "$tmp.quiet" && { echo "FAIL: a progress line with --quiet"; fail=1; }
KFUSE_PROGRESS_AFTER=0 "$opt" "$tmp.kf" -p fuse -o /dev/null 2> "$tmp.err"
grep -q 'fuse on @' "$tmp.err" && { echo "FAIL: a progress line when stderr is not a terminal"; fail=1; }
# the default threshold (a second) keeps a short run quiet on a terminal: a
# chain of 200 (the 20000 took over a second under ASan on a loaded 2-core
# machine, and the line rightly showed)
awk 'BEGIN { print "graph @chain(%x: f32[64]) -> (f32[64]) {"; p = "x";
	for (i = 0; i < 200; i++) { printf "  %%v%d = add(%%%s, %%x) : f32[64]\n", i, p; p = "v" i }
	printf "  return %%%s\n}\n", p }' > "$tmp.small.kf"
script -qec "$opt $tmp.small.kf -p fuse -o /dev/null" /dev/null > "$tmp.short" 2>&1
grep -q 'on @chain' "$tmp.short" && { echo "FAIL: a progress line for a short pass"; fail=1; }
[ $fail = 0 ] && echo "progress: shown on a terminal, not otherwise, not with --quiet"
exit $fail
