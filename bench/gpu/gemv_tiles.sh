#!/bin/sh
# bench/gpu/gemv_tiles.sh [BUILD_DIR]: the issue's GEMV shape, x[1,1024] @ w
# (16 MiB of f32, w stored [K, N] = [1024, 4096] or [N, K] = [4096, 1024]),
# every GEMV tile ($TILES overrides) forced, checked against the CPU, then
# its own kernel duration from Nsight Compute, weight warm (left in L2 by the
# launch before: --cache-control none) and cold (caches flushed), beside
# kfuse's row sum of the same [4096, 1024] (a read-only pass of 16 MiB).
. "$(dirname "$0")/setup.sh"
command -v ncu > /dev/null || { echo "gemv_tiles.sh: no ncu on this machine"; exit 2; }
printf 'graph @kn(%%x: f32[1,1024], %%w: f32[1024,4096]) -> (f32[1,4096]) {\n  %%y = matmul(%%x, %%w) : f32[1,4096]\n  return %%y\n}\n' > "$out/kn.kf"
printf 'graph @nk(%%x: f32[1,1024], %%w: f32[4096,1024]) -> (f32[1,4096]) {\n  %%t = transpose(%%w) {perm = [1, 0]} : f32[1024,4096]\n  %%y = matmul(%%x, %%t) : f32[1,4096]\n  return %%y\n}\n' > "$out/nk.kf"
printf 'graph @rowsum(%%x: f32[4096,1024]) -> (f32[4096]) {\n  %%y = reduce_sum(%%x) {axes = [1], keepdims = false} : f32[4096]\n  return %%y\n}\n' > "$out/rowsum.kf"
: > "$out/none.txt"
dur() { # LABEL CACHE CMD...: the median duration (ns) of the most launched kernel
	label=$1 cache=$2
	shift 2
	ncu --clock-control none --cache-control "$cache" --metrics gpu__time_duration.sum --csv --print-units base "$@" \
		> "$out/$label.csv" 2> "$out/$label.err" || { echo "gemv_tiles.sh: $label failed"; tail -3 "$out/$label.err"; }
	d=$(python3 "$here/ncu_dur.py" "$out/$label.csv")
	if [ -n "$d" ]; then echo "$d" | awk '{printf "%.2f\n", $2 / 1e3}'; else echo -; fi
}
printf '%-5s %-12s %-6s %8s %6s %8s %6s\n' case tile check warm_us %copy cold_us %copy > "$log"
row() { # CASE TILE FILE
	c=$1 t=$2 f=$3
	chk=$(env KFUSE_TUNE_FILE="$out/none.txt" KFUSE_MATMUL_TILE=$t "$kfrun" "$f" --backend=cuda --random-inputs \
		--compare=cpu --rtol 1e-4 --atol 1e-3 2>&1 | grep -c '\[ok\]')
	w=$(KFUSE_TUNE_FILE="$out/none.txt" KFUSE_MATMUL_TILE=$t dur "$c.$t.none" none "$kfrun" "$f" --backend=cuda --random-inputs --no-graph --bench 8)
	d=$(KFUSE_TUNE_FILE="$out/none.txt" KFUSE_MATMUL_TILE=$t dur "$c.$t.all" all "$kfrun" "$f" --backend=cuda --random-inputs --no-graph --bench 8)
	python3 -c "
import sys
c, t, ok, w, d = sys.argv[1:]
p = lambda u: f'{100 * 16777216 / (float(u) * 1e3) / 4224:5.1f}%' if u != '-' else '     -'
print(f'{c:<5} {t:<12} {\"ok\" if ok == \"1\" else \"BAD\":<6} {w:>8} {p(w):>6} {d:>8} {p(d):>6}')" "$c" "$t" "$chk" "$w" "$d" >> "$log"
}
for c in kn nk; do
	"$opt" "$out/$c.kf" -p fuse-matmul,fuse -o "$out/$c.mm.kf" 2> /dev/null
	for t in ${TILES:-gemv gemvk1 gemvk2 gemvk4 gemvk8 gemvk16 gemvk32 gemvk1u4 gemvk2u4 gemvk4u4 gemvk16u4 gemvk8u16 gemvb}; do
		row $c $t "$out/$c.mm.kf"
	done
done
"$opt" "$out/rowsum.kf" -p fuse -o "$out/rowsum.f.kf" 2> /dev/null
row rsum - "$out/rowsum.f.kf"
cat "$log"
echo "%copy: the 16 MiB weight at the 4224 GB/s device copy ceiling (1 GiB, matmul.sh); 85% = 4.67 us"
