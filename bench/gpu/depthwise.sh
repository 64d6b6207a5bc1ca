#!/bin/sh
# bench/gpu/depthwise.sh [BUILD_DIR [N [--dry]]]: issue 21's depthwise bar
# (80% of copy bandwidth at batch 32): every distinct depthwise layer of
# MobileNetV2, MobileNetV3-Large, EfficientNet-B0 and ConvNeXt-T, batch 32
# and 1, fp16 channels-last conv + bias + ReLU, once per $KFUSE_DEPTHWISE
# variant (default, rows, tiled), each checked against PyTorch and timed
# beside cuDNN + a separate ReLU, in GB/s and % of a copy ceiling measured
# in the same run (bench/gpu/depthwise_bench.py has the details).
# Needs python3 with torch (CUDA) and torchvision, no Lua or cmocka (a
# build from bench/gpu/carry-build.sh will do).  --dry: on a CPU machine,
# each variant compiled for sm_90 (NVRTC) and each layer checked on the
# interpreter, nothing timed.  Knobs: DW_VARIANTS (e.g.
# default,rows,tiled,toep,rows:v4x3h8), DW_MODELS, DW_BATCHES, DW_LIMIT;
# DW_RANDOM=K [DW_SEED=S]: K random layers instead of the models'.
. "$(dirname "$0")/setup.sh"
export DW_N=$N
py=${PYTHON:-python3}
dry=
for a in "$@"; do [ "$a" = --dry ] && dry=--dry; done
if [ -n "$dry" ]; then
	check="import torch, torchvision"
else
	check="import torch, torchvision; assert torch.cuda.is_available()"
fi
if ! "$py" -c "$check" 2>/dev/null; then
	echo "$me: needs $py with torch${dry:-" (CUDA)"} and torchvision" | sed 's/torch--dry/torch/' | tee -a "$log"
	exit 2
fi
"$py" "$here/depthwise_bench.py" "$build" "$out" $dry 2>&1 | tee -a "$log"
echo "$me: the table is in $out/depthwise-results.txt"
