#!/bin/sh
# bench/gpu/attention.sh [BUILD_DIR] [N]: the attention kernel against
# PyTorch's scaled_dot_product_attention (flash, cuDNN, memory-efficient
# backends) and torch.compile, f16 ($DTYPE=bf16: bf16; $DTYPE=f32: f32,
# with TF32=1 through tf32 tensor cores on both sides), in one call; prints
# one table.
#
# Needs the GPU, CUDA (libnvrtc), python3 with PyTorch and numpy; uses the
# prebuilt kfuse-opt and kfuse-run of BUILD_DIR (bench/gpu/setup.sh).
# Cases: sequence lengths $TS (default 128 to 16384; queries = keys), head
# dims $DS (default 64 and 128), causal and not; batch x heads fill the GPU as the
# FlashAttention benchmarks do: 16384 tokens a batch (B = 16384 / T) and
# 2048 channels (H = 2048 / D, rounded down).  A decode case ($DECODE=0: none): one query over 8192 keys (no
# mask: the last query sees them all), batch 8 x 32 heads, head dim 128,
# timed in GB/s of q, k, v and o moved (the device copy beside it).
# kfuse runs as it chooses (the default: on an H200 the Hopper kernel's
# rule, docs/attention.md), and at the lengths in $SWEEP_T (default 2048
# 8192) with each tile of $TILES too; "TILE@PAT" runs only on cases whose
# name holds PAT ("wga128x176s2po@d128_c0").  $BEFORE: another build
# directory whose default runs beside ("before", e.g. main's), and at
# $SWEEP_T its tiles in $BEFORE_TILES.  Each kfuse line prints as it runs,
# the table at the end.  The check of the Hopper kernel's schedule against
# main's build (about 4 to 5 minutes on the H200):
#   TS="512 2048 8192 16384" SWEEP_T=8192 RUN_TIMEOUT=30 BEFORE=MAIN_BUILD \
#   BEFORE_TILES=wga128x128s2 TILES="wga128x128s2po@d128_c0 wga128x192s2po@d64_c0
#   wga192x128s3o@d64 wga128x128s2@c0" bench/gpu/attention.sh BUILD 10
# torch.compile recompiles for every shape (tens of seconds each): it runs
# at the sequence lengths in $COMPILE_T (default 2048; 0: none); the
# PyTorch part has $TORCH_TIMEOUT seconds (default 420).
# Each kfuse output is checked against PyTorch's (attention_check.py)
# before its time counts; a failing case says why and the script goes on
# (a run has $RUN_TIMEOUT seconds, default 60: a kernel that hangs costs
# no more).  Inputs and outputs go to /dev/shm when it is there.
# TFLOP/s: 4 B H Tq Tk D flops, half of it under a causal mask.
[ $# -ge 2 ] || set -- "${1:-}" 20
[ -z "${KFUSE_BENCH_OUT:-}" ] && [ -d /dev/shm ] && KFUSE_BENCH_OUT=$(mktemp -d /dev/shm/kfuse-attention.XXXXXX) &&
	export KFUSE_BENCH_OUT
. "$(dirname "$0")/setup.sh"
TILES=${TILES:-}
SWEEP_T=${SWEEP_T:-"2048 8192"}
TS=${TS:-"128 512 1024 2048 4096 8192 16384"}
BEFORE=${BEFORE:-}
BEFORE_TILES=${BEFORE_TILES:-}
RUN_TIMEOUT=${RUN_TIMEOUT:-60}
DT=${DTYPE:-f16}
case $DT in f16|bf16|f32) ;; *) echo "attention.sh: DTYPE '$DT' is not f16, bf16 or f32" >&2; exit 2 ;; esac
# TF32=1 (f32 only): kfuse-run --allow-tf32, and PyTorch's allow_tf32 for
# its timings (the references stay exact f32)
tf=""
case ${TF32:-0} in
1) [ "$DT" = f32 ] || { echo "attention.sh: TF32=1 needs DTYPE=f32" >&2; exit 2; }
   tf=--allow-tf32 ;;
0) ;;
*) echo "attention.sh: TF32 '$TF32' is not 0 or 1" >&2; exit 2 ;;
esac
py=${PYTHON:-python3}

cases=""
for T in $TS; do
	for D in ${DS:-64 128}; do
		for C in 0 1; do
			B=$((16384 / T)) H=$((2048 / D))
			cases="$cases t${T}_d${D}_c${C}:$B:$H:$T:$T:$D:$C"
		done
	done
done
[ "${DECODE:-1}" = 1 ] && cases="$cases decode:8:32:1:8192:128:0"

echo "== PyTorch (inputs, references, SDPA backends, torch.compile) =="
(cd "$here" && ATT_DTYPE=$DT ATT_TF32=${TF32:-0} COMPILE_T="${COMPILE_T:-2048}" timeout "${TORCH_TIMEOUT:-420}" "$py" attention_torch.py "$out" $cases) > "$out/torch.jsonl" 2> "$out/torch.log"
rc=$?
[ $rc = 0 ] || { echo "attention_torch.py failed ($rc):"; tail -20 "$out/torch.log"; }

# graph NAME B H TQ TK D CAUSAL: the attention as exporters write it
graph() {
	n=$1 B=$2 H=$3 TQ=$4 TK=$5 D=$6 C=$7
	sc=$(awk "BEGIN { printf \"%.8g\", 1 / sqrt($D) }")
	{
		echo "graph @$n(%q: $DT[$B,$H,$TQ,$D], %k: $DT[$B,$H,$TK,$D], %v: $DT[$B,$H,$TK,$D]) -> ($DT[$B,$H,$TQ,$D]) {"
		echo "  %kt = transpose(%k) {perm = [0, 1, 3, 2]} : $DT[$B,$H,$D,$TK]"
		echo "  %s = matmul(%q, %kt) : $DT[$B,$H,$TQ,$TK]"
		echo "  %c = const $sc : $DT[]"
		echo "  %t = mul(%s, %c) : $DT[$B,$H,$TQ,$TK]"
		p=t
		if [ "$C" = 1 ]; then
			echo "  %r = iota() {axis = 0, shape = [$TQ, $TK]} : i64[$TQ,$TK]"
			echo "  %cc = iota() {axis = 1, shape = [$TQ, $TK]} : i64[$TQ,$TK]"
			echo "  %off = const $((TK - TQ)) : i64[]"
			echo "  %ro = add(%r, %off) : i64[$TQ,$TK]"
			echo "  %keep = le(%cc, %ro) : i1[$TQ,$TK]"
			echo "  %ninf = const -inf : $DT[]"
			echo "  %m = where(%keep, %t, %ninf) : $DT[$B,$H,$TQ,$TK]"
			p=m
		fi
		echo "  %p = softmax(%$p) {axis = -1} : $DT[$B,$H,$TQ,$TK]"
		echo "  %o = matmul(%p, %v) : $DT[$B,$H,$TQ,$D]"
		echo "  return %o"
		echo "}"
	} > "$out/$n.kf"
}

# kfuse NAME VARIANT RUN [ENV...]: fuse, run with the saved inputs, check, time
kfuse() {
	n=$1 v=$2 run=$3
	shift 3
	f="$out/$n.fused.kf"
	rm -rf "$out/$n.out"
	mkdir -p "$out/$n.out"
	timeout "$RUN_TIMEOUT" env "$@" "$run" "$f" --backend=cuda --input "q=$out/$n.q.npy" --input "k=$out/$n.k.npy" \
		--input "v=$out/$n.v.npy" --output-dir "$out/$n.out" --bench "$N" $tf > "$out/$n.$v.txt" 2>&1
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
	kfuse "$n" default "$kfrun"
	[ -n "$BEFORE" ] && kfuse "$n" before "$BEFORE/kfuse-run"
	T=${n#t}
	T=${T%%_*}
	case " $SWEEP_T " in *" $T "*)
		for t in $TILES; do
			case $t in *@*) case $n in *"${t#*@}"*) ;; *) continue ;; esac ;; esac
			kfuse "$n" "${t%%@*}" "$kfrun" KFUSE_ATTN_TILE="${t%%@*}"
		done
		[ -n "$BEFORE" ] && [ "$n" != decode ] && for t in $BEFORE_TILES; do
			kfuse "$n" "before-$t" "$BEFORE/kfuse-run" KFUSE_ATTN_TILE="$t"
		done ;;
	esac
	rm -f "$out/$n".*.npy
	rm -rf "$out/$n.out"
done

echo "== table =="
$py - "$log" "$out/torch.jsonl" "$DT${tf:+ (tf32 allowed)}" <<'EOP'
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
        es = 4 if sys.argv[3].startswith("f32") else 2
        return es * B * H * (2 * TK * D + 2 * TQ * D) / (ms * 1e6)
    f = 4 * B * H * TQ * TK * D * (0.5 if C else 1.0)
    return f / (ms * 1e9)
cols = ["flash", "cudnn", "efficient", "compile"]
r = lambda n, ms: rate(n, ms) if not math.isnan(ms) else math.nan
print(f"{'case':<15} {'default':>8} {'before':>8} {'best tile':>9} {'tile':>15} " + " ".join(f"{c:>9}" for c in cols) +
      f" {'best torch':>10} {'dflt/best':>9}  check")
ratios = []
for n in sorted(runs, key=lambda n: (n == "decode",) + shape(n)[2:]):
    best_v, best = None, math.nan
    for v, (ms, chk) in runs[n].items():
        if not v.startswith("before") and not math.isnan(ms) and (math.isnan(best) or ms < best):
            best_v, best = v, ms
    d = r(n, runs[n].get("default", (math.nan, ""))[0])
    bf = r(n, runs[n].get("before", (math.nan, ""))[0])
    tr = [r(n, torch.get(n, {}).get(c, math.nan)) for c in cols]
    bt = max([x for x in tr if not math.isnan(x)], default=math.nan)
    if bt == bt and d == d and n != "decode":
        ratios.append(d / bt)
    chk = runs[n].get("default", (0, "-"))[1]
    print(f"{n:<15} {d:8.1f} {bf:8.1f} {r(n, best):9.1f} {best_v or '-':>15} " + " ".join(f"{x:9.1f}" for x in tr) +
          f" {bt:10.1f} {d / bt if bt == bt and bt else math.nan:9.3f}  {chk}")
if ratios:
    print(f"default / best torch (attention cases): geometric mean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f} over {len(ratios)} cases, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}")
print(f"(dtype {sys.argv[3]}; units: TFLOP/s; decode: GB/s of q, k, v and o, device copy {copy:.0f} GB/s)")
for n in sorted(runs):
    for v, (ms, chk) in sorted(runs[n].items()):
        if math.isnan(ms):
            print(f"note: {n} {v}: {chk}")
EOP
