/* fuzz_middle: the whole middle end on graphs the fuzzer's bytes choose.
 *
 * The bytes are: one for the size (2 to 65 ops), two for the pipeline (a
 * bit per pass: canonicalize, cse, rules{path=patterns}, fuse, fuse-matmul,
 * dce; the rest pick the order and fuse's limits), then every choice of
 * the random-graph generator (tests/random/kf_gen.h), zeros once they run
 * out.  The graph goes through the pipeline pass by pass
 * (tests/random/kf_mid.h): each result must verify, compute what the graph
 * computed before the pass on the interpreter (bit for bit after cse, dce,
 * fuse and fuse-matmul), print and parse back, and have its CUDA kernels
 * emitted (NVRTC is too slow for a fuzzer's pace; kf-random compiles).
 * Anything else aborts with the report.  KF_FUZZ_VERBOSE=1 prints each
 * graph and pipeline. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "interp.h"
#include "kf.h"
#include "kf_gen.h"
#include "kf_mid.h"
#include "pass.h"
#include "passes.h"

#ifndef KF_SOURCE_DIR
#define KF_SOURCE_DIR "."
#endif

static kf_ctx *ctx;
static kf_passreg reg;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	ctx = kf_ctx_new();
	kf_rt_register(ctx);
	kf_passes_builtin(&reg);
	return 0;
}

/* The pipeline bits pick (as kf-random does, from a different source):
 * the passes in, their order, and now and then a binding fuse limit. */
static void pipeline(unsigned bits, kf_buf *out)
{
	static const char *const lim[] = {"fuse", "fuse{max-nodes=3}", "fuse{max-inputs=2}", "fuse{max-search=8}",
					  "fuse{siblings=false}", "fuse{max-row=64}", "fuse", "fuse"};
	const char *all[6] = {"canonicalize", "cse", "rules{path=\"" KF_SOURCE_DIR "/patterns\"}",
			      lim[(bits >> 6) & 7], "fuse-matmul", "dce"};
	const char *p[6];
	int n = 0;
	for (int i = 0; i < 6; i++)
		if (bits >> i & 1)
			p[n++] = all[i];
	if (!n)
		p[n++] = all[3];
	for (int i = n - 1, r = (int)(bits >> 9); i > 0; i--, r /= 7) {
		int j = r % (i + 1);
		const char *t = p[i];
		p[i] = p[j];
		p[j] = t;
	}
	out->n = 0;
	for (int i = 0; i < n; i++)
		kf_buf_printf(out, "%s%s", i ? "," : "", p[i]);
	kf_buf_putc(out, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 3)
		return 0;
	unsigned nodes = 2 + data[0] % 64, bits = (unsigned)data[1] | (unsigned)data[2] << 8;
	kf_gen_src src = {.p = data + 3, .n = size - 3, .bytes_only = true};
	kf_gen_opts go = {.nodes = nodes, .max_numel = 64};
	kf_graph *g = kf_gen_graph(ctx, &src, &go, "g");
	kf_buf text = {0}, pipe = {0}, rep = {0};
	kf_print_graph(&text, g);
	kf_graph_free(g);
	pipeline(bits, &pipe);
	if (getenv("KF_FUZZ_VERBOSE"))
		fprintf(stderr, "--- %s ---\n%.*s", pipe.p, (int)text.n, text.p);
	kf_mid_opts mo = {.reg = &reg, .pipeline = pipe.p, .seed = 7, .emit = true};
	kf_mid_verdict v = kf_mid_check(ctx, "fuzz.kf", text.p, text.n, &mo, &rep);
	if (v != KF_MID_OK) {
		fprintf(stderr, "fuzz_middle: %s with pipeline %s\n%.*s--- the graph ---\n%.*s", kf_mid_verdict_name(v),
			pipe.p, (int)rep.n, rep.p, (int)text.n, text.p);
		abort();
	}
	kf_buf_free(&text);
	kf_buf_free(&pipe);
	kf_buf_free(&rep);
	kf_diag_clear(ctx);
	return 0;
}
