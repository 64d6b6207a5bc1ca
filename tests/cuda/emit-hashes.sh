#!/bin/sh
# emit-hashes.sh KFUSE_OPT SOURCE_DIR [--update]: the CUDA text emitted for
# the graphs listed in tests/cuda/emit-hashes.txt (every .kf under tests/,
# examples/ and bench/ when it was last regenerated), as written and after
# the fusion pipelines below, hashed per graph and pipeline and compared with
# the list.  A change to what the emitter writes for any of them fails here
# until the list is regenerated with --update, so every change of emitted
# kernels is a deliberate one that shows in review (the backend's move to
# cuda/ was checked byte-identical this way).  Graphs that do not emit are
# recorded as "error", so that changes too is seen.  Files added since the
# list was made are not checked; a listed file that is gone fails.
opt=$1
src=$2
mode=$3
list=$src/tests/cuda/emit-hashes.txt
tmp=${TMPDIR:-/tmp}/kf-emit-hashes.$$
trap 'rm -f "$tmp" "$tmp".*' EXIT
case $opt in /*) ;; *) opt=$PWD/$opt ;; esac
case $list in /*) ;; *) list=$PWD/$list ;; esac
cd "$src" || exit 1
if [ "$mode" = --update ]; then
	files=$(find tests examples bench -name '*.kf' | LC_ALL=C sort)
else
	files=$(cut -d' ' -f1 "$list" | uniq)
fi
for f in $files; do
	if [ ! -f "$f" ]; then
		echo "$f gone"
		continue
	fi
	for p in none fuse fuse-matmul,fuse persistent persistent,fuse-matmul,fuse; do
		if [ $p = none ]; then set --; else set -- -p $p; fi
		if "$opt" "$f" "$@" --emit=cuda > "$tmp.cu" 2> /dev/null; then
			h=$(sha256sum < "$tmp.cu" | cut -c1-16)
		else
			h=error
		fi
		echo "$f $p $h"
	done
done > "$tmp"
if [ "$mode" = --update ]; then
	cp "$tmp" "$list"
	echo "wrote $list ($(wc -l < "$list") lines)"
	exit 0
fi
if ! diff -u "$list" "$tmp" > "$tmp.diff"; then
	echo "emitted CUDA differs from tests/cuda/emit-hashes.txt:"
	grep '^[-+][^-+]' "$tmp.diff" | head -40
	echo "(if the change is intended: sh tests/cuda/emit-hashes.sh BUILD/kfuse-opt . --update)"
	exit 1
fi
echo "emitted CUDA of $(wc -l < "$tmp") graph/pipeline pairs unchanged"
