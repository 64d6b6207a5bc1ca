#!/bin/sh
# bench/gpu/embed_device.sh [BUILD_DIR] [N]: the embedding API on the GPU.
#
# Builds bench/gpu/embed_device.c against the build's libkfuse.so and
# include/, and runs it on a few graphs: kfuse_run on the cuda backend and
# kfuse_run_device (device buffers on the program's own stream, twice: the
# second run is a CUDA-graph replay) against the interpreter, then N timed
# runs of each.  Prints a line per output and round, and the times; every
# line must say ok and the last "all results match the interpreter".
. "$(dirname "$0")/setup.sh"

exe="$out/embed_device"
cc -O2 -I"$root/include" "$here/embed_device.c" -L"$build" -lkfuse -Wl,-rpath,"$build" -ldl -lm -o "$exe" ||
	{ echo "FAIL: embed_device.c does not build against $build/libkfuse.so"; exit 1; }
rc=0
for g in "$here/bias_gelu.kf" "$here/layer_norm.kf" "$root/examples/mlp.kf"; do
	echo "== $g"
	"$exe" "$g" "canonicalize,cse,rules,fuse-matmul,fuse,dce" "$N" 2>&1 | tee -a "$log" || rc=1
done
exit $rc
