#!/bin/sh
# layering.sh SOURCE_DIR: the include rules of the layers (CMakeLists.txt):
#   core, ir-text -> runtime -> passes -> cuda -> onnx -> api -> tools
# (include/kfuse/ holds the public headers: core implements the plugin
# API, kfuse_plugin.h; api/ the embedding API, kfuse.h, over every layer)
# A file may include headers of its own folder and of the folders below it
# (core and ir-text link each other); so the CUDA backend (cuda/) never
# includes a pass's header, and no library below the tools includes a CUDA
# header (the tools use cuda/cuda_backend.h, the backend's contract; tests
# may include any layer's internals).  No include may name a path with "../" (which
# would get around the include directories that make a backwards include a
# build error).  Prints each violation; exit 1 if any.
src=${1:-.}
cd "$src" || exit 1
bad=${TMPDIR:-/tmp}/kf-layering.$$
rm -f "$bad"
headers() { for f in "$@"; do [ -d "$f" ] && ls "$f" | grep '\.h$'; done; }
allowed() { # allowed FOLDER: the folders whose headers FOLDER may include
	case $1 in
	core|ir-text) echo "core ir-text" ;;
	runtime) echo "core ir-text runtime" ;;
	passes) echo "core ir-text runtime passes" ;;
	cuda) echo "core ir-text runtime cuda" ;;
	onnx) echo "core ir-text runtime passes onnx" ;;
	api) echo "core ir-text runtime passes cuda onnx api" ;;
	esac
}
for dir in core ir-text runtime passes cuda onnx api; do
	ok=$(allowed $dir)
	okh=$(headers $ok)
	for f in $dir/*.c $dir/*.h $dir/*.re; do
		[ -f "$f" ] || continue
		grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
			h=$(echo "$line" | sed 's/.*include[[:space:]]*"\([^"]*\)".*/\1/')
			case $h in
			../*|*/../*) echo "$f: $line: relative include"; echo x >> "$bad" ;;
			kfuse/kfuse_plugin.h) ;;  # the plugin API, which core implements
			kfuse/kfuse.h) [ "$dir" = api ] || { echo "$f: $line: only api/ implements the embedding API"; echo x >> "$bad"; } ;;
			*/*) ;;  # a generated or system path (onnx.pb-c.h lives in the build tree)
			*) if ! echo "$okh" | grep -qx "$h" && [ ! -f "$dir/$h" ]; then
				 case $h in onnx.pb-c.h) ;; *) echo "$f: $line: $dir/ may include only headers of: $ok"; echo x >> "$bad" ;; esac
			   fi ;;
			esac
		done
	done
done
if [ -f "$bad" ]; then rm -f "$bad"; exit 1; fi
echo "layering: every include follows the layers"
