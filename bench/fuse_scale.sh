#!/bin/sh
# fuse_scale.sh: the fuse pass at 20k, 200k and 1M ops of bench/gen_graph.py
# (the issue's bars: 10x the ops at most ~12x the time; 1M in under 5 s),
# beside mlir-opt-19 --canonicalize --cse on the same graph (g.mlir).
#
# usage: bench/fuse_scale.sh [-k KFUSE_OPT] [-r RUNS] [-s "20000 200000 1000000"]
# Environment: INSTR_MAX (default 1000000): no callgrind above this many
# ops for mlir-opt (it runs about an hour under callgrind at 1M); INSTR=0:
# no callgrind at all.
# For each size: the fuse pass's own wall time (kfuse-opt --timing, best of
# RUNS), the process's CPU time with -p fuse less that with an empty
# pipeline (parse, verify and print are the same), the instructions of
# kf_fuse_run (callgrind, --toggle-collect) and the process's; then
# mlir-opt's wall time, CPU time and instructions.  Prints a markdown table.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
kopt=""
runs=3
sizes="20000 200000 1000000"
while getopts k:r:s: o; do
	case $o in
	k) kopt=$OPTARG ;;
	r) runs=$OPTARG ;;
	s) sizes=$OPTARG ;;
	*) echo "usage: $0 [-k KFUSE_OPT] [-r RUNS] [-s SIZES]" >&2; exit 2 ;;
	esac
done
[ -n "$kopt" ] || kopt=$(ls -t "$root"/build*/kfuse-opt 2>/dev/null | head -n 1 || true)
[ -x "$kopt" ] || { echo "$0: no kfuse-opt found (build it, or pass -k PATH)" >&2; exit 1; }
mlir=$(command -v mlir-opt-19 || command -v mlir-opt || true)
[ -x /usr/bin/time ] || { echo "$0: /usr/bin/time is needed (Debian package 'time')" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# best NAME: the least of the numbers on stdin
best() { sort -g | head -n 1; }

# cpu CMD...: user + sys seconds of one run
cpu() {
	/usr/bin/time -f '%U %S' -o "$tmp/t" "$@" > /dev/null 2>&1 || { echo "$0: failed: $*" >&2; exit 1; }
	awk '{ print $1 + $2 }' "$tmp/t"
}

# instr [FUNCTION] CMD...: instructions (callgrind), of FUNCTION's calls only when given
instr() {
	fn=$1
	shift
	if [ "${INSTR:-1}" = 0 ] || ! command -v valgrind >/dev/null; then echo 0; return; fi
	set -- valgrind --tool=callgrind --callgrind-out-file=/dev/null ${fn:+--toggle-collect=$fn} "$@"
	"$@" > /dev/null 2> "$tmp/cg" || { cat "$tmp/cg" >&2; echo "$0: failed under callgrind" >&2; exit 1; }
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/cg" | tail -n 1
}

echo "| ops | fuse pass wall (best of $runs) | fuse CPU (process, less parse/print) | kf_fuse_run instructions | kfuse-opt -p fuse instructions | kernels | mlir-opt --canonicalize --cse wall | mlir CPU | mlir instructions |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $sizes; do
	python3 "$root/bench/gen_graph.py" --nodes "$n" --out "$tmp/g$n"
	g="$tmp/g$n/g.kf"
	walls="" cpus="" cpu0s=""
	i=0
	while [ $i -lt "$runs" ]; do
		"$kopt" "$g" -p fuse -o /dev/null --timing 2> "$tmp/timing" --quiet
		walls="$walls $(awk '$NF == "fuse" && $1 ~ /^[0-9.]+$/ { print $1 / 1000 }' "$tmp/timing")"
		cpus="$cpus $(cpu "$kopt" "$g" -p fuse -o /dev/null --quiet)"
		cpu0s="$cpu0s $(cpu "$kopt" "$g" -o /dev/null --quiet)"
		i=$((i + 1))
	done
	w=$(echo $walls | tr ' ' '\n' | best)
	c=$(echo $cpus | tr ' ' '\n' | best)
	c0=$(echo $cpu0s | tr ' ' '\n' | best)
	k=$(sed -n 's/^fuse: @main: \([0-9]*\) fusion kernel.*/\1/p' "$tmp/timing")
	fi=$(instr kf_fuse_run "$kopt" "$g" -p fuse -o /dev/null --quiet)
	pi=$(instr "" "$kopt" "$g" -p fuse -o /dev/null --quiet)
	mw="-" mc="-" mi="-"
	if [ -n "$mlir" ]; then
		ms="" mcs=""
		i=0
		while [ $i -lt "$runs" ]; do
			/usr/bin/time -f '%e %U %S' -o "$tmp/mt" "$mlir" --canonicalize --cse "$tmp/g$n/g.mlir" -o /dev/null
			ms="$ms $(awk '{ print $1 }' "$tmp/mt")"
			mcs="$mcs $(awk '{ print $2 + $3 }' "$tmp/mt")"
			i=$((i + 1))
		done
		mw=$(echo $ms | tr ' ' '\n' | best)
		mc=$(echo $mcs | tr ' ' '\n' | best)
		if [ "$n" -le "${INSTR_MAX:-1000000}" ]; then
			mi=$(instr "" "$mlir" --canonicalize --cse "$tmp/g$n/g.mlir" -o /dev/null)
			mi=$(awk -v x="$mi" 'BEGIN { printf "%.3f G", x / 1e9 }')
		fi
	fi
	awk -v n="$n" -v w="$w" -v c="$c" -v c0="$c0" -v fi="$fi" -v pi="$pi" -v k="$k" -v mw="$mw" -v mc="$mc" -v mi="$mi" \
	    'BEGIN { printf "| %d | %.3f s | %.2f s | %.3f G | %.3f G | %s | %s s | %s s | %s |\n", n, w, c - c0, fi / 1e9, pi / 1e9, k, mw, mc, mi }'
done
