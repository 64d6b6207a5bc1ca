#!/bin/sh
# bench/models/f64file.sh BUILD N DIR NAME...: for models exported in f16 or
# bf16 by wild.py (DIR/NAME.onnx, its inputs, PyTorch's outputs and the
# model in f64, NAME.ref<i>.npy), how far the FILE itself is from f64:
# upcast.py makes every f16/bf16 tensor of it f32 (exactly), kfuse runs
# that in f32 (the tests' pipeline, $KFUSE_BACKEND, default cuda), and
# f64err.py measures its outputs as wild.sh measures kfuse's own f16/bf16
# run.  When the upcast file is as far from f64 as kfuse's low-precision
# run, the distance is the exporter's (batch norms folded into rounded
# weights: the file's BatchNormalization count is printed beside), not
# kfuse's arithmetic.  One line a model.
. "$(dirname "$0")/../gpu/setup.sh"
. "$root/bench/models/run_kfuse.sh"
dir=$(cd "${3:?usage: f64file.sh BUILD N DIR NAME...}" && pwd)
shift 3
mkdir -p "$dir/up"
for n in "$@"; do
	if ! $py "$root/bench/models/upcast.py" "$dir/$n.onnx" "$dir/up/$n.onnx" 2> "$dir/up/$n.upcast.err"; then
		echo "$n: upcast failed: $(tail -1 "$dir/up/$n.upcast.err")"
		continue
	fi
	for f in "$dir/$n".out*.npy "$dir/$n".ref*.npy; do
		[ -f "$f" ] && ln -sf "$f" "$dir/up/"
	done
	# the inputs as the upcast file takes them: f16 ones widened to f32
	# (exact; bf16 exports already write f32)
	$py -c "import numpy as np, sys
for f in sys.argv[2:]:
    a = np.load(f)
    np.save(sys.argv[1] + '/' + f.rsplit('/', 1)[1], a.astype(np.float32) if a.dtype == np.float16 else a)" \
		"$dir/up" "$dir/$n".in*.npy
	# judged against PyTorch's low-precision outputs at f32's tolerance it
	# fails the check; its outputs are written all the same
	r=$(run_kfuse "$dir/up" "$n" f32 2 "" | cut -f2)
	bn=$($py -c "import onnx, sys; print(sum(x.op_type == 'BatchNormalization' for x in onnx.load(sys.argv[1]).graph.node))" \
		"$dir/$n.onnx" 2> /dev/null)
	e=$($py "$root/bench/models/f64err.py" "$dir/up" "$n" "$dir/up/$n.outs" 2> /dev/null)
	echo "$n: the file upcast to f32 (kfuse ${KFUSE_BACKEND:-cuda}: $r): ${e:-no f64 reference}; BatchNormalization nodes in the file: ${bn:-?}" |
		tee -a "$log"
done
