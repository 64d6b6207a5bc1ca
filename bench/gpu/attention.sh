#!/bin/sh
# bench/gpu/attention.sh [BUILD_DIR] [N]: the attention kernel against
# PyTorch's scaled_dot_product_attention (flash, cuDNN, memory-efficient
# backends) and torch.compile, f16, in one call; prints one table.
#
# Needs the GPU, CUDA (libnvrtc), python3 with PyTorch and numpy; uses the
# prebuilt kfuse-opt and kfuse-run of BUILD_DIR (bench/gpu/setup.sh).
# Cases: sequence 128 to 16384 (queries = keys), head dims 64 and 128,
# causal and not; batch x heads fill the GPU as the FlashAttention
# benchmarks do: 16384 tokens a batch (B = 16384 / T) and 2048 channels (H =
# 2048 / D).  A decode case: one query over 8192 keys (no mask: the last
# query sees them all), batch 8 x 32 heads, head dim 128, timed in GB/s of
# q, k, v and o moved (the device copy beside it).
# Tiles: the default (the mma.sync kernel), the Hopper kernel (wgmma, TMA,
# a producer warpgroup: $WGA, default wga128x128s2) at every shape, and at
# T 2048 the alternatives in $TILES.  $TS: the sequence lengths.  About 8
# minutes on the H200 with the defaults (N 20); each kfuse line prints as
# it runs, the table at the end.
# torch.compile recompiles for every shape (tens of seconds each): it runs
# at the sequence lengths in $COMPILE_T (default 2048).
# Each kfuse output is checked against PyTorch's (attention_check.py)
# before its time counts; a failing case says why and the script goes on.
# TFLOP/s: 4 B H Tq Tk D flops, half of it under a causal mask.
[ $# -ge 2 ] || set -- "${1:-}" 20
. "$(dirname "$0")/setup.sh"
TILES=${TILES:-"fa128x128s2 fa64x64s2 wga128x64s2"}
TS=${TS:-"128 512 1024 2048 4096 8192 16384"}
WGA=${WGA:-wga128x128s2}
py=${PYTHON:-python3}

cases=""
for T in $TS; do
	for D in 64 128; do
		for C in 0 1; do
			B=$((16384 / T)) H=$((2048 / D))
			cases="$cases t${T}_d${D}_c${C}:$B:$H:$T:$T:$D:$C"
		done
	done
done
cases="$cases decode:8:32:1:8192:128:0"

echo "== PyTorch (inputs, references, SDPA backends, torch.compile) =="
(cd "$here" && COMPILE_T="${COMPILE_T:-2048}" timeout 420 "$py" attention_torch.py "$out" $cases) > "$out/torch.jsonl" 2> "$out/torch.log"
rc=$?
[ $rc = 0 ] || { echo "attention_torch.py failed ($rc):"; tail -20 "$out/torch.log"; }

# graph NAME B H TQ TK D CAUSAL: the attention as exporters write it
graph() {
	n=$1 B=$2 H=$3 TQ=$4 TK=$5 D=$6 C=$7
	sc=$(awk "BEGIN { printf \"%.8g\", 1 / sqrt($D) }")
	{
		echo "graph @$n(%q: f16[$B,$H,$TQ,$D], %k: f16[$B,$H,$TK,$D], %v: f16[$B,$H,$TK,$D]) -> (f16[$B,$H,$TQ,$D]) {"
		echo "  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : f16[$B,$H,$D,$TK]"
		echo "  %s = matmul(%q, %kt) : f16[$B,$H,$TQ,$TK]"
		echo "  %c = const $sc : f16[]"
		echo "  %t = mul(%s, %c) : f16[$B,$H,$TQ,$TK]"
		p=t
		if [ "$C" = 1 ]; then
			echo "  %r = iota() {axis = 0, shape = [$TQ, $TK]} : i64[$TQ,$TK]"
			echo "  %cc = iota() {axis = 1, shape = [$TQ, $TK]} : i64[$TQ,$TK]"
			echo "  %off = const $((TK - TQ)) : i64[]"
			echo "  %ro = add(%r, %off) : i64[$TQ,$TK]"
			echo "  %keep = le(%cc, %ro) : i1[$TQ,$TK]"
			echo "  %ninf = const -inf : f16[]"
			echo "  %m = where(%keep, %t, %ninf) : f16[$B,$H,$TQ,$TK]"
			p=m
		fi
		echo "  %p = softmax(%$p) {axis = -1} : f16[$B,$H,$TQ,$TK]"
		echo "  %o = matmul(%p, %v) : f16[$B,$H,$TQ,$D]"
		echo "  return %o"
		echo "}"
	} > "$out/$n.kf"
}

# kfuse NAME VARIANT [ENV...]: fuse, run with the saved inputs, check, time
kfuse() {
	n=$1 v=$2
	shift 2
	f="$out/$n.fused.kf"
	rm -rf "$out/$n.out"
	mkdir -p "$out/$n.out"
	timeout 300 env "$@" "$kfrun" "$f" --backend=cuda --input "q=$out/$n.q.npy" --input "k=$out/$n.k.npy" \
		--input "v=$out/$n.v.npy" --output-dir "$out/$n.out" --bench "$N" > "$out/$n.$v.txt" 2>&1
	rc=$?
	chk=$($py "$here/attention_check.py" "$out/$n.out/out0.npy" "$out/$n.ref.npy" 2>&1)
	line=$(grep '^bench cuda' "$out/$n.$v.txt" | head -1)
	echo "kfuse $n $v rc=$rc check=[$chk] :: $line" | tee -a "$log"
	[ $rc = 0 ] || tail -6 "$out/$n.$v.txt"
}

echo "== kfuse =="
for c in $cases; do
	n=${c%%:*}
	set -- $(echo "$c" | tr ':' ' ')
	graph "$@"
	if [ ! -f "$out/$n.q.npy" ]; then
		echo "kfuse $n default rc=- check=[no inputs: PyTorch did not make them] ::" | tee -a "$log"
		continue
	fi
	if ! "$opt" "$out/$n.kf" -p fuse-attention,fuse-matmul,fuse -o "$out/$n.fused.kf" 2> "$out/$n.opt.log"; then
		echo "kfuse $n default rc=- check=[kfuse-opt failed] ::" | tee -a "$log"
		cat "$out/$n.opt.log"
		continue
	fi
	kfuse "$n" default
	[ "$n" = decode ] || kfuse "$n" "$WGA" KFUSE_ATTN_TILE="$WGA"
	case $n in t2048_*)
		for t in $TILES; do kfuse "$n" "$t" KFUSE_ATTN_TILE="$t"; done ;;
	esac
	rm -f "$out/$n".*.npy
	rm -rf "$out/$n.out"
done

echo "== table =="
$py - "$log" "$out/torch.jsonl" <<'EOP'
import json, math, re, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"kfuse (\S+) (\S+) rc=(\S+) check=\[(.*?)\] :: (.*)", line)
    if not m:
        continue
    t = re.search(r"median ([0-9.]+) ms", m.group(5))
    ok = m.group(4).startswith("ok")
    runs.setdefault(m.group(1), {})[m.group(2)] = (float(t.group(1)) if t and ok else math.nan, m.group(4))
torch = {}
copy = math.nan
for line in open(sys.argv[2]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if j["name"] == "copy":
        copy = j.get("gbs", math.nan)
        continue
    torch.setdefault(j["name"], {})[j["variant"]] = j["ms"]
def shape(n):
    if n == "decode":
        return 8, 32, 1, 8192, 128, True
    T, D, C = re.match(r"t(\d+)_d(\d+)_c(\d)", n).groups()
    T, D = int(T), int(D)
    return 16384 // T, 2048 // D, T, T, D, C == "1"
def rate(n, ms):
    B, H, TQ, TK, D, C = shape(n)
    if n == "decode":  # GB/s of k and v (and q, o) moved once
        return 2 * B * H * (2 * TK * D + 2 * TQ * D) / (ms * 1e6)
    f = 4 * B * H * TQ * TK * D * (0.5 if C else 1.0)
    return f / (ms * 1e9)
cols = ["flash", "cudnn", "efficient", "compile"]
unit = lambda n: "GB/s" if n == "decode" else "TFLOP/s"
print(f"{'case':<16} {'kfuse':>8} {'tile':>12} " + " ".join(f"{c:>9}" for c in cols) + f" {'best torch':>10} {'kfuse/best':>10}  check")
for n in sorted(runs, key=lambda n: (n == "decode",) + shape(n)[2:]):
    best_v, best = None, math.nan
    for v, (ms, chk) in runs[n].items():
        if not math.isnan(ms) and (math.isnan(best) or ms < best):
            best_v, best = v, ms
    k = rate(n, best) if not math.isnan(best) else math.nan
    tr = [rate(n, torch.get(n, {}).get(c, math.nan)) if not math.isnan(torch.get(n, {}).get(c, math.nan)) else math.nan for c in cols]
    bt = max([x for x in tr if not math.isnan(x)], default=math.nan)
    chk = runs[n].get("default", (0, "-"))[1]
    print(f"{n:<16} {k:8.1f} {best_v or '-':>12} " + " ".join(f"{x:9.1f}" for x in tr) + f" {bt:10.1f} {k / bt if bt == bt and bt else math.nan:10.3f}  {chk}")
print(f"(units: TFLOP/s; decode: GB/s of q, k, v and o, device copy {copy:.0f} GB/s)")
for n in sorted(runs):
    for v, (ms, chk) in sorted(runs[n].items()):
        if math.isnan(ms):
            print(f"note: {n} {v}: {chk}")
EOP
