#!/bin/sh
# shared-consts.sh KFUSE_RUN: the plans of a symbolic graph share the device
# copy of a large inline constant (cuda/cuda_consts.c): planned for two
# shapes on the dry-run CUDA backend, the second plan reads and uploads no
# constant.  A model loaded through the API from ONNX keeps its weights
# inline; without the sharing every new shape uploaded them all again.
# Exit 77 when NVRTC is absent (the dry run compiles the kernels).
run=$1
tmp=${TMPDIR:-/tmp}/kf-shared-consts.$$
trap 'rm -rf "$tmp".*' EXIT
export KFUSE_CACHE_DIR="$tmp.cache"
# a 128 x 256 f32 weight (128 KiB), written as a dense literal
awk 'BEGIN {
	printf "graph @g(%%x: f32[B,128]) -> (f32[B,256]) {\n  %%w = const dense<["
	for (i = 0; i < 128; i++) {
		printf "%s[", i ? ", " : ""
		for (j = 0; j < 256; j++)
			printf "%s%g", j ? ", " : "", ((i * 7 + j * 13) % 17 - 8) / 16
		printf "]"
	}
	printf "]> : f32[128,256]\n  %%y = matmul(%%x, %%w) : f32[B,256]\n  %%z = relu(%%y) : f32[B,256]\n  return %%z\n}\n"
}' > "$tmp.kf"
if ! "$run" "$tmp.kf" --compile-only --shape B=4 --shape B=64 > "$tmp.out" 2>&1; then
	if grep -qi "nvrtc" "$tmp.out"; then
		echo "SKIP: NVRTC is not available: $(grep -i -m1 nvrtc "$tmp.out")"
		exit 77
	fi
	cat "$tmp.out"
	exit 1
fi
first=$(grep -c 'constants 0.12 MiB read and uploaded, 0.00 MiB shared with other plans' "$tmp.out")
second=$(grep -c 'constants 0.00 MiB read and uploaded, 0.12 MiB shared with other plans' "$tmp.out")
if [ "$first" != 1 ] || [ "$second" != 1 ]; then
	echo "FAIL: the second plan did not share the inline weight:"
	grep 'constants' "$tmp.out"
	exit 1
fi
echo "ok: the second shape's plan shares the 128 KiB inline weight"
