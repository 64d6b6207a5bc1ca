#!/bin/sh
# wide-heads.sh KFUSE_OPT KFUSE_RUN: an attention whose head dim is over
# what the attention kernels take (1024 here: EdgeNeXt's attention across
# channels has such heads) is fused by fuse-attention all the same, and the
# CUDA backend runs its body op by op (a kernel per op), not an error
# (session 18: "attention kernel: head dims over 512" stopped timm's
# edgenext_xx_small).  Planned and compiled on the dry-run backend (exit 77
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
echo "wide-heads: ok"
