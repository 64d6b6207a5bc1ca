#!/bin/sh
# bench/gpu/ncu.sh [BUILD_DIR]: kernel durations from Nsight Compute, the
# pure device time of each kernel with no launch gap between replays (ncu
# flushes the caches before each kernel and leaves the clocks alone here:
# --clock-control none).  For the fused bench/gpu/*.kf graphs and torch's
# device copy at the same size and at 1 GiB; one table, GB/s counting every
# input and output once.
. "$(dirname "$0")/setup.sh"
command -v ncu > /dev/null || { echo "ncu.sh: no ncu on this machine"; exit 2; }
prof() { # NAME CMD...: median kernel duration (ns) per kernel name into the log
	name=$1
	shift
	ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base "$@" \
		> "$out/$name.ncu.csv" 2> "$out/$name.ncu.err" || { echo "ncu.sh: $name failed"; tail -3 "$out/$name.ncu.err"; }
	python3 - "$name" "$out/$name.ncu.csv" >> "$log" <<'PY'
import csv, sys, statistics
name, path = sys.argv[1], sys.argv[2]
rows = [r for r in csv.reader(l for l in open(path) if l.startswith('"'))]
if not rows:
    sys.exit()
h = rows[0]
ki, vi = h.index("Kernel Name"), h.index("Metric Value")
by = {}
for r in rows[1:]:
    by.setdefault(r[ki], []).append(float(r[vi].replace(",", "")))
for k, v in by.items():
    print(f"NCU {name} {k[:40].replace(' ', '_')} {len(v)} {statistics.median(v):.0f}")
PY
}
# and the f16 / bf16 forms of four of them (every f32 of the text the low
# type, as bench/gpu/run.sh makes them)
low="ew_chain.f16 ew_chain.bf16 bias_gelu.f16 bias_gelu.bf16 layer_norm.f16 layer_norm.bf16 softmax.f16 softmax.bf16"
for f in ew_chain ew_chain3 copy bias_gelu layer_norm softmax $low; do
	src="$here/$f.kf"
	case $f in *.*) src="$out/$f.kf"; sed "s/f32/${f#*.}/g" "$here/${f%.*}.kf" > "$src" ;; esac
	"$opt" "$src" -p fuse -o "$out/$f.fused.kf" 2> /dev/null
	"$kfrun" "$out/$f.fused.kf" --backend=cuda --random-inputs > /dev/null 2>&1 # compile into the cache first
	prof "$f" "$kfrun" "$out/$f.fused.kf" --backend=cuda --random-inputs --no-graph --bench 4
done
prof copy_torch python3 "$here/ncu_copy.py" 16777216
prof copy1g_torch python3 "$here/ncu_copy.py" 268435456
python3 - "$log" <<'PY'
import sys
mb = 1 << 20
nbytes = {"ew_chain": 128 * mb, "ew_chain3": 256 * mb, "copy": 128 * mb, "copy_torch": 128 * mb,
          "copy1g_torch": 2048 * mb, "bias_gelu": 256 * mb + 16384,
          "layer_norm": 128 * mb + 8192, "softmax": 128 * mb}
for g in ("ew_chain", "bias_gelu", "layer_norm", "softmax"):
    for dt in ("f16", "bf16"):
        nbytes[g + "." + dt] = nbytes[g] // 2
res, cnt = {}, {}
for l in open(sys.argv[1]):
    w = l.split()
    # the kernel launched most often in each run (torch's randn runs once)
    if w and w[0] == "NCU" and w[1] in nbytes and int(w[3]) > cnt.get(w[1], 0):
        res[w[1]], cnt[w[1]] = float(w[4]), int(w[3])
print()
print("kernel durations (ncu gpu__time_duration, median of the launches; caches flushed before each)")
ceil = nbytes["copy1g_torch"] / res["copy1g_torch"] if "copy1g_torch" in res else None
for g, ns in res.items():
    gbs = nbytes[g] / ns
    pct = f"{100 * gbs / ceil:6.1f}% of the 1 GiB copy" if ceil else ""
    print(f"  {g:<16} {ns / 1e3:8.1f} us {gbs:7.0f} GB/s  {pct}")
PY
