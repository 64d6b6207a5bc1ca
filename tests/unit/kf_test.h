/* kf_test.h: the scaffolding the unit tests share (include after cmocka.h):
 * parse a module and verify it, run a pipeline with the verifier after
 * each pass, remove a temporary directory; a failure ends the test with
 * the diagnostics. */
#ifndef KF_TEST_H
#define KF_TEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_cuda.h"
#include "emit_matmul.h"
#include "interp.h"
#include "kf.h"
#include "pass.h"
#include "passes.h"

/* Removes the temporary directory dir (a kernel cache) and all in it. */
static inline void kft_rmdir(const char *dir)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

/* Parses the contraction config s into *cf: it must parse and print back
 * as s. */
static inline void kft_mm_config(const char *s, kf_mm_config *cf)
{
	char txt[64];
	assert_int_equal(kf_mm_config_parse(s, cf), 0);
	kf_mm_config_text(cf, txt, sizeof txt);
	assert_string_equal(txt, s);
}

static inline void kft_fail_diags(kf_ctx *c, const char *what)
{
	kf_buf b = {0};
	kf_diag_render(c, &b);
	fail_msg("%s: %.*s", what, (int)b.n, b.p);
}

/* Parses text as module "t.kf" and verifies its first graph. */
static inline kf_module *kft_parse(kf_ctx *c, const char *text)
{
	kf_module *m = kf_parse(c, "t.kf", text, strlen(text));
	if (!m || kf_verify(m->graph[0]) != 0)
		kft_fail_diags(c, "parse");
	return m;
}

/* Runs pipeline text over m, verifying after each pass. */
static inline void kft_run_pipe(kf_ctx *c, kf_module *m, const char *text)
{
	kf_passreg r = {0};
	kf_passes_builtin(&r);
	kf_pipeline *p = kf_pipeline_parse(c, &r, text);
	assert_non_null(p);
	kf_runopts ro = {.verify_each = true};
	if (kf_pipeline_run(p, m, &ro) != 0)
		kft_fail_diags(c, "pipeline");
	kf_pipeline_free(p);
	kf_passreg_free(&r);
}

/* kft_parse, then fuse-matmul,fuse: contraction kernels as the backend sees them. */
static inline kf_module *kft_parse_fused(kf_ctx *c, const char *text)
{
	kf_rt_register(c);
	kf_module *m = kft_parse(c, text);
	kft_run_pipe(c, m, "fuse-matmul,fuse");
	return m;
}

/* The first fusion node of g's top level (the test fails without one). */
static inline kf_nid kft_first_fusion(kf_graph *g)
{
	kf_foreach_node(g, 0, n)
		if (kf_N(g, n)->op == KF_OP_FUSION)
			return n;
	fail_msg("no fusion");
	return KF_NONE;
}

/* Emits the contraction kernel of text (kft_parse_fused) for emit target
 * wg (kf_emit_target), with tile forced through KFUSE_MATMUL_TILE unless
 * NULL. */
static inline void kft_emit_contraction(const char *text, int wg, const char *tile, kf_kernel *k)
{
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse_fused(c, text);
	kf_emit_target t = {wg};
	if (tile)
		setenv("KFUSE_MATMUL_TILE", tile, 1);
	assert_int_equal(kf_emit_node_for(m->graph[0], kft_first_fusion(m->graph[0]), &t, k), 0);
	unsetenv("KFUSE_MATMUL_TILE");
	kf_module_free(m);
	kf_ctx_free(c);
}
#endif
