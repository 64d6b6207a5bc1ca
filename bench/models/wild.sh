#!/bin/sh
# bench/models/wild.sh [BUILD_DIR] [N]: models nobody here shaped kfuse
# for, on the GPU machine (timm and transformers are there): wild.py
# exports each (random weights, the library's own definition, f32 unless
# WILD_DTYPE=f16 or bf16), then each goes through run_kfuse (bench/models/
# run_kfuse.sh: kfuse-import-onnx, the tests' whole pipeline, kfuse-run
# with PyTorch's inputs, every output checked against PyTorch's) on the
# GPU (--bench N, default 10) and, unless WILD_CPU=0, on the CPU
# interpreter too (the oracle; --bench 1), WILD_JOBS models at a time.  One table: a row per model and
# backend, then the counts; a model PyTorch could not export is listed
# apart (PyTorch's failure, not kfuse's).
# In f16 and bf16 each GPU row also gives kfuse's and PyTorch's distance from
# the same model in f64 (relative L2 of the worst output), the count of
# models where kfuse's is at most 1.5x PyTorch's follows the table.
#
# Environment: WILD_SET (timm or hf; default timm), WILD_ONLY (comma-
# separated names), WILD_DTYPE, WILD_CPU, WILD_TINY=1 (transformers at
# widths of 64: wild.py --tiny), KFUSE_RUN_TIMEOUT (seconds a
# kfuse-run may take; default 300 here).
. "$(dirname "$0")/../gpu/setup.sh"
N=${2:-10}
. "$root/bench/models/run_kfuse.sh"
set="${WILD_SET:-timm}"
dt=${WILD_DTYPE:-f32}
d="$out/$set.$dt"
mkdir -p "$d"
: > "$d/export.err"
export KFUSE_RUN_TIMEOUT=${KFUSE_RUN_TIMEOUT:-300}
t0=$(date +%s)
# one model: export, then kfuse on the GPU and on the CPU; rows into $d/NAME.rows
one() {
	$py "$root/bench/models/wild.py" --set "$set" --dtype "$dt" --only "$1" ${WILD_TINY:+--tiny} --out "$d" > "$d/$1.export.log" 2>&1
	n=$(echo "$1" | tr - _)
	: > "$d/$n.rows"
	[ -f "$d/$n.onnx" ] || return 0
	# in f16 and bf16, the distance of kfuse's and of PyTorch's outputs from
	# the model in f64 (bench/models/f64err.py) follows the row's detail
	r=$(run_kfuse "$d" "$n" "$dt" 2 "")
	e=$($py "$root/bench/models/f64err.py" "$d" "$n" "$d/$n.outs" 2>/dev/null)
	printf 'cuda\t%s%s\n' "$r" "${e:+; $e}" >> "$d/$n.rows"
	[ "${WILD_CPU:-1}" = 0 ] && return 0
	printf 'cpu\t%s\n' "$(N=1 KFUSE_BACKEND=cpu KFUSE_RUN_TAG=cpu run_kfuse "$d" "$n" "$dt" 2 "")" >> "$d/$n.rows"
}
# WILD_JOBS models at once (default 6): the time goes to exports and NVRTC
# compiles on the CPU; the GPU times are then indicative only
names=$($py "$root/bench/models/wild.py" --set "$set" ${WILD_ONLY:+--only "$WILD_ONLY"} --list)
# the table of the models done so far (at the end, or when stopped: a
# device call's timeout then still leaves what finished)
report() {
	rows="$out/wild.tsv"
	: > "$rows"
	for m in $names; do
		n=$(echo "$m" | tr - _)
		cat "$d/$n.rows" 2>/dev/null >> "$rows"
		grep -h 'export failed' "$d/$m.export.log" 2>/dev/null >> "$d/export.err"
	done
	{
		echo "# bench/models/wild.sh, $(date -u '+%F %T UTC'): WILD_SET=$set, $dt, N=$N${1:+ ($1)}"
		nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/# gpu: /'
		$py -c "import torch, importlib; print('# torch', torch.__version__, *[m + ' ' + importlib.import_module(m).__version__ for m in ('timm', 'transformers') if importlib.util.find_spec(m)])" 2>/dev/null
		echo "| backend | model | check | ms | kernels | detail |"
		echo "|---|---|---|---|---|---|"
		sed 's/\t/ | /g; s/^/| /; s/$/ |/' "$rows"
		for b in cuda cpu; do
			t=$(grep -c "^$b	" "$rows")
			[ "$t" = 0 ] && continue
			echo "$b: $(grep -c "^$b	[^	]*	ok	" "$rows") of $t exported models match PyTorch"
			f=$(grep "^$b	.*f64 rel L2" "$rows" | sed 's/.*(\([0-9.inf]*\) x)$/\1/')
			[ -n "$f" ] && echo "$b: $(echo "$f" | awk '$1 <= 1.5' | wc -l) of $(echo "$f" | wc -l) within 1.5x PyTorch $dt's distance from f64"
		done
		sed -n 's/^wild: \(.*\): export failed: /PyTorch could not export \1: /p' "$d/export.err"
		echo "wild: $(($(date +%s) - t0)) s"
	} | tee "$log"
}
trap 'trap - TERM INT; kill $(jobs -p) 2>/dev/null; report "stopped before the end"; exit 124' TERM INT
i=0
for m in $names; do
	one "$m" &
	i=$((i + 1))
	[ $((i % ${WILD_JOBS:-6})) = 0 ] && wait
done
wait
report
