#!/bin/sh
# bench/gpu/sweep.sh [BUILD_DIR] [N] [SETTINGS]: the tuning sweep of the
# fused memory-bound kernels (docs/fusion.md, "Tuning"), in one device call.
#
# Needs what run.sh needs (an NVIDIA GPU, libnvrtc, the prebuilt kfuse-opt
# and kfuse-run of BUILD_DIR; PyTorch only for the copy ceiling).  Each
# bench graph is fused once, and its CPU reference (the interpreter, on the
# inputs of --seed 1) computed once; then every setting runs the graphs it
# concerns through kfuse-run --backend=cuda --bench N, its output checked
# against the reference (--expect, rtol 1e-3, atol 1e-4).  A setting is a
# line `NAME GRAPHS VAR=VALUE...` (GRAPHS: ew for ew_chain and bias_gelu,
# row for layer_norm and softmax, all, or one graph's name); the variables
# are the emitter's KFUSE_* tuning variables.  SETTINGS, a file of such
# lines, replaces the built-in list.  The copy ceiling is torch_ref.py's
# device copy, or $KFUSE_COPY_GBS.  Ends with one table and the best
# setting per graph.  Logs in $KFUSE_BENCH_OUT (default: a new /tmp dir).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-${KFUSE_BUILD:-}}
N=${2:-100}
settings=${3:-}
if [ -z "$build" ]; then
	for d in "$root"/build*/ "$root"/.carry/*/; do
		if [ -x "$d/kfuse-run" ] && [ -x "$d/kfuse-opt" ]; then build=$d; break; fi
	done
fi
if [ -z "$build" ] || [ ! -x "$build/kfuse-run" ]; then
	echo "sweep.sh: no build directory with kfuse-run and kfuse-opt (pass one, or set KFUSE_BUILD)" >&2
	exit 2
fi
if [ -n "$settings" ] && [ ! -r "$settings" ]; then
	echo "sweep.sh: cannot read the settings file '$settings'" >&2
	exit 2
fi
opt="$build/kfuse-opt"
kfrun="$build/kfuse-run"
out=${KFUSE_BENCH_OUT:-$(mktemp -d /tmp/kfuse-sweep.XXXXXX)}
mkdir -p "$out"
export KFUSE_CACHE_DIR="$out/cache"
# the settings below name every variable they change; none leaks in
for v in EW_VEC EW_BLOCK EW_GRID ROW_WARPS ROW_BLOCK ROW_GRID CACHE_HINTS FAST_GELU; do unset "KFUSE_$v"; done
log="$out/sweep.txt"
: > "$log"
t0=$(date +%s)
echo "sweep.sh: build $build, $N timed runs each, logs in $out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'

if [ -z "$settings" ]; then
	settings="$out/settings.txt"
	# first and last: the default (the predicted best), twice, for the spread
	cat > "$settings" <<'EOF'
default          all
ew.first-run     ew   KFUSE_EW_VEC=1 KFUSE_EW_GRID=wave KFUSE_FAST_GELU=0
ew.vec1          ew   KFUSE_EW_VEC=1
ew.vec2          ew   KFUSE_EW_VEC=2
ew.vec8          ew   KFUSE_EW_VEC=8
ew.block128      ew   KFUSE_EW_BLOCK=128
ew.block512      ew   KFUSE_EW_BLOCK=512
ew.block1024     ew   KFUSE_EW_BLOCK=1024
ew.grid-wave     ew   KFUSE_EW_GRID=wave
ew.grid2         ew   KFUSE_EW_GRID=2
ew.grid4         ew   KFUSE_EW_GRID=4
ew.vec2-grid8    ew   KFUSE_EW_VEC=2 KFUSE_EW_GRID=8
ew.hints1        ew   KFUSE_CACHE_HINTS=1
ew.hints2        ew   KFUSE_CACHE_HINTS=2
ew.hints3        ew   KFUSE_CACHE_HINTS=3
ew.tanhf         bias_gelu KFUSE_FAST_GELU=0
row.first-run    row  KFUSE_ROW_BLOCK=256 KFUSE_ROW_GRID=wave
row.block64      row  KFUSE_ROW_BLOCK=64
row.block256     row  KFUSE_ROW_BLOCK=256
row.block512     row  KFUSE_ROW_BLOCK=512
row.warps2       row  KFUSE_ROW_WARPS=2
row.warps4       row  KFUSE_ROW_WARPS=4
row.warps2-b256  row  KFUSE_ROW_WARPS=2 KFUSE_ROW_BLOCK=256
row.grid-wave    row  KFUSE_ROW_GRID=wave
row.grid8        row  KFUSE_ROW_GRID=8
row.hints1       row  KFUSE_CACHE_HINTS=1
row.hints2       row  KFUSE_CACHE_HINTS=2
row.hints3       row  KFUSE_CACHE_HINTS=3
default.again    all
EOF
fi

# the copy ceiling
copy=${KFUSE_COPY_GBS:-}
if [ -z "$copy" ]; then
	copy=$(python3 "$here/torch_ref.py" --copy 2> "$out/copy.err" | grep "\"name\": \"copy\"" | sed -n 's/.*"gbs": \([0-9.]*\).*/\1/p')
	[ -n "$copy" ] || { echo "sweep.sh: no torch copy ($(tail -1 "$out/copy.err")); using 4247 GB/s, the first run's"; copy=4247; }
fi

graphs="ew_chain ew_chain3 copy bias_gelu layer_norm softmax"
for g in $graphs; do
	"$opt" "$here/$g.kf" -p fuse -o "$out/$g.fused.kf" 2> "$out/$g.fuse.log" || { echo "FAIL fuse $g"; cat "$out/$g.fuse.log"; exit 1; }
	"$kfrun" "$out/$g.fused.kf" --random-inputs --seed 1 --output-dir "$out/ref-$g" > "$out/ref-$g.txt" 2>&1 ||
		{ echo "FAIL reference $g"; tail -5 "$out/ref-$g.txt"; exit 1; }
done
echo "sweep.sh: references done in $(( $(date +%s) - t0 )) s"

# one setting on one graph: a line "RESULT name graph rc check median_ms bytes kernel"
run_one() {
	name=$1 g=$2
	shift 2
	f="$out/$name.$g.txt"
	env "$@" "$kfrun" "$out/$g.fused.kf" --backend=cuda --random-inputs --seed 1 \
		--expect "0=$out/ref-$g/out0.npy" --rtol 1e-3 --atol 1e-4 --bench "$N" > "$f" 2>&1
	rc=$?
	chk=bad
	grep -q '^expect out0 .*\[ok\]$' "$f" && chk=ok
	ms=$(sed -n 's/^bench cuda .* median \([0-9.]*\) ms.*/\1/p' "$f")
	nb=$(sed -n 's/^bench cuda .* \([0-9]*\) bytes in+out.*/\1/p' "$f")
	echo "RESULT $name $g $rc $chk ${ms:-0} ${nb:-0}" >> "$log"
	[ $rc = 0 ] && [ $chk = ok ] || { echo "-- $name $g: rc=$rc check=$chk"; tail -4 "$f"; }
}

while read -r name which vars; do
	case $name in ''|'#'*) continue ;; esac
	case $which in
	all) gs=$graphs ;;
	ew) gs="ew_chain ew_chain3 copy bias_gelu" ;;
	row) gs="layer_norm softmax" ;;
	*) gs=$which ;;
	esac
	for g in $gs; do
		# shellcheck disable=SC2086 # the variables are words
		run_one "$name" "$g" $vars
	done
done < "$settings"
echo "sweep.sh: $(grep -c '^RESULT' "$log") runs in $(( $(date +%s) - t0 )) s"

python3 - "$log" "$copy" "$settings" <<'PY'
import sys
log, copy, sfile = sys.argv[1], float(sys.argv[2]), sys.argv[3]
env = {}
for l in open(sfile):
    w = l.split()
    if w and not w[0].startswith("#"):
        env[w[0]] = " ".join(w[2:]) or "(defaults)"
bars = {"ew_chain": 95, "ew_chain3": 95, "copy": 100, "bias_gelu": 95, "layer_norm": 85, "softmax": 85}
rows = []
for l in open(log):
    w = l.split()
    if w and w[0] == "RESULT":
        name, g, rc, chk, ms, nb = w[1], w[2], int(w[3]), w[4], float(w[5]), int(w[6])
        rows.append((name, g, rc, chk, ms, nb))
print()
print(f"copy ceiling {copy:.0f} GB/s; median of the timed replays; check: output vs the CPU interpreter")
hdr = f"{'setting':<16} {'graph':<11} {'us':>8} {'GB/s':>7} {'% copy':>7} {'check':>6}"
print(hdr)
print("-" * len(hdr))
best = {}
for name, g, rc, chk, ms, nb in rows:
    if rc or ms <= 0:
        print(f"{name:<16} {g:<11} {'FAILED (rc=%d)' % rc:>30}")
        continue
    gbs = nb / ms / 1e6
    pct = 100 * gbs / copy
    print(f"{name:<16} {g:<11} {ms * 1e3:8.1f} {gbs:7.0f} {pct:6.1f}% {chk:>6}")
    if chk == "ok" and (g not in best or ms < best[g][1]):
        best[g] = (name, ms, pct)
print()
print("best per graph (bar: % of copy):")
for g in bars:
    if g in best:
        name, ms, pct = best[g]
        print(f"  {g:<11} {ms * 1e3:7.1f} us {pct:6.1f}% (bar {bars[g]}%)  {name}: {env.get(name, '?')}")
    else:
        print(f"  {g:<11} no passing run")
PY
