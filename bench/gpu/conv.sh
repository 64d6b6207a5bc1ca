#!/bin/sh
# bench/gpu/conv.sh [BUILD_DIR] [N]: convolutions on the GPU (docs/conv.md),
# one run, one table (bench/gpu/conv_bench.py has the details):
#   1. every distinct conv layer of ResNet-50, MobileNetV2 and ConvNeXt-T at
#      batch 1 and 32, fp16 channels-last: kfuse's conv + bias + ReLU kernel
#      checked against the CPU interpreter (batch 1) and PyTorch (both),
#      then timed beside cuDNN with a separate ReLU and torch.compile;
#   2. ResNet-50 end to end, fp16, batch 1 and 32: import, the CNN
#      pipeline, checked against PyTorch, timed beside eager, torch.compile
#      and torch.compile(mode="reduce-overhead"), with and without
#      channels_last.
# Needs python3 with torch (CUDA) and torchvision.  A failure is a row that
# says why; the script goes on.  Knobs: CONV_COMPILE=0 (no per-layer
# torch.compile), CONV_MODELS, CONV_BATCHES, CONV_E2E=0, CONV_LIMIT=N.
. "$(dirname "$0")/setup.sh"
export CONV_N=$N
py=${PYTHON:-python3}
if ! "$py" -c "import torch, torchvision; assert torch.cuda.is_available()" 2>/dev/null; then
	echo "$me: needs $py with torch (CUDA) and torchvision" | tee -a "$log"
	exit 2
fi
"$py" "$here/conv_bench.py" "$build" "$out" 2>&1 | tee -a "$log"
echo "$me: the table is in $out/conv-results.txt"
