#!/bin/sh
# Times parse + verify + print of one graph by kfuse-opt and by mlir-opt-19,
# side by side: instructions executed (callgrind: the measure a busy machine
# does not move), best wall and CPU time of R runs, and peak memory
# (/usr/bin/time).
#
#   bench/parse_vs_mlir.sh [KFUSE_OPT] [DIR]
#
# KFUSE_OPT defaults to the newest build*/kfuse-opt of this tree.  DIR holds
# g.kf and g.mlir (bench/gen_graph.py); when it has none they are made there
# with NODES nodes (default 200000).  R (default 5) runs per tool.  INSTR=0
# skips the instruction counts (mlir-opt takes a few minutes under
# callgrind); so does a machine without valgrind.  Builds nothing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
kf=${1:-}
if [ -z "$kf" ]; then
	kf=$(ls -t "$root"/build*/kfuse-opt 2>/dev/null | head -n 1 || true)
	[ -n "$kf" ] || { echo "no build*/kfuse-opt found; give its path" >&2; exit 2; }
fi
[ -x "$kf" ] || { echo "$kf: not an executable" >&2; exit 2; }
dir=${2:-${TMPDIR:-/tmp}/kfuse-parse-bench}
mlir=${MLIR_OPT:-mlir-opt-19}
command -v "$mlir" >/dev/null || { echo "$mlir not found" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time (Debian package time) is needed" >&2; exit 2; }
runs=${R:-5}
if [ ! -f "$dir/g.kf" ] || [ ! -f "$dir/g.mlir" ]; then
	python3 "$here/gen_graph.py" --nodes "${NODES:-200000}" --out "$dir"
fi
nodes=$(grep -c ' = ' "$dir/g.kf")

# best wall seconds, best CPU (user + sys) seconds and the largest peak RSS
# (KiB) over $runs runs of "$@"
measure() {
	best=; cpu=; peak=0; i=0
	while [ $i -lt "$runs" ]; do
		/usr/bin/time -f '%e %U %S %M' -o "$dir/time.out" "$@" >/dev/null 2>"$dir/err.out" || {
			echo "failed: $*" >&2; cat "$dir/err.out" >&2; exit 1; }
		read -r t u s m <"$dir/time.out"
		c=$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')
		if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
		if [ -z "$cpu" ] || awk "BEGIN{exit !($c < $cpu)}"; then cpu=$c; fi
		[ "$m" -gt "$peak" ] && peak=$m
		i=$((i + 1))
	done
	echo "$best $cpu $peak"
}

# instructions executed by "$@" (callgrind), or 0 when not counted
instr() {
	if [ "${INSTR:-1}" = 0 ] || ! command -v valgrind >/dev/null; then echo 0; return; fi
	valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" >/dev/null 2>"$dir/cg.out" || {
		echo "failed under callgrind: $*" >&2; cat "$dir/cg.out" >&2; exit 1; }
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$dir/cg.out" | tail -n 1
}

set -- $(measure "$kf" "$dir/g.kf" -o /dev/null)
kt=$1 kc=$2 km=$3
set -- $(measure "$mlir" "$dir/g.mlir" -o /dev/null)
mt=$1 mc=$2 mm=$3
ki=$(instr "$kf" "$dir/g.kf" -o /dev/null)
mi=$(instr "$mlir" "$dir/g.mlir" -o /dev/null)
size() { wc -c <"$1" | awk '{printf "%.1f MB", $1 / 1e6}'; }
echo "graph: $nodes nodes; g.kf $(size "$dir/g.kf"), g.mlir $(size "$dir/g.mlir"); best of $runs runs"
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)"
awk -v kt="$kt" -v kc="$kc" -v km="$km" -v ki="$ki" -v mt="$mt" -v mc="$mc" -v mm="$mm" -v mi="$mi" \
    -v n="$nodes" -v kf="$(basename "$kf")" -v ml="$mlir" 'BEGIN {
	printf "| %-12s | %12s | %9s | %9s | %12s | %14s |\n", "tool", "instructions", "wall (s)", "CPU (s)", "nodes/s", "peak RSS (MiB)"
	printf "|--------------|--------------|-----------|-----------|--------------|----------------|\n"
	printf "| %-12s | %10.3f G | %9.3f | %9.3f | %12.0f | %14.1f |\n", kf, ki / 1e9, kt, kc, n / (kt > 0 ? kt : 0.001), km / 1024
	printf "| %-12s | %10.3f G | %9.3f | %9.3f | %12.0f | %14.1f |\n", ml, mi / 1e9, mt, mc, n / (mt > 0 ? mt : 0.001), mm / 1024
	printf "| %-12s | %11.1fx | %8.1fx | %8.1fx | %12s | %13.2fx |\n", "mlir / kfuse", (ki > 0 ? mi / ki : 0),
		mt / (kt > 0 ? kt : 0.001), mc / (kc > 0 ? kc : 0.001), "", mm / km
}'
