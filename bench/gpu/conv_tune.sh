#!/bin/sh
# bench/gpu/conv_tune.sh [BUILD_DIR] [N]: the conv kernels' variants on the
# GPU (bench/gpu/conv_tune.py has the steps): every distinct ResNet-50
# layer at batch 1 and 32 checked against the interpreter with the default
# and forced tiles, tuned (every candidate timed; the winners in
# $out/tune.txt, the lines cuda/tune_h200.txt ships), and ResNet-50 end to
# end with the defaults and with the tuned table, profiled.  Needs python3
# with torch (CUDA) and torchvision.  Knobs: CONV_TUNE_STEPS,
# CONV_TUNE_CHECK_TILES, CONV_BATCHES.
. "$(dirname "$0")/setup.sh"
py=${PYTHON:-python3}
if ! "$py" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
	echo "$me: needs $py with torch (CUDA) and torchvision" | tee -a "$log"
	exit 2
fi
"$py" "$here/conv_tune.py" "$build" "$out" 2>&1 | tee -a "$log"
echo "$me: outputs in $out"
