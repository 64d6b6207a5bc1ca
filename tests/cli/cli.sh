#!/bin/sh
# cli.sh BUILD SOURCE: the command-line conventions every tool keeps
# (docs/tools.md, "Conventions"), and that docs/tools.md and each tool's
# --help name the same options.  Prints each failure; exit 1 if any.
build=$1
src=$2
tmp=${TMPDIR:-/tmp}/kf-cli.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
tool_path() { if [ -x "$build/$1" ]; then echo "$build/$1"; else echo "$build/onnx/$1"; fi; }

# run TOOL ARGS...: status in $rc, stdout in $tmp/out, stderr in $tmp/err
run() { t=$(tool_path "$1"); shift; "$t" "$@" > "$tmp/out" 2> "$tmp/err"; rc=$?; }

# a usage error: status, exactly two lines on stderr, the second the hint
usage_error() { # TOOL STATUS WORDS ARGS...
	tool=$1 want=$2 words=$3
	shift 3
	run "$tool" "$@"
	[ $rc = "$want" ] || fail "$tool $*: status $rc, not $want"
	[ "$(wc -l < "$tmp/err")" = 2 ] || { fail "$tool $*: stderr is not two lines:"; cat "$tmp/err"; }
	grep -qF -- "$words" "$tmp/err" || { fail "$tool $*: no '$words' in:"; cat "$tmp/err"; }
	tail -n 1 "$tmp/err" | grep -qx "Try '$tool --help' for more information." ||
		fail "$tool $*: no hint line"
	[ -s "$tmp/out" ] && fail "$tool $*: wrote to stdout"
}

for tool in kfuse-opt kfuse-run kfuse-check kfuse-diff kfuse-verify-rules kfuse-import-onnx; do
	t=$(tool_path $tool)
	[ -x "$t" ] || { [ $tool = kfuse-import-onnx ] && continue; fail "$tool not built"; continue; }
	for h in --help -h; do
		run $tool $h
		[ $rc = 0 ] || fail "$tool $h: status $rc"
		head -n 1 "$tmp/out" | grep -q "^usage: $tool " || fail "$tool $h: no usage line on stdout"
		[ -s "$tmp/err" ] && fail "$tool $h: wrote to stderr"
	done
	run $tool --version
	[ $rc = 0 ] || fail "$tool --version: status $rc"
	head -n 1 "$tmp/out" | grep -qx "$tool (kfuse [0-9]*\.[0-9]*\.[0-9]*)" || fail "$tool --version: $(head -n 1 "$tmp/out")"

	# --help and docs/tools.md name the same long options
	$t --help | grep -o -- '--[a-z][a-z0-9-]*' | sort -u > "$tmp/help"
	awk -v t="## $tool" '$0 == t {on = 1; next} /^## / {on = 0} on' "$src/docs/tools.md" |
		grep -o -- '--[a-z][a-z0-9-]*' | sort -u > "$tmp/doc"
	[ -s "$tmp/doc" ] || fail "docs/tools.md has no section '## $tool'"
	comm -23 "$tmp/help" "$tmp/doc" | while read -r o; do echo "FAIL: $tool --help has $o, docs/tools.md does not"; done
	comm -13 "$tmp/help" "$tmp/doc" | while read -r o; do echo "FAIL: docs/tools.md has $o for $tool, its --help does not"; done
	[ -z "$(comm -3 "$tmp/help" "$tmp/doc")" ] || fails=$((fails + 1))
done

# usage errors: one line and a hint, status 2 (kfuse-check: 1, as FileCheck)
kf=$src/examples/mlp.kf
usage_error kfuse-opt 2 "unknown option '--no-such-option'" $kf --no-such-option
usage_error kfuse-opt 2 "option '--seed' needs a value" $kf --seed
usage_error kfuse-opt 2 "--seed needs a non-negative integer, not 'abc'" $kf --check-equivalence --seed abc
usage_error kfuse-opt 2 "--seed needs a non-negative integer, not '-1'" $kf --seed -1
usage_error kfuse-opt 2 "--trials needs an integer in 1..1000, not '0'" $kf --trials 0
usage_error kfuse-opt 2 "--rtol needs a number >= 0, not '1e'" $kf --rtol 1e
usage_error kfuse-opt 2 "unknown --emit kind 'llvm'" $kf --emit=llvm
usage_error kfuse-opt 2 "no input file" -p cse
usage_error kfuse-opt 2 "more than one input file" $kf $kf
usage_error kfuse-run 2 "--seed needs a non-negative integer, not 'abc'" $kf --random-inputs --seed abc
usage_error kfuse-run 2 "--seed needs a non-negative integer, not '7x'" $kf --random-inputs --seed=7x
usage_error kfuse-run 2 "--bench needs an integer in 1..1000000, not 'many'" $kf --bench many
usage_error kfuse-run 2 "--input wants NAME=FILE.npy" $kf --input x
usage_error kfuse-run 2 "--tune takes no value or =force" $kf --tune=always
usage_error kfuse-run 2 "unknown option '-x'" $kf -x
usage_error kfuse-run 2 "--compile-only plans for cuda; --backend=auto says otherwise" $kf --compile-only --backend=auto
usage_error kfuse-run 2 "--compile-only runs nothing" $kf --compile-only --bench 3
usage_error kfuse-verify-rules 2 "--seed needs a non-negative integer, not 'abc'" --seed abc
usage_error kfuse-verify-rules 2 "--trials needs an integer in 1..1000, not '2.5'" --trials 2.5
usage_error kfuse-verify-rules 2 "unknown option '--verify'" --verify
usage_error kfuse-diff 2 "--max needs an integer" --max lots $kf $kf
usage_error kfuse-diff 2 "two files to compare" $kf
usage_error kfuse-diff 2 "--rtol needs a number >= 0, not '-1'" --rtol -1 $kf $kf
if [ -x "$build/onnx/kfuse-import-onnx" ]; then
	usage_error kfuse-import-onnx 2 "--inline-max needs an integer >= 0, not 'x'" m.onnx --inline-max x
	usage_error kfuse-import-onnx 2 "no model file" -o x.kf
fi
usage_error kfuse-check 1 "--dump-input-context needs an integer" $kf --dump-input-context=lots

# a bad environment knob: one error line naming it, status 1 (checked
# before the tuner looks for a GPU, so on any machine)
env KFUSE_TUNE_FLUSH=sometimes "$(tool_path kfuse-run)" $kf --backend=cuda --random-inputs --tune > "$tmp/out" 2> "$tmp/err"
rc=$?
[ $rc = 1 ] || fail "KFUSE_TUNE_FLUSH=sometimes kfuse-run --tune: status $rc, not 1"
grep -qF "KFUSE_TUNE_FLUSH wants 0 (warm replays) or 1 (the L2 flushed, the default), not 'sometimes'" "$tmp/err" ||
	{ fail "KFUSE_TUNE_FLUSH=sometimes: no error naming it:"; cat "$tmp/err"; }

# the two scripts of the tree: --help and --version too
for py in tests/run-golden tools/update-checks; do
	python3 "$src/$py" --help > "$tmp/out" 2>&1 || fail "$py --help: status $?"
	v=$(python3 "$src/$py" --version 2>&1)
	echo "$v" | grep -qx "$(basename $py) (kfuse [0-9.]*)" || fail "$py --version: $v"
done

echo "$fails failure(s)"
[ $fails = 0 ]
