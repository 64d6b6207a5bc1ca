#!/bin/sh
# bench/gpu/dynamic.sh [BUILD_DIR] [N]: one compiled model for every batch
# and sequence (docs/dynamic.md, issue 24) on the GPU, in one call (about 7
# minutes on an H200 with the defaults).  Three parts, each printing as it
# goes; the exit status is 0 only when every check of every part passed.
#
# 1. The zoo's small BERT and GPT-2 with dynamic axes (tests/models/zoo/
#    *_dyn.onnx, 64 positions) through bench/gpu/dynamic.c (the embedding
#    API): ONE kfuse_compile, run at shapes that cross buckets and revisit
#    them, each checked against the interpreter on the symbolic graph; a
#    second sweep finds every plan cached.  Every row must say ok and each
#    model's last line "every shape matches the interpreter".
# 2. kfuse-run --shape on a symbolic .kf: the plan cache's report (hit and
#    miss, the kernels a new shape compiled, the buckets of a sized plan).
# 3. BERT-base and GPT-2 small at full size (768 wide, 12 layers, position
#    tables of 2048), f16, exported with dynamic batch and sequence and
#    compiled ONCE by kfuse, swept over batch 1-64 and sequence 1-2048
#    (bench/gpu/dynamic_torch.py: $SHAPES, $STATIC), beside the same model
#    compiled for each shape alone, torch.compile(dynamic=True) and eager
#    PyTorch on the same device tensors, every kfuse output checked
#    against eager PyTorch (relative L2 2e-2 in f16), and the kernels each
#    new shape compiled (entries the kernel cache gained: 0 for a shape in
#    known buckets).  One table; the last line must be "every shape matches
#    PyTorch".  Needs python3 ($PYTHON) with PyTorch on CUDA and numpy.
[ $# -ge 2 ] || set -- "${1:-}" 20
. "$(dirname "$0")/setup.sh"
py=${PYTHON:-python3}
rc=0

echo "== 1. the zoo's small transformers: one compile, every shape against the interpreter"
exe="$out/dynamic"
if cc -O2 -I"$root/include" "$here/dynamic.c" -L"$build" -lkfuse -Wl,-rpath,"$build" -ldl -lm -o "$exe"; then
	# buckets (batch, seq) 1, 1 / 1, 8 / 4, 32 / 8, 64 / 2, 32 / 16, 64 / 32, 16 / 2, 8; revisited by
	# 3, 17 (4, 32) and 5, 40 (8, 64)
	shapes=1x1,1x8,4x32,8x64,2x17,16x64,32x16,3x17,5x40,2x5
	pipe="canonicalize,cse,rules,canonicalize,cse,merge-matmul,fuse-attention,fuse-matmul,fuse,dce"
	for m in bert_dyn gpt2_dyn; do
		echo "-- $m"
		timeout 120 "$exe" "$root/tests/models/zoo/$m.onnx" "$pipe" "$shapes" 5 2>&1 | tee "$out/$m.txt"
		[ "$(tail -n 1 "$out/$m.txt")" = "every shape matches the interpreter" ] || rc=1
		cat "$out/$m.txt" >> "$log"
	done
else
	echo "FAIL: dynamic.c does not build against $build/libkfuse.so"
	rc=1
fi

echo "== 2. kfuse-run --shape (the plan cache's report)"
cat > "$out/sym.kf" <<'KF'
graph @rows(%x: f32[B,T,768], %y: f32[B,T,768]) -> (f32[B,T,768], f32[B,T]) {
  %a = add(%x, %y) : f32[B,T,768]
  %c = exp(%a) : f32[B,T,768]
  %s = reduce_sum(%c) {axes = [2], keepdims = false} : f32[B,T]
  return %c, %s
}
KF
"$kfrun" "$out/sym.kf" --backend=cuda --random-inputs --dim B=2 --dim T=8 --shape B=1,T=3 \
	--shape B=64,T=512 --shape B=2,T=8 --shape B=48,T=400 --max-plans 2 --compare=cpu 2>&1 | grep -v '^out' |
	tee -a "$log" || rc=1

echo "== 3. BERT-base and GPT-2 small, one kfuse compile each, beside torch.compile(dynamic=True)"
# (batch 1 and sequence 1 last: torch.compile specialises 0 and 1 and
# compiles again for them; pairs such as 4x256 then 3x200 share buckets)
SHAPES=${SHAPES:-2x77,4x256,3x200,8x384,6x300,16x512,13x450,32x200,64x128,48x100,8x1024,4x2048,3x1500,2x2048,1x128,1x2048,1x7,1x1}
STATIC=${STATIC:-1x128,4x256,16x512,64x128,8x1024,4x2048}
# DYN_MAX_SECONDS: no new shape is started after this many seconds of part 3
maxs=${DYN_MAX_SECONDS:-400}
timeout $((maxs + 50)) "$py" "$here/dynamic_torch.py" --lib "$build/libkfuse.so" --out "$out" --shapes "$SHAPES" \
	--static "$STATIC" --n "$N" --max-seconds "$maxs" 2>&1 | tee "$out/full.txt"
[ "$(tail -n 1 "$out/full.txt")" = "every shape matches PyTorch" ] || rc=1
cat "$out/full.txt" >> "$log"
echo "dynamic.sh: results in $log"
exit $rc
