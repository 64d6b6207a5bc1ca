#!/bin/sh
# bench/gpu/attention_tiles.sh [BUILD_DIR] [N]: the attention kernels' tiles
# on the GPU against the CPU interpreter, on the small odd shapes of
# bench/gpu/attention/*.kf (the cases test_attention emulates: partial
# tiles, causal and bottom-right causal masks, additive masks of several
# broadcast shapes, a boolean mask, grouped-query heads, GPT-2's split
# layout, f16 and bf16, head dims 64 and 128): each graph fused, then run
# with the default tile, the mma.sync kernel's and every Hopper tile of
# $TILES64 / $TILES128 (by head dim), random inputs, --compare=cpu.  One
# line a run ("ok" or why not), a count at the end; about a minute on the
# H200.  Exit status 1 when a run fails.
[ $# -ge 2 ] || set -- "${1:-}" 1
. "$(dirname "$0")/setup.sh"
TILES64=${TILES64:-"wga64x64s2 wga64x64s2o wga128x64s2po wga128x128s3po wga192x64s3po wga128x176s3po wga128x48s2po"}
TILES128=${TILES128:-"wga64x64s2o wga128x64s3po wga128x128s3po wga128x176s2po wga128x80s2po"}
fails=0 runs=0
for f in "$here"/attention/*.kf; do
	n=$(basename "$f" .kf)
	if ! "$opt" "$f" -p fuse-attention,fuse-matmul,fuse -o "$out/$n.fused.kf" 2> "$out/$n.opt.log"; then
		echo "$n: kfuse-opt failed: $(tail -1 "$out/$n.opt.log")"
		fails=$((fails + 1))
		continue
	fi
	tol="--rtol 2e-2 --atol 4e-3"
	grep -q bf16 "$f" && tol="--rtol 5e-2 --atol 3e-2"
	tiles=$TILES64
	grep -q '^# head dim 128' "$f" && tiles=$TILES128
	for t in default fa128x64s2 $tiles; do
		env=""
		[ "$t" = default ] || env="KFUSE_ATTN_TILE=$t"
		timeout 60 env $env "$kfrun" "$out/$n.fused.kf" --backend=cuda --random-inputs --seed 3 --compare=cpu $tol \
			> "$out/$n.$t.txt" 2>&1
		rc=$?
		runs=$((runs + 1))
		line=$(grep '^compare' "$out/$n.$t.txt" | head -1)
		if [ $rc = 0 ] && [ -n "$line" ]; then
			echo "$n $t: ok ($line)" | tee -a "$log"
		else
			echo "$n $t: FAILED rc=$rc: $(tail -2 "$out/$n.$t.txt" | tr '\n' ' ')" | tee -a "$log"
			fails=$((fails + 1))
		fi
	done
done
echo "attention_tiles: $runs runs, $fails failed"
[ $fails = 0 ]
