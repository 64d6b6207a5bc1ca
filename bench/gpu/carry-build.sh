#!/bin/sh
# bench/gpu/carry-build.sh [DIR]: a Release build that travels to the GPU
# machine (which has the CUDA driver and NVRTC but no Lua, re2c, cmocka or
# protobuf-c): Lua linked statically into the programs; libprotobuf-c.so.1
# and liblua5.4.so.0 (libkfuse.so's) copied into DIR/lib, which
# bench/models/gpu.sh and dynamic.sh put on LD_LIBRARY_PATH.  DIR defaults
# to .carry/bin, which .gitignore keeps out of git and bench/gpu/setup.sh
# finds by itself; pass it to the device tool as a carried path.
set -e
cd "$(dirname "$0")/../.."
dir=${1:-.carry/bin}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKF_STATIC_LUA=ON >/dev/null
ninja -C "$dir" kfuse-opt kfuse-run kfuse-check kfuse-diff onnx/kfuse-import-onnx kfuse
mkdir -p "$dir/lib"
# libkfuse.so (bench/gpu/dynamic_torch.py loads it) links Lua's shared library
cp -L /usr/lib/x86_64-linux-gnu/libprotobuf-c.so.1 /usr/lib/x86_64-linux-gnu/liblua5.4.so.0 "$dir/lib/"
# the tests and objects stay here: the carry limit is 64 MiB
du -sh "$dir" | sed 's/^/carry-build: /'
