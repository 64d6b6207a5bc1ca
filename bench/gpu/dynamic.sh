#!/bin/sh
# bench/gpu/dynamic.sh [BUILD_DIR] [N]: one compiled model for many shapes
# (docs/dynamic.md) on the GPU.
#
# Builds bench/gpu/dynamic.c against the build's libkfuse.so and runs the
# zoo's BERT and GPT-2 exported with dynamic batch and sequence
# (tests/models/zoo/*_dyn.onnx; 64 positions, so seq <= 64) at several
# shapes through ONE kfuse_compile each: per shape the first call (a miss:
# specialise, fuse, plan, compile), the median of N repeats (hits), the same
# shape compiled statically in a session of its own, and a second sweep's
# first call (a hit: the 7 shapes fit the 8 plans kept), each checked
# against the interpreter.  Every row must say ok and each model's last line
# "every shape matches the interpreter".  Then kfuse-run --shape on a
# symbolic .kf prints the plan cache's lines (hit/miss, kernels compiled or
# from the kernel cache).
. "$(dirname "$0")/setup.sh"

exe="$out/dynamic"
cc -O2 -I"$root/include" "$here/dynamic.c" -L"$build" -lkfuse -Wl,-rpath,"$build" -ldl -lm -o "$exe" ||
	{ echo "FAIL: dynamic.c does not build against $build/libkfuse.so"; exit 1; }
shapes=1x1,1x8,4x32,8x64,2x17,16x64,32x16
rc=0
for m in bert_dyn gpt2_dyn; do
	echo "== $m"
	"$exe" "$root/tests/models/zoo/$m.onnx" "canonicalize,cse,rules,fuse-matmul,fuse,dce" "$shapes" "$N" 2>&1 |
		tee -a "$log"
	[ "$(tail -n 1 "$log")" = "every shape matches the interpreter" ] || rc=1
done
cat > "$out/sym.kf" <<'KF'
graph @rows(%x: f32[B,T,768], %y: f32[B,T,768]) -> (f32[B,T,768], f32[B,T]) {
  %a = add(%x, %y) : f32[B,T,768]
  %c = exp(%a) : f32[B,T,768]
  %s = reduce_sum(%c) {axes = [2], keepdims = false} : f32[B,T]
  return %c, %s
}
KF
echo "== kfuse-run --shape (the plan cache's report)"
"$kfrun" "$out/sym.kf" --backend=cuda --random-inputs --dim B=2 --dim T=8 --shape B=1,T=3 \
	--shape B=64,T=512 --shape B=2,T=8 --max-plans 2 --compare=cpu 2>&1 | grep -v '^out' | tee -a "$log" || rc=1
exit $rc
