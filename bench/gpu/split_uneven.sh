#!/bin/sh
# bench/gpu/split_uneven.sh [BUILD_DIR] [N]: splits of unequal parts on the GPU.
#
# Each graph of split_uneven.kf runs with --backend=cuda --compare=cpu --bench N:
# the splits as written (one loop kernel with a loop per part size), and @qkv
# after the merge-matmuls transform (tests/rules/author/merge-matmuls.lua: one
# matmul of the concatenated weights, then the uneven split), unfused and with
# fuse-matmul,fuse.  Every line must say ok and rc=0.  Builds nothing.
. "$(dirname "$0")/setup.sh"

g="$here/split_uneven.kf"
rules="$root/tests/rules/author/merge-matmuls.lua"
"$opt" "$g" -p "rules{path=$rules}" -o "$out/merged.kf" 2> "$out/merge.log" || { echo "FAIL merge"; cat "$out/merge.log"; exit 1; }
"$opt" "$out/merged.kf" -p fuse-matmul,fuse -o "$out/fused.kf" 2> "$out/fuse.log" || { echo "FAIL fuse"; cat "$out/fuse.log"; exit 1; }
grep -q 'split(' "$out/merged.kf" || { echo "FAIL: the transform merged nothing"; exit 1; }
printf '%-12s %-7s %-3s %-9s %s\n' graph form rc compare bench
for gr in split_tail split_f16 qkv; do
	for form in merged fused; do
		"$kfrun" "$out/$form.kf" --graph "$gr" --backend=cuda --random-inputs --seed 1 --compare=cpu \
			--rtol 1e-3 --atol 1e-3 --bench "$N" > "$out/$gr.$form.txt" 2>&1
		rc=$?
		cmp=-
		grep -q 'MISMATCH' "$out/$gr.$form.txt" && cmp=MISMATCH
		grep -q '\[ok\]' "$out/$gr.$form.txt" && [ $cmp = - ] && cmp=ok
		b=$(grep '^bench cuda' "$out/$gr.$form.txt" | head -1)
		printf '%-12s %-7s %-3s %-9s %s\n' "$gr" "$form" "$rc" "$cmp" "${b:--}" | tee -a "$log"
		[ $rc = 0 ] || tail -5 "$out/$gr.$form.txt"
	done
done
