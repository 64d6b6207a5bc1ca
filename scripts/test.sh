#!/bin/sh
# Builds kfuse twice, plainly and under AddressSanitizer + UndefinedBehaviorSanitizer,
# and runs the whole test suite in both builds (and, for the plain build, the
# Debian package from outside the checkout: scripts/test-install.sh); then builds the libFuzzer
# targets with clang and runs each for a short smoke time (a finding fails).
# Exit status 0 only if all pass.
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
  # use_tls=0: LeakSanitizer's tracer crashes (SIGSEGV) scanning the TLS
  # of libnvrtc 13 at exit; not scanning TLS can only add leak reports,
  # and tests/lsan.supp names the one that adds (libnvrtc's key block)
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    LSAN_OPTIONS=use_tls=0:suppressions=$PWD/tests/lsan.supp:print_suppressions=0 \
    ctest --test-dir $dir -j "$jobs" --output-on-failure
  if [ $kind = plain ]; then
    echo "== the Debian package, installed into a scratch directory (plain build) =="
    ./scripts/test-install.sh $dir
  fi
done

echo "== fuzz smoke (libFuzzer, ${KF_FUZZ_SECONDS:-10} s per target) =="
dir=build-test-fuzz
cmake -S . -B $dir -G Ninja -DCMAKE_C_COMPILER=clang-14 -DKF_FUZZ=ON >/dev/null
ninja -C $dir $(cd tests/fuzz && ls fuzz_*.c | sed 's/_/-/; s/\.c$//')
rm -rf $dir/runs
STRICT=1 JOBS=$jobs OUT=$dir/runs tests/fuzz/run.sh $dir "${KF_FUZZ_SECONDS:-10}"
