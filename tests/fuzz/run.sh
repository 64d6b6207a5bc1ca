#!/bin/sh
# run.sh: runs the libFuzzer targets, each for a given time on its seed corpus.
#
#   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang-14 -DKF_FUZZ=ON
#   ninja -C build-fuzz $(cd tests/fuzz && ls fuzz_*.c | sed 's/_/-/; s/\.c$//')
#   tests/fuzz/run.sh build-fuzz 600 [TARGET...]      (default: every target)
#
# Environment: JOBS targets at a time (default 1), OUT the directory for
# logs, grown corpora and crash artifacts (default /tmp/kf-fuzz).  The
# checked-in corpus/<target>/ is only read: new inputs go to $OUT/corpus,
# so it stays small.  Each crash, leak or timeout is saved as
# $OUT/<target>-crash-* (or leak-, timeout-, oom-); minimise it with
# `fuzz-<target> -minimize_crash=1 FILE`, fix the bug, and add it to
# regress/<target>/ so that ctest replays it from then on.
# Prints one line per target: seconds it ran (less than asked when it
# stopped at a finding), executions, corpus size, findings.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: run.sh BUILD_DIR [SECONDS] [TARGET...]}
secs=${2:-600}
[ $# -ge 2 ] && shift 2 || shift $#
targets=${*:-$(cd "$here" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')}
out=${OUT:-/tmp/kf-fuzz}
jobs=${JOBS:-1}
mkdir -p "$out/corpus"

run_one() {
	t=$1
	exe=$build/tests/fuzz/fuzz-$t
	if [ ! -x "$exe" ]; then
		echo "$t: $exe not built (configure with -DKF_FUZZ=ON)" >&2
		return 0
	fi
	mkdir -p "$out/corpus/$t"
	# Real sizes: an input as large as what the format really gets (the
	# seeds include real exports), and large enough for the attacks that
	# need room: ONNX subgraphs 3000 deep take 122 KB, which the old 8 KB
	# limit could never reach.  rewrite reads a small program.
	case $t in
	onnx|npy) maxlen=1048576 ;;
	parse|roundtrip|check) maxlen=262144 ;;
	lua) maxlen=65536 ;;
	*) maxlen=8192 ;;
	esac
	set -- -max_total_time="$secs" -timeout=20 -rss_limit_mb=2560 -malloc_limit_mb=2048 \
		-max_len="$maxlen" -print_final_stats=1 -artifact_prefix="$out/$t-"
	[ -f "$here/$t.dict" ] && set -- "$@" -dict="$here/$t.dict"
	# stdout/stderr of the code under test are closed (kfuse-check prints a
	# lot); libFuzzer's and the sanitizers' reports still reach the log
	start=$(date +%s)
	"$exe" "$@" -close_fd_mask=3 "$out/corpus/$t" "$here/corpus/$t" >"$out/$t.log" 2>&1 || true
	took=$(($(date +%s) - start))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log" | tail -1)
	found=$(ls "$out" | grep -c "^$t-" || true)
	ncorp=$(ls "$out/corpus/$t" | wc -l)
	echo "$t: ${took}s, ${execs:-?} execs, corpus $ncorp, findings $found (log $out/$t.log)"
}

n=0
for t in $targets; do
	run_one "$t" &
	n=$((n + 1))
	if [ "$n" -ge "$jobs" ]; then
		wait
		n=0
	fi
done
wait
# STRICT=1 (CI's smoke run): a finding fails the run.
if [ "${STRICT:-0}" = 1 ]; then
	for t in $targets; do
		if ls "$out" | grep -q "^$t-"; then
			echo "run.sh: $t has findings in $out" >&2
			exit 1
		fi
	done
fi
