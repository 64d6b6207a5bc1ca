#!/bin/sh
# nvrtc-all.sh KFUSE_OPT SOURCE_DIR: emits the CUDA kernels of every .kf
# graph under tests/golden, examples and bench/gpu, with and without the
# fuse pass, compiles each program with NVRTC to PTX (sm_90), and checks that
# the PTX has one .entry per distinct kernel.  Files that kfuse-opt rejects
# (error tests) are skipped, and so are files that say `nvrtc-all: skip` (an
# op without a CUDA form, with the reason).  Exit 77 when NVRTC is absent.
opt=$1
src=$2
tmp=${TMPDIR:-/tmp}/kf-nvrtc.$$
trap 'rm -f "$tmp".*' EXIT
printf 'graph @t(%%x: f32[4]) -> (f32[4]) {\n  %%y = exp(%%x) : f32[4]\n  return %%y\n}\n' > "$tmp.probe.kf"
if ! "$opt" "$tmp.probe.kf" --emit=ptx > /dev/null 2> "$tmp.err"; then
	if grep -qi "nvrtc" "$tmp.err"; then
		echo "SKIP: NVRTC is not available: $(head -1 "$tmp.err")"
		exit 77
	fi
	cat "$tmp.err"
	exit 1
fi
fail=0 files=0 kernels=0
for f in $(find "$src/tests/golden" "$src/examples" "$src/bench/gpu" -name '*.kf' 2>/dev/null | sort); do
	"$opt" "$f" > /dev/null 2>&1 || continue
	# a graph with an op that has no CUDA form says so in a comment
	grep -q 'nvrtc-all: skip' "$f" && continue
	files=$((files + 1))
	for pipe in "" "fuse"; do
		if [ -n "$pipe" ]; then set -- -p "$pipe"; else set --; fi
		if ! "$opt" "$f" "$@" --emit=cuda > "$tmp.cu" 2> "$tmp.err"; then
			# the CUDA backend needs static shapes (docs/fusion.md)
			grep -q "has symbolic shapes" "$tmp.err" && continue
			echo "FAIL: emit ${pipe:-unfused}: $f"; cat "$tmp.err"; fail=1; continue
		fi
		want=$(grep -c '^extern "C" __global__' "$tmp.cu")
		if ! "$opt" "$f" "$@" --emit=ptx > "$tmp.ptx" 2> "$tmp.err"; then
			echo "FAIL: nvrtc ${pipe:-unfused}: $f"; head -40 "$tmp.err"; fail=1; continue
		fi
		got=$(grep -c '^\.visible \.entry kf_' "$tmp.ptx")
		if [ "$want" != "$got" ]; then
			echo "FAIL: ${pipe:-unfused}: $f: $want kernels emitted, $got in the PTX"; fail=1
		fi
		kernels=$((kernels + got))
	done
done
echo "nvrtc-all: $files graphs, $kernels kernels compiled to PTX for sm_90"
[ "$files" -gt 0 ] || { echo "FAIL: no graphs found"; exit 1; }
exit $fail
