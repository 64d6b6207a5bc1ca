/* fuzz_onnx: the ONNX importer on arbitrary bytes.
 *
 * kf_onnx_import either builds a module whose every graph verifies, or
 * leaves an error naming the model in the context.  Initializers stay
 * inline (no weights directory), so the target writes no files; the
 * first byte's low bit (a protobuf tag's wire type, so both values occur
 * in valid models) turns on --allow-unsupported. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "kf.h"
#include "onnx_import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kf_ctx *c = kf_ctx_new();
	/* the first byte's low bit: ops kfuse lacks kept as `opaque @Op` */
	kf_onnx_opts o = {.inline_max = 64, .allow_unsupported = size > 0 && (data[0] & 1)};
	kf_module *m = kf_onnx_import(c, "fuzz.onnx", data, size, &o);
	if (!m && kf_nerrors(c) == 0)
		abort(); /* a failure always says why */
	for (uint32_t i = 0; m && i < m->ngraph; i++)
		if (kf_verify(m->graph[i]) != 0) {
			/* the importer built a graph that breaks the IR's invariants */
			kf_diag_flush(c, stderr);
			abort();
		}
	kf_buf diag = {0};
	kf_diag_render(c, &diag);
	kf_buf_free(&diag);
	kf_module_free(m);
	kf_ctx_free(c);
	return 0;
}
