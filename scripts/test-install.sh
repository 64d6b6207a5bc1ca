#!/bin/sh
# test-install.sh BUILD: kfuse as a user gets it, away from the checkout.
# Builds the Debian package from BUILD (cpack), unpacks it into a scratch
# directory with dpkg -x (no root, nothing touched outside it), and from
# another scratch directory, with only the unpacked tree on PATH:
#   1. runs the README's tour, line by line as written there;
#   2. builds the example C plugin against the package with pkg-config and
#      with find_package(kfuse), and runs each;
#   3. builds the embedding example (examples/embed) with pkg-config against
#      libkfuse.so and with find_package against libkfuse.so and libkfuse.a,
#      and runs each on the CPU backend.
# Exit status 0 only if all of it works.
set -e
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
step() { echo "== $*"; }

step "the Debian package"
(cd "$build" && cpack -G DEB -B "$work/pkg" > "$work/cpack.log") || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/pkg/kfuse_*.deb)
dpkg-deb --field "$deb" Package Version Depends
dpkg -x "$deb" "$work/root"
prefix=$work/root/usr
# nothing of the build or the checkout may be used from here on
export PATH="$prefix/bin:/usr/bin:/bin"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
unset KFUSE_RULES_PATH LD_LIBRARY_PATH
mkdir "$work/tour"
cd "$work/tour"
test "$(command -v kfuse-opt)" = "$prefix/bin/kfuse-opt"
kfuse-opt --version
kfuse-opt --version | grep -qx "standard rules: $prefix/share/kfuse/patterns"

step "the README's tour"
ex=$prefix/share/kfuse/examples
sed -n '/^## A tour/,/^## /p' "$src/README.md" | sed -n '/^```sh$/,/^```$/p' | sed '1d;$d' |
	grep -v '^#' | grep -v '^ex=' | grep -v '^$' > "$work/tour.sh"
test "$(wc -l < "$work/tour.sh")" -ge 8
while IFS= read -r line; do
	echo "\$ $line"
	rc=0
	ex=$ex sh -c "$line" > "$work/line.out" 2>&1 || rc=$?
	head -c 1500 "$work/line.out"
	case "$line" in
	kfuse-diff*) [ $rc -le 1 ] ;;   # 1: the graphs differ, as the comment says
	*) [ $rc = 0 ] ;;
	esac || { echo "the tour's line failed (status $rc): $line"; exit 1; }
done < "$work/tour.sh"
grep -q "fusion @" model.fused.kf
test -s model.svg

step "a plugin built with pkg-config"
cc -shared -fPIC -O2 $(pkg-config --cflags kfuse) -Wl,-z,defs "$ex/plugins/c/softplus.c" \
	-o libsoftplus.so -lm
kfuse-opt "$ex/plugins/c/softplus.kf" --plugin ./libsoftplus.so -p fold-softplus,dce --check-equivalence |
	grep -q 'softplus(%x)'

step "a plugin built with find_package(kfuse)"
cmake -S "$ex/plugins/c" -B plugin-build -DCMAKE_PREFIX_PATH="$prefix" > "$work/cmake.log" ||
	{ cat "$work/cmake.log"; exit 1; }
cmake --build plugin-build > "$work/cmake.log" || { cat "$work/cmake.log"; exit 1; }
kfuse-opt "$ex/plugins/c/softplus.kf" --plugin plugin-build/libkfuse_softplus.so -p fold-softplus,dce |
	grep -q 'softplus(%x)'

step "the embedding example, pkg-config, libkfuse.so"
cc -O2 -DEMBED_DIR="\"$ex/embed\"" "$ex/embed/embed.c" $(pkg-config --cflags --libs kfuse) -lm -o embed
LD_LIBRARY_PATH="$prefix/lib" ./embed
LD_LIBRARY_PATH="$prefix/lib" ./embed "$ex/onnx/ffn.onnx" cpu | grep -q "same as the unoptimised graph"

for kind in shared static; do
	step "the embedding example, find_package(kfuse), $kind"
	flag=OFF
	[ $kind = static ] && flag=ON
	cmake -S "$ex/embed" -B embed-$kind -DCMAKE_PREFIX_PATH="$prefix" -DKFUSE_STATIC=$flag \
		> "$work/cmake.log" || { cat "$work/cmake.log"; exit 1; }
	cmake --build embed-$kind > "$work/cmake.log" || { cat "$work/cmake.log"; exit 1; }
	./embed-$kind/embed | grep -q "same as the unoptimised graph"
done
step "the installed kfuse works from $work/tour"
