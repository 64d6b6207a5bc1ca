#!/bin/sh
# bench/gpu/shapes.sh [BUILD_DIR] [N]: every distinct contraction of the model
# zoo after fusion, in f16 and f32, then the fp32 Llama-style block end to
# end (bench/gpu/llama_block.sh); one table.  Issue 19's bars.
#
# Needs the GPU, CUDA (libnvrtc, libcublas, libcublasLt), python3 with
# PyTorch (Triton for torch.compile); no Lua, re2c or cmocka: it uses the
# prebuilt kfuse-opt, kfuse-run and kfuse-import-onnx of BUILD_DIR (see
# setup.sh; libprotobuf-c from BUILD/lib when the machine lacks it).
#
# The cases (SHAPES_SET):
#   zoo      (default) each model of SHAPES_MODELS exported at full size by
#            bench/models/zoo.py (the fp32 block by llama_block.py),
#            imported, optimised by the standard pipeline
#            (canonicalize,cse,rules,fuse-matmul,fuse,dce), and every
#            distinct contraction kernel cut out with its body as fused
#            (shapes.py extract: zoo.MODEL.K)
#   config   bench/gpu/shapes.txt: the same models' shapes from their
#            configurations (shapes.py gen), for a machine without the zoo
#   both
# Per case and dtype:
#   default    the cost model alone (no tune file, no shipped table:
#              KFUSE_TUNE_SHIPPED=0), what an untuned run gets
#   tuned      the tile kfuse-run --tune=force chose (all cases of a dtype
#              tuned in one run of one graph holding them all)
#   cublas     the tile cublas: a cuBLAS GEMM and kfuse's fused epilogue
#              kernel ("cuBLAS with the same epilogue", the bars' floor)
#   cublaslt   the tile cublaslt: cuBLASLt with the epilogue, where it
#              takes it (else the row says the route it fell to, unused)
#   torch      the product alone (torch.matmul: cuBLAS; config cases),
#              eager and torch.compile of the same body (shapes.py torch;
#              SHAPES_COMPILE=0 skips torch.compile)
# Every kfuse variant is checked against the CPU interpreter's output for
# the same random inputs (f16: rtol/atol 1e-2; f32: rtol 1e-4, atol 1e-3),
# computed once per case.  L2 is flushed before every timed kfuse replay
# (KFUSE_BENCH_FLUSH=1, outside the events) as triton's do_bench does for
# PyTorch's; SHAPES_FLUSH=0 times back-to-back warm replays instead.
# Environment: SHAPES_SET, SHAPES_MODELS (name:batch[:seq] of zoo.py, and
# llamablock), SHAPES_ONLY=REGEX (case names), SHAPES_DTYPES (default
# "f16 f32"), SHAPES_TORCH=0, SHAPES_LLAMA=0, SHAPES_DEVICE (zoo.py's export
# device, default cuda), SHAPES_FULL=0 (zoo.py's small CI sizes: the
# plumbing on a machine without a GPU), PYTHON (default python3),
# SHAPES_ZOO_DIR (the output directory of a bench/models/gpu.sh run: its
# exports, DTYPE/NAME_bB[_sS]/NAME.onnx, are taken instead of exporting
# again; the exports are most of the time otherwise).  The tuned tables are merged into
# $out/tune_h200.txt, the format of the shipped cuda/tune_h200.txt (copy its
# lines there to ship them).
. "$(dirname "$0")/setup.sh"
only=${SHAPES_ONLY:-}
dts=${SHAPES_DTYPES:-f16 f32}
set_=${SHAPES_SET:-zoo}
models=${SHAPES_MODELS:-bert:1:128 bert:8:512 gpt2:1:128 llama:1:128 t5:1:128 encoder_layer:1:128 mlp:8 llamablock}
imp="$build/onnx/kfuse-import-onnx"
[ -x "$imp" ] || imp="$build/kfuse-import-onnx"
pipeline="canonicalize,cse,rules{path=$root/patterns},fuse-matmul,fuse,dce"
py=${PYTHON:-python3}
res="$out/shapes.txt"
: > "$res"
: > "$out/none.txt"
t0=$(date +%s)

# run CASE DT VARIANT [ENV...]: one kfuse-run of the fused case, checked
# against the reference; one line into $res
run() {
	c=$1 dt=$2 v=$3
	shift 3
	tol="--rtol 1e-2 --atol 1e-2"
	[ "$dt" = f32 ] && tol="--rtol 1e-4 --atol 1e-3"
	f="$out/g/$c.$dt.txt.$v"
	# shellcheck disable=SC2086
	timeout 300 env KFUSE_TUNE_SHIPPED=0 KFUSE_BENCH_FLUSH="${SHAPES_FLUSH:-1}" "$@" "$kfrun" "$out/g/$c.$dt.mm.kf" \
		--backend=cuda --random-inputs --seed 1 --expect "0=$out/ref/$c.$dt/out0.npy" $tol --bench "$N" > "$f" 2>&1
	rc=$?
	ok=$(grep -c '\[ok\]' "$f")
	ms=$(sed -n 's/^bench cuda .* median \([0-9.]*\) ms.*/\1/p' "$f" | head -1)
	route=$(sed -n 's/^cuda: @m0: \(own kernel \)\{0,1\}\([^ ]*\).*/\2/p' "$f" | head -1)
	grep -q '^cuda: @m0: cuBLAS +' "$f" && route=cublas+epi
	grep -q '^cuda: @m0: cuBLAS (' "$f" && route=cublas
	grep -q '^cuda: @m0: cuBLAS (tf32)' "$f" && route=cublas-tf32
	grep -q '^cuda: @m0: cuBLAS after' "$f" && route=cublas+pro
	grep -q '^cuda: @m0: cuBLASLt with' "$f" && route=cublaslt
	grep -q 'cuBLASLt not used' "$f" && route=lt-fallback
	echo "$c $dt $v rc=$rc ok=$ok ms=${ms:-nan} route=${route:--}" | tee -a "$res"
	[ $rc = 0 ] || tail -5 "$f"
}

# the zoo's contraction kernels of dtype $1 (names on stdout)
zoo_cases() {
	dt=$1 pairs=""
	for c in $models; do
		name=${c%%:*} b="" s=""
		case $c in *:*)
			rest=${c#*:}
			b=${rest%%:*}
			case $rest in *:*) s=${rest#*:} ;; esac ;;
		esac
		d="$out/zoo/$dt/$name${b:+_b$b}${s:+_s$s}"
		mkdir -p "$d"
		src="$d/$name.onnx"
		z="${SHAPES_ZOO_DIR:-}/$dt/$name${b:+_b$b}${s:+_s$s}/$name.onnx"
		if [ -n "${SHAPES_ZOO_DIR:-}" ] && [ -f "$z" ]; then
			src=$z # bench/models/gpu.sh exported it already (beside its external data, if any)
		elif [ "$name" = llamablock ]; then
			[ "$dt" = f32 ] || continue # the block of issue 19 is fp32
			$py "$here/llama_block.py" export "$d" > "$d/export.log" 2>&1 && mv "$d/llama_block.onnx" "$d/$name.onnx"
		else
			full=--full
			[ "${SHAPES_FULL:-1}" = 0 ] && full=
			$py "$root/bench/models/zoo.py" $full --only "$name" --batch "$b" ${s:+--seq "$s"} --dtype "$dt" \
				--device "${SHAPES_DEVICE:-cuda}" --out "$d" > "$d/export.log" 2>&1
		fi
		if [ ! -f "$src" ]; then
			echo "zoo: $name $dt: no export ($(grep -m1 -i 'error\|fail' "$d/export.log" | cut -c1-120))" >&2
			continue
		fi
		"$imp" "$src" -o "$d/$name.kf" 2> "$d/import.log" &&
			"$opt" "$d/$name.kf" -p "$pipeline" -o "$d/$name.fused.kf" 2> "$d/opt.log" ||
			{ echo "zoo: $name $dt: import or pipeline failed: $(tail -1 "$d/import.log" "$d/opt.log")" >&2; continue; }
		pairs="$pairs $name${b:+_b$b}${s:+_s$s}=$d/$name.fused.kf"
	done
	# shellcheck disable=SC2086
	[ -n "$pairs" ] && $py "$here/shapes.py" extract "$out/g" "$dt" $pairs
}

mkdir -p "$out/g" "$out/ref"
for dt in $dts; do
	te=$(date +%s)
	names=""
	case $set_ in zoo | both) names=$(zoo_cases "$dt") ;; esac
	# shellcheck disable=SC2086
	case $set_ in config | both) names="$names $($py "$here/shapes.py" gen "$out/g" "$dt" $only)" ;; esac
	[ -n "$only" ] && names=$(for c in $names; do echo "$c"; done | grep -E "$only")
	echo "$dt: $(echo $names | wc -w) cases ($(($(date +%s) - te)) s to make them)"
	[ -n "$names" ] || continue
	# shellcheck disable=SC2086
	$py "$here/shapes.py" all "$out/g" "$dt" $names
	for c in $names all; do
		"$opt" "$out/g/$c.$dt.kf" -p fuse-matmul,fuse -o "$out/g/$c.$dt.mm.kf" 2>> "$out/opt.log" ||
			echo "FAIL kfuse-opt $c $dt"
	done
	# one tuning run for every case of the dtype (the candidates of each
	# contraction compile at once, in threads)
	tt=$(date +%s)
	KFUSE_TUNE_SHIPPED=0 KFUSE_TUNE_FILE="$out/tune-$dt.txt" timeout 900 "$kfrun" "$out/g/all.$dt.mm.kf" \
		--backend=cuda --random-inputs --tune=force > "$out/tune-$dt.log" 2>&1 ||
		{ echo "tuning $dt failed:"; tail -5 "$out/tune-$dt.log"; }
	echo "tuned $dt in $(($(date +%s) - tt)) s: $(grep -c ' -> ' "$out/tune-$dt.log") contractions"
	for c in $names; do
		"$kfrun" "$out/g/$c.$dt.mm.kf" --random-inputs --seed 1 --output-dir "$out/ref/$c.$dt" > "$out/ref/$c.$dt.log" 2>&1 ||
			{ echo "FAIL reference $c $dt"; tail -3 "$out/ref/$c.$dt.log"; }
		run "$c" "$dt" default KFUSE_TUNE_FILE="$out/none.txt"
		run "$c" "$dt" tuned KFUSE_TUNE_FILE="$out/tune-$dt.txt"
		run "$c" "$dt" cublas KFUSE_TUNE_FILE="$out/none.txt" KFUSE_MATMUL_TILE=cublas
		run "$c" "$dt" cublaslt KFUSE_TUNE_FILE="$out/none.txt" KFUSE_MATMUL_TILE=cublaslt
	done
	if [ "${SHAPES_TORCH:-1}" != 0 ]; then
		tt=$(date +%s)
		# shellcheck disable=SC2086
		$py "$here/shapes.py" torch "$out/g" "$dt" $only >> "$out/torch.jsonl" 2>> "$out/torch.err" ||
			{ echo "shapes.py torch failed:"; tail -5 "$out/torch.err"; }
		echo "torch $dt in $(($(date +%s) - tt)) s"
	fi
done

{
	echo "# kfuse shipped tune table v1: device $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
	echo "# bench/gpu/shapes.sh, $(date -u +%Y-%m-%d): kfuse-run --tune=force of the zoo's contractions"
	cat "$out"/tune-*.txt 2>/dev/null | grep -v '^#'
} > "$out/tune_h200.txt"

echo
echo "== the zoo's contractions (us; ratios: cuBLAS+epilogue (best of cublas, cublaslt) / kfuse; def/tc: torch.compile / default)"
$py "$here/shapes.py" table "$out/g" "$res" "$out/torch.jsonl" | tee "$out/table.txt"
echo "shapes: $(($(date +%s) - t0)) s; the tuned table: $out/tune_h200.txt"

if [ "${SHAPES_LLAMA:-1}" != 0 ]; then
	echo
	KFUSE_BENCH_OUT="$out/llama" sh "$here/llama_block.sh" "$build" "$N"
fi
