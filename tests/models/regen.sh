#!/bin/sh
# tests/models/regen.sh: rewrites the test data of tests/models from its
# generators: the model zoo's small configurations (bench/models/zoo.py) into
# zoo/, the models nobody shaped the importer for (bench/models/others.py)
# into others/, and in bf16 (others and the zoo's transformers) into bf16/.  Seeded: the same torch writes the same files.  Needs torch
# 1.13 or newer with torchvision and onnx (Debian: python3-torch,
# python3-torchvision, python3-onnx; /usr/bin/python3 has them here).
set -e
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-/usr/bin/python3}
rm -rf "$here/zoo" "$here/others" "$here/bf16"
"$py" "$here/../../bench/models/zoo.py" --out "$here/zoo"
"$py" "$here/../../bench/models/others.py" --out "$here/others"
"$py" "$here/../../bench/models/others.py" --out "$here/bf16" --dtype bf16
"$py" "$here/../../bench/models/zoo.py" --out "$here/bf16" --dtype bf16 --only gpt2,llama,bert,t5
