# bench/gpu/setup.sh: what every bench script does first; sourced with the
# script's own arguments ([BUILD_DIR] [N]).  Sets here, root, build, N, opt,
# kfrun, out (logs: $KFUSE_BENCH_OUT or a new /tmp dir), log, and a kernel
# cache inside out.  The build is BUILD_DIR, else $KFUSE_BUILD, else the first
# build*/ or .carry/*/ holding a prebuilt kfuse-run and kfuse-opt.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
me=$(basename "$0")
build=${1:-${KFUSE_BUILD:-}}
N=${2:-50}
if [ -z "$build" ]; then
	for d in "$root"/build*/ "$root"/.carry/*/; do
		if [ -x "$d/kfuse-run" ] && [ -x "$d/kfuse-opt" ]; then build=$d; break; fi
	done
fi
if [ -z "$build" ] || [ ! -x "$build/kfuse-run" ]; then
	echo "$me: no build directory with kfuse-run and kfuse-opt (pass one, or set KFUSE_BUILD)" >&2
	exit 2
fi
# the programs link libprotobuf-c (and libkfuse.so Lua's shared library): a
# machine without them takes those carried in BUILD/lib (bench/gpu/carry-build.sh)
[ -d "$build/lib" ] && export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
opt="$build/kfuse-opt"
kfrun="$build/kfuse-run"
out=${KFUSE_BENCH_OUT:-$(mktemp -d "/tmp/kfuse-${me%.sh}.XXXXXX")}
mkdir -p "$out"
export KFUSE_CACHE_DIR="$out/cache"
log="$out/results.txt"
: > "$log"
echo "$me: build $build, $N timed runs each, logs in $out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
