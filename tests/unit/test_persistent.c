/* Unit tests of the persistent pass (passes/recurrence.c) and the
 * persistent kernel (passes/emit_persistent.c): the chain is found and
 * replaced by one fusion node that verifies and computes what the steps
 * did (the interpreter is the judge); chains that differ are refused; the
 * emitted kernel compiles with NVRTC to PTX for sm_90 (skipped without
 * NVRTC); what the kernel cannot do is a clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cuda.h"
#include "emit_cuda.h"
#include "equiv.h"
#include "interp.h"
#include "kf.h"
#include "pass.h"
#include "passes.h"

static kf_module *parse_file(kf_ctx *c, const char *rel)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", KF_TEST_DATA, rel);
	kf_module *m = kf_parse_file(c, path);
	if (!m) {
		kf_diag_flush(c, stderr);
		fail_msg("cannot parse %s", path);
	}
	return m;
}

static kf_module *parse_text(kf_ctx *c, const char *text)
{
	kf_module *m = kf_parse(c, "test.kf", text, strlen(text));
	if (!m)
		kf_diag_flush(c, stderr);
	assert_non_null(m);
	return m;
}

/* Runs `persistent` on m; returns the pass log. */
static void run_pass(kf_ctx *c, kf_module *m, kf_buf *log)
{
	kf_passreg reg = {0};
	kf_passes_builtin(&reg);
	kf_pipeline *p = kf_pipeline_parse(c, &reg, "persistent");
	assert_non_null(p);
	kf_runopts ro = {.verify_each = true, .log = log};
	int rc = kf_pipeline_run(p, m, &ro);
	if (rc != 0)
		kf_diag_flush(c, stderr);
	assert_int_equal(rc, 0);
	kf_pipeline_free(p);
	kf_passreg_free(&reg);
}

static uint32_t count_persistent(kf_graph *g, kf_nid *last)
{
	uint32_t n = 0;
	kf_foreach_node(g, 0, x)
		if (kf_N(g, x)->op == KF_OP_FUSION && !strcmp(kf_attr_str(g, x, "kind", ""), "persistent")) {
			n++;
			*last = x;
		}
	return n;
}

/* The pass on file rel: `want` persistent nodes of `steps` steps and
 * `cell`, verified, and equivalent to the graph before it. */
static void check_file(const char *rel, uint32_t want, int64_t steps, const char *cell)
{
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	kf_module *before = parse_file(c, rel), *after = parse_file(c, rel);
	kf_buf log = {0};
	run_pass(c, after, &log);
	kf_graph *g = after->graph[0];
	kf_nid f = KF_NONE;
	assert_int_equal(count_persistent(g, &f), want);
	assert_int_equal(kf_attr_int(g, f, "steps", 0), steps);
	assert_string_equal(kf_attr_str(g, f, "cell", ""), cell);
	assert_int_equal(kf_verify(g), 0);
	/* nothing of the steps is left outside the node: no recurrent matmul */
	kf_foreach_node(g, 0, x)
		if (kf_N(g, x)->op == KF_OP_MATMUL)
			assert_true(kf_vtype(g, kf_in(g, x, 0))->dim[0] > 1);
	kf_buf rep = {0};
	int rc = kf_equiv_check(before->graph[0], g, 42, 2, 1e-5, 1e-6, &rep);
	if (rc != 0) {
		kf_diag_flush(c, stderr);
		fprintf(stderr, "%.*s", (int)rep.n, rep.p);
	}
	assert_int_equal(rc, 0);
	kf_buf_free(&rep);
	kf_buf_free(&log);
	kf_module_free(before);
	kf_module_free(after);
	kf_ctx_free(c);
}

static void test_lstm(void **st)
{
	(void)st;
	check_file("golden/persistent/lstm.kf", 1, 3, "lstm");
}

static void test_gru(void **st)
{
	(void)st;
	check_file("golden/persistent/gru.kf", 1, 3, "gru");
}

static void test_stacked(void **st)
{
	(void)st;
	check_file("golden/persistent/stacked.kf", 2, 3, "lstm");
}

static void test_lstm_80_steps(void **st)
{
	(void)st;
	check_file("../examples/rnn/lstm_80x256.kf", 1, 80, "lstm");
}

/* Steps that differ, and matmuls over different weights, stay as they are. */
static void test_refused(void **st)
{
	(void)st;
	kf_ctx *c = kf_ctx_new();
	kf_module *m = parse_file(c, "golden/persistent/refuse.kf");
	uint32_t live[3];
	for (uint32_t i = 0; i < 3; i++)
		live[i] = kf_graph_live_nodes(m->graph[i]);
	kf_buf log = {0};
	run_pass(c, m, &log);
	kf_buf_putc(&log, 0);
	kf_nid f;
	assert_int_equal(count_persistent(m->graph[0], &f), 1);
	for (uint32_t i = 1; i < 3; i++) {
		assert_int_equal(count_persistent(m->graph[i], &f), 0);
		assert_int_equal(kf_graph_live_nodes(m->graph[i]), live[i]);
	}
	assert_non_null(strstr(log.p, "@mixed: the matmuls over %r are not a recurrence: step 3 has no "
				      "counterpart of step 2's 'tanh' node"));
	kf_buf_free(&log);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* The kernel of the 80-step LSTM: one persistent kernel, 128 groups of 2
 * units, compiled by NVRTC to PTX for sm_90. */
static void test_emit_nvrtc(void **st)
{
	(void)st;
	kf_ctx *c = kf_ctx_new();
	kf_module *m = parse_file(c, "../examples/rnn/lstm_80x256.kf");
	kf_buf log = {0};
	run_pass(c, m, &log);
	kf_graph *g = m->graph[0];
	kf_nid f = KF_NONE;
	assert_int_equal(count_persistent(g, &f), 1);
	kf_kernel k;
	int rc = kf_emit_node(g, f, &k);
	if (rc != 0)
		kf_diag_flush(c, stderr);
	assert_int_equal(rc, 0);
	assert_int_equal(k.kind, KF_KK_PERSISTENT);
	assert_int_equal(k.block, 256);
	assert_int_equal(k.units, 128);
	assert_non_null(strstr(k.src, "kf_sigmoid("));
	assert_non_null(strstr(k.src, "__shfl_xor_sync"));
	kf_nvrtc *nv = kf_nvrtc_open(c);
	if (nv) {
		kf_buf src = {0}, ptx = {0};
		kf_buf_puts(&src, kf_emit_prelude());
		kf_buf_puts(&src, k.src);
		kf_buf_putc(&src, 0);
		const char *opts[] = {"-std=c++17"};
		rc = kf_nvrtc_compile(nv, src.p, "persistent.cu", "sm_90", opts, 1, 0, &ptx, NULL);
		if (rc != 0)
			kf_diag_flush(c, stderr);
		assert_int_equal(rc, 0);
		char entry[64];
		snprintf(entry, sizeof entry, ".entry %s(", k.name);
		assert_non_null(strstr(ptx.p, entry));
		kf_buf_free(&src);
		kf_buf_free(&ptx);
		kf_nvrtc_close(nv);
	} else {
		kf_diag_clear(c);
		fprintf(stderr, "test_emit_nvrtc: NVRTC not available, PTX not checked\n");
	}
	kf_kernel_free(&k);
	kf_buf_free(&log);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* Batch 2: the pass makes the node (the interpreter runs it), the kernel
 * says why it cannot. */
static void test_emit_batch2(void **st)
{
	(void)st;
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	const char *text =
		"graph @b2(%x: f32[4,3], %h0: f32[2,3], %r: f32[3,3]) -> (f32[2,3]) {\n"
		"  %m1 = matmul(%h0, %r) : f32[2,3]\n  %h1 = tanh(%m1) : f32[2,3]\n"
		"  %m2 = matmul(%h1, %r) : f32[2,3]\n  %h2 = tanh(%m2) : f32[2,3]\n"
		"  %m3 = matmul(%h2, %r) : f32[2,3]\n  %h3 = tanh(%m3) : f32[2,3]\n"
		"  return %h3\n}\n";
	kf_module *m = parse_text(c, text), *orig = parse_text(c, text);
	kf_buf log = {0};
	run_pass(c, m, &log);
	kf_graph *g = m->graph[0];
	kf_nid f = KF_NONE;
	assert_int_equal(count_persistent(g, &f), 1);
	kf_buf rep = {0};
	assert_int_equal(kf_equiv_check(orig->graph[0], g, 1, 1, 1e-5, 1e-6, &rep), 0);
	kf_kernel k;
	assert_int_equal(kf_emit_node(g, f, &k), -1);
	kf_buf d = {0};
	kf_diag_render(c, &d);
	kf_buf_putc(&d, 0);
	assert_non_null(strstr(d.p, "persistent kernel: batch sizes other than 1 are not supported"));
	kf_diag_clear(c);
	kf_buf_free(&d);
	kf_buf_free(&rep);
	kf_buf_free(&log);
	kf_module_free(m);
	kf_module_free(orig);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lstm),
		cmocka_unit_test(test_gru),
		cmocka_unit_test(test_stacked),
		cmocka_unit_test(test_lstm_80_steps),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_emit_nvrtc),
		cmocka_unit_test(test_emit_batch2),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
