#!/bin/sh
# tests/rnn/run.sh BUILD DIR NAME PERSISTENT
#
# One exported recurrence (tests/rnn/gen.py) end to end: kfuse-import-onnx
# DIR/NAME.onnx; kfuse-opt with `persistent` in the standard pipeline,
# verifying the graph after every pass; the result must hold exactly
# PERSISTENT top-level `fusion {kind = "persistent"}` nodes (one per
# recurrence, stack of layers or pair of directions); every kernel of the
# result emitted as CUDA, compiled by NVRTC and ptxas where they are here;
# then kfuse-run on the interpreter with PyTorch's inputs
# (DIR/NAME.in<i>.npy), every output within 1e-4 (relative, plus 1e-5
# absolute) of PyTorch's (DIR/NAME.out<i>.npy).
set -u
build=$1 dir=$2 name=$3 want=$4
imp=$build/onnx/kfuse-import-onnx
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-rnn-$name.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
pipeline="canonicalize,cse,persistent,rules,fuse,dce"

"$imp" "$dir/$name.onnx" -o "$tmp/$name.kf" || { echo "FAIL: $name does not import"; exit 1; }
"$build/kfuse-opt" "$tmp/$name.kf" -p "$pipeline" --verify-each -o "$tmp/$name.opt.kf" 2> "$tmp/opt.log" || {
	cat "$tmp/opt.log"
	echo "FAIL: $name: kfuse-opt -p '$pipeline'"
	exit 1
}
cat "$tmp/opt.log"
got=$(grep -c '^  %.* = fusion @[A-Za-z0-9_]*(.*) {.*kind = "persistent"' "$tmp/$name.opt.kf")
if [ "$got" != "$want" ]; then
	grep '^  %.* = fusion' "$tmp/$name.opt.kf" | cut -c1-200
	echo "FAIL: $name: $got persistent nodes, want $want"
	exit 1
fi
# every kernel, the persistent ones first of all, must emit; and compile
# with NVRTC to PTX and with ptxas to sm_90 code, where those are here
"$build/kfuse-opt" "$tmp/$name.opt.kf" --emit=cuda -o "$tmp/$name.cu" || {
	echo "FAIL: $name: the CUDA emitter refused the graph"
	exit 1
}
if "$build/kfuse-opt" "$tmp/$name.opt.kf" --emit=ptx -o "$tmp/$name.ptx" 2> "$tmp/ptx.log"; then
	if command -v ptxas > /dev/null 2>&1; then
		ptxas -arch=sm_90 "$tmp/$name.ptx" -o "$tmp/$name.cubin" || {
			echo "FAIL: $name: ptxas refused the PTX"
			exit 1
		}
	fi
elif ! grep -q "cannot load NVRTC" "$tmp/ptx.log"; then
	cat "$tmp/ptx.log"
	echo "FAIL: $name: NVRTC did not compile the kernels"
	exit 1
fi
set --
i=0
while [ -f "$dir/$name.in$i.npy" ]; do
	set -- "$@" --input "$i=$dir/$name.in$i.npy"
	i=$((i + 1))
done
i=0
while [ -f "$dir/$name.out$i.npy" ]; do
	set -- "$@" --expect "$i=$dir/$name.out$i.npy"
	i=$((i + 1))
done
"$build/kfuse-run" "$tmp/$name.opt.kf" "$@" --rtol 1e-4 --atol 1e-5 || {
	echo "FAIL: $name: the interpreter's outputs differ from PyTorch's"
	exit 1
}
