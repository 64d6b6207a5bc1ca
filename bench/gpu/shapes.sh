#!/bin/sh
# bench/gpu/shapes.sh [BUILD_DIR] [N]: every distinct contraction of the model
# zoo (bench/gpu/shapes.txt) in f16 and f32, then the fp32 Llama-style block
# end to end (bench/gpu/llama_block.sh); one table.  Issue 19's bars.
#
# Needs the GPU, CUDA (libnvrtc, libcublas, libcublasLt), python3 with
# PyTorch (Triton for torch.compile); no Lua, re2c or cmocka: it uses the
# prebuilt kfuse-opt, kfuse-run and kfuse-import-onnx of BUILD_DIR (see
# setup.sh).  Per case and dtype (kfuse-opt -p fuse-matmul,fuse first):
#   default    the cost model alone (no tune file, no shipped table:
#              KFUSE_TUNE_SHIPPED=0), what an untuned run gets
#   tuned      the tile kfuse-run --tune=force chose (all cases of a dtype
#              tuned in one run of all.DT.kf, into $out/tune-DT.txt)
#   cublas     the tile cublas: a cuBLAS GEMM and kfuse's fused epilogue
#              kernel ("cuBLAS with the same epilogue", the bars' floor)
#   cublaslt   where the epilogue is bias [+ gelu-tanh]: cuBLASLt with it
#   torch      the product alone (torch.matmul: cuBLAS), eager, torch.compile
#              (shapes.py torch; SHAPES_COMPILE=0 skips torch.compile)
# Every kfuse variant is checked against the CPU interpreter's output for
# the same random inputs (f16: rtol/atol 1e-2; f32: rtol 1e-4, atol 1e-3),
# computed once per case.  Environment: SHAPES_ONLY=REGEX (case names),
# SHAPES_DTYPES (default "f16 f32"), SHAPES_TORCH=0, SHAPES_LLAMA=0.
# L2 is flushed before every timed kfuse replay (KFUSE_BENCH_FLUSH=1,
# outside the events), as triton's do_bench does for PyTorch's times:
# SHAPES_FLUSH=0 times back-to-back warm replays instead.
# The tuned tables are merged into $out/tune_h200.txt, the format of the
# shipped cuda/tune_h200.txt (copy its lines there to ship them).
. "$(dirname "$0")/setup.sh"
only=${SHAPES_ONLY:-}
dts=${SHAPES_DTYPES:-f16 f32}
imp="$build/onnx/kfuse-import-onnx"
[ -x "$imp" ] || imp="$build/kfuse-import-onnx"
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
	f="$out/$c.$dt.txt.$v"
	# shellcheck disable=SC2086
	timeout 300 env KFUSE_TUNE_SHIPPED=0 KFUSE_BENCH_FLUSH="${SHAPES_FLUSH:-1}" "$@" "$kfrun" "$out/g/$c.$dt.mm.kf" --backend=cuda --random-inputs --seed 1 \
		--expect "0=$out/ref/$c.$dt/out0.npy" $tol --bench "$N" > "$f" 2>&1
	rc=$?
	ok=$(grep -c '\[ok\]' "$f")
	ms=$(sed -n 's/^bench cuda .* median \([0-9.]*\) ms.*/\1/p' "$f" | head -1)
	route=$(sed -n 's/^cuda: @m0: \(own kernel \)\{0,1\}\([^ ]*\).*/\2/p' "$f" | head -1)
	grep -q '^cuda: @m0: cuBLAS +' "$f" && route=cublas+epi
	grep -q '^cuda: @m0: cuBLAS (' "$f" && route=cublas
	grep -q '^cuda: @m0: cuBLAS (tf32)' "$f" && route=cublas-tf32
	grep -q '^cuda: @m0: cuBLASLt with' "$f" && route=cublaslt
	grep -q 'cuBLASLt not used' "$f" && route=lt-fallback
	echo "$c $dt $v rc=$rc ok=$ok ms=${ms:-nan} route=${route:--}" | tee -a "$res"
	[ $rc = 0 ] || tail -5 "$f"
}

mkdir -p "$out/g" "$out/ref"
for dt in $dts; do
	# shellcheck disable=SC2086
	names=$(python3 "$here/shapes.py" gen "$out/g" "$dt" $only) || { echo "shapes.py gen failed"; exit 1; }
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
		case $(sed -n "s/^$c .* \([a-z_]*\)\$/\1/p" "$here/shapes.txt") in
		bias | bias_gelu_tanh | bias_relu)
			run "$c" "$dt" cublaslt KFUSE_TUNE_FILE="$out/none.txt" KFUSE_MATMUL_TILE=cublaslt ;;
		esac
	done
	if [ "${SHAPES_TORCH:-1}" != 0 ]; then
		tt=$(date +%s)
		# shellcheck disable=SC2086
		python3 "$here/shapes.py" torch "$dt" $only >> "$out/torch.jsonl" 2>> "$out/torch.err" ||
			{ echo "shapes.py torch failed:"; tail -5 "$out/torch.err"; }
		echo "torch $dt in $(($(date +%s) - tt)) s"
	fi
done

{
	echo "# kfuse shipped tune table v1: device $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
	echo "# bench/gpu/shapes.sh, $(date -u +%Y-%m-%d): kfuse-run --tune=force of bench/gpu/shapes.txt"
	cat "$out"/tune-*.txt 2>/dev/null | grep -v '^#'
} > "$out/tune_h200.txt"

echo
echo "== the zoo's contractions (us; ratios: cuBLAS+epilogue (best of cublas, cublaslt) / kfuse; def/tc: torch.compile / default)"
python3 "$here/shapes.py" table "$res" "$out/torch.jsonl" | tee "$out/table.txt"
echo "shapes: $(($(date +%s) - t0)) s; the tuned table: $out/tune_h200.txt"

if [ "${SHAPES_LLAMA:-1}" != 0 ]; then
	echo
	KFUSE_BENCH_OUT="$out/llama" sh "$here/llama_block.sh" "$build" "$N"
fi
