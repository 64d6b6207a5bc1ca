#!/bin/sh
# Builds kfuse twice, plainly and under AddressSanitizer + UndefinedBehaviorSanitizer,
# and runs the whole test suite in both builds.  Exit status 0 only if all pass.
set -e
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
for kind in plain asan; do
  dir=build-test-$kind
  flags=""
  [ $kind = asan ] && flags="-DKF_SANITIZE=ON"
  cmake -S . -B $dir -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $flags >/dev/null
  ninja -C $dir
  echo "== tests ($kind build) =="
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir $dir -j "$jobs" --output-on-failure
done
