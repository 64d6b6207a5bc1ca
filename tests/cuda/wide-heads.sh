#!/bin/sh
# wide-heads.sh KFUSE_OPT KFUSE_RUN: an attention whose head dim is over
# what the attention kernels take (1024 here: EdgeNeXt's attention across
# channels has such heads) is fused by fuse-attention all the same, and the
# CUDA backend runs its body op by op (a kernel per op), not an error
# (session 18: "attention kernel: head dims over 512" stopped timm's
# edgenext_xx_small).  The same for an attention the kernels refuse whose
# body ends in a view: GPT-Neo, GPT-J and CodeGen in f16 take the scores
# in f32 against f16 values and end in reshape(transpose(...)), which
# stopped the plan ("its body cannot run op by op (it yields a view)",
# session 19: the reshape's operand is now computed into the fusion's
# result).  Planned and compiled on the dry-run backend (exit 77
# without NVRTC); the fused graph checked against the unfused one on the
# interpreter.
opt=$1 run=$2
tmp=${TMPDIR:-/tmp}/kf-wide-heads.$$
trap 'rm -rf "$tmp".*' EXIT
export KFUSE_CACHE_DIR="$tmp.cache"
cat > "$tmp.kf" <<'EOG'
graph @g(%q: f32[2,8,1024], %k: f32[2,8,1024], %v: f32[2,8,1024]) -> (f32[2,8,1024]) {
  %kt = transpose(%k) {perm = [0, 2, 1]} : f32[2,1024,8]
  %s = matmul(%q, %kt) : f32[2,8,8]
  %c = const 0.03125 : f32[]
  %t = mul(%s, %c) : f32[2,8,8]
  %p = softmax(%t) {axis = -1} : f32[2,8,8]
  %o = matmul(%p, %v) : f32[2,8,1024]
  return %o
}
EOG
"$opt" "$tmp.kf" -p fuse-attention,dce -o "$tmp.f.kf" || exit 1
grep -q 'kind = "attention"' "$tmp.f.kf" || { echo "wide-heads: fuse-attention made no attention kernel" >&2; exit 1; }
"$run" "$tmp.f.kf" --random-inputs --compare=cpu > "$tmp.cpu" 2>&1 || { cat "$tmp.cpu" >&2; exit 1; }
if ! out=$("$run" "$tmp.f.kf" --backend=cuda --compile-only 2>&1); then
	if echo "$out" | grep -qi nvrtc; then
		echo "SKIP: NVRTC is not available: $(echo "$out" | grep -i -m1 nvrtc)"
		exit 77
	fi
	echo "$out" >&2
	echo "wide-heads: the dry run failed" >&2
	exit 1
fi
echo "$out" | grep -q 'runs op by op: attention kernel: head dims over 512' || {
	echo "$out" >&2
	echo "wide-heads: the wide attention did not run op by op" >&2
	exit 1
}
# GPT-Neo's f16 attention: f32 scores, f16 values, heads merged by a view
cat > "$tmp.m.kf" <<'EOG'
graph @g(%q: f32[2,4,8,16], %k: f32[2,4,8,16], %v: f16[2,4,8,16]) -> (f16[2,8,64]) {
  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f32[2,4,16,8]
  %s = matmul(%q, %kt) : f32[2,4,8,8]
  %c = const 0.25 : f32[]
  %t = mul(%s, %c) : f32[2,4,8,8]
  %p = softmax(%t) {axis = -1} : f32[2,4,8,8]
  %ph = cast(%p) {to = "f16"} : f16[2,4,8,8]
  %o = matmul(%ph, %v) : f16[2,4,8,16]
  %ot = transpose(%o) {perm = [0, 2, 1, 3]} : f16[2,8,4,16]
  %r = reshape(%ot) {shape = [2, 8, 64]} : f16[2,8,64]
  return %r
}
EOG
"$opt" "$tmp.m.kf" -p fuse-attention,dce -o "$tmp.mf.kf" || exit 1
grep -q 'kind = "attention"' "$tmp.mf.kf" || { echo "wide-heads: no attention kernel in the mixed graph" >&2; exit 1; }
"$run" "$tmp.mf.kf" --random-inputs --compare=cpu > "$tmp.cpu" 2>&1 || { cat "$tmp.cpu" >&2; exit 1; }
out=$("$run" "$tmp.mf.kf" --backend=cuda --compile-only 2>&1) || {
	echo "$out" >&2
	echo "wide-heads: the dry run of the mixed-type attention failed" >&2
	exit 1
}
echo "$out" | grep -q 'runs op by op: attention kernel: q, k and v are not of one of' || {
	echo "$out" >&2
	echo "wide-heads: the mixed-type attention did not run op by op" >&2
	exit 1
}
# on a GPU (KF_WIDE_HEADS_GPU=1): both run against the interpreter
if [ "${KF_WIDE_HEADS_GPU:-0}" = 1 ]; then
	for f in "$tmp.f.kf" "$tmp.mf.kf"; do
		"$run" "$f" --backend=cuda --random-inputs --compare=cpu --rtol 2e-3 --atol 2e-3 || exit 1
	done
fi
echo "wide-heads: ok"
