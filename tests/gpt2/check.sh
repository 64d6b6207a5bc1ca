#!/bin/sh
# check.sh BUILD_DIR SOURCE_DIR: the GPT-2 block PyTorch exported
# (make_gpt2_block.py): imports, goes through the fusion pipeline (with and
# without fuse-matmul), matches PyTorch's output on the interpreter, and its
# kernels (the -inf of the causal mask among their constants) compile with
# NVRTC for sm_90 when NVRTC is here.  Prints the kernel count.
b=$1
src=$2
here=$src/tests/gpt2
tmp=${TMPDIR:-/tmp}/kf-gpt2.$$
trap 'rm -rf "$tmp".*' EXIT
set -e
"$b/onnx/kfuse-import-onnx" "$here/gpt2_block.onnx" -o "$tmp.kf"
grep -q 'const -inf' "$tmp.kf" || { echo "FAIL: the import has no -inf constant (the mask)"; exit 1; }
nvrtc=1
printf 'graph @t(%%x: f32[4]) -> (f32[4]) {\n  %%y = exp(%%x) : f32[4]\n  return %%y\n}\n' > "$tmp.probe.kf"
"$b/kfuse-opt" "$tmp.probe.kf" --emit=ptx > /dev/null 2>&1 || nvrtc=0
for pipe in "canonicalize,cse,rules{path=$src/patterns},fuse-matmul,fuse,dce" \
	    "canonicalize,cse,rules{path=$src/patterns},fuse,dce"; do
	"$b/kfuse-opt" "$tmp.kf" -p "$pipe" -o "$tmp.fused.kf" 2> "$tmp.log"
	k=$(grep -c '= fusion @' "$tmp.fused.kf" || true)
	"$b/kfuse-run" "$tmp.fused.kf" --input x="$here/x.npy" --expect y="$here/y.npy" --rtol 1e-4 --atol 1e-4 > "$tmp.run"
	grep -q '\[ok\]' "$tmp.run" || { cat "$tmp.run"; echo "FAIL: $pipe: not PyTorch's output"; exit 1; }
	if [ $nvrtc = 1 ]; then
		"$b/kfuse-opt" "$tmp.fused.kf" --emit=ptx -o "$tmp.ptx"
		e=$(grep -c '^\.visible \.entry' "$tmp.ptx")
		echo "gpt2 block: $pipe: $k fusion nodes, matches PyTorch, $e kernels compiled to PTX"
	else
		echo "gpt2 block: $pipe: $k fusion nodes, matches PyTorch (NVRTC absent: not compiled)"
	fi
done
