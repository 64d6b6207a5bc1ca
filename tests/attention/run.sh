#!/bin/sh
# run.sh BUILD_DIR MODELS_DIR NAME N K [RTOL]: one attention test model
# (gen.py wrote it: NAME.onnx, NAME.in<i>.npy, NAME.out.npy; or one of the
# model zoo's, tests/models, with NAME.out<i>.npy) through the
# importer and the transformer pipeline (merge-matmul, fuse-attention,
# fuse-matmul, fuse); N attention kernels must come out, no softmax outside
# them, at most K kernels in all (top-level ops but constants, reshapes,
# which are aliases, and concatenations of weights, which the CUDA plan
# computes once), and the interpreter must match PyTorch's output within
# RTOL (default 1e-4; atol 1e-5).
set -e
b=$1 m=$2 name=$3 want=$4 maxk=$5 rtol=${6:-1e-4}
root=$(cd "$(dirname "$0")/../.." && pwd)
t=${TMPDIR:-/tmp}/kf-attn-$name.$$
trap 'rm -rf "$t"' EXIT
mkdir -p "$t"
"$b/onnx/kfuse-import-onnx" "$m/$name.onnx" -o "$t/$name.kf"
"$b/kfuse-opt" "$t/$name.kf" -p "canonicalize,cse,rules{path=$root/patterns},merge-matmul,fuse-attention,fuse-matmul,fuse,dce" \
  --explain-fusion -o "$t/$name.fused.kf" 2> "$t/log"
got=$(grep -c 'kind = "attention"' "$t/$name.fused.kf" || true)
if [ "$got" != "$want" ]; then
  cat "$t/log" >&2
  echo "$name: $got attention kernels, expected $want" >&2
  exit 1
fi
if grep -q '^  %[^ ]* = softmax(' "$t/$name.fused.kf"; then
  cat "$t/log" >&2
  echo "$name: a softmax is left outside the attention kernels" >&2
  exit 1
fi
kernels=$(grep -E '^  %[^ ]+ = ' "$t/$name.fused.kf" | grep -vcE '= (const|reshape|concat)[ (]' || true)
if [ "$kernels" -gt "$maxk" ]; then
  grep -E '^  %[^ ]+ = ' "$t/$name.fused.kf" | grep -vE '= (const|reshape|concat)[ (]' | cut -c1-100 >&2
  echo "$name: $kernels kernels, expected at most $maxk" >&2
  exit 1
fi
echo "$name: $got attention kernel(s), $kernels kernels in all"
ins=""
for f in "$m/$name".in*.npy; do
  i=${f##*.in}; i=${i%.npy}
  ins="$ins --input $i=$f"
done
# gen.py's one output is NAME.out.npy; the zoo's (tests/models) NAME.out<i>.npy
outs=""
for f in "$m/$name".out*.npy; do
  i=${f##*.out}; i=${i%.npy}
  outs="$outs --expect ${i:-0}=$f"
done
"$b/kfuse-run" "$t/$name.fused.kf" $ins $outs --rtol "$rtol" --atol 1e-5
