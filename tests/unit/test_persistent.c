/* Unit tests of the persistent pass (passes/recurrence.c) and the
 * persistent kernel (cuda/emit_persistent.c): the chain is found and
 * replaced by one fusion node that verifies and computes what the steps
 * did (the interpreter is the judge); chains that differ are refused; the
 * emitted kernel compiles with NVRTC to PTX for sm_90 (skipped without
 * NVRTC); what the kernel cannot do is a clear error.  The kernel's
 * text, compiled as C with a small CUDA shim and run on the host (blocks
 * are threads, a block's threads are fibers), computes what the
 * interpreter computes, launch after launch, in both hand-off modes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "kf_test.h"
#include "kf_test_nvrtc.h"

#include "cuda.h"
#include "cuda_backend.h"
#include "emit_cuda.h"
#include "equiv.h"
#include "interp.h"
#include "kf.h"
#include "pass.h"
#include "passes.h"
#include "persistent_emu.h"

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
static void run_pipe(kf_ctx *c, kf_module *m, kf_buf *log, const char *pipe)
{
	kf_passreg reg = {0};
	kf_passes_builtin(&reg);
	kf_pipeline *p = kf_pipeline_parse(c, &reg, pipe ? pipe : "persistent");
	assert_non_null(p);
	kf_runopts ro = {.verify_each = true, .log = log};
	int rc = kf_pipeline_run(p, m, &ro);
	if (rc != 0)
		kf_diag_flush(c, stderr);
	assert_int_equal(rc, 0);
	kf_pipeline_free(p);
	kf_passreg_free(&reg);
}

static void run_pass(kf_ctx *c, kf_module *m, kf_buf *log)
{
	run_pipe(c, m, log, NULL);
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
	/* one node of two layers (the body: a node per layer) */
	check_file("golden/persistent/stacked.kf", 1, 3, "lstm");
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
	assert_non_null(strstr(log.p, "@mixed: the matmuls over %r are not a recurrence: step 2 has no "
				      "counterpart of step 1's 'tanh' %h1 ("));
	assert_non_null(strstr(log.p, "refuse.kf:41:3) (it has 'relu' %h2 ("));
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

/* KFUSE_PERSISTENT_SYNC=grid: the backend finds cooperative_groups.h (and
 * CUDA 13's cccl/ beside it) for NVRTC, and the GRU's program compiles
 * (a dry-run plan: no GPU needed). */
static void test_grid_nvrtc(void **st)
{
	(void)st;
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	kf_module *m = parse_file(c, "../examples/rnn/gru_80x256.kf");
	kf_buf log = {0};
	run_pass(c, m, &log);
	char inc[512], dir[] = "/tmp/kfuse-grid-XXXXXX";
	kf_nvrtc *nv = kf_nvrtc_open(c);
	if (!nv || kf_cuda_include_dir(kf_nvrtc_path(nv), inc, sizeof inc) != 0) {
		kf_diag_clear(c);
		fprintf(stderr, "test_grid_nvrtc: no NVRTC or no CUDA headers, not compiled\n");
	} else {
		assert_non_null(mkdtemp(dir));
		kf_cuda_opts o = {.dry_run = true, .no_cache = true, .cache_dir = dir, .threads = 1};
		setenv("KFUSE_PERSISTENT_SYNC", "grid", 1);
		kf_cuda_session *s = kf_cuda_session_new(c, &o);
		assert_non_null(s);
		int rc = kf_cuda_session_plan(s, m->graph[0]);
		unsetenv("KFUSE_PERSISTENT_SYNC");
		if (rc != 0)
			kf_diag_flush(c, stderr);
		assert_int_equal(rc, 0);
		kf_cuda_stats cs;
		kf_cuda_session_stats(s, &cs);
		assert_true(cs.compiled >= 1);
		kf_cuda_session_free(s);
		kft_rmdir(dir);
	}
	if (nv)
		kf_nvrtc_close(nv);
	kf_buf_free(&log);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* A batch: the pass makes the node, the kernel takes batch 2 (each block's
 * gate rows against both states) and compiles; batch 17 is past what it
 * takes, and it says so, and the backend's plan runs the node's body. */
static void test_emit_batch(void **st)
{
	(void)st;
	for (int B = 2; B <= 17; B += 15) {
		kf_ctx *c = kf_ctx_new();
		kf_rt_register(c);
		kf_buf text = {0};
		kf_buf_printf(&text, "graph @b(%%h0: f32[%d,3], %%r: f32[3,3]) -> (f32[%d,3]) {\n", B, B);
		for (int t = 1; t <= 3; t++)
			kf_buf_printf(&text, "  %%m%d = matmul(%%h%d, %%r) : f32[%d,3]\n  %%a%d = add(%%m%d, %%h%d) : f32[%d,3]\n"
				      "  %%h%d = tanh(%%a%d) : f32[%d,3]\n", t, t - 1, B, t, t, t - 1, B, t, t, B);
		kf_buf_puts(&text, "  return %h3\n}\n");
		kf_buf_putc(&text, 0);
		kf_module *m = parse_text(c, text.p), *orig = parse_text(c, text.p);
		kf_buf log = {0};
		run_pass(c, m, &log);
		kf_graph *g = m->graph[0];
		kf_nid f = KF_NONE;
		assert_int_equal(count_persistent(g, &f), 1);
		kf_buf rep = {0};
		assert_int_equal(kf_equiv_check(orig->graph[0], g, 1, 1, 1e-5, 1e-6, &rep), 0);
		kf_kernel k;
		if (B == 2) {
			assert_int_equal(kf_emit_node(g, f, &k), 0);
			assert_non_null(strstr(k.src, "kf_sg[(0 * 1 + u) * 2 + b]"));
			if (kft_have_nvrtc())
				kft_ptxas_checked(&k, "sm_90", 0);
			kf_kernel_free(&k);
		} else {
			assert_int_equal(kf_emit_node(g, f, &k), -1);
			kf_buf d = {0};
			kf_diag_render(c, &d);
			kf_buf_putc(&d, 0);
			assert_non_null(strstr(d.p, "persistent kernel: batch sizes above 16 are not supported"));
			kf_diag_clear(c);
			kf_buf_free(&d);
			/* the backend's plan runs the node's body instead, and says why */
			char dir[] = "/tmp/kfuse-batch-XXXXXX";
			if (kft_have_nvrtc() && mkdtemp(dir)) {
				kf_buf report = {0};
				kf_cuda_opts o = {.dry_run = true, .no_cache = true, .cache_dir = dir, .threads = 1,
						  .report = &report};
				kf_cuda_session *cs = kf_cuda_session_new(c, &o);
				assert_non_null(cs);
				int rc = kf_cuda_session_plan(cs, g);
				if (rc != 0)
					kf_diag_flush(c, stderr);
				assert_int_equal(rc, 0);
				assert_int_equal(kf_nerrors(c), 0);
				kf_buf_putc(&report, 0);
				assert_non_null(strstr(report.p, "runs as ordinary kernels: cuda: persistent kernel: batch "
								 "sizes above 16 are not supported"));
				kf_cuda_session_free(cs);
				kf_buf_free(&report);
				kft_rmdir(dir);
			}
		}
		kf_buf_free(&rep);
		kf_buf_free(&log);
		kf_buf_free(&text);
		kf_module_free(m);
		kf_module_free(orig);
		kf_ctx_free(c);
	}
}

/* ---- the kernel on the host ------------------------------------------------------ */

/* An unrolled LSTM or GRU as examples/rnn/gen_rnn.py writes it (L layers). */
static void gen_rnn(kf_buf *o, bool lstm, int T, int IN, int H, int L)
{
	int G = (lstm ? 4 : 3) * H;
	kf_buf_printf(o, "graph @%s(%%x: f32[%d,%d]", lstm ? "lstm" : "gru", T, IN);
	for (int l = 0; l < L; l++) {
		kf_buf_printf(o, ", %%h0_%d: f32[1,%d]", l, H);
		if (lstm)
			kf_buf_printf(o, ", %%c0_%d: f32[1,%d]", l, H);
		kf_buf_printf(o, ", %%w_ih_%d: f32[%d,%d], %%w_hh_%d: f32[%d,%d]", l, G, l ? H : IN, l, G, H);
		if (lstm)
			kf_buf_printf(o, ", %%b_%d: f32[%d]", l, G);
		else
			kf_buf_printf(o, ", %%b_ih_%d: f32[%d], %%b_hh_%d: f32[%d]", l, G, l, G);
	}
	kf_buf_printf(o, ") -> (f32[%d,%d], f32[1,%d]", T, H, H);
	if (lstm)
		kf_buf_printf(o, ", f32[1,%d]", H);
	kf_buf_puts(o, ") {\n");
	if (!lstm)
		kf_buf_puts(o, "  %one = const 1.0 : f32[]\n");
#define SL(d, s, a, b) kf_buf_printf(o, "  %%l%d_t%d_%s = slice(%%l%d_t%d_%s) {axes = [1], ends = [%d], starts = [%d]} : f32[1,%d]\n", \
				      l, t, d, l, t, s, b, a, H)
#define OP2(d, op, a, b) kf_buf_printf(o, "  %%l%d_t%d_%s = " op "(%%l%d_t%d_%s, %%l%d_t%d_%s) : f32[1,%d]\n", \
				       l, t, d, l, t, a, l, t, b, H)
#define OP1(d, op, a) kf_buf_printf(o, "  %%l%d_t%d_%s = " op "(%%l%d_t%d_%s) : f32[1,%d]\n", l, t, d, l, t, a, H)
	for (int l = 0; l < L; l++) {
		kf_buf_printf(o, "  %%wt_ih_%d = transpose(%%w_ih_%d) {perm = [1, 0]} : f32[%d,%d]\n", l, l, l ? H : IN, G);
		kf_buf_printf(o, "  %%wt_hh_%d = transpose(%%w_hh_%d) {perm = [1, 0]} : f32[%d,%d]\n", l, l, H, G);
		for (int t = 0; t < T; t++) {
			if (l == 0)
				kf_buf_printf(o, "  %%l0_t%d_x = slice(%%x) {axes = [0], ends = [%d], starts = [%d]} : f32[1,%d]\n"
					      "  %%l0_t%d_xw = matmul(%%l0_t%d_x, %%wt_ih_0) : f32[1,%d]\n", t, t + 1, t, IN, t, t, G);
			else
				kf_buf_printf(o, "  %%l%d_t%d_xw = matmul(%%l%d_t%d_h, %%wt_ih_%d) : f32[1,%d]\n", l, t, l - 1, t, l, G);
			if (t == 0)
				kf_buf_printf(o, "  %%l%d_t0_hw = matmul(%%h0_%d, %%wt_hh_%d) : f32[1,%d]\n", l, l, l, G);
			else
				kf_buf_printf(o, "  %%l%d_t%d_hw = matmul(%%l%d_t%d_h, %%wt_hh_%d) : f32[1,%d]\n", l, t, l, t - 1, l, G);
			if (lstm) {
				kf_buf_printf(o, "  %%l%d_t%d_s = add(%%l%d_t%d_xw, %%l%d_t%d_hw) : f32[1,%d]\n", l, t, l, t, l, t, G);
				kf_buf_printf(o, "  %%l%d_t%d_pre = add(%%l%d_t%d_s, %%b_%d) : f32[1,%d]\n", l, t, l, t, l, G);
				SL("gi", "pre", 0, H);
				SL("gf", "pre", H, 2 * H);
				SL("gg", "pre", 2 * H, 3 * H);
				SL("go", "pre", 3 * H, 4 * H);
				OP1("ia", "sigmoid", "gi");
				OP1("fa", "sigmoid", "gf");
				OP1("ga", "tanh", "gg");
				OP1("oa", "sigmoid", "go");
				if (t == 0)
					kf_buf_printf(o, "  %%l%d_t0_fc = mul(%%l%d_t0_fa, %%c0_%d) : f32[1,%d]\n", l, l, l, H);
				else
					kf_buf_printf(o, "  %%l%d_t%d_fc = mul(%%l%d_t%d_fa, %%l%d_t%d_c) : f32[1,%d]\n", l, t, l, t, l, t - 1, H);
				OP2("ig", "mul", "ia", "ga");
				OP2("c", "add", "fc", "ig");
				OP1("tc", "tanh", "c");
				OP2("h", "mul", "oa", "tc");
				continue;
			}
			kf_buf_printf(o, "  %%l%d_t%d_a = add(%%l%d_t%d_xw, %%b_ih_%d) : f32[1,%d]\n", l, t, l, t, l, G);
			kf_buf_printf(o, "  %%l%d_t%d_r = add(%%l%d_t%d_hw, %%b_hh_%d) : f32[1,%d]\n", l, t, l, t, l, G);
			const char *gate[3] = {"r", "z", "n"};
			for (int q = 0; q < 3; q++) {
				char d[8];
				snprintf(d, sizeof d, "a%s", gate[q]);
				SL(d, "a", q * H, (q + 1) * H);
				snprintf(d, sizeof d, "r%s", gate[q]);
				SL(d, "r", q * H, (q + 1) * H);
			}
			OP2("rs", "add", "ar", "rr");
			OP1("rg", "sigmoid", "rs");
			OP2("zs", "add", "az", "rz");
			OP1("zg", "sigmoid", "zs");
			OP2("rm", "mul", "rg", "rn");
			OP2("ns", "add", "an", "rm");
			OP1("n", "tanh", "ns");
			kf_buf_printf(o, "  %%l%d_t%d_omz = sub(%%one, %%l%d_t%d_zg) : f32[1,%d]\n", l, t, l, t, H);
			OP2("a1", "mul", "omz", "n");
			if (t == 0)
				kf_buf_printf(o, "  %%l%d_t0_a2 = mul(%%l%d_t0_zg, %%h0_%d) : f32[1,%d]\n", l, l, l, H);
			else
				kf_buf_printf(o, "  %%l%d_t%d_a2 = mul(%%l%d_t%d_zg, %%l%d_t%d_h) : f32[1,%d]\n", l, t, l, t, l, t - 1, H);
			OP2("h", "add", "a1", "a2");
		}
	}
#undef SL
#undef OP1
#undef OP2
	kf_buf_puts(o, "  %y = concat(");
	for (int t = 0; t < T; t++)
		kf_buf_printf(o, "%s%%l%d_t%d_h", t ? ", " : "", L - 1, t);
	kf_buf_printf(o, ") {axis = 0} : f32[%d,%d]\n  return %%y, %%l%d_t%d_h", T, H, L - 1, T - 1);
	if (lstm)
		kf_buf_printf(o, ", %%l%d_t%d_c", L - 1, T - 1);
	kf_buf_puts(o, "\n}\n");
}

typedef struct emu_case {
	bool lstm;
	int T, IN, H, L;
	const char *upb, *sync; /* KFUSE_PERSISTENT_UPB and _SYNC while emitting; NULL: unset */
	const char *hv, *pf;    /* KFUSE_PERSISTENT_HV and _PF while emitting; NULL: unset */
	int grid, node;         /* blocks; which persistent node (layer) */
	const char *pipe;       /* the pipeline (NULL: "persistent": stacks merged) */
	const char *from, *to;  /* a corruption of the kernel text (NULL: none) */
} emu_case;

/* Inputs as PyTorch initialises an RNN: weights and biases U(-k, k) with
 * k = 1/sqrt(H), the rest U(-1, 1) (N(0, 1) weights make the recurrence
 * chaotic, docs/persistent.md). */
static void rnn_inputs(kf_graph *g, int H, kf_tensor *in)
{
	uint64_t rng = 7;
	const kf_block *b0 = &g->blk[0];
	for (uint32_t i = 0; i < b0->narg; i++) {
		assert_int_equal(kf_tensor_alloc_type(&in[i], kf_vtype(g, b0->arg[i])), 0);
		const char *nm = kf_str(g->ctx, kf_V(g, b0->arg[i])->name);
		double k = nm[0] == 'w' || nm[0] == 'b' ? 1.0 / sqrt((double)H) : 1.0;
		float *d = in[i].data;
		for (int64_t e = 0; e < kf_tensor_numel(&in[i]); e++)
			d[e] = (float)(k * (2.0 * (double)(kf_rng_next(&rng) >> 11) * 0x1p-53 - 1.0));
	}
}

/* The emulated kernel against the interpreter; returns the elements out
 * of tolerance (rtol 1e-4, atol 1e-5), -1 when it cannot run here. */
static int64_t emu_check(const emu_case *e)
{
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	kf_buf text = {0}, log = {0};
	gen_rnn(&text, e->lstm, e->T, e->IN, e->H, e->L);
	kf_buf_putc(&text, 0);
	kf_module *m = parse_text(c, text.p), *m2 = parse_text(c, text.p);
	run_pipe(c, m, &log, e->pipe);
	run_pipe(c, m2, &log, e->pipe);
	kf_graph *g2 = m2->graph[0];
	uint32_t na = g2->blk[0].narg;
	kf_tensor in[64];
	assert_true(na <= 64);
	rnn_inputs(g2, e->H, in);
	char label[96];
	snprintf(label, sizeof label, "%s L=%d T=%d H=%d", e->lstm ? "lstm" : "gru", e->L, e->T, e->H);
	kft_emu x = {.upb = e->upb, .sync = e->sync, .hv = e->hv, .pf = e->pf, .grid = e->grid, .from = e->from,
		     .to = e->to, .label = label};
	int64_t bad = kft_emu_run(m->graph[0], g2, e->node, &x, in);
	for (uint32_t i = 0; i < na; i++)
		kf_tensor_free(&in[i]);
	kf_buf_free(&text);
	kf_buf_free(&log);
	kf_module_free(m);
	kf_module_free(m2);
	kf_ctx_free(c);
	return bad;
}

static void emu_ok(const emu_case *e)
{
	int64_t bad = emu_check(e);
	if (bad >= 0)
		assert_int_equal(bad, 0);
}

/* LSTM, hidden 40 (not a multiple of 32): one unit per block (40 groups
 * over 3 blocks), three units (14 groups over 4 blocks, two gate rows per
 * warp), and the grid-sync variant. */
static void test_emu_lstm(void **st)
{
	(void)st;
	emu_ok(&(emu_case){.lstm = true, .T = 6, .IN = 24, .H = 40, .L = 1, .grid = 3});
	emu_ok(&(emu_case){.lstm = true, .T = 6, .IN = 24, .H = 40, .L = 1, .upb = "3", .grid = 4});
	emu_ok(&(emu_case){.lstm = true, .T = 6, .IN = 24, .H = 40, .L = 1, .sync = "grid", .grid = 3});
}

/* The tuning switches of the hand-off (docs/persistent.md): one h word
 * per load instead of two, no prefetch before the wait; a block per group
 * (every block's states in registers, every load prefetched); and an odd
 * hidden size, where the 16-byte loads do not apply. */
static void test_emu_variants(void **st)
{
	(void)st;
	emu_ok(&(emu_case){.lstm = true, .T = 6, .IN = 24, .H = 40, .L = 1, .hv = "1", .grid = 3});
	emu_ok(&(emu_case){.lstm = true, .T = 6, .IN = 24, .H = 40, .L = 1, .pf = "0", .upb = "3", .grid = 4});
	emu_ok(&(emu_case){.lstm = true, .T = 6, .IN = 24, .H = 32, .L = 1, .upb = "4", .grid = 8});
	emu_ok(&(emu_case){.T = 5, .IN = 20, .H = 35, .L = 1, .upb = "5", .grid = 7});
}

static void test_emu_gru(void **st)
{
	(void)st;
	emu_ok(&(emu_case){.T = 5, .IN = 20, .H = 36, .L = 1, .grid = 5});
	emu_ok(&(emu_case){.T = 5, .IN = 20, .H = 36, .L = 1, .sync = "grid", .upb = "4", .grid = 2});
}

/* Hidden 256 as in the examples: 128 groups of 2 units, the weight rows
 * in registers; and the second layer of a stacked LSTM kept as a node of
 * its own (`persistent{stack=0}`). */
static void test_emu_wide_stacked(void **st)
{
	(void)st;
	emu_ok(&(emu_case){.lstm = true, .T = 3, .IN = 32, .H = 256, .L = 1, .grid = 4});
	emu_ok(&(emu_case){.lstm = true, .T = 4, .IN = 16, .H = 32, .L = 2, .node = 1, .grid = 3,
			   .pipe = "persistent{stack=0}"});
}

/* Stacks as one wavefront kernel (cuda/emit_stack.c): a block per group
 * (few groups: every emulated block is a spinning OS thread);
 * fewer blocks than groups, so that a block's groups lie in different
 * layers (and most read their weights from L2); three layers, a block
 * per group; 16-byte h loads off (odd hidden). */
static void test_emu_stack(void **st)
{
	(void)st;
	emu_ok(&(emu_case){.lstm = true, .T = 4, .IN = 16, .H = 32, .L = 2, .upb = "8", .grid = 8});
	emu_ok(&(emu_case){.lstm = true, .T = 5, .IN = 12, .H = 40, .L = 3, .upb = "3", .grid = 5});
	emu_ok(&(emu_case){.lstm = true, .T = 4, .IN = 16, .H = 36, .L = 3, .upb = "12", .grid = 9});
	emu_ok(&(emu_case){.lstm = true, .T = 3, .IN = 8, .H = 35, .L = 2, .upb = "5", .grid = 4});
}

/* The example's shape: 8 layers of hidden 256, 8 units per group (256
 * groups, each block's rows of both weights in registers), 16 blocks. */
static void test_emu_stack_wide(void **st)
{
	(void)st;
	emu_ok(&(emu_case){.lstm = true, .T = 8, .IN = 256, .H = 256, .L = 8, .grid = 16});
}

/* The check can fail on a stack: a layer that reads the layer below's h
 * of the step before (a dependency off by one). */
static void test_emu_stack_catches_a_bug(void **st)
{
	(void)st;
	int64_t bad = emu_check(&(emu_case){.lstm = true, .T = 4, .IN = 16, .H = 32, .L = 2, .upb = "8", .grid = 8,
					    .from = "[t][kk], tag)", .to = "[t > 0 ? t - 1 : 0][kk], tag)"});
	if (bad >= 0)
		assert_true(bad > 0);
}

/* The check can fail: a kernel whose warp reduction drops partial sums. */
static void test_emu_catches_a_bug(void **st)
{
	(void)st;
	int64_t bad = emu_check(&(emu_case){.lstm = true, .T = 4, .IN = 16, .H = 40, .L = 1, .grid = 2,
					    .from = "acc += __shfl_xor_sync", .to = "acc = __shfl_xor_sync"});
	if (bad >= 0)
		assert_true(bad > 0);
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
		cmocka_unit_test(test_grid_nvrtc),
		cmocka_unit_test(test_emit_batch),
		cmocka_unit_test(test_emu_lstm),
		cmocka_unit_test(test_emu_variants),
		cmocka_unit_test(test_emu_gru),
		cmocka_unit_test(test_emu_wide_stacked),
		cmocka_unit_test(test_emu_catches_a_bug),
		cmocka_unit_test(test_emu_stack),
		cmocka_unit_test(test_emu_stack_wide),
		cmocka_unit_test(test_emu_stack_catches_a_bug),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
