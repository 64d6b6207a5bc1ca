#!/bin/sh
# tests/models/compile_model.sh BUILD DIR NAME PIPELINE
#
# One model compiled for the GPU without one: kfuse-import-onnx
# DIR/NAME.onnx, kfuse-opt PIPELINE, then kfuse-run --compile-only, which
# plans the graph for CUDA at its inputs' shapes (a symbolic graph: every
# symbol 4, then 7, through the same pipeline) and compiles every kernel
# with NVRTC for sm_90.  A kernel NVRTC rejects, or an op with no CUDA
# form, fails the test; no NVRTC skips it (status 77).  A scratch kernel
# cache, so that every kernel compiles.
set -u
build=$1 dir=$2 name=$3 pipeline=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-compile-$name.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
"$build/onnx/kfuse-import-onnx" "$dir/$name.onnx" -o "$tmp/$name.kf" || { echo "FAIL: $name does not import"; exit 1; }
"$build/kfuse-opt" "$tmp/$name.kf" -p "$pipeline" -o "$tmp/$name.opt.kf" || { echo "FAIL: $name: kfuse-opt"; exit 1; }
set --
# a symbolic graph: a second shape, every symbol 7 (what --dim sets)
for s in $(sed -n '1,/^graph /{s/^graph @[^(]*(//p}' "$tmp/$name.opt.kf" | grep -o '[a-zA-Z_][a-zA-Z_0-9]*[],]' |
	   tr -d '],' | grep -v '^[fi][0-9]*$\|^bf16$' | sort -u); do
	set -- "$@" "$s=7"
done
[ $# -gt 0 ] && set -- --shape "$(echo "$@" | tr ' ' ',')"
KFUSE_CACHE_DIR="$tmp/cache" "$build/kfuse-run" "$tmp/$name.opt.kf" --compile-only --shape-pipeline "$pipeline" "$@" \
	>"$tmp/out" 2>&1
rc=$?
grep -E "compiled for|error" "$tmp/out"
if grep -q "cannot load NVRTC" "$tmp/out"; then
	echo "skipped: NVRTC is not available"
	exit 77
fi
[ $rc = 0 ] || { cat "$tmp/out" | tail -30; echo "FAIL: $name does not compile for CUDA"; exit 1; }
# the second shape's plan reads no weight file again: the first plan's
# device copies are shared (cuda/cuda_consts.c; constants that only feed
# results computed at plan time, cuda_hoist.c, are not uploaded themselves)
last=$(grep "file constants .* MiB read" "$tmp/out" | tail -n 1)
if [ $# -gt 0 ] && [ -n "$last" ] && ! echo "$last" | grep -q " 0.00 MiB read"; then
	grep -E "file constants|dyn:" "$tmp/out"
	echo "FAIL: $name: the plan of the second shape read file constants again"
	exit 1
fi
