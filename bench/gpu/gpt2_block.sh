#!/bin/sh
# bench/gpu/gpt2_block.sh [BUILD_DIR] [N]: the GPT-2 block PyTorch exported
# (tests/gpt2/make_gpt2_block.py: a causal mask filled with -inf, whose
# literal once came out of the emitter as '-inff') on the GPU, in one call:
# imported, fused two ways (with and without fuse-matmul) and unfused, each
# run with --backend=cuda, checked against the CPU interpreter
# (--compare=cpu) and against PyTorch's output (tests/gpt2/y.npy), then
# timed (--bench N).  Look for: rc=0, cpu=ok and torch=ok on every line.
. "$(dirname "$0")/setup.sh"
imp="$build/onnx/kfuse-import-onnx"
[ -x "$imp" ] || { echo "$me: no $imp (the ONNX importer)"; exit 2; }
g="$root/tests/gpt2"
"$imp" "$g/gpt2_block.onnx" -o "$out/gpt2.kf" || { echo "FAIL import"; exit 1; }
fail=0
for v in fused-matmul fused unfused; do
	src="$out/gpt2.kf"
	case $v in
	fused-matmul) pipe="canonicalize,cse,rules{path=$root/patterns},fuse-matmul,fuse,dce" ;;
	fused) pipe="canonicalize,cse,rules{path=$root/patterns},fuse,dce" ;;
	unfused) pipe="canonicalize,cse,dce" ;;
	esac
	"$opt" "$src" -p "$pipe" -o "$out/gpt2.$v.kf" 2> "$out/gpt2.$v.opt.log" || { echo "FAIL opt $v"; cat "$out/gpt2.$v.opt.log"; fail=1; continue; }
	"$kfrun" "$out/gpt2.$v.kf" --backend=cuda --input x="$g/x.npy" --compare=cpu --rtol 1e-3 --atol 1e-4 \
		--expect y="$g/y.npy" --bench "$N" > "$out/gpt2.$v.txt" 2>&1
	rc=$?
	cpu=$(grep -q 'compare.*\[ok\]\|cpu.*\[ok\]' "$out/gpt2.$v.txt" && echo ok || echo NO)
	torch=$(grep -q 'expect.*\[ok\]' "$out/gpt2.$v.txt" && echo ok || echo NO)
	k=$(grep -c '= fusion @' "$out/gpt2.$v.kf" || true)
	line=$(grep '^bench cuda' "$out/gpt2.$v.txt" | head -1)
	echo "gpt2 $v rc=$rc cpu=$cpu torch=$torch fusions=$k :: $line" | tee -a "$log"
	[ $rc = 0 ] && [ $cpu = ok ] && [ $torch = ok ] || { tail -15 "$out/gpt2.$v.txt"; fail=1; }
done
exit $fail
