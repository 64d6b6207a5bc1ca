#!/bin/sh
# bench/models/testdata_gpu.sh BUILD [JOBS]: every model of the tests' data
# (tests/models/{zoo,others,wild,bf16}: PyTorch exports with their
# expected outputs) through the tests' pipeline and run on the GPU, judged
# as the CTests judge the interpreter (tests/models/run_model.sh with
# KFUSE_RUN_BACKEND=cuda): f32 (rtol 1e-3, atol 1e-4), amp{dtype=bf16}
# (relative L2 5e-2) and amp{dtype=f16} (1e-2); the bf16 set as exported
# (against f64, 3e-2).  One line a model and form; JOBS at once (default
# 8).  $TESTDATA_ONLY (a grep -E pattern over SET/NAME) selects;
# $TESTDATA_DIRS (space-separated) runs other folders written the same way
# instead (e.g. `others.py --large --out DIR`: models too large to commit);
# $TESTDATA_FORMS (default "f32 bf16 f16 native") the forms.
set -u
# --one BUILD LOGS K: the case on line K of LOGS/cases, one line of the table
if [ "${1:-}" = --one ]; then
	root=$(cd "$(dirname "$0")/../.." && pwd)
	build=$2 logs=$3
	IFS='	' read -r d n p dt tol <<EOF
$(sed -n "${4}p" "$logs/cases")
EOF
	l="$logs/$(basename "$d").$n.$dt.log"
	# shellcheck disable=SC2086
	timeout 300 sh "$root/tests/models/run_model.sh" "$build" "$d" "$n" "$p" $tol > "$l" 2>&1
	case $? in 0) st=ok ;; 77) st=skip ;; 124) st="FAIL timeout" ;; *) st=FAIL ;; esac
	printf '| %s/%s | %s | %s | %s |\n' "$(basename "$d")" "$n" "$dt" "$st" \
		"$(grep -m1 -E 'FAIL|MISMATCH|rror' "$l" | cut -c1-160)"
	exit 0
fi
build=$(cd "${1:?usage: testdata_gpu.sh BUILD [JOBS]}" && pwd)
jobs=${2:-8}
root=$(cd "$(dirname "$0")/../.." && pwd)
[ -d "$build/lib" ] && export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KFUSE_CACHE_DIR=${KFUSE_CACHE_DIR:-$(mktemp -d /tmp/kfuse-testdata.XXXXXX)}
export KFUSE_RUN_BACKEND=${KFUSE_RUN_BACKEND:-cuda}  # cpu: the plumbing without a GPU
# the tests' whole pipeline, as run_kfuse.sh (gpu.sh, wild.sh) writes it
me=testdata_gpu.sh
. "$root/bench/models/run_kfuse.sh"
logs=$(mktemp -d /tmp/kfuse-testdata-logs.XXXXXX)
echo "testdata_gpu.sh: build $build, logs in $logs"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
t=$root/tests/models
for f in $(for d in ${TESTDATA_DIRS:-$t/zoo $t/others $t/wild $t/bf16}; do ls "$d"/*.onnx; done); do
	d=$(dirname "$f") n=$(basename "$f" .onnx)
	s=$(basename "$d")/$n
	if [ -n "${TESTDATA_ONLY:-}" ] && ! echo "$s" | grep -qE "$TESTDATA_ONLY"; then continue; fi
	if [ "$(basename "$d")" = bf16 ]; then # exported in bf16, judged against f64 (as its CTests)
		printf '%s\t%s\t%s\tnative\t%s\n' "$d" "$n" "$pipeline" "--l2 3e-2"
		continue
	fi
	printf '%s\t%s\t%s\tf32\t%s\n' "$d" "$n" "$pipeline" "1e-3 1e-4"
	printf '%s\t%s\t%s\tbf16\t%s\n' "$d" "$n" "amp{dtype=bf16},$pipeline" "--l2 5e-2"
	printf '%s\t%s\t%s\tf16\t%s\n' "$d" "$n" "amp{dtype=f16},$pipeline" "--l2 1e-2"
done | awk -F'\t' -v forms=" ${TESTDATA_FORMS:-f32 bf16 f16 native} " 'index(forms, " " $4 " ")' > "$logs/cases"
echo "| model | form | status | first failure line |"
echo "|---|---|---|---|"
# the cases JOBS at a time, each by this script again (--one K: line K of the cases)
seq 1 "$(wc -l < "$logs/cases")" | xargs -P "$jobs" -n 1 sh "$0" --one "$build" "$logs"
