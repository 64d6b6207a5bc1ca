#!/bin/sh
# shared-consts.sh KFUSE_RUN: the plans of a symbolic graph share the device
# copy of a large inline constant (cuda/cuda_consts.c), and of a
# constant-only node over one (cuda/cuda_hoist.c: a transposed weight):
# planned for two shapes on the dry-run CUDA backend, the second plan
# reads, computes and uploads no constant.  A model loaded through the API
# from ONNX keeps its weights inline; without the sharing every new shape
# uploaded them all again (and computed merged or cast weights again).
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
	printf "]> : f32[128,256]\n  %%v = const file(\"v.npy\") : f32[256,128]\n"
	printf "  %%t = transpose(%%v) {perm = [1, 0]} : f32[128,256]\n"
	printf "  %%y = matmul(%%x, %%w) : f32[B,256]\n  %%u = matmul(%%x, %%t) : f32[B,256]\n"
	printf "  %%r = relu(%%y) : f32[B,256]\n  %%z = add(%%r, %%u) : f32[B,256]\n  return %%z\n}\n"
}' > "$tmp.kf"
# the second weight a file (canonicalize folds ops over inline constants
# into new ones, not over files), written by kfuse-run itself
mkdir "$tmp.d"
printf 'graph @v(%%v: f32[256,128]) -> (f32[256,128]) {\n  return %%v\n}\n' > "$tmp.v.kf"
"$run" "$tmp.v.kf" --random-inputs --save-inputs "$tmp.d" > /dev/null || exit 1
mv "$tmp.kf" "$tmp.d/g.kf"
if ! "$run" "$tmp.d/g.kf" --compile-only --shape-pipeline dce --shape B=4 --shape B=64 > "$tmp.out" 2>&1; then
	if grep -qi "nvrtc" "$tmp.out"; then
		echo "SKIP: NVRTC is not available: $(grep -i -m1 nvrtc "$tmp.out")"
		exit 77
	fi
	cat "$tmp.out"
	exit 1
fi
first=$(grep -c 'constants 0.25 MiB read and uploaded, 0.00 MiB shared with other plans' "$tmp.out")
second=$(grep -c 'constants 0.00 MiB read and uploaded, 0.25 MiB shared with other plans' "$tmp.out")
hoisted=$(grep -c '1 constant-only node computed at plan time, or shared' "$tmp.out")
if [ "$first" != 1 ] || [ "$second" != 1 ] || [ "$hoisted" != 2 ]; then
	echo "FAIL: the second plan did not share the inline weight and the transposed one:"
	grep 'constant' "$tmp.out"
	exit 1
fi
# a hoisted `shape` of a graph input has no key (its operand is no
# constant): computed per plan, never looked up past the input
printf 'graph @s(%%x: f32[B,4]) -> (f32[B,4], i64[2]) {\n  %%sh = shape(%%x) : i64[2]\n  %%z = relu(%%x) : f32[B,4]\n  return %%z, %%sh\n}\n' > "$tmp.s.kf"
if ! "$run" "$tmp.s.kf" --compile-only --shape-pipeline dce --shape B=3 --shape B=5 > "$tmp.s.out" 2>&1 ||
	[ "$(grep -c '1 constant-only node computed at plan time' "$tmp.s.out")" != 3 ]; then
	echo "FAIL: the hoisted shape of an input:"
	cat "$tmp.s.out"
	exit 1
fi
echo "ok: the second shape's plan shares the 128 KiB inline weight and the transposed file weight"
