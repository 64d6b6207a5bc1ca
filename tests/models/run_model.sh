#!/bin/sh
# tests/models/run_model.sh BUILD DIR NAME PIPELINE [RTOL ATOL | --l2 E]
#
# One model end to end, as a user runs it: kfuse-import-onnx DIR/NAME.onnx,
# kfuse-opt PIPELINE (verifying the graph after every pass), then kfuse-run
# on the interpreter with the inputs PyTorch saw (DIR/NAME.in<i>.npy), every
# output compared with PyTorch's (DIR/NAME.out<i>.npy): NaN matches NaN,
# else |got - want| <= ATOL + RTOL * |want| (defaults 1e-3 and 1e-4, f32).
# With --l2 E, each output's relative L2 error ||got - want|| / ||want|| is
# at most E and NaN and infinities agree: the judge of a pipeline that runs
# `amp` (docs/amp.md), whose low-precision results say nothing element by
# element.
#
# KFUSE_RUN_BACKEND=cuda runs the graph on the GPU instead of the
# interpreter, judged the same way (bench/models/testdata_gpu.sh).
#
# With NEEDS_CONV=1 in the environment, a model whose import fails only for
# want of the convolution and pooling ops (issue 21) is skipped (status 77,
# "needs conv"); once those ops exist it runs like any other.
set -u
build=$1 dir=$2 name=$3 pipeline=$4
if [ "${5:-}" = --l2 ]; then
	judge="--l2 ${6:?run_model.sh: --l2 needs a tolerance}"
else
	judge="--rtol ${5:-1e-3} --atol ${6:-1e-4}"
fi
imp=$build/onnx/kfuse-import-onnx
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-model-$name.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

if ! "$imp" "$dir/$name.onnx" -o "$tmp/$name.kf" 2>"$tmp/import.err"; then
	if [ "${NEEDS_CONV:-0}" = 1 ] && grep -q "kfuse's convolution and pooling ops" "$tmp/import.err"; then
		echo "skipped: $name needs conv (the conv and pooling ops of issue 21):"
		cat "$tmp/import.err"
		exit 77
	fi
	cat "$tmp/import.err"
	echo "FAIL: $name does not import"
	exit 1
fi
cat "$tmp/import.err"
"$build/kfuse-opt" "$tmp/$name.kf" -p "$pipeline" --verify-each -o "$tmp/$name.opt.kf" || {
	echo "FAIL: $name: kfuse-opt -p '$pipeline'"
	exit 1
}
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
if [ $i = 0 ]; then
	echo "FAIL: $name has no expected outputs ($dir/$name.out0.npy)"
	exit 1
fi
backend=${KFUSE_RUN_BACKEND:-cpu}
"$build/kfuse-run" "$tmp/$name.opt.kf" --backend="$backend" "$@" $judge || {
	echo "FAIL: $name: the outputs of the $backend backend differ from PyTorch's"
	exit 1
}
