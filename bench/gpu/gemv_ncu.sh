#!/bin/sh
# bench/gpu/gemv_ncu.sh [BUILD_DIR]: the GEMV kernels' own durations from
# Nsight Compute, with the weight cold (caches flushed before each kernel:
# read from HBM) and warm (--cache-control none: the weight left in L2 by the
# launch before), beside a read-only reference of the same 16 MiB: torch's
# sum of the weight (one pass, cold).  No launch gap is counted, unlike the
# event-timed back-to-back replays of matmul.sh.  Clocks are left alone.
# Extra rows: the bulk-copy GEMV (gemvb, gemvb8: B [N, K] streamed into
# shared memory by cp.async.bulk, a CTA per SM) forced on the [N, K] cases,
# each first checked against the CPU ("OK ... matches" lines), plus a
# correctness-only run of its ring (rows of 64 KiB).
. "$(dirname "$0")/setup.sh"
command -v ncu > /dev/null || { echo "gemv_ncu.sh: no ncu on this machine"; exit 2; }
gemv() { # NAME K N T: x[1,K] @ w (w [K,N], or [N,K] transposed when T = t)
	if [ "$4" = t ]; then
		body="  %t = transpose(%w) {perm = [1, 0]} : f32[$2,$3]
  %y = matmul(%x, %t) : f32[1,$3]" w="f32[$3,$2]"
	else
		body="  %y = matmul(%x, %w) : f32[1,$3]" w="f32[$2,$3]"
	fi
	printf 'graph @%s(%%x: f32[1,%s], %%w: %s) -> (f32[1,%s]) {\n%s\n  return %%y\n}\n' "$1" "$2" "$w" "$3" "$body" > "$out/$1.kf"
}
gemv gemv_kn 4096 1024 n
gemv gemv_nk 4096 1024 t
gemv gemv_kn_k1024 1024 4096 n
gemv gemv_nk_k1024 1024 4096 t
dur() { # LABEL CACHE CMD...: the median duration (ns) of the most launched kernel
	label=$1 cache=$2
	shift 2
	ncu --clock-control none --cache-control "$cache" --metrics gpu__time_duration.sum --csv --print-units base "$@" \
		> "$out/$label.csv" 2> "$out/$label.err" || { echo "gemv_ncu.sh: $label failed"; tail -3 "$out/$label.err"; }
	d=$(python3 "$here/ncu_dur.py" "$out/$label.csv")
	[ -z "$d" ] || echo "DUR $label $d" >> "$log"
}
for c in gemv_kn gemv_nk gemv_kn_k1024 gemv_nk_k1024; do
	"$opt" "$out/$c.kf" -p fuse-matmul,fuse -o "$out/$c.mm.kf" 2> /dev/null
	"$kfrun" "$out/$c.mm.kf" --backend=cuda --random-inputs --tune --compare=cpu --rtol 1e-4 --atol 1e-3 > "$out/$c.tune.txt" 2>&1
	grep -q '\[ok\]' "$out/$c.tune.txt" || { echo "gemv_ncu.sh: $c does not match the interpreter"; tail -3 "$out/$c.tune.txt"; }
	for cache in all none; do
		dur "$c.$cache" $cache "$kfrun" "$out/$c.mm.kf" --backend=cuda --random-inputs --no-graph --bench 8
	done
done
# the bulk-copy GEMV (gemvb[S], B [N, K]; $GEMVB overrides the configs)
# forced, the tuner's cache off; each checked against the CPU first.  The
# kernel name emitted for the config is printed beside the one ncu timed.
: > "$out/none.txt"
gemv gemv_nk_ring 16384 1024 t # 8 rows of 64 KiB per CTA: the ring of 2 slots
"$opt" "$out/gemv_nk_ring.kf" -p fuse-matmul,fuse -o "$out/gemv_nk_ring.mm.kf" 2> /dev/null
for c in gemv_nk_k1024 gemv_nk gemv_nk_ring; do
	for t in ${GEMVB:-gemvb gemvb8}; do
		[ $c = gemv_nk_ring ] && [ $t != gemvb ] && continue
		KFUSE_MATMUL_TILE=$t "$opt" "$out/$c.mm.kf" --emit=cuda > "$out/$c.$t.cu" 2> /dev/null
		kn=$(grep -q 'kf_gb_copy(sw' "$out/$c.$t.cu" &&
			sed -n 's/^extern "C" __global__ void .* \(kf_[0-9a-f]*\)(.*/\1/p' "$out/$c.$t.cu" | head -1)
		echo "gemv_ncu.sh: $c $t: emitted ${kn:-NO BULK-COPY KERNEL}" | tee -a "$log"
		(
			export KFUSE_TUNE_FILE="$out/none.txt" KFUSE_MATMUL_TILE=$t
			"$kfrun" "$out/$c.mm.kf" --backend=cuda --random-inputs --compare=cpu --rtol 1e-4 --atol 1e-3 \
				> "$out/$c.$t.txt" 2>&1
			if grep -q '\[ok\]' "$out/$c.$t.txt"; then echo "OK $c $t matches the interpreter" >> "$log"
			else echo "gemv_ncu.sh: $c $t does not match the interpreter" | tee -a "$log"; tail -3 "$out/$c.$t.txt"; fi
			[ $c = gemv_nk_ring ] && exit 0
			for cache in all none; do
				dur "$c.$t.$cache" $cache "$kfrun" "$out/$c.mm.kf" --backend=cuda --random-inputs --no-graph --bench 8
			done
		)
	done
done
# the same 16 MiB through kfuse's own memory-bound kernels: a copy of 8 MiB
# (8 read + 8 written) and a sum of 16 MiB over rows of 4096 (read only)
printf 'graph @copy16(%%x: f32[2097152]) -> (f32[2097152]) {\n  %%y = neg(%%x) : f32[2097152]\n  return %%y\n}\n' > "$out/copy16.kf"
printf 'graph @sum16(%%x: f32[1024,4096]) -> (f32[1024]) {\n  %%y = reduce_sum(%%x) {axes = [1], keepdims = false} : f32[1024]\n  return %%y\n}\n' > "$out/sum16.kf"
for c in copy16 sum16; do
	"$opt" "$out/$c.kf" -p fuse -o "$out/$c.f.kf" 2> /dev/null
	"$kfrun" "$out/$c.f.kf" --backend=cuda --random-inputs > /dev/null 2>&1
	dur "kfuse_$c.all" all "$kfrun" "$out/$c.f.kf" --backend=cuda --random-inputs --no-graph --bench 8
	dur "kfuse_$c.none" none "$kfrun" "$out/$c.f.kf" --backend=cuda --random-inputs --no-graph --bench 8
done
cat > "$out/sum.py" <<'PY'
import torch
w = torch.randn(4096 * 1024, device="cuda")
for _ in range(8):
    w.sum()
torch.cuda.synchronize()
PY
dur torch_sum.all all python3 "$out/sum.py"
dur torch_sum.none none python3 "$out/sum.py"
cat "$log"
python3 - "$log" <<'PY'
import sys
wb = 4096 * 1024 * 4
ceil = 4224  # GB/s, the event-timed 1 GiB device copy of this session's matmul.sh
print()
print(f"GEMV kernel durations (ncu, median); weight 16 MiB; % of the {ceil} GB/s copy ceiling")
print(f"{'case':<22} {'cold us':>8} {'GB/s':>6} {'%copy':>6}   {'warm us':>8} {'GB/s':>6}")
d = {}
for l in open(sys.argv[1]):
    w = l.split()
    if w and w[0] == "DUR":
        c, cache = w[1].rsplit(".", 1)
        d.setdefault(c, {})[cache] = float(w[3]) / 1e3
for c, v in d.items():
    cold, warm = v.get("all"), v.get("none")
    s = f"{c:<22}"
    s += f" {cold:8.2f} {wb / cold / 1e3:6.0f} {100 * wb / cold / 1e3 / ceil:5.1f}%" if cold else " " * 23
    s += f"   {warm:8.2f} {wb / warm / 1e3:6.0f}" if warm else ""
    print(s)
PY
