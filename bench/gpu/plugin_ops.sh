#!/bin/sh
# bench/gpu/plugin_ops.sh [BUILD_DIR] [N]: kfuse-run --plugin on the GPU.
#
# plugin_ops.kf chains built-in add with hardswish and hardsigmoid (Lua ops of
# patterns/activations.lua), softsign (examples/plugins/lua) and softplus (the
# C plugin, BUILD_DIR/tests/rules/libkfuse_softplus.so).  Each form (fused into
# one kernel, and unfused) runs with --backend=cuda --compare=cpu --bench N;
# the plugin ops run on the GPU from their cuda expressions and are checked
# against their cpu functions.  Builds nothing.  Prints one line per form.
. "$(dirname "$0")/setup.sh"

so="$build/tests/rules/libkfuse_softplus.so"
[ -f "$so" ] || { echo "$me: no $so (build the test plugin kfuse_softplus)" >&2; exit 2; }
set -- --plugin "$root/patterns/activations.lua" --plugin "$root/examples/plugins/lua/softsign.lua" --plugin "$so"
g="$here/plugin_ops.kf"
"$opt" "$g" "$@" -p fuse -o "$out/plugin_ops.fused.kf" 2> "$out/fuse.log" || { echo "FAIL fuse"; cat "$out/fuse.log"; exit 1; }
printf '%-8s %-3s %-10s %-10s %-8s %s\n' form rc compare median_ms kernels GB/s
for v in fused unfused; do
	src=$g
	[ $v = fused ] && src="$out/plugin_ops.fused.kf"
	"$kfrun" "$src" "$@" --backend=cuda --random-inputs --seed 1 --compare=cpu --rtol 1e-4 --atol 1e-5 \
		--bench "$N" > "$out/$v.txt" 2>&1
	rc=$?
	cmp=-
	grep -q 'MISMATCH' "$out/$v.txt" && cmp=MISMATCH
	grep -q '\[ok\]' "$out/$v.txt" && [ $cmp = - ] && cmp=ok
	b=$(grep '^bench cuda' "$out/$v.txt" | head -1)
	med=$(echo "$b" | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
	k=$(echo "$b" | sed -n 's/.* \([0-9]*\) kernels.*/\1/p')
	gbs=$(echo "$b" | sed -n 's/.* \([0-9.]*\) GB\/s.*/\1/p')
	printf '%-8s %-3s %-10s %-10s %-8s %s\n' $v $rc $cmp "${med:--}" "${k:--}" "${gbs:--}" | tee -a "$log"
	[ $rc = 0 ] || tail -5 "$out/$v.txt"
done
