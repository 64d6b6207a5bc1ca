#!/bin/sh
# The main job on the bundled example: a transformer feed-forward block in
# ONNX (layer norm and GELU written as primitive ops, as exporters write them)
# is imported, optimised (canonicalize, CSE, the standard Lua fusion rules,
# the fuse pass), checked against the original on the CPU interpreter, and
# run: on the GPU when there is one (compared with the CPU), else on the CPU.
set -e
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build >/dev/null
out=build/demo
mkdir -p $out
set -x
./build/onnx/kfuse-import-onnx examples/onnx/ffn.onnx -o $out/ffn.kf
./build/kfuse-opt $out/ffn.kf -p 'canonicalize,cse,rules,fuse,dce' \
  --check-equivalence --timing -o $out/ffn.fused.kf
./build/kfuse-run $out/ffn.fused.kf --backend=auto --compare=cpu --random-inputs --seed 1 \
  --output-dir $out
set +x
echo "== the optimised graph ($out/ffn.fused.kf), long constants cut =="
cut -c1-150 $out/ffn.fused.kf
