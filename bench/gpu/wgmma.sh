#!/bin/sh
# bench/gpu/wgmma.sh [BUILD_DIR] [N]: the Hopper wgmma + TMA contraction
# kernel alone, each tile forced (KFUSE_MATMUL_TILE), on an H100/H200; one
# table.  Needs only the prebuilt kfuse-opt and kfuse-run (no torch).
# Correctness first: every case but the 4096^3 timing rows is checked
# against the CPU interpreter (f16: rtol 1e-2, atol 1e-2):
#   odd_nk   gelu_tanh(x @ w + b), 300 x 200 x 72, w stored [K, N] (partial tiles)
#   odd_t    the same with w stored [N, K] (a transpose folded: K-major B)
#   odd_n    odd_t with N = 201 (the paired 'v' stores fall back on odd rows)
#   bf16     x @ w, bf16, 256 x 384 x 512
#   many     gelu_tanh(x @ w + b), 2000 x 4000 x 200: 256 tiles of 128 x 256,
#            500 of 128 x 128, so a persistent CTA takes 2-4 tiles, partial ones
#   many_t   the same with w stored [N, K] and N = 4001
#   mm_512   gelu_tanh(x @ w + b), f16, 512 x 4096 x 4096
#   mm_4096  the same at 4096^3 (timed only: the interpreter is slow there)
# Tile suffixes: c2 / c4 = clusters of 2 / 4 CTAs along M, B multicast
#   (with p: the cluster's CTAs walk the persistent tiles in step);
# p = persistent (132 CTAs walking the tiles, grouped raster);
# pp = persistent ping-pong (two consumer warpgroups on alternate tiles);
# e = epilogue warps (the producer warpgroup's idle warps run the staged
#     epilogue while the consumers go on to the next tile);
# v = epilogue stores of 2 columns at once (4 bytes);
# s = the epilogue's results staged in shared memory, stored in 16-byte chunks.
# Each row: the tile asked for, what the plan took (wgmma, or '-' when the
# tile was passed over), rc, the check, the median time, TFLOP/s.
. "$(dirname "$0")/setup.sh"

mm() { # NAME M N K DT TRANS EPI
	if [ "$6" = t ]; then
		wdecl="%w: $5[$3,$4]" mmexpr="  %t = transpose(%w) {perm = [1, 0]} : $5[$4,$3]
  %m = matmul(%x, %t) : $5[$2,$3]"
	else
		wdecl="%w: $5[$4,$3]" mmexpr="  %m = matmul(%x, %w) : $5[$2,$3]"
	fi
	if [ "$7" = gelu ]; then
		cat > "$out/$1.kf" <<EOG
graph @$1(%x: $5[$2,$4], $wdecl, %b: $5[$3]) -> ($5[$2,$3]) {
$mmexpr
  %a = add(%m, %b) : $5[$2,$3]
  %y = gelu(%a) {approximate = "tanh"} : $5[$2,$3]
  return %y
}
EOG
	else
		cat > "$out/$1.kf" <<EOG
graph @$1(%x: $5[$2,$4], $wdecl) -> ($5[$2,$3]) {
$mmexpr
  return %m
}
EOG
	fi
	"$opt" "$out/$1.kf" -p fuse-matmul,fuse -o "$out/$1.mm.kf" || echo "FAIL fuse-matmul $1"
}
mm odd_nk 300 200 72 f16 n gelu
mm odd_t 300 200 72 f16 t gelu
mm odd_n 300 201 72 f16 t gelu
mm bf16 256 384 512 bf16 n none
mm many 2000 4000 200 f16 n gelu
mm many_t 2000 4001 200 f16 t gelu
mm mm_512 512 4096 4096 f16 n gelu
mm mm_4096 4096 4096 4096 f16 n gelu

# one CASE TILE CHECK(yes/no) [ENV...]
one() {
	c=$1 t=$2 chk=$3
	shift 3
	extra=""
	[ "$chk" = yes ] && extra="--compare=cpu --rtol 1e-2 --atol 1e-2"
	f="$out/$c.$t.txt"
	# shellcheck disable=SC2086
	timeout 60 env KFUSE_TUNE_FILE="$out/none.txt" KFUSE_MATMUL_TILE="$t" "$@" "$kfrun" "$out/$c.mm.kf" --backend=cuda \
		--random-inputs --seed 1 $extra --bench "$N" > "$f" 2>&1
	rc=$?
	took=$(grep -q ': wgmma kernel' "$f" && echo wgmma || echo -)
	res="n/c"
	[ "$chk" = yes ] && { res=$(grep -q MISMATCH "$f" && echo BAD || { grep -q '\[ok\]' "$f" && echo ok || echo '?'; }); }
	ms=$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' "$f" | head -1)
	[ $# -gt 0 ] && t="$t+env"
	echo "$c $t $took $rc $res ${ms:--}" >> "$log"
	[ $rc = 0 ] || tail -6 "$f" | sed 's/^/    /'
}

# correctness of the default tiles and the variants: clusters walking
# tiles in step ("c2p", "c4p"), epilogue warps ("e"), ping-pong ("pp"):
# partial tiles, odd N (the scalar fallback of the 16-byte chunks),
# several tiles per CTA, bf16 without an epilogue
for t in wg128x256x64s3pvs wg128x128x64s4pvs wg128x256x64s3c2pvs wg128x128x64s4c2pvs wg128x128x64s4c4pv \
	wg128x256x64s3pvse wg128x128x64s6ppvs; do
	for c in odd_nk odd_t odd_n many many_t bf16 mm_512; do
		one $c $t yes
	done
done
# timing: beside the default (pvs) and cuBLASLt, twice
for r in 1 2; do
	for t in wg128x128x64s4pvs wg128x128x64s4c2pvs wg128x128x64s4c4pvs cublaslt; do
		one mm_512 $t no
	done
	for t in wg128x256x64s3pvs wg128x256x64s3c2pvs wg128x256x64s4c2pvs wg128x256x64s3c4pvs cublaslt; do
		one mm_4096 $t no
	done
done

python3 - "$log" <<'PY'
import sys
flop = {"mm_512": 2 * 512 * 4096 * 4096, "mm_4096": 2 * 4096 ** 3, "odd_nk": 2 * 300 * 200 * 72,
        "many": 2 * 2000 * 4000 * 200, "many_t": 2 * 2000 * 4001 * 200,
        "odd_n": 2 * 300 * 201 * 72,
        "odd_t": 2 * 300 * 200 * 72, "bf16": 2 * 256 * 384 * 512}
print(f"{'case':<8} {'tile asked':<18} {'took':<6} {'rc':>3} {'check':>6} {'ms':>9} {'TFLOP/s':>8}")
for l in open(sys.argv[1]):
    c, t, took, rc, res, ms = l.split()
    tf = f"{flop[c] / float(ms) / 1e9:8.1f}" if ms != "-" else f"{'-':>8}"
    print(f"{c:<8} {t:<18} {took:<6} {rc:>3} {res:>6} {ms:>9} {tf}")
PY
echo "every wg row: 'took' wgmma, rc 0, check ok (or n/c).  Timing: ...pvse and ...pp... against the default ...pvs"
echo "(the bar, cuBLAS + epilogue, from matmul.sh: mm_4096 0.1920-0.1949 ms, mm_512 0.0288-0.0291).  logs: $out"
