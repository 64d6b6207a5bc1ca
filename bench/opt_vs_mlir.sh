#!/bin/sh
# opt_vs_mlir.sh: kfuse-opt -p canonicalize,cse,dce against
# mlir-opt-19 --canonicalize --cse on the same generated graph (bench/gen_graph.py
# writes it as g.kf and as TOSA g.mlir).  Builds nothing.
#
# usage: bench/opt_vs_mlir.sh [-k KFUSE_OPT] [-n NODES] [-r RUNS] [-g GENERATOR]
# Prints a markdown table: instructions executed (callgrind, one run each: the
# measure a busy machine does not move; INSTR=0 or no valgrind skips it, as
# mlir-opt takes minutes under it), best wall and CPU time of RUNS runs, peak
# RSS (/usr/bin/time -v) and the number of ops left (lines defining a value in
# the output, constants included, on both sides).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
kopt=""
nodes=200000
runs=3
gen="$root/bench/gen_graph.py"
while getopts k:n:r:g: o; do
	case $o in
	k) kopt=$OPTARG ;;
	n) nodes=$OPTARG ;;
	r) runs=$OPTARG ;;
	g) gen=$OPTARG ;;
	*) echo "usage: $0 [-k KFUSE_OPT] [-n NODES] [-r RUNS] [-g GENERATOR]" >&2; exit 2 ;;
	esac
done
if [ -z "$kopt" ]; then
	# the most recently built kfuse-opt under build*/
	kopt=$(ls -t "$root"/build*/kfuse-opt "$root"/build*/tools/kfuse-opt 2>/dev/null | head -n 1 || true)
fi
[ -x "$kopt" ] || { echo "$0: no kfuse-opt found (build it, or pass -k PATH)" >&2; exit 1; }
mlir=$(command -v mlir-opt-19 || command -v mlir-opt || true)
[ -n "$mlir" ] || { echo "$0: mlir-opt-19 is not installed" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "$0: /usr/bin/time is needed (Debian package 'time')" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$gen" --nodes "$nodes" --out "$tmp"

# measure NAME OUTFILE CMD...: best wall seconds, best CPU (user + sys)
# seconds and the max peak RSS (KiB) over runs.  CPU time is what to read on
# a busy machine, where wall time includes waiting for a core.
measure() {
	name=$1 out=$2
	shift 2
	best="" cpu="" rss=0 i=0
	while [ $i -lt "$runs" ]; do
		/usr/bin/time -v "$@" >"$out" 2>"$tmp/$name.time" || {
			cat "$tmp/$name.time" >&2
			echo "$0: $name failed" >&2
			exit 1
		}
		w=$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$tmp/$name.time" |
			awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
		r=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$tmp/$name.time")
		u=$(sed -n 's/.*User time (seconds): //p' "$tmp/$name.time")
		sy=$(sed -n 's/.*System time (seconds): //p' "$tmp/$name.time")
		c=$(awk -v u="$u" -v s="$sy" 'BEGIN { print u + s }')
		best=$(awk -v a="$best" -v b="$w" 'BEGIN { print (a == "" || b < a) ? b : a }')
		cpu=$(awk -v a="$cpu" -v b="$c" 'BEGIN { print (a == "" || b < a) ? b : a }')
		[ "$r" -gt "$rss" ] && rss=$r
		i=$((i + 1))
	done
	echo "$best $cpu $rss"
}

# instructions executed by "$@" (callgrind), or 0 when not counted
instr() {
	if [ "${INSTR:-1}" = 0 ] || ! command -v valgrind >/dev/null; then echo 0; return; fi
	valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" >/dev/null 2>"$tmp/cg.out" || {
		cat "$tmp/cg.out" >&2
		echo "$0: failed under callgrind: $*" >&2
		exit 1
	}
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/cg.out" | tail -n 1
}

set -- $(measure kfuse "$tmp/out.kf" "$kopt" "$tmp/g.kf" -p canonicalize,cse,dce -o "$tmp/out.kf")
kt=$1 kc=$2 kr=$3
set -- $(measure mlir "$tmp/out.mlir" "$mlir" --canonicalize --cse "$tmp/g.mlir" -o "$tmp/out.mlir")
mt=$1 mc=$2 mr=$3
ki=$(instr "$kopt" "$tmp/g.kf" -p canonicalize,cse,dce -o "$tmp/out.kf")
mi=$(instr "$mlir" --canonicalize --cse "$tmp/g.mlir" -o "$tmp/out.mlir")

kin=$(grep -c ' = ' "$tmp/g.kf" || true)
min=$(grep -c ' = ' "$tmp/g.mlir" || true)
kleft=$(grep -c ' = ' "$tmp/out.kf" || true)
mleft=$(grep -c ' = ' "$tmp/out.mlir" || true)

awk -v kt="$kt" -v mt="$mt" -v kc="$kc" -v mc="$mc" -v kr="$kr" -v mr="$mr" -v kin="$kin" -v min="$min" \
    -v ki="$ki" -v mi="$mi" \
    -v kl="$kleft" -v ml="$mleft" -v n="$nodes" -v runs="$runs" -v gen="$(basename "$gen")" 'BEGIN {
	printf "graph: %s --nodes %d (best of %d runs)\n\n", gen, n, runs
	printf "| | kfuse-opt -p canonicalize,cse,dce | mlir-opt-19 --canonicalize --cse | ratio (mlir / kfuse) |\n"
	printf "|---|---:|---:|---:|\n"
	printf "| instructions (callgrind) | %.3f G | %.3f G | %.1fx |\n", ki / 1e9, mi / 1e9, (ki > 0 ? mi / ki : 0)
	printf "| wall time | %.3f s | %.3f s | %.1fx |\n", kt, mt, (kt > 0 ? mt / kt : 0)
	printf "| CPU time (user+sys) | %.3f s | %.3f s | %.1fx |\n", kc, mc, (kc > 0 ? mc / kc : 0)
	printf "| peak RSS | %.1f MiB | %.1f MiB | %.1fx |\n", kr / 1024, mr / 1024, (kr > 0 ? mr / kr : 0)
	printf "| ops in | %d | %d | |\n", kin, min
	printf "| ops left | %d | %d | |\n", kl, ml
}'
