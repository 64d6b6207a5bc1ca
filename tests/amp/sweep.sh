#!/bin/sh
# sweep.sh KFUSE_OPT SOURCE_DIR: the amp pass (bf16 and f16) on every graph
# of the tree that parses (tests/golden, examples, bench/gpu), each checked
# against its f32 original on the interpreter with --check-equivalence's
# default tolerance for the low type (runtime/equiv.h), then fused.
# Skipped: graphs that do not parse or do not run on random inputs before
# amp (an error by design, an index input out of range).
# Skipped: examples/rnn, whose weights are unit-variance random inputs:
# 80 steps of such a recurrence are chaotic, and any rounding (f16, bf16, or
# f32 against f64) moves the result by its own size.
opt=$1
src=$2
cd "$src" || exit 1
fail=0 n=0
for f in $(find tests/golden examples bench/gpu -name '*.kf' | LC_ALL=C sort); do
	case $f in examples/rnn/*) continue ;; esac
	# only graphs that parse and run on random inputs as they are: a file
	# whose graph fails by design (tests/golden/run/gather-elements.kf's
	# out-of-range index) says nothing about amp
	"$opt" "$f" --check-equivalence --trials 1 > /dev/null 2>&1 || continue
	for dt in bf16 f16; do
		n=$((n + 1))
		if ! out=$("$opt" "$f" -p "amp{dtype=$dt},canonicalize,cse,dce,fuse" --check-equivalence --trials 2 2>&1 >/dev/null); then
			echo "FAIL: $f amp{dtype=$dt}:"
			echo "$out" | grep -E 'error|MISMATCH' | head -5
			fail=1
		fi
	done
done
echo "amp sweep: $n graph/dtype pairs, $([ $fail = 0 ] && echo all equivalent || echo FAILURES)"
exit $fail
