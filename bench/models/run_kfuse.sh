# bench/models/run_kfuse.sh: sourced by gpu.sh and wild.sh after
# bench/gpu/setup.sh (which sets build, opt, kfrun, N, root).  Sets imp
# (kfuse-import-onnx, checked to run), zoo, py and pipeline (the tests'
# whole pipeline; KFUSE_ATTENTION=0 leaves the transformer passes out) and
# defines run_kfuse DIR NAME DTYPE BATCH SEQ [AMP]: imports DIR/NAME.onnx,
# runs the pipeline, runs the result on $KFUSE_BACKEND (default cuda) with
# the exported inputs, every output checked against PyTorch's
# (DIR/NAME.out<i>.npy), then --bench N, under a timeout of
# $KFUSE_RUN_TIMEOUT seconds (default 1800); its files are
# DIR/NAME[.amp-AMP][.$KFUSE_RUN_TAG].* (its outputs in .outs/); prints one tab-separated row:
# variant, status (ok, FAIL import/opt/run/check/timeout), ms, kernels,
# detail.

imp="$build/onnx/kfuse-import-onnx"
if ! "$imp" --version > /dev/null 2>&1; then
	echo "$me: $imp does not run here: $("$imp" --version 2>&1 | head -1)" >&2
	echo "$me: (a missing libprotobuf-c.so.1: bench/gpu/carry-build.sh copies it into BUILD/lib/)" >&2
	exit 2
fi
zoo="$root/bench/models/zoo.py"
# The same pipeline as tests/models' CTests: persistent (an RNN's steps as one
# kernel, docs/persistent.md; nothing else matches), the transformer passes (q/k/v
# as one matmul, each attention one flash-attention kernel;
# docs/attention.md) change nothing in a CNN, the CNN passes (layout,
# pad-channels, fuse-conv: docs/conv.md) nothing in a transformer.  KFUSE_ATTENTION=0
# leaves merge-matmul and fuse-attention out (attention op by op).
front="canonicalize,cse,persistent,rules{path=$root/patterns},canonicalize,cse,layout,pad-channels,canonicalize,cse"
pipeline="$front,merge-matmul,fuse-attention,fuse-conv,fuse-matmul,fuse,dce"
[ "${KFUSE_ATTENTION:-1}" = 0 ] && pipeline="$front,fuse-conv,fuse-matmul,fuse,dce"
py=${PYTHON:-python3}

# kfuse on one exported model: a tab-separated row (variant, status, ms, kernels, detail);
# AMP (bf16 or f16): amp{dtype=AMP} first, its files NAME.amp-AMP.*
run_kfuse() { # DIR NAME DTYPE BATCH SEQ [AMP]
	d=$1 n=$2 dt=$3 b=$4 s=$5 amp=${6:-}
	pipe=$pipeline
	[ -n "$amp" ] && pipe="amp{dtype=$amp},$pipe"
	o=$n${amp:+.amp-$amp}${KFUSE_RUN_TAG:+.$KFUSE_RUN_TAG}
	# a dynamic variant is compiled for the size of its test input
	case $n in *_dyn)
		b=$($py -c "import numpy; print(numpy.load('$d/$n.in0.npy', mmap_mode='r').shape[0])")
		[ -n "$s" ] && s=$($py -c "import numpy; print(numpy.load('$d/$n.in0.npy', mmap_mode='r').shape[1])")
		pipe="specialize{batch=$b${s:+,seq=$s}},$pipe" ;;
	esac
	v=$n${amp:+ amp-$amp}
	if ! "$imp" "$d/$n.onnx" -o "$d/$o.kf" > "$d/$o.log" 2>&1; then
		printf '%s\tFAIL import\t-\t-\t%s\n' "$v" "$(grep -m1 error "$d/$o.log" | cut -c1-160)"; return
	fi
	if ! "$opt" "$d/$o.kf" -p "$pipe" -o "$d/$o.opt.kf" >> "$d/$o.log" 2>&1; then
		printf '%s\tFAIL opt\t-\t-\t%s\n' "$v" "$(grep -m1 error "$d/$o.log" | cut -c1-160)"; return
	fi
	set --
	i=0; while [ -f "$d/$n.in$i.npy" ]; do set -- "$@" --input "$i=$d/$n.in$i.npy"; i=$((i + 1)); done
	i=0; while [ -f "$d/$n.out$i.npy" ]; do set -- "$@" --expect "$i=$d/$n.out$i.npy"; i=$((i + 1)); done
	# f16: each output's relative L2 error at most 1e-2 (docs/amp.md): a
	# 50-layer CNN's f16 logits differ from PyTorch's by rounding (ResNet-50
	# on the H200: rel L2 1e-3, yet single logits near 50 off by up to 1)
	tol="--rtol 1e-3 --atol 1e-3"
	[ "$dt" = f16 ] && tol="--l2 1e-2"
	[ "$dt" = bf16 ] && tol="--l2 5e-2"
	# amp: the f32 model computing in the low type, judged as
	# kfuse-opt --check-equivalence judges it (runtime/equiv.h)
	[ "$amp" = f16 ] && tol="--l2 1e-2"
	[ "$amp" = bf16 ] && tol="--l2 5e-2"
	tf=""
	[ "${KFUSE_TF32:-0}" = 1 ] && [ "$dt" = f32 ] && [ -z "$amp" ] && tf=--allow-tf32 tol="--l2 1e-2"
	timeout "${KFUSE_RUN_TIMEOUT:-1800}" "$kfrun" "$d/$o.opt.kf" --backend="${KFUSE_BACKEND:-cuda}" "$@" $tol $tf --bench "$N" \
		--output-dir "$d/$o.outs" > "$d/$o.run.txt" 2>&1
	rc=$?
	line=$(grep '^bench ' "$d/$o.run.txt" | head -1)
	ms=$(echo "$line" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
	k=$(echo "$line" | sed -n 's/.* \([0-9]*\) kernels.*/\1/p')
	worst=$(grep '^expect' "$d/$o.run.txt" | sed -n 's/.*max abs \([^,]*\),.*/\1/p' | sort -g | tail -1)
	if grep -q MISMATCH "$d/$o.run.txt"; then
		printf '%s\tFAIL check\t%s\t%s\t%s\n' "$v" "${ms:--}" "${k:--}" "$(grep -m1 MISMATCH "$d/$o.run.txt" | cut -c1-160)"
	elif [ $rc = 124 ]; then
		printf '%s\tFAIL timeout\t-\t-\tover %s s\n' "$v" "${KFUSE_RUN_TIMEOUT:-1800}"
	elif [ $rc != 0 ] || [ -z "$ms" ]; then
		printf '%s\tFAIL run\t-\t-\t%s\n' "$v" "$(grep -m1 -i error "$d/$o.run.txt" | cut -c1-160)"
	else
		printf '%s\tok\t%s\t%s\tmax abs err %s\n' "$v" "$ms" "$k" "${worst:-?}"
	fi
}
