#!/bin/sh
# bench/gpu/llama_block.sh [BUILD_DIR] [N]: the fp32 Llama-style block of
# issue 19 (bench/gpu/llama_block.py: 64 tokens x 512, GQA, SwiGLU) end to
# end: exported by PyTorch (ONNX, static shapes), imported, optimised
# (canonicalize,cse,rules,fuse-matmul,fuse,dce), run by kfuse (CUDA graph
# replays) and checked against PyTorch's output; beside PyTorch eager and
# torch.compile(mode="reduce-overhead"), each without and with TF32.
#   default    the cost model (no tune file, no shipped table)
#   shipped    with the shipped table (cuda/tune_h200.txt) and no tune file
#   tuned      kfuse-run --tune=force first
#   tuned-cached  the tune file that run wrote, in a fresh process
#   tf32       --allow-tf32 (checked at rtol/atol 1e-2), and tf32 tuned
# Per-kernel profiles of the default and tuned runs follow the table.  L2 is
# flushed before every timed replay (KFUSE_BENCH_FLUSH=1, outside the
# events), as triton's do_bench does for PyTorch; LLAMA_FLUSH=0: warm.
. "$(dirname "$0")/setup.sh"
imp="$build/onnx/kfuse-import-onnx"
[ -x "$imp" ] || imp="$build/kfuse-import-onnx"
d="$out"
${PYTHON:-python3} "$here/llama_block.py" export "$d" > "$d/export.log" 2>&1 || { echo "export failed:"; tail -5 "$d/export.log"; exit 1; }
"$imp" "$d/llama_block.onnx" -o "$d/block.kf" 2> "$d/import.log" || { echo "import failed:"; cat "$d/import.log"; exit 1; }
"$opt" "$d/block.kf" -p "canonicalize,cse,rules{path=$root/patterns},fuse-matmul,fuse,dce" -o "$d/block.fused.kf" \
	2> "$d/opt.log" || { echo "kfuse-opt failed:"; cat "$d/opt.log"; exit 1; }
: > "$d/none.txt"

# run VARIANT TOL [kfuse-run options] -- [ENV...]
run() {
	v=$1 tol=$2
	shift 2
	o=""
	while [ $# -gt 0 ] && [ "$1" != -- ]; do o="$o $1"; shift; done
	[ $# -gt 0 ] && shift
	f="$d/block.$v.txt"
	# shellcheck disable=SC2086
	timeout 300 env KFUSE_BENCH_FLUSH="${LLAMA_FLUSH:-1}" "$@" "$kfrun" "$d/block.fused.kf" --backend=cuda --input "x=$d/x.npy" \
		--expect "0=$d/ref.npy" --rtol "$tol" --atol "$tol" $o --bench "$N" > "$f" 2>&1
	rc=$?
	line=$(grep '^bench cuda' "$f" | head -1)
	echo "llama_block kfuse $v rc=$rc ok=$(grep -c '\[ok\]' "$f") :: $line"
	[ $rc = 0 ] || tail -5 "$f"
	grep -c '^cuda: @m[0-9]*: cuBLAS' "$f" | sed 's/^/  contractions through cuBLAS(Lt): /'
}
run default 1e-4 -- KFUSE_TUNE_SHIPPED=0 KFUSE_TUNE_FILE="$d/none.txt"
run shipped 1e-4 -- KFUSE_TUNE_FILE="$d/none.txt"
run tuned 1e-4 --tune=force -- KFUSE_TUNE_SHIPPED=0 KFUSE_TUNE_FILE="$d/tune.txt"
run tuned-cached 1e-4 -- KFUSE_TUNE_SHIPPED=0 KFUSE_TUNE_FILE="$d/tune.txt"
run tf32 1e-2 --allow-tf32 -- KFUSE_TUNE_SHIPPED=0 KFUSE_TUNE_FILE="$d/none.txt"
run tf32-tuned 1e-2 --allow-tf32 --tune=force -- KFUSE_TUNE_SHIPPED=0 KFUSE_TUNE_FILE="$d/tune.txt"
run tf32-tuned-cached 1e-2 --allow-tf32 -- KFUSE_TUNE_SHIPPED=0 KFUSE_TUNE_FILE="$d/tune.txt"
echo "torch (median ms, bench/gpu/timing.py):"
${PYTHON:-python3} "$here/llama_block.py" time "$N" 2> "$d/torch.err" | sed 's/^/  /' || tail -5 "$d/torch.err"
echo "profile of the default run (eager launches):"
KFUSE_TUNE_SHIPPED=0 KFUSE_TUNE_FILE="$d/none.txt" "$kfrun" "$d/block.fused.kf" --backend=cuda --input "x=$d/x.npy" \
	--profile 2>&1 | sed -n '/^profile/,$p' | sed 's/^/  /'
echo "profile of the tuned run (its tune file; eager launches):"
KFUSE_TUNE_SHIPPED=0 KFUSE_TUNE_FILE="$d/tune.txt" "$kfrun" "$d/block.fused.kf" --backend=cuda --input "x=$d/x.npy" \
	--profile 2>&1 | sed -n '/^profile/,$p' | sed 's/^/  /'
echo "tuned picks:"
grep -h ' -> ' "$d"/block.tuned.txt "$d"/block.tf32-tuned.txt | sed 's/^/  /'
