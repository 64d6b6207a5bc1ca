/* The CUDA conv and pool kernels run on the CPU (kf_test_emu.h) against
 * the interpreter: the implicit GEMM on tensor cores (mma.sync f16, bf16,
 * tf32; cp.async rows and element-wise gathers) and on CUDA cores, with
 * bias, per-channel and residual epilogues; the direct kernel of grouped,
 * depthwise and channels-first convs; max and average pools in both
 * layouts.  The emulation is checked first on the matmul kernels, which
 * have run on GPUs.  Skipped without g++. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "emit_conv.h"
#include "equiv.h"
#include "kf_test.h"
#include "kf_test_emu.h"

static char DIR[64];

static int setup(void **st)
{
	snprintf(DIR, sizeof DIR, "/tmp/kf-emu-conv.%d", (int)getpid());
	char cmd[128];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", DIR);
	return system(cmd);
}

static int teardown(void **st)
{
	if (!getenv("KFT_KEEP")) /* KFT_KEEP=1: keep the last kernel's k.cc for a look */
		kft_rmdir(DIR);
	return 0;
}

/* Runs the first kernel-making node of g's body (whose operands are the
 * graph's inputs, in order, and whose result is the graph's) emulated, and
 * the graph on the interpreter, on the same random inputs.  With `from`,
 * the kernel's text has its first `from` replaced by `to` (as long) and
 * must then give wrong results: the check can fail. */
static void check_graph_mut(const char *text, const char *pipeline, double rtol, double atol, uint64_t seed,
			    const char *from, const char *to);

static void check_graph(const char *text, const char *pipeline, double rtol, double atol, uint64_t seed)
{
	check_graph_mut(text, pipeline, rtol, atol, seed, NULL, NULL);
}

static void check_graph_mut(const char *text, const char *pipeline, double rtol, double atol, uint64_t seed,
			    const char *from, const char *to)
{
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse(c, text);
	if (pipeline)
		kft_run_pipe(c, m, pipeline);
	kf_graph *g = m->graph[0];
	kf_nid n = KF_NONE;
	kf_foreach_node(g, 0, x)
		if (n == KF_NONE && kf_N(g, x)->op != KF_OP_CONST)
			n = x;
	kf_kernel k;
	if (kf_emit_node(g, n, &k) != 0)
		kft_fail_diags(c, "emit");
	if (from) {
		char *p = strstr(k.src, from);
		assert_non_null(p);
		assert_int_equal(strlen(from), strlen(to));
		memcpy(p, to, strlen(to));
	}
	const kf_block *b0 = &g->blk[0];
	kf_tensor in[8] = {0}, pin[8] = {0}, want[2] = {0}, got[2] = {0};
	assert_true(b0->narg <= 8 && k.nin <= 8 && k.nout == 1);
	for (uint32_t i = 0; i < b0->narg; i++) {
		const kf_type *t = kf_vtype(g, b0->arg[i]);
		assert_int_equal(kf_tensor_random(&in[i], t->dtype, t->rank, t->dim, &seed), 0);
	}
	for (uint32_t j = 0; j < k.nin; j++) { /* the kernel's parameters are graph inputs */
		uint32_t i = 0;
		while (i < b0->narg && b0->arg[i] != k.in[j])
			i++;
		assert_true(i < b0->narg);
		pin[j] = in[i];
	}
	assert_int_equal(kf_interp_run(g, in, (int)b0->narg, want, 1), 0);
	kft_emu_run(g, &k, pin, got, DIR);
	kf_equiv_stat st;
	kf_equiv_compare(&got[0], &want[0], rtol, atol, &st);
	if (from)
		assert_true(st.nbad > 0);
	else if (st.nbad || st.shape_differs) {
		kf_buf d = {0};
		kf_equiv_describe(&d, &st);
		fail_msg("%s (%s): %.*s\n%s", k.name, kf_kernel_kind_name(k.kind), (int)d.n, d.p, text);
	}
	for (uint32_t i = 0; i < b0->narg; i++)
		kf_tensor_free(&in[i]);
	kf_tensor_free(&want[0]);
	kf_tensor_free(&got[0]);
	kf_kernel_free(&k);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* ---- the emulation itself, on kernels that have run on GPUs ---------------- */

static void emu_matmul(void **st)
{
	if (!kft_have_gxx())
		skip();
	static const char *const tiles[] = {"mma64x64x32w2x2s4", "mma128x64x32w2x2s4", "fma32x32x16t2x2"};
	static const char *const dts[] = {"f16", "bf16", "f32"};
	for (int t = 0; t < 3; t++) {
		setenv("KFUSE_MATMUL_TILE", tiles[t], 1);
		for (int d = 0; d < 3; d++) {
			if (t < 2 && d == 2)
				continue; /* f32 on tensor cores only with tf32: below */
			char text[1024];
			snprintf(text, sizeof text,
				 "graph @mm(%%x: %s[70,40], %%w: %s[40,52], %%b: %s[52]) -> (%s[70,52]) {\n"
				 "  %%m = matmul(%%x, %%w) : %s[70,52]\n  %%a = add(%%m, %%b) : %s[70,52]\n"
				 "  %%y = relu(%%a) : %s[70,52]\n  return %%y\n}\n",
				 dts[d], dts[d], dts[d], dts[d], dts[d], dts[d], dts[d]);
			double tol = d == 1 ? 3e-2 : d == 0 ? 4e-3 : 1e-4;
			check_graph(text, "fuse-matmul", tol, tol, 11 + (uint64_t)t);
		}
	}
	setenv("KFUSE_MATMUL_TILE", "mma64x64x32w2x2s4", 1);
	check_graph("graph @tf(%x: f32[33,24], %w: f32[40,24]) -> (f32[33,40]) {\n"
		    "  %t = transpose(%w) {perm = [1, 0]} : f32[24,40]\n  %m = matmul(%x, %t) : f32[33,40]\n  return %m\n}\n",
		    "fuse-matmul{tf32}", 1e-2, 1e-2, 5);
	unsetenv("KFUSE_MATMUL_TILE");
}

/* A corrupted fragment layout must fail: the check can fail. */
static void emu_catches(void **st)
{
	if (!kft_have_gxx())
		skip();
	kf_ctx *c = kf_ctx_new();
	const char *text = "graph @mm(%x: f16[32,32], %w: f16[32,16]) -> (f16[32,16]) {\n"
			   "  %m = matmul(%x, %w) : f16[32,16]\n  return %m\n}\n";
	kf_module *m = kft_parse(c, text);
	setenv("KFUSE_MATMUL_TILE", "mma32x16x32w2x1s2", 1);
	kf_graph *g = m->graph[0];
	kf_kernel k;
	kf_nid n = g->blk[0].first;
	assert_int_equal(kf_emit_node(g, n, &k), 0);
	unsetenv("KFUSE_MATMUL_TILE");
	/* swap the two halves of each accumulator pair: wrong columns */
	char *p = strstr(k.src, "q * 2 + (h & 1)");
	assert_non_null(p);
	memcpy(p, "q * 2 + (h ^ 1)", 15);
	uint64_t seed = 3;
	kf_tensor in[2] = {0}, want[1] = {0}, got[1] = {0};
	for (int i = 0; i < 2; i++) {
		const kf_type *t = kf_vtype(g, g->blk[0].arg[i]);
		assert_int_equal(kf_tensor_random(&in[i], t->dtype, t->rank, t->dim, &seed), 0);
	}
	assert_int_equal(kf_interp_run(g, in, 2, want, 1), 0);
	kft_emu_run(g, &k, in, got, DIR);
	kf_equiv_stat s;
	kf_equiv_compare(&got[0], &want[0], 4e-3, 4e-3, &s);
	assert_true(s.nbad > 0);
	for (int i = 0; i < 2; i++)
		kf_tensor_free(&in[i]);
	kf_tensor_free(&want[0]);
	kf_tensor_free(&got[0]);
	kf_kernel_free(&k);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* ---- conv kernels ------------------------------------------------------------ */

typedef struct conv_case {
	const char *dt;
	bool cl;
	int nsp, N, C, O, G;
	int in[3], k[3], s[3], d[3], pb[3], pe[3];
	int epi;          /* 0: none; 1: bias; 2: bias, per-channel scale, residual, relu;
			   * 3: bias, relu6 (max 0, min 6); 4: bias, silu */
	const char *tile; /* KFUSE_CONV_TILE, or NULL */
	bool tf32;
	const char *dw;   /* KFUSE_DEPTHWISE (the depthwise kernel's choices), or NULL */
} conv_case;

static void shape_text(char *o, size_t n, const char *dt, int N, int C, int nsp, const int *sp, bool cl)
{
	int k = snprintf(o, n, "%s[%d", dt, N);
	if (!cl)
		k += snprintf(o + k, n - (size_t)k, ",%d", C);
	for (int i = 0; i < nsp; i++)
		k += snprintf(o + k, n - (size_t)k, ",%d", sp[i]);
	if (cl)
		k += snprintf(o + k, n - (size_t)k, ",%d", C);
	snprintf(o + k, n - (size_t)k, "]");
}

static void list_text(char *o, size_t n, const int *a, int cnt, const int *b)
{
	int k = snprintf(o, n, "[");
	for (int i = 0; i < cnt; i++)
		k += snprintf(o + k, n - (size_t)k, "%s%d", i ? ", " : "", a[i]);
	for (int i = 0; b && i < cnt; i++)
		k += snprintf(o + k, n - (size_t)k, ", %d", b[i]);
	snprintf(o + k, n - (size_t)k, "]");
}

/* The graph of case cc: a conv fusion over x, w and the epilogue's operands. */
static void conv_text(const conv_case *cc, char *text, size_t size)
{
	int out[3], Cg = cc->C / cc->G;
	for (int i = 0; i < cc->nsp; i++)
		out[i] = (cc->in[i] + cc->pb[i] + cc->pe[i] - cc->d[i] * (cc->k[i] - 1) - 1) / cc->s[i] + 1;
	char xt[96], wt[96], yt[96], bt[32], st[64], ss[64], pp[64], dd[64];
	shape_text(xt, sizeof xt, cc->dt, cc->N, cc->C, cc->nsp, cc->in, cc->cl);
	shape_text(yt, sizeof yt, cc->dt, cc->N, cc->O, cc->nsp, out, cc->cl);
	shape_text(wt, sizeof wt, cc->dt, cc->O, Cg, cc->nsp, cc->k, cc->cl); /* [O, Cg, K..] or [O, K.., Cg] */
	snprintf(bt, sizeof bt, "%s[%d]", cc->dt, cc->O);
	/* the per-channel scale: [O] channels last, [O, 1, ..] first */
	int k = snprintf(st, sizeof st, "%s[%d", cc->dt, cc->O);
	for (int i = 0; !cc->cl && i < cc->nsp; i++)
		k += snprintf(st + k, sizeof st - (size_t)k, ",1");
	snprintf(st + k, sizeof st - (size_t)k, "]");
	list_text(ss, sizeof ss, cc->s, cc->nsp, NULL);
	list_text(pp, sizeof pp, cc->pb, cc->nsp, cc->pe);
	list_text(dd, sizeof dd, cc->d, cc->nsp, NULL);
	/* the operands: x, w, then the bias, the scale and the residual */
	const char *ty[5] = {xt, wt, bt, st, yt}, *nm[5] = {"x", "w", "b", "s", "r"};
	int nops = cc->epi == 2 ? 5 : cc->epi ? 3 : 2;
	char args[512] = "", ops[128] = "", bargs[512] = "";
	for (int i = 0; i < nops; i++) {
		snprintf(args + strlen(args), sizeof args - strlen(args), "%s%%%s: %s", i ? ", " : "", nm[i], ty[i]);
		snprintf(ops + strlen(ops), sizeof ops - strlen(ops), "%s%%%s", i ? ", " : "", nm[i]);
		snprintf(bargs + strlen(bargs), sizeof bargs - strlen(bargs), "%s%%%d: %s", i ? ", " : "", i, ty[i]);
	}
	int n = snprintf(text, size,
			 "graph @c(%s) -> (%s) {\n  %%y = fusion @c0(%s) {kind = \"conv\"%s} : %s {\n  ^(%s):\n"
			 "    %%c = conv(%%0, %%1%s) {%sdilations = %s, group = %d, pads = %s, strides = %s} : %s\n",
			 args, yt, ops, cc->tf32 ? ", tf32 = true" : "", yt, bargs, cc->epi ? ", %2" : "",
			 cc->cl ? "channels_last = true, " : "", dd, cc->G, pp, ss, yt);
	if (cc->epi == 2)
		n += snprintf(text + n, size - (size_t)n,
			      "    %%m = mul(%%c, %%3) : %s\n    %%a = add(%%m, %%4) : %s\n    %%z = relu(%%a) : %s\n"
			      "    yield %%z\n  }\n  return %%y\n}\n", yt, yt, yt);
	else if (cc->epi == 3)
		n += snprintf(text + n, size - (size_t)n,
			      "    %%k = const 6.0 : %s[]\n    %%z = const 0.0 : %s[]\n    %%h = max(%%c, %%z) : %s\n"
			      "    %%l = min(%%h, %%k) : %s\n    yield %%l\n  }\n  return %%y\n}\n", cc->dt, cc->dt, yt, yt);
	else if (cc->epi == 4)
		n += snprintf(text + n, size - (size_t)n, "    %%s = silu(%%c) : %s\n    yield %%s\n  }\n  return %%y\n}\n", yt);
	else
		n += snprintf(text + n, size - (size_t)n, "    yield %%c\n  }\n  return %%y\n}\n");
	assert_true(n < (int)size);
}

static void check_conv(const conv_case *cc, uint64_t seed)
{
	char text[4096];
	conv_text(cc, text, sizeof text);
	if (cc->tile)
		setenv("KFUSE_CONV_TILE", cc->tile, 1);
	if (cc->dw)
		setenv("KFUSE_DEPTHWISE", cc->dw, 1);
	bool lowp = !strcmp(cc->dt, "f16") || !strcmp(cc->dt, "bf16") || cc->tf32;
	double tol = !strcmp(cc->dt, "bf16") ? 3e-2 : lowp ? 6e-3 : 1e-4;
	check_graph(text, NULL, tol, tol, seed);
	unsetenv("KFUSE_CONV_TILE");
	unsetenv("KFUSE_DEPTHWISE");
}

static void conv_gemm(void **st)
{
	if (!kft_have_gxx())
		skip();
	/* tensor cores: 16-byte row copies (C % 8 == 0) and element gathers
	 * (C = 3), strides, asymmetric pads, dilations, 1-D and 3-D, tiles
	 * that cover the output unevenly, every epilogue */
	conv_case cs[] = {
		{"f16", true, 2, 2, 16, 24, 1, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, "mma64x64x32w2x2s4"},
		{"f16", true, 2, 1, 8, 64, 1, {10, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 0}, {0, 1}, 1, "mma128x64x32w2x2s4"},
		{"f16", true, 2, 1, 3, 16, 1, {11, 9}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}, 1, "mma64x64x32w2x2s4"},
		{"bf16", true, 2, 2, 16, 32, 1, {6, 6}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 2, "mma64x64x32w2x2s4"},
		{"f16", true, 1, 2, 24, 16, 1, {13}, {5}, {2}, {1}, {2}, {1}, 1, "mma64x64x32w2x2s4"},
		{"f16", true, 3, 1, 8, 16, 1, {4, 5, 5}, {3, 3, 3}, {1, 2, 1}, {1, 1, 1}, {1, 1, 1}, {1, 0, 1}, 2, "mma64x64x32w2x2s4"},
		{"f32", true, 2, 1, 8, 24, 1, {7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, "mma64x64x32w2x2s4", true},
		{"f32", true, 2, 2, 5, 7, 1, {6, 7}, {3, 2}, {2, 1}, {1, 2}, {1, 0}, {2, 1}, 2, "fma32x32x16t2x2"},
		{"f16", true, 2, 1, 16, 8, 1, {5, 5}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 0, "fma32x32x16t2x2"},
		{"f64", true, 2, 1, 4, 6, 1, {5, 6}, {3, 3}, {1, 2}, {1, 1}, {1, 1}, {1, 1}, 1, NULL},
		{"f16", true, 2, 2, 32, 40, 1, {8, 8}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 2, NULL},
		/* small maps (batch 1, 3 x 3): the heuristic's small tiles */
		{"f16", true, 2, 1, 64, 96, 1, {5, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 2, NULL},
		{"bf16", true, 2, 1, 16, 24, 1, {3, 3}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, "mma32x32x32w1x1s4"},
		/* split along K: 3 splits of 7, 7 and 4 K tiles, summed by the
		 * tile's last block, then every epilogue */
		{"f16", true, 2, 1, 72, 40, 1, {4, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, "mma64x64x32w2x2s4k3"},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
		check_conv(&cs[i], 100 + i);
}

static void conv_direct(void **st)
{
	if (!kft_have_gxx())
		skip();
	conv_case cs[] = {
		/* depthwise, channel multiplier 1 and 2; 16-byte vectors of
		 * channels (f16 x 8, f32 x 4, bf16) or one at a time (C = 6) */
		{"f16", true, 2, 2, 16, 16, 16, {9, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 2, NULL},
		{"f16", true, 2, 1, 24, 24, 24, {7, 7}, {7, 7}, {1, 1}, {1, 1}, {3, 3}, {3, 3}, 1, NULL},
		{"f32", true, 2, 2, 8, 8, 8, {6, 5}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 2, NULL},
		{"bf16", true, 1, 1, 16, 16, 16, {9}, {3}, {2}, {1}, {1}, {0}, 0, NULL},
		{"f32", true, 2, 1, 6, 12, 6, {7, 7}, {5, 5}, {1, 1}, {2, 1}, {4, 2}, {4, 2}, 1, NULL},
		/* grouped */
		{"f32", true, 2, 2, 8, 12, 4, {6, 5}, {3, 3}, {1, 2}, {1, 1}, {1, 0}, {1, 1}, 2, NULL},
		{"bf16", true, 1, 1, 6, 9, 3, {11}, {3}, {1}, {3}, {3}, {3}, 1, NULL},
		/* channels first: the direct kernel, any group */
		{"f32", false, 2, 2, 4, 6, 1, {7, 6}, {3, 3}, {2, 1}, {1, 1}, {1, 0}, {1, 1}, 2, NULL},
		{"f16", false, 2, 1, 6, 6, 3, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL},
		{"f32", false, 3, 1, 2, 4, 2, {3, 4, 4}, {2, 3, 3}, {1, 1, 2}, {1, 1, 1}, {0, 1, 1}, {1, 1, 0}, 0, NULL},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
		check_conv(&cs[i], 200 + i);
}

/* The depthwise kernel (a block's weights in shared memory, a thread R
 * outputs along W of one 16-byte channel vector): 7x7 and 3x3 (ConvNeXt's
 * and MobileNet's), strides whose last tile passes the row's end, a
 * dilation, strides that skip input vectors, channel vectors that are no
 * power of two (24) or one, batches, 1-D and 3-D, every dtype, every
 * epilogue, and the block shapes $KFUSE_DEPTHWISE forces: several channel
 * slices, several trips, blocks whose last tiles are past the output. */
static void conv_depthwise(void **st)
{
	if (!kft_have_gxx())
		skip();
	conv_case cs[] = {
		{"f16", true, 2, 2, 24, 24, 24, {6, 9}, {7, 7}, {1, 1}, {1, 1}, {3, 3}, {3, 3}, 1, NULL},
		{"f16", true, 2, 1, 192, 192, 192, {4, 5}, {7, 7}, {1, 1}, {1, 1}, {3, 3}, {3, 3}, 2, NULL},
		{"f16", true, 2, 2, 16, 16, 16, {11, 13}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1, NULL},
		{"f16", true, 2, 2, 16, 16, 16, {11, 13}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 2, NULL, false, "r3"},
		{"f32", true, 2, 2, 12, 12, 12, {7, 10}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 2, NULL},
		{"f16", true, 2, 3, 8, 8, 8, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL},
		{"bf16", true, 2, 2, 8, 8, 8, {7, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {0, 1}, 2, NULL},
		{"bf16", true, 2, 1, 24, 24, 24, {6, 7}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 2, NULL},
		{"f16", true, 1, 2, 16, 16, 16, {19}, {5}, {1}, {1}, {2}, {2}, 1, NULL},
		{"f32", true, 1, 1, 8, 8, 8, {17}, {3}, {2}, {2}, {2}, {1}, 0, NULL},
		{"f32", true, 1, 1, 4, 4, 4, {20}, {2}, {3}, {1}, {0}, {1}, 1, NULL, false, "r4"},
		{"f16", true, 3, 1, 8, 8, 8, {4, 5, 6}, {3, 3, 3}, {1, 2, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1, NULL},
		{"f64", true, 2, 1, 4, 4, 4, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, NULL},
		{"f16", true, 2, 2, 48, 48, 48, {7, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, NULL, false, "r3c2p3t2"},
		{"f32", true, 2, 1, 16, 16, 16, {9, 6}, {3, 3}, {2, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "c1p5t3r2"},
		/* weights past the shared memory (1331 taps): the generic direct kernel */
		{"f16", true, 3, 1, 8, 8, 8, {11, 11, 11}, {11, 11, 11}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, 1, NULL},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
		check_conv(&cs[i], 400 + i); /* these small convs: the vector kernel, unless forced */
		if (!cs[i].dw) {             /* and the tiled kernel with its own choices */
			conv_case t = cs[i];
			t.dw = "";
			check_conv(&t, 450 + i);
		}
	}
}

/* The rows kernel (a thread VT channels x RC columns, down a strip of R
 * output rows, weights in registers), forced by $KFUSE_DEPTHWISE "rows"
 * (its own shape) or "rows:v<VT>x<RC>h<R>..": 3x3 and 5x5, strides 1 and
 * 2, pads 0, 1, 2 and asymmetric, a dilation, odd sizes that the strips
 * and column groups do not divide (and a strip taller than the image),
 * 8 to 144 channels, batches 1 and 2, 16-, 8- and 4-byte loads and stores
 * (and pairs forced), f16, bf16, f32, 1-D; bias with ReLU, ReLU6, SiLU, a
 * per-channel scale and residual add; 0 to 4 input rows loaded ahead
 * (f<PF>), a stride past the taps' reach. */
static const conv_case dw_rows_cases[] = {
	{"f16", true, 2, 2, 16, 16, 16, {11, 13}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "rows"},
	{"f16", true, 2, 1, 24, 24, 24, {9, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 3, NULL, false, "rows:v8x1h4"},
	{"f16", true, 2, 2, 8, 8, 8, {11, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 2, NULL, false, "rows:v4x2h3f4"},
	{"f16", true, 2, 1, 144, 144, 144, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 4, NULL, false, "rows"},
	{"f16", true, 2, 2, 16, 16, 16, {9, 11}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 1, NULL, false, "rows:v2x3h5f3"},
	{"f16", true, 2, 1, 24, 24, 24, {13, 12}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}, 3, NULL, false, "rows:v4x2h4"},
	{"f16", true, 2, 1, 16, 16, 16, {8, 9}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 0, NULL, false, "rows:v8x2h2"},
	{"f16", true, 2, 2, 8, 8, 8, {10, 9}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 1, NULL, false, "rows:v4x2h3"},
	{"f16", true, 2, 1, 16, 16, 16, {10, 10}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 2, NULL, false, "rows:v2x1h2"},
	{"f16", true, 2, 1, 8, 8, 8, {5, 6}, {3, 3}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 4, NULL, false, "rows:v8x1h3"},
	{"f16", true, 2, 2, 16, 16, 16, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "rows:v4x1h8s4f2"},
	{"f16", true, 2, 1, 32, 32, 32, {6, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 3, NULL, false, "rows:v8x2h2c2p3f1"},
	{"bf16", true, 2, 1, 16, 16, 16, {7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "rows"},
	{"f32", true, 2, 1, 8, 8, 8, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, NULL, false, "rows"},
	{"f32", true, 2, 1, 12, 12, 12, {7, 5}, {5, 5}, {2, 1}, {1, 1}, {2, 2}, {2, 2}, 1, NULL, false, "rows:v2x2h2"},
	{"f16", true, 1, 2, 16, 16, 16, {19}, {5}, {1}, {1}, {2}, {2}, 1, NULL, false, "rows"},
	/* stride 4 over 3 taps: input rows no output reads, loaded ahead or not */
	{"f16", true, 2, 1, 16, 16, 16, {14, 13}, {3, 3}, {4, 4}, {1, 1}, {1, 1}, {0, 0}, 1, NULL, false, "rows:v4x2h3f2"},
	{"f16", true, 2, 1, 16, 16, 16, {14, 13}, {3, 3}, {4, 4}, {1, 1}, {1, 1}, {0, 0}, 2, NULL, false, "rows:v8x1h2f0"},
};

/* Case cc's kernel (its KFUSE_DEPTHWISE) with `from` replaced by `to`
 * must give wrong results: the depthwise checks can fail. */
static void check_dw_mut(const conv_case *cc, uint64_t seed, const char *from, const char *to)
{
	char text[4096];
	conv_text(cc, text, sizeof text);
	setenv("KFUSE_DEPTHWISE", cc->dw, 1);
	check_graph_mut(text, NULL, 6e-3, 6e-3, seed, from, to);
	unsetenv("KFUSE_DEPTHWISE");
}

static void conv_depthwise_rows(void **st)
{
	if (!kft_have_gxx())
		skip();
	for (size_t i = 0; i < sizeof dw_rows_cases / sizeof *dw_rows_cases; i++)
		check_conv(&dw_rows_cases[i], 600 + i);
	/* and they can fail: each output row stored one input row early (before
	 * its last tap row is in), or the strip's input one column off */
	static const char *const muts[][2] = {{"if (i != r * 1 + 2) continue;", "if (i != r * 1 + 1) continue;"},
					      {"iw0 = ow0 * 1 - 1;", "iw0 = ow0 * 1 - 0;"}};
	for (int m = 0; m < 2; m++)
		check_dw_mut(&dw_rows_cases[0], 600, muts[m][0], muts[m][1]);
}

/* The band kernel (the rows kernel's walk over a band of input a block
 * copies into shared memory with cp.async), forced by $KFUSE_DEPTHWISE
 * "band" (its own plan) or "band:v<VT>x<RC>h<R>c<CSV>b<MB>": 3x3 and 5x5,
 * strides 1, 2 and 4, pads 0 to 2 and asymmetric, a dilation, bands that
 * the image's rows do not divide, several slices of channels and column
 * groups a thread, f16, bf16, f32, 1-D; the epilogues of the rows cases. */
static const conv_case dw_band_cases[] = {
	{"f16", true, 2, 2, 16, 16, 16, {11, 13}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "band"},
	{"f16", true, 2, 1, 24, 24, 24, {9, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 3, NULL, false, "band:v8h4c8"},
	{"f16", true, 2, 2, 32, 32, 32, {11, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 2, NULL, false, "band:v4x2h3c16"},
	{"f16", true, 2, 1, 144, 144, 144, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 4, NULL, false, "band"},
	{"f16", true, 2, 2, 16, 16, 16, {9, 11}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 1, NULL, false, "band:v2x3h5"},
	{"f16", true, 2, 1, 24, 24, 24, {13, 12}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}, 3, NULL, false, "band"},
	{"f16", true, 2, 1, 16, 16, 16, {8, 9}, {3, 3}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 0, NULL, false, "band:h2"},
	{"f16", true, 2, 2, 8, 8, 8, {10, 9}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 1, NULL, false, "band:h3"},
	{"f16", true, 2, 1, 16, 16, 16, {10, 10}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 2, NULL, false, "band"},
	{"f16", true, 2, 1, 16, 16, 16, {14, 13}, {3, 3}, {4, 4}, {1, 1}, {1, 1}, {0, 0}, 1, NULL, false, "band:x2h3"},
	{"f16", true, 2, 1, 32, 32, 32, {30, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, NULL, false, "band:c8h2"},
	{"bf16", true, 2, 1, 16, 16, 16, {7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "band"},
	{"f32", true, 2, 1, 8, 8, 8, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, NULL, false, "band"},
	{"f32", true, 2, 1, 12, 12, 12, {7, 5}, {5, 5}, {2, 1}, {1, 1}, {2, 2}, {2, 2}, 1, NULL, false, "band:v2x2h2c4"},
	{"f16", true, 1, 2, 16, 16, 16, {19}, {5}, {1}, {1}, {2}, {2}, 1, NULL, false, "band"},
	/* d1, the double-buffered walk: 3 or 5 blocks a slice over 12 to 20
	 * bands (several rounds, the last partial), two slices, 5x5 at stride
	 * 2, bf16, and every band its own block (g past the bands) */
	{"f16", true, 2, 2, 16, 16, 16, {11, 13}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "band:h2d1g3"},
	{"f16", true, 2, 1, 32, 32, 32, {10, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, NULL, false, "band:h1c16d1g5"},
	{"f16", true, 2, 1, 24, 24, 24, {13, 12}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}, 3, NULL, false, "band:h2d1g2"},
	{"bf16", true, 2, 1, 16, 16, 16, {7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "band:h1d1g4"},
	{"f16", true, 2, 1, 16, 16, 16, {9, 11}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 1, NULL, false, "band:h3d1g64"},
	/* the band copied in stages of rows, each waited for as the walk
	 * reaches it: 2 to 8 stages (more stages than a band has rows: empty
	 * ones), several column groups a thread, a partial last band, 5x5 at
	 * stride 2, rows no output reads (stride 4), bf16 */
	{"f16", true, 2, 2, 16, 16, 16, {11, 13}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "band:h8s3"},
	{"f16", true, 2, 1, 24, 24, 24, {13, 12}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}, 3, NULL, false, "band:s2"},
	{"f16", true, 2, 1, 16, 16, 16, {9, 11}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 1, NULL, false, "band:h5s4"},
	{"f16", true, 2, 1, 16, 16, 16, {14, 13}, {3, 3}, {4, 4}, {1, 1}, {1, 1}, {0, 0}, 1, NULL, false, "band:x2h3s3"},
	{"f16", true, 2, 1, 32, 32, 32, {30, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, NULL, false, "band:c8h2s8"},
	{"bf16", true, 2, 1, 16, 16, 16, {7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "band:s2"},
};

static void conv_depthwise_band(void **st)
{
	if (!kft_have_gxx())
		skip();
	for (size_t i = 0; i < sizeof dw_band_cases / sizeof *dw_band_cases; i++)
		check_conv(&dw_band_cases[i], 700 + i);
	/* and they can fail: the band's rows one off, or its columns */
	static const char *const muts[][2] = {{"ih0 = oh0 * 1 - 1,", "ih0 = oh0 * 1 - 0,"}, {"iw0 = -1;", "iw0 = -0;"}};
	for (int m = 0; m < 2; m++)
		check_dw_mut(&dw_band_cases[0], 700, muts[m][0], muts[m][1]);
	/* the walk's: the next band into the buffer being read, or the
	 * buffers never swapped */
	static const char *const wmuts[][2] = {{"kf_band + (t ^ 1) *", "kf_band + (t ^ 0) *"},
					       {"u += G, t ^= 1", "u += G, t ^= 0"}};
	size_t w = sizeof dw_band_cases / sizeof *dw_band_cases - 11;
	for (int m = 0; m < 2; m++)
		check_dw_mut(&dw_band_cases[w], 720, wmuts[m][0], wmuts[m][1]);
	/* the stages': the first stage's wait also taken for the second (its
	 * rows read before they land: the emulated cp.async lands at the wait) */
	size_t s3 = sizeof dw_band_cases / sizeof *dw_band_cases - 6;
	check_dw_mut(&dw_band_cases[s3], 730, "else if (i == 4) kf_cp_wait<1>();", "else if (i == 4) kf_cp_wait<2>();");
}

/* The Toeplitz tensor-core kernel (emit_depthwise_toep.c), forced by
 * "toep" or "toep:h<R>c<CSV>w<NW>b<MB>": 3x3, 5x5, 7x7 and 9x9, strides
 * and dilations down and along the image (one and two 16-column steps), asymmetric pads, images narrower than a
 * segment and wider than two tiles, a partial last band, 8 and 16
 * channels a block and several slices, one warp for many channels, a 1-D
 * conv, f16 and bf16, every epilogue. */
static const conv_case dw_toep_cases[] = {
	{"f16", true, 2, 2, 16, 16, 16, {11, 13}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "toep"},
	{"f16", true, 2, 1, 32, 32, 32, {9, 20}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 2, NULL, false, "toep"},
	{"f16", true, 2, 2, 48, 48, 48, {13, 12}, {5, 5}, {2, 1}, {1, 1}, {2, 2}, {2, 2}, 3, NULL, false, "toep:h3c16"},
	{"f16", true, 2, 1, 16, 16, 16, {10, 9}, {3, 3}, {1, 1}, {2, 1}, {2, 1}, {2, 1}, 4, NULL, false, "toep:h4"},
	{"f16", true, 2, 1, 24, 24, 24, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {0, 2}, {1, 0}, 1, NULL, false, "toep"},
	{"f16", true, 2, 1, 64, 64, 64, {7, 37}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 0, NULL, false, "toep:h5c32w2"},
	{"f16", true, 2, 2, 16, 16, 16, {9, 14}, {7, 7}, {1, 1}, {1, 1}, {3, 3}, {3, 3}, 2, NULL, false, "toep:h2c8w1"},
	{"f16", true, 2, 1, 8, 8, 8, {12, 11}, {9, 9}, {1, 1}, {1, 1}, {4, 4}, {4, 4}, 1, NULL, false, "toep"},
	{"f16", true, 1, 2, 16, 16, 16, {19}, {5}, {1}, {1}, {2}, {2}, 1, NULL, false, "toep"},
	{"bf16", true, 2, 2, 16, 16, 16, {9, 8}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 2, NULL, false, "toep"},
	{"bf16", true, 2, 1, 32, 32, 32, {6, 17}, {3, 3}, {2, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "toep:h2c16"},
	/* along W: stride 2 (two 16-column steps from 7x7), a dilation */
	{"f16", true, 2, 2, 16, 16, 16, {13, 14}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1, NULL, false, "toep"},
	{"f16", true, 2, 1, 32, 32, 32, {15, 17}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}, 2, NULL, false, "toep:h3"},
	{"f16", true, 2, 1, 8, 8, 8, {16, 19}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}, 1, NULL, false, "toep"},
	{"f16", true, 2, 1, 16, 16, 16, {7, 20}, {3, 3}, {1, 2}, {1, 1}, {1, 0}, {1, 1}, 4, NULL, false, "toep"},
	{"bf16", true, 2, 1, 16, 16, 16, {12, 21}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 3, NULL, false, "toep"},
	/* a band no default plan fits (19 input rows x 88 columns x 16
	 * channels: 53 KiB at one row; S22d's random layer 2): forced, the
	 * override's bounds */
	{"f16", true, 2, 1, 16, 16, 16, {21, 72}, {7, 1}, {1, 1}, {3, 1}, {4, 1}, {4, 1}, 1, NULL, false, "toep"},
};

static void conv_depthwise_toep(void **st)
{
	if (!kft_have_gxx())
		skip();
	for (size_t i = 0; i < sizeof dw_toep_cases / sizeof *dw_toep_cases; i++)
		check_conv(&dw_toep_cases[i], 780 + i);
	/* and they can fail: T one column off, the band a column off, the
	 * second half of a tile's segments at the first half's input columns,
	 * a channel's results in its neighbour's stagger */
	static const char *const muts[][2] = {{"2 * t - 1 * g + 8;", "2 * t - 1 * g + 9;"},
					      {"iw = cl - 1;", "iw = cl - 0;"},
					      {"(lane >> 4) * 8;", "(lane >> 4) * 0;"},
					      {"(c >> 3 & 3) * 8;", "(c >> 3 & 1) * 8;"},
					      {"a[j] = f.x, a1[j] = f.y;", "a[j] = f.x, a1[j] = f.x;"}};
	for (int m = 0; m < 5; m++)
		check_dw_mut(&dw_toep_cases[m == 3 ? 5 : 0], 800, muts[m][0], muts[m][1]);
}

/* The Toeplitz kernel on geometries nobody here chose: 12 draws of a
 * fixed xorshift (channels 8 to 48, kernels 1 to 9 each way, strides and
 * dilations 1 to 3 down the image, along it those whose 8 outputs read at
 * most 32 columns, pads 0 to 4 each side, images 1 to 24 each way,
 * batches 1 to 3, any epilogue, f16 or bf16), each with drawn knobs (rows
 * a band, channels and warps a block), against the interpreter. */
static void conv_depthwise_toep_random(void **st)
{
	if (!kft_have_gxx())
		skip();
	uint64_t x = 0x2545f4914f6cdd1dull;
#define DRAW(n) (x ^= x << 13, x ^= x >> 7, x ^= x << 17, (int)(x % (uint64_t)(n)))
	for (int i = 0; i < 12;) {
		conv_case cc = {DRAW(3) ? "f16" : "bf16", true, 2, 1 + DRAW(3), 8 * (1 + DRAW(6))};
		cc.O = cc.G = cc.C;
		for (int a = 0; a < 2; a++) {
			cc.k[a] = 1 + DRAW(9), cc.s[a] = 1 + DRAW(3), cc.d[a] = 1 + DRAW(3);
			cc.pb[a] = DRAW(5), cc.pe[a] = DRAW(5), cc.in[a] = 1 + DRAW(24);
		}
		cc.epi = DRAW(5);
		int span = 7 * cc.s[1] + (cc.k[1] - 1) * cc.d[1] + 1, ok = span <= 32;
		for (int a = 0; a < 2; a++)
			ok &= cc.in[a] + cc.pb[a] + cc.pe[a] >= cc.d[a] * (cc.k[a] - 1) + 1;
		int csv = cc.C % 16 == 0 && DRAW(2) ? 16 : 8, nw = csv >> DRAW(4);
		char dw[48];
		snprintf(dw, sizeof dw, "toep:h%dc%dw%d", 1 + DRAW(6), csv, nw);
		cc.dw = dw;
		if (!ok) /* toep refuses these (the emitter's own test) */
			continue;
		check_conv(&cc, 900 + (uint64_t)i++);
	}
#undef DRAW
}

/* Emits case cc's kernel into k (KFUSE_DEPTHWISE = dw); kf_emit_node's result. */
static int emit_case(const conv_case *cc, const char *dw, kf_kernel *k)
{
	char text[4096];
	conv_text(cc, text, sizeof text);
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse(c, text);
	kf_graph *g = m->graph[0];
	if (dw)
		setenv("KFUSE_DEPTHWISE", dw, 1);
	int rc = kf_emit_node(g, g->blk[0].first, k);
	unsetenv("KFUSE_DEPTHWISE");
	kf_module_free(m);
	kf_ctx_free(c);
	return rc;
}

/* Which kernel a depthwise conv gets, and its launch: weights through
 * shared memory; the generic kernel when they do not fit; a block of
 * CS x P threads, NS x ceil(Q / (P TR)) blocks; a bad $KFUSE_DEPTHWISE
 * an error. */
static void depthwise_plan(void **st)
{
	conv_case dw = {"f16", true, 2, 32, 192, 192, 192, {28, 28}, {7, 7}, {1, 1}, {1, 1}, {3, 3}, {3, 3}, 1, NULL};
	kf_kernel k;
	unsetenv("KFUSE_DEPTHWISE"); /* a failed check_conv may have left it */
	/* ConvNeXt-T's 7x7 of 192 channels at 28x28, batch 32: by default the
	 * Toeplitz kernel, 16 channels (8 warps, two a warp) of 14 rows a
	 * block: 20 input rows of 40 columns a channel (3 x 8 + 16; 5 16-byte
	 * units, odd), 4 tiles of the 56 segments; the result tile (16 x 512
	 * floats) over the band, then 16 x 7 x 24 weight pairs */
	assert_int_equal(emit_case(&dw, NULL, &k), 0);
	assert_non_null(strstr(k.src, "depthwise toep: 14 rows x 28 columns x 16 channels a block (20 x 40 inputs a channel), "
				      "4 tiles of 16 segments a channel, 256 threads"));
	assert_int_equal(k.block, 256);
	assert_int_equal(k.units, 12 * 32 * 2);
	assert_int_equal(k.smem, (16 * 512 + 24) * 4 + 16 * 7 * 24 * 4);
	kf_kernel_free(&k);
	/* f32: the tiled kernel (the Toeplitz one takes f16 and bf16) */
	conv_case dw32 = dw;
	dw32.dt = "f32";
	assert_int_equal(emit_case(&dw32, NULL, &k), 0);
	assert_non_null(strstr(k.src, "kf_w["));
	kf_kernel_free(&k);
	/* forced to the Toeplitz kernel where it cannot run: f32; 8 outputs
	 * along W reading 43 columns (9x9 at stride 3: 7 x 3 + 8 x 2 + 1
	 * with dilation 2 along W); knobs past its bounds */
	assert_int_not_equal(emit_case(&dw32, "toep", &k), 0);
	conv_case wide = dw;
	wide.s[1] = 3, wide.d[1] = 2, wide.k[0] = wide.k[1] = 9;
	assert_int_not_equal(emit_case(&wide, "toep", &k), 0);
	assert_int_not_equal(emit_case(&dw, "toep:c20", &k), 0); /* not whole vectors of 8 */
	assert_int_not_equal(emit_case(&dw, "toep:w3", &k), 0);  /* 3 warps do not share 16 channels */
	assert_int_not_equal(emit_case(&dw, "toep:q1", &k), 0);  /* no such knob */
	/* forced (set but empty), the tiled kernel's own choices */
	assert_int_equal(emit_case(&dw, "", &k), 0);
	assert_non_null(strstr(k.src, "__shared__ __align__(16) float kf_w[9408]")); /* 49 taps x 192 channels */
	assert_null(strstr(k.src, "ow0 + r >=")); /* R = 4 divides 28: no row-end guard */
	assert_int_equal(k.block, 240); /* 24 vectors x 10 tiles */
	assert_int_equal(k.units, (32 * 28 * 7 + 9) / 10);
	kf_kernel_free(&k);
	/* batch 1 (150528 outputs, under 2^19): the vector kernel, no shared weights */
	conv_case small = dw;
	small.N = 1;
	assert_int_equal(emit_case(&small, NULL, &k), 0);
	assert_null(strstr(k.src, "__shared__"));
	kf_kernel_free(&k);
	assert_int_equal(emit_case(&small, "", &k), 0); /* $KFUSE_DEPTHWISE set: the tiled one */
	assert_non_null(strstr(k.src, "kf_w["));
	kf_kernel_free(&k);
	assert_int_equal(emit_case(&dw, "r3c8p4t2", &k), 0); /* 3 slices of 8 vectors; 28 = 9 x 3 + 1 */
	assert_int_equal(k.block, 32);
	assert_int_equal(k.units, 3 * ((32 * 28 * 10 + 7) / 8));
	assert_non_null(strstr(k.src, "if (ow0 + r >= 28) break;"));
	kf_kernel_free(&k);
	assert_int_not_equal(emit_case(&dw, "c5", &k), 0); /* 5 does not divide 24 */
	assert_int_not_equal(emit_case(&dw, "r9", &k), 0);
	/* MobileNetV2's 32-channel 3x3 at 112x112, batch 32: by default the
	 * band kernel (stride 1; faster there on the H200, s13a), bands of 4
	 * rows (6 x 114 x 32 f16 inputs: 43776 bytes of shared memory), 32 x 28
	 * blocks of 224 threads (112 columns x 8 vectors of 4 channels, 4 a
	 * thread); forced, the rows kernel, 4 channels x 2 columns x 8 rows a
	 * thread (8-byte loads and stores), 8 x 32 threads a block, 32 x 14 x
	 * 56 strips; "vector" and "" force the others.  At stride 2 the band
	 * kernel takes 5x5, and 3x3 on inputs of at most 28x28 (at 4 blocks
	 * an SM): 3x3 at 56x56 the tiled kernel, at 14x14 the band.  Its 384
	 * channels at 14x14 stride 1, the band; 5x5 at 28x28 and 56x56, the
	 * band */
	conv_case mb = {"f16", true, 2, 32, 32, 32, 32, {112, 112}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL};
	assert_int_equal(emit_case(&mb, NULL, &k), 0);
	assert_non_null(strstr(k.src, "depthwise band: 4 rows x 112 columns x 32 channels a block (6 x 114 inputs"));
	assert_int_equal(k.smem, 6 * 114 * 32 * 2);
	assert_int_equal(k.block, 224);
	assert_int_equal(k.units, 32 * 28);
	kf_kernel_free(&k);
	conv_case s2 = mb;
	s2.C = s2.O = s2.G = 144, s2.in[0] = s2.in[1] = 56, s2.s[0] = s2.s[1] = 2;
	assert_int_equal(emit_case(&s2, NULL, &k), 0);
	assert_null(strstr(k.src, "depthwise band"));
	assert_null(strstr(k.src, "depthwise rows"));
	assert_non_null(strstr(k.src, "xf[r * 2 + kw * 1]")); /* the tiled kernel */
	kf_kernel_free(&k);
	s2.C = s2.O = s2.G = 576, s2.in[0] = s2.in[1] = 14;
	assert_int_equal(emit_case(&s2, NULL, &k), 0);
	assert_non_null(strstr(k.src, "depthwise band"));
	assert_non_null(strstr(k.src, "__launch_bounds__(112, 4)"));
	kf_kernel_free(&k);
	conv_case m14 = {"f16", true, 2, 32, 384, 384, 384, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, NULL};
	assert_int_equal(emit_case(&m14, NULL, &k), 0);
	assert_non_null(strstr(k.src, "depthwise band"));
	kf_kernel_free(&k);
	conv_case e28 = {"f16", true, 2, 32, 240, 240, 240, {28, 28}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 1, NULL};
	assert_int_equal(emit_case(&e28, NULL, &k), 0);
	assert_non_null(strstr(k.src, "depthwise band"));
	kf_kernel_free(&k);
	e28.in[0] = e28.in[1] = 56;
	e28.s[0] = e28.s[1] = 2;
	assert_int_equal(emit_case(&e28, NULL, &k), 0);
	assert_non_null(strstr(k.src, "depthwise band: 7 rows x 28 columns x 16 channels"));
	kf_kernel_free(&k);
	/* slices whose blocks are whole warps, bands that divide the rows:
	 * EfficientNet-B0's 672 channels of 14 x 14 under 5x5 take 32-channel
	 * slices (224 threads; the widest, 56, made 196) and 7-row bands (8
	 * would add up 16 rows of 14) */
	conv_case e14 = {"f16", true, 2, 32, 672, 672, 672, {14, 14}, {5, 5}, {1, 1}, {1, 1}, {2, 2}, {2, 2}, 1, NULL};
	assert_int_equal(emit_case(&e14, NULL, &k), 0);
	assert_non_null(strstr(k.src, "depthwise band: 7 rows x 14 columns x 32 channels a block (11 x 18 inputs"));
	assert_int_equal(k.block, 224);
	assert_int_equal(k.units, 21 * 32 * 2);
	assert_non_null(strstr(k.src, "__launch_bounds__(224, 4)")); /* 4 blocks an SM: whole warps, 14 rows */
	kf_kernel_free(&k);
	e14.in[0] = e14.in[1] = 7; /* 7 x 7: 3 */
	assert_int_equal(emit_case(&e14, NULL, &k), 0);
	assert_non_null(strstr(k.src, ", 3)"));
	kf_kernel_free(&k);
	assert_int_not_equal(emit_case(&e14, "band:s9", &k), 0);   /* at most 8 stages */
	assert_int_not_equal(emit_case(&e14, "band:d1s2", &k), 0); /* stages are not d1's */
	/* ConvNeXt's 7x7 (above) keeps the tiled kernel; so does a conv the
	 * band kernel does not take: bad knobs are errors */
	assert_int_not_equal(emit_case(&mb, "band:c24", &k), 0); /* 24 does not divide 32 */
	assert_int_not_equal(emit_case(&mb, "band:q1", &k), 0);  /* no knob q */
	assert_int_not_equal(emit_case(&mb, "band:h99", &k), 0); /* 99 rows */
	/* the knobs' own limits: a store of 2 bytes, 5 rows ahead, no channels */
	assert_int_not_equal(emit_case(&mb, "rows:s2", &k), 0);
	assert_int_not_equal(emit_case(&mb, "rows:f5", &k), 0);
	assert_int_not_equal(emit_case(&mb, "band:v0", &k), 0);
	assert_int_not_equal(emit_case(&mb, "s8", &k), 0);
	assert_int_equal(emit_case(&mb, "rows:f0s4", &k), 0);
	kf_kernel_free(&k);
	assert_int_equal(emit_case(&mb, "rows", &k), 0);
	assert_non_null(strstr(k.src, "depthwise rows: 4 channels x 2 columns x 8 rows a thread, 8 x 32 a block"));
	assert_non_null(strstr(k.src, "*(uint2 *)(o0 + voff) = kv;"));
	assert_int_equal(k.block, 256);
	assert_int_equal(k.units, 32 * 14 * 56 / 32);
	kf_kernel_free(&k);
	assert_int_equal(emit_case(&mb, "vector", &k), 0);
	assert_null(strstr(k.src, "__shared__"));
	kf_kernel_free(&k);
	assert_int_equal(emit_case(&mb, "", &k), 0);
	assert_non_null(strstr(k.src, "xf[r * 1 + kw * 1]"));
	kf_kernel_free(&k);
	assert_int_equal(emit_case(&small, "rows:v8x1h4c2p5b3", &k), 0); /* 7x7 forced */
	assert_non_null(strstr(k.src, "depthwise rows: 8 channels x 1 columns x 4 rows a thread, 2 x 5 a block"));
	assert_int_equal(k.min_blocks, 3);
	assert_int_equal(k.units, 12 * ((28 * 7 + 4) / 5));
	kf_kernel_free(&k);
	assert_int_not_equal(emit_case(&mb, "rows:v3", &k), 0);   /* 3 does not divide 8 */
	assert_int_not_equal(emit_case(&mb, "rows:x2q1", &k), 0); /* no knob q */
	assert_int_not_equal(emit_case(&mb, "rows:c3", &k), 0);   /* 3 does not divide 8 vectors of 4 */
	conv_case big = {"f16", true, 3, 1, 8, 8, 8, {11, 11, 11}, {11, 11, 11}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, 0, NULL};
	assert_int_not_equal(emit_case(&big, "rows", &k), 0); /* 3-D */
	assert_int_equal(emit_case(&big, NULL, &k), 0);
	assert_null(strstr(k.src, "kf_w"));
	kf_kernel_free(&k);
}

static void pools(void **st)
{
	if (!kft_have_gxx())
		skip();
	static const char *const g[] = {
		"graph @p(%x: f16[2,9,8,16]) -> (f16[2,5,5,16]) {\n"
		"  %y = max_pool(%x) {channels_last = true, kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2], ceil_mode = true} : f16[2,5,5,16]\n"
		"  return %y\n}\n",
		"graph @p(%x: f32[2,9,8,5]) -> (f32[2,5,5,5]) {\n"
		"  %y = avg_pool(%x) {channels_last = true, kernel_shape = [3, 2], pads = [1, 1, 1, 1], strides = [2, 2], ceil_mode = true, count_include_pad = true} : f32[2,5,5,5]\n"
		"  return %y\n}\n",
		"graph @p(%x: f32[2,3,9,8]) -> (f32[2,3,4,4]) {\n"
		"  %y = avg_pool(%x) {kernel_shape = [3, 3], pads = [0, 1, 0, 1], strides = [2, 2], dilations = [1, 1]} : f32[2,3,4,4]\n"
		"  return %y\n}\n",
		"graph @p(%x: i32[1,2,7,7]) -> (i32[1,2,3,3]) {\n"
		"  %y = max_pool(%x) {kernel_shape = [2, 2], strides = [2, 2], dilations = [2, 2]} : i32[1,2,3,3]\n"
		"  return %y\n}\n",
		/* conv_transpose: strides, pads, dilations, output padding, groups, bias */
		"graph @t(%x: f32[2,4,5,4], %w: f32[4,3,3,2], %b: f32[6]) -> (f32[2,6,10,8]) {\n"
		"  %y = conv_transpose(%x, %w, %b) {strides = [2, 2], pads = [1, 0, 1, 0], output_padding = [1, 0], group = 2} : f32[2,6,10,8]\n"
		"  return %y\n}\n",
		"graph @t(%x: f16[1,3,6], %w: f16[3,2,3]) -> (f16[1,2,12]) {\n"
		"  %y = conv_transpose(%x, %w) {strides = [2], pads = [2, 1], dilations = [2]} : f16[1,2,12]\n"
		"  return %y\n}\n",
		/* channels in 16-byte runs: a thread a run (bf16 x 8, f32 x 4) */
		"graph @p(%x: bf16[1,7,9,24]) -> (bf16[1,4,5,24]) {\n"
		"  %y = avg_pool(%x) {channels_last = true, kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : bf16[1,4,5,24]\n"
		"  return %y\n}\n",
		"graph @p(%x: f32[2,5,6,8]) -> (f32[2,3,3,8]) {\n"
		"  %y = max_pool(%x) {channels_last = true, kernel_shape = [2, 2], strides = [1, 2], dilations = [2, 1]} : f32[2,3,3,8]\n"
		"  return %y\n}\n",
		"graph @p(%x: f32[1,4,5,6,7]) -> (f32[1,4,3,3,4]) {\n"
		"  %y = avg_pool(%x) {kernel_shape = [2, 2, 2], pads = [1, 1, 1, 0, 0, 0], strides = [2, 2, 2]} : f32[1,4,3,3,4]\n"
		"  return %y\n}\n",
	};
	for (size_t i = 0; i < sizeof g / sizeof *g; i++)
		check_graph(g[i], NULL, 2e-3, 2e-3, 300 + i);
}

/* The generic reductions (emit_reduce.c), whose pools feed squeeze-excite
 * blocks: short ranges a thread per output, long ones a block of 1024
 * threads per 8 outputs (X's last dim kept) or per output (reduced). */
static void reductions(void **st)
{
	if (!kft_have_gxx())
		skip();
	static const char *const g[] = {
		/* a channels-last global pool: 400 positions, 24 channels (3 blocks of 8) */
		"graph @r(%x: f16[2,20,20,24]) -> (f16[2,1,1,24]) {\n"
		"  %y = reduce_mean(%x) {axes = [1, 2], keepdims = true} : f16[2,1,1,24]\n  return %y\n}\n",
		/* x.isinf().any() as exported: an i64 sum of everything (one block; a row
		 * of more than 32768 is not the row kernel's) */
		"graph @r(%x: i64[1,128,300]) -> (i64[]) {\n"
		"  %y = reduce_sum(%x) {keepdims = false} : i64[]\n  return %y\n}\n",
		/* 7 columns of 100: the guard of a block's unused outputs */
		"graph @r(%x: f32[100,7]) -> (f32[7]) {\n"
		"  %y = reduce_max(%x) {axes = [0], keepdims = false} : f32[7]\n  return %y\n}\n",
		"graph @r(%x: i64[3,90,5]) -> (i64[5]) {\n"
		"  %y = reduce_min(%x) {axes = [0, 1], keepdims = false} : i64[5]\n  return %y\n}\n",
		/* generic_row's split mode: a softmax over axis 0 of 5 columns
		 * (8 a block, 3 past M), rows longer than the row kernel's 32768
		 * (a log_softmax, a layer norm of everything with a scale) */
		"graph @r(%x: f32[300,5]) -> (f32[300,5]) {\n"
		"  %y = softmax(%x) {axis = 0} : f32[300,5]\n  return %y\n}\n",
		"graph @r(%x: f32[2,40000]) -> (f32[2,40000]) {\n"
		"  %y = log_softmax(%x) {axis = 1} : f32[2,40000]\n  return %y\n}\n",
		"graph @r(%x: f32[200,200], %s: f32[200,200]) -> (f32[200,200]) {\n"
		"  %y = layer_norm(%x, %s) {axis = 0, epsilon = 0.00001} : f32[200,200]\n  return %y\n}\n",
		/* a middle axis reduced, short: a thread per output */
		"graph @r(%x: f64[4,9,6]) -> (f64[4,6]) {\n"
		"  %y = reduce_sum(%x) {axes = [1], keepdims = false} : f64[4,6]\n  return %y\n}\n",
	};
	for (size_t i = 0; i < sizeof g / sizeof *g; i++)
		check_graph(g[i], NULL, 1e-3, 1e-3, 400 + i);
	/* column kernels (emit_colreduce.c) of long columns: a block's rows
	 * split each level's loop and combine before the next level */
	static const char *const cg[] = {
		/* an instance norm, channels-last: 900 positions x 32 columns */
		"graph @n(%x: f32[2,30,30,16]) -> (f32[2,30,30,16]) {\n"
		"  %m = reduce_mean(%x) {axes = [1, 2], keepdims = true} : f32[2,1,1,16]\n"
		"  %d = sub(%x, %m) : f32[2,30,30,16]\n  %q = mul(%d, %d) : f32[2,30,30,16]\n"
		"  %v = reduce_mean(%q) {axes = [1, 2], keepdims = true} : f32[2,1,1,16]\n"
		"  %e = const 0.00001 : f32[]\n  %a = add(%v, %e) : f32[2,1,1,16]\n  %r = sqrt(%a) : f32[2,1,1,16]\n"
		"  %y = div(%d, %r) : f32[2,30,30,16]\n  return %y\n}\n",
		/* columns normalised over axis 0: 5 columns (3 of the block's 8 past M) */
		"graph @s(%x: f16[300,5]) -> (f16[300,5]) {\n"
		"  %e = exp(%x) : f16[300,5]\n  %m = reduce_sum(%e) {axes = [0], keepdims = true} : f16[1,5]\n"
		"  %y = div(%e, %m) : f16[300,5]\n  return %y\n}\n",
		/* a max over the reduced last dim, read along the column */
		"graph @c(%x: f32[3,70,40]) -> (f32[1,70,1]) {\n"
		"  %y = reduce_max(%x) {axes = [0, 2], keepdims = true} : f32[1,70,1]\n  %z = exp(%y) : f32[1,70,1]\n"
		"  return %z\n}\n",
	};
	for (size_t i = 0; i < sizeof cg / sizeof *cg; i++)
		check_graph(cg[i], "fuse", 2e-3, 2e-3, 420 + i);
}

/* The host copy of the gather (emit_conv.h) is the device's text: its
 * answers against the definition of im2col. */
static void gather_host(void **st)
{
	int OD = 2, OH = 3, OW = 4, ID = 3, IH = 5, IW = 6, C = 5, KD = 2, KH = 3, KW = 2;
	int S[3] = {1, 2, 1}, P[3] = {1, 0, 2}, D[3] = {2, 1, 3};
	for (long long m = 0; m < 2LL * OD * OH * OW; m++)
		for (int kk = 0; kk < KD * KH * KW * C; kk++) {
			long long ix;
			bool in = kf_conv_gather(m, kk, OD, OH, OW, ID, IH, IW, C, C, KH, KW, S[0], S[1], S[2], P[0], P[1],
						 P[2], D[0], D[1], D[2], &ix);
			int ow = (int)(m % OW), oh = (int)(m / OW % OH), od = (int)(m / OW / OH % OD);
			long long n = m / OW / OH / OD;
			int c = kk % C, kw = kk / C % KW, kh = kk / C / KW % KH, kd = kk / C / KW / KH;
			int id = od * S[0] - P[0] + kd * D[0], ih = oh * S[1] - P[1] + kh * D[1], iw = ow * S[2] - P[2] + kw * D[2];
			bool want = id >= 0 && id < ID && ih >= 0 && ih < IH && iw >= 0 && iw < IW;
			assert_int_equal(in, want);
			if (want)
				assert_true(ix == (((n * ID + id) * IH + ih) * IW + iw) * C + c);
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(gather_host),
		cmocka_unit_test(emu_matmul),
		cmocka_unit_test(emu_catches),
		cmocka_unit_test(conv_gemm),
		cmocka_unit_test(conv_direct),
		cmocka_unit_test(conv_depthwise),
		cmocka_unit_test(conv_depthwise_rows),
		cmocka_unit_test(conv_depthwise_band),
		cmocka_unit_test(conv_depthwise_toep),
		cmocka_unit_test(conv_depthwise_toep_random),
		cmocka_unit_test(depthwise_plan),
		cmocka_unit_test(pools),
		cmocka_unit_test(reductions),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
