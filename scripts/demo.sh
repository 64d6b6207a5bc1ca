#!/bin/sh
# Builds kfuse and runs the main job on the bundled example: parse, optimise,
# fuse and print the graph, then run it on the CPU interpreter.
set -e
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build
./build/kfuse-opt examples/mlp.kf
