#!/bin/sh
# bench/models/gpu.sh [BUILD_DIR] [N]: the model zoo at full size on the GPU,
# in one call.  First the index kernels (gather, pad, resize, iota) against
# the references of tests/golden/run/index-ops.kf; then for each
# configuration and dtype:
#   export   zoo.py --full (on the GPU, in that dtype; transformers' own models
#            with --hf when transformers is importable), PyTorch's output saved
#   kfuse    kfuse-import-onnx, kfuse-opt -p PIPELINE (specialize{batch,seq}
#            first for the _dyn variants), kfuse-run --backend=cuda with
#            PyTorch's inputs, every output checked against PyTorch's
#            (--expect; f16 relative L2 1e-2, f32 rtol/atol 1e-3), then --bench N: the
#            median CUDA-graph replay and the kernel count
#   torch    torch_bench.py in one process: eager, torch.compile and
#            torch.compile(mode="reduce-overhead"), medians of 30 runs
# and writes one table (model, dtype, sizes, kfuse ms and kernels, the
# three PyTorch times, kfuse / reduce-overhead) to $out/results.txt and
# bench/results/DATE-gpu-models.txt.  A model that fails anywhere gets a row
# saying where and why, and the script goes on.
#
# Environment: KFUSE_MODELS (configurations, name:batch[:seq], space
# separated; default the issue's anchors), KFUSE_DTYPES (default "f16 f32"),
# KFUSE_ATTENTION=0 (merge-matmul and fuse-attention left out),
# KFUSE_TORCH_MODES (default "eager,compile,reduce-overhead"), KFUSE_DYN=0 to
# skip the dynamic-axes variants; KFUSE_AMP=bf16 (or f16, or "f16 bf16": issue 23,
# docs/amp.md) gives each f32 model a second row, variant "NAME amp-bf16":
# the f32 export with amp{dtype=bf16} first in the pipeline, checked against
# PyTorch's f32 output by that type's relative L2 tolerance (bf16 5e-2, f16
# 1e-2), beside the f32 row it is to beat; KFUSE_TF32=1: f32 through tf32
# tensor cores on both sides (kfuse-run --allow-tf32, checked by relative L2
# 1e-2 as f16 is, tf32 having f16's mantissa; torch_bench.py --tf32, which
# also times f16 rows with it on, where it changes nothing); KFUSE_BACKEND=cpu KFUSE_FULL=0
# KFUSE_DEVICE=cpu tries the script's plumbing on a machine without a GPU
# (small models on the interpreter; PyTorch rows then say why they failed).
# The whole zoo, f16 only:
#   KFUSE_MODELS="$(sh bench/models/gpu.sh --all-configs)" KFUSE_DTYPES=f16 sh bench/models/gpu.sh
ALL="resnet18:1 resnet50:1 resnet50:32 mobilenet_v2:1 mobilenet_v3_small:1 efficientnet_b0:1 convnext_tiny:1
regnet_y_400mf:1 vit_b_16:1 encoder_layer:1:128 lstm:1 gru:1 mlp:8 bert:1:128 bert:8:512 gpt2:1:128 llama:1:128
t5:1:128"
if [ "${1:-}" = --all-configs ]; then echo $ALL; exit 0; fi
. "$(dirname "$0")/../gpu/setup.sh"
N=${2:-30}
models=${KFUSE_MODELS:-"resnet50:1 resnet50:32 vit_b_16:1 bert:1:128 bert:8:512 gpt2:1:128 llama:1:128"}
dtypes=${KFUSE_DTYPES:-"f16 f32"}
. "$root/bench/models/run_kfuse.sh"
hf=""
$py -c "import transformers" 2>/dev/null && hf=--hf
rows="$out/kfuse.tsv"
: > "$rows"


# The index kernels (gather, pad's modes, resize's modes, iota, sin) against
# the numpy/PyTorch references tests/golden/run/index-ops.kf holds: each
# output is a largest difference, which must be 0 (sin: an ulp).
for v in unfused fused; do
	src="$root/tests/golden/run/index-ops.kf"
	[ $v = fused ] && { "$opt" "$src" -p fuse -o "$out/index-ops.fused.kf" 2>/dev/null; src="$out/index-ops.fused.kf"; }
	echo "index kernels ($v): $("$kfrun" "$src" --backend="${KFUSE_BACKEND:-cuda}" 2>&1 | grep -c '\[0\] sum=0') of 10 exact;" \
		"$("$kfrun" "$src" --backend="${KFUSE_BACKEND:-cuda}" 2>&1 | grep -v '\[0\] sum=0' | grep 'out\|error' | tr '\n' ' ')" \
		| tee -a "$out/index-kernels.txt"
done

for dt in $dtypes; do
	for c in $models; do
		name=${c%%:*} rest=${c#*:}
		b=${rest%%:*} s=""
		case $rest in *:*) s=${rest#*:} ;; esac
		d="$out/$dt/${name}_b${b}${s:+_s$s}"
		mkdir -p "$d"
		echo "== $name b$b${s:+ s$s} $dt"
		full=--full
		[ "${KFUSE_FULL:-1}" = 0 ] && full=
		if ! $py "$zoo" $full $hf --only "$name" --batch "$b" ${s:+--seq "$s"} --dtype "$dt" \
			--device "${KFUSE_DEVICE:-cuda}" \
			--out "$d" > "$d/export.log" 2>&1; then
			printf '%s\t%s\t%s\t%s\t%s\tFAIL export\t-\t-\t%s\n' "$name" "$dt" "$b" "${s:--}" "$name" \
				"$(grep -m1 -i 'error\|failed' "$d/export.log" | cut -c1-160)" >> "$rows"
		fi
		# what PyTorch times is what was exported: the hand-written model
		# when transformers' export failed
		tc="$name:$b:${s:-0}"
		grep -q "hand-written" "$d/export.log" 2>/dev/null && tc="$tc:hand"
		tcfgs="${tcfgs:+$tcfgs,}$tc"
		for v in "$name" "${name}_dyn"; do
			[ -f "$d/$v.onnx" ] || continue
			case $v in *_dyn) [ "${KFUSE_DYN:-1}" = 0 ] && continue ;; esac
			printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$dt" "$b" "${s:--}" "$(run_kfuse "$d" "$v" "$dt" "$b" "$s")" >> "$rows"
			tail -1 "$rows"
			[ "$dt" = f32 ] || continue
			for a in ${KFUSE_AMP:-}; do
				printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$dt" "$b" "${s:--}" \
					"$(run_kfuse "$d" "$v" "$dt" "$b" "$s" "$a")" >> "$rows"
				tail -1 "$rows"
			done
		done
	done
done

echo "== torch: eager, torch.compile, reduce-overhead"
cfgs=$(echo "$tcfgs" | tr ',' '\n' | awk '!seen[$0]++' | paste -sd, -)
$py "$root/bench/models/torch_bench.py" --configs "$cfgs" --dtypes "$(echo $dtypes | tr ' ' ',')" \
	--modes "${KFUSE_TORCH_MODES:-eager,compile,reduce-overhead}" $hf $([ "${KFUSE_TF32:-0}" = 1 ] && echo --tf32) \
	> "$out/torch.jsonl" 2> "$out/torch.err" ||
	{ echo "torch_bench.py failed:"; tail -5 "$out/torch.err"; }

results=${KFUSE_RESULTS:-$root/bench/results/$(date +%F)-gpu-models.txt}
$py - "$rows" "$out/torch.jsonl" > "$out/table.txt" <<'PY'
import json, sys
rows, tj = sys.argv[1], sys.argv[2]
torch = {}
for l in open(tj):
    try:
        d = json.loads(l)
    except ValueError:
        continue
    key = (d["model"], d["dtype"], str(d["batch"]), str(d["seq"] or "-"))
    torch.setdefault(key, {})[d["mode"]] = "%.3f" % d["ms"] if "ms" in d else "ERR"
    if "error" in d:
        torch[key].setdefault("errors", []).append("%s: %s" % (d["mode"], d["error"]))
print("| model | variant | dtype | batch | seq | check | kfuse ms | kernels | eager ms | compile ms | "
      "reduce-overhead ms | kfuse / reduce-overhead | detail |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
errs = []
for l in open(rows):
    f = l.rstrip("\n").split("\t")
    if len(f) < 9:
        continue
    model, dt, b, s, var, st, ms, k, detail = f[:9]
    t = torch.get((model, dt, b, s), {})
    ro = t.get("reduce-overhead", "-")
    ratio = "%.2f" % (float(ms) / float(ro)) if ms not in ("-", "") and ro not in ("-", "ERR") else "-"
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        model, var, dt, b, s, st, ms, k, t.get("eager", "-"), t.get("compile", "-"), ro, ratio, detail))
    errs += ["%s %s: %s" % (model, dt, e) for e in t.pop("errors", [])]
for e in sorted(set(errs)):
    print("torch error:", e)
PY
{
	echo "# bench/models/gpu.sh, $(date -u '+%F %T UTC'), N=$N${KFUSE_TF32:+, KFUSE_TF32=$KFUSE_TF32}"
	sed 's/^/# /' "$out/index-kernels.txt"
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/# gpu: /'
	$py -c "import torch; print('# torch', torch.__version__)" 2>/dev/null
	cat "$out/table.txt"
} | tee "$log" > "$results"
cat "$log"
echo "results: $results (logs in $out)"
