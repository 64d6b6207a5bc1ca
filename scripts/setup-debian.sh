#!/bin/sh
# Installs what kfuse needs to build and test on a fresh Debian 12 machine.
# Idempotent: packages already present are left alone.
set -e
pkgs="build-essential cmake ninja-build pkg-config python3 python3-numpy python3-onnx
 liblua5.4-dev re2c libcmocka-dev
 protobuf-c-compiler libprotobuf-c-dev libonnx-dev libonnx-testdata
 clang libclang-rt-14-dev llvm-19-tools mlir-19-tools graphviz time
 python3-torch python3-torchvision"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing
fi
