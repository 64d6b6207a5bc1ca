#!/bin/sh
# bench/gpu/tune_check.sh [BUILD_DIR]: does --tune pick what the replays say
# is fastest?  kfuse-run --tune on matmul + bias + GELU f16 (4096^3 and
# 512 x 4096 x 4096): the tuner's times of the default wgmma tiles and of
# cuBLASLt, its pick, then the CUDA-graph replay bench of cuBLASLt and of
# the default tile, each forced.
. "$(dirname "$0")/setup.sh"
for s in 4096 512; do
	cat > "$out/g$s.kf" <<EOG
graph @g(%x: f16[$s,4096], %w: f16[4096,4096], %b: f16[4096]) -> (f16[$s,4096]) {
  %m = matmul(%x, %w) : f16[$s,4096]
  %a = add(%m, %b) : f16[$s,4096]
  %y = gelu(%a) {approximate = "tanh"} : f16[$s,4096]
  return %y
}
EOG
	"$opt" "$out/g$s.kf" -p fuse-matmul,fuse -o "$out/g$s.mm.kf" 2> /dev/null
	"$kfrun" "$out/g$s.mm.kf" --backend=cuda --random-inputs --tune --bench "$N" 2>&1 |
		grep -E "wg128x256x64s4c2pvs |wg128x128x64s4pvs |cublaslt|->|median"
	for t in cublaslt default; do
		tile=$([ $t = cublaslt ] && echo cublaslt)
		KFUSE_TUNE_FILE="$out/none.txt" KFUSE_MATMUL_TILE=$tile "$kfrun" "$out/g$s.mm.kf" --backend=cuda --random-inputs \
			--bench "$N" 2>&1 | grep -o "median [0-9.]* ms" | sed "s/^/$s $t replay /"
	done
done
