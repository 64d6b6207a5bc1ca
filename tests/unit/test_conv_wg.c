/* The Hopper conv kernels in the host emulation (tests/unit/kf_emu.h,
 * whose wgmma, mbarrier and TMA machinery test_emu.c checks on the matmul
 * kernels that ran on an H200) against the interpreter: the wgmma
 * implicit-GEMM conv (emit_conv_wg.c: cp.async gathers into the 128-byte
 * swizzle; 1-D, 2-D, 3-D; strides, asymmetric pads, dilations; partial
 * tiles in M, N and K; split-K; the per-element, paired and staged
 * epilogues with bias, per-channel and residual operands; f16 and bf16)
 * and the matmul's TMA kernel on a pointwise conv.  A corrupted swizzle
 * must fail.  Then the default configs of ResNet-50's conv shapes, and the
 * tuner's conv key.  Skipped without a C++ compiler. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "kf_test.h"
#include "kf_emu.h"
#include "equiv.h"
#include "tune.h"

typedef struct wcase {
	const char *dt;
	int nsp, N, C, O;
	int in[3], k[3], s[3], d[3], pb[3], pe[3];
	int epi;          /* 0: none; 1: bias + relu; 2: bias, per-channel scale, residual, relu */
	const char *tile; /* KFUSE_CONV_TILE */
} wcase;

static void dims_text(char *o, size_t n, const char *dt, int a, int nsp, const int *sp, int z)
{
	int k = snprintf(o, n, "%s[%d", dt, a);
	for (int i = 0; i < nsp; i++)
		k += snprintf(o + k, n - (size_t)k, ",%d", sp[i]);
	snprintf(o + k, n - (size_t)k, ",%d]", z);
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

/* The graph of case w: one conv fusion, channels last, over inputs x, w
 * and the epilogue's operands. */
static void case_text(const wcase *w, char *text, size_t size)
{
	int out[3];
	for (int i = 0; i < w->nsp; i++)
		out[i] = (w->in[i] + w->pb[i] + w->pe[i] - w->d[i] * (w->k[i] - 1) - 1) / w->s[i] + 1;
	char xt[96], wt[96], yt[96], bt[32], ss[64], pp[64], dd[64];
	dims_text(xt, sizeof xt, w->dt, w->N, w->nsp, w->in, w->C);
	dims_text(yt, sizeof yt, w->dt, w->N, w->nsp, out, w->O);
	dims_text(wt, sizeof wt, w->dt, w->O, w->nsp, w->k, w->C);
	snprintf(bt, sizeof bt, "%s[%d]", w->dt, w->O);
	list_text(ss, sizeof ss, w->s, w->nsp, NULL);
	list_text(pp, sizeof pp, w->pb, w->nsp, w->pe);
	list_text(dd, sizeof dd, w->d, w->nsp, NULL);
	const char *ty[5] = {xt, wt, bt, bt, yt}, *nm[5] = {"x", "w", "b", "s", "r"};
	int nops = w->epi == 2 ? 5 : w->epi == 1 ? 3 : 2;
	char args[512] = "", ops[128] = "", bargs[512] = "";
	for (int i = 0; i < nops; i++) {
		snprintf(args + strlen(args), sizeof args - strlen(args), "%s%%%s: %s", i ? ", " : "", nm[i], ty[i]);
		snprintf(ops + strlen(ops), sizeof ops - strlen(ops), "%s%%%s", i ? ", " : "", nm[i]);
		snprintf(bargs + strlen(bargs), sizeof bargs - strlen(bargs), "%s%%%d: %s", i ? ", " : "", i, ty[i]);
	}
	int n = snprintf(text, size,
			 "graph @c(%s) -> (%s) {\n  %%y = fusion @c0(%s) {kind = \"conv\"} : %s {\n  ^(%s):\n"
			 "    %%c = conv(%%0, %%1%s) {channels_last = true, dilations = %s, group = 1, pads = %s, strides = %s} : %s\n",
			 args, yt, ops, yt, bargs, w->epi ? ", %2" : "", dd, pp, ss, yt);
	if (w->epi == 2)
		n += snprintf(text + n, size - (size_t)n,
			      "    %%m = mul(%%c, %%3) : %s\n    %%a = add(%%m, %%4) : %s\n    %%z = relu(%%a) : %s\n"
			      "    yield %%z\n  }\n  return %%y\n}\n", yt, yt, yt);
	else if (w->epi == 1)
		n += snprintf(text + n, size - (size_t)n, "    %%z = relu(%%c) : %s\n    yield %%z\n  }\n  return %%y\n}\n", yt);
	else
		n += snprintf(text + n, size - (size_t)n, "    yield %%c\n  }\n  return %%y\n}\n");
	assert_true(n < (int)size);
}

/* Emulates case w's kernel (emitted for a device with wgmma, tile forced;
 * `corrupt`, if not NULL, is replaced by "0" in the kernel's text) against
 * the interpreter; the count of elements out of tolerance, -1 when there
 * is no C++ compiler.  want_kernel: text the kernel must contain. */
static int64_t emulate(const wcase *w, const char *want_kernel, const char *corrupt)
{
	char text[4096];
	case_text(w, text, sizeof text);
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	kf_module *m = kft_parse(c, text);
	kf_graph *g = m->graph[0];
	kf_emit_target tg = {1};
	kf_kernel k;
	setenv("KFUSE_CONV_TILE", w->tile, 1);
	if (kf_emit_node_for(g, kft_first_fusion(g), &tg, &k) != 0)
		kft_fail_diags(c, "emit");
	unsetenv("KFUSE_CONV_TILE");
	if (want_kernel && !strstr(k.src, want_kernel))
		fail_msg("%s: the kernel has no '%s'", w->tile, want_kernel);
	if (corrupt) {
		char *p = strstr(k.src, corrupt);
		assert_non_null(p);
		memset(p, ' ', strlen(corrupt));
		p[0] = '0';
	}
	uint32_t na = g->blk[0].narg;
	kf_tensor in[5], par[5], want, got;
	uint64_t rng = 29 + (uint64_t)w->C;
	for (uint32_t i = 0; i < na; i++) {
		const kf_type *t = kf_vtype(g, g->blk[0].arg[i]);
		assert_int_equal(kf_tensor_random(&in[i], (kf_dtype)t->dtype, t->rank, t->dim, &rng), 0);
	}
	assert_int_equal(kf_interp_run(g, in, (int)na, &want, 1), 0);
	assert_true(k.nin == na && k.nout == 1);
	kfe_params_from_inputs(g, &k, in, par);
	assert_int_equal(kf_tensor_alloc_type(&got, kf_vtype(g, kf_in(g, kf_block_terminator(g, 0), 0))), 0);
	int64_t bad = -1;
	if (kfe_run(&k, par, &got)) {
		double tol = !strcmp(w->dt, "bf16") ? 3e-2 : 6e-3;
		kf_equiv_stat st;
		kf_equiv_compare(&got, &want, tol, tol, &st);
		kf_buf d = {0};
		kf_equiv_describe(&d, &st);
		fprintf(stderr, "emu %s%s: %.*s\n", w->tile, corrupt ? " (corrupted)" : "", (int)d.n, d.p);
		kf_buf_free(&d);
		bad = st.nbad + (st.shape_differs ? 1 : 0);
	}
	for (uint32_t i = 0; i < na; i++)
		kf_tensor_free(&in[i]);
	kf_tensor_free(&want);
	kf_tensor_free(&got);
	kf_kernel_free(&k);
	kf_module_free(m);
	kf_ctx_free(c);
	return bad;
}

static void check(const wcase *w, const char *want_kernel) { kfe_expect_clean(emulate(w, want_kernel, NULL)); }

/* The wgmma conv on 2-D convs: 3x3 with M, N and K tiles partial, the
 * staged epilogue with every operand; a stride, asymmetric pads and a K
 * of two tiles (C = 8: one 16-byte chunk of channels per tap), paired
 * stores; bf16 with dilation 2 and the scalar epilogue; a 7x7 stride-2
 * stem of 8 channels (7 K tiles, the last one 8 columns); 4 warpgroups. */
static void wgc_2d(void **st)
{
	(void)st;
	wcase cs[] = {
		{"f16", 2, 2, 16, 24, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, "wgc128x64x64s4s"},
		{"f16", 2, 1, 8, 64, {10, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 0}, {0, 1}, 1, "wgc64x64x64s3v"},
		{"bf16", 2, 2, 32, 72, {6, 6}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, {2, 2}, 2, "wgc128x128x64s5"},
		{"f16", 2, 1, 8, 64, {16, 14}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}, 1, "wgc128x64x64s4s"},
		{"f16", 2, 2, 64, 64, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, "wgc256x64x64s3s"},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
		check(&cs[i], "kf_wgmma_");
}

/* 1-D and 3-D convs, a 1x1 stride-2 conv (ResNet's downsampling), and a
 * split of K in 4 and 3 (a split of fewer tiles than the others and the
 * tile's last block summing in order). */
static void wgc_dims_split(void **st)
{
	(void)st;
	wcase cs[] = {
		{"f16", 1, 2, 24, 40, {13}, {5}, {2}, {1}, {2}, {1}, 1, "wgc64x64x64s4s"},
		{"f16", 3, 1, 8, 16, {4, 5, 5}, {3, 3, 3}, {1, 2, 1}, {1, 1, 1}, {1, 1, 1}, {1, 0, 1}, 2, "wgc64x64x64s3"},
		{"f16", 2, 2, 32, 64, {9, 9}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, 1, "wgc64x64x64s4v"},
		{"f16", 2, 1, 64, 64, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 2, "wgc64x64x64s6k4s"},
		{"bf16", 2, 1, 40, 96, {4, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, "wgc64x128x64s4k3v"},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
		check(&cs[i], "kf_wgmma_");
	/* the split's workspace and counter are there */
	check(&cs[3], "_cnt[");
}

/* A pointwise conv is a matmul of x as stored: the TMA kernel. */
static void pointwise_tma(void **st)
{
	(void)st;
	wcase cs[] = {
		{"f16", 2, 2, 64, 128, {8, 8}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 2, "wg128x128x64s4"},
		{"f16", 2, 1, 128, 64, {7, 9}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, 1, "wg64x128x64s8v"},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
		check(&cs[i], "kf_tma2d(");
}

/* The swizzle made the identity: the rows' chunks land where wgmma does
 * not read them, and the check must see it. */
static void catches(void **st)
{
	(void)st;
	wcase w = {"f16", 2, 2, 16, 24, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, "wgc64x64x64s4"};
	int64_t bad = emulate(&w, NULL, "((threadIdx.x >> 3) & 7)");
	if (bad < 0) {
		skip();
		return;
	}
	assert_true(bad > 0);
}

/* Configs: the text round trip, what does not parse, what fits. */
static void configs(void **st)
{
	(void)st;
	kf_mm_config c;
	kft_mm_config("wgc128x128x64s4s", &c);
	assert_int_equal(c.algo, KF_MM_WGC);
	kft_mm_config("wgc64x64x64s6k8s", &c);
	assert_int_equal(c.sk, 8);
	kft_mm_config("wgc64x128x64s4k3v", &c);
	kft_mm_config("wgc256x128x64s3", &c);
	static const char *const bad[] = {"wgc128x128x32s4", "wgc96x128x64s4", "wgc128x128x64s2", "wgc128x128x64s9",
					  "wgc128x128x64s4k1", "wgc128x128x64s4vs", "wgc256x32x64s4", "wgc128x128x64s4k0",
					  "wgc128x128x64s4x"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		if (kf_mm_config_parse(bad[i], &c) == 0)
			fail_msg("%s parsed", bad[i]);
}

/* The default config of a ResNet-50 conv shape (batch b, C > O, k x k
 * stride s on an h x h map) on a device with wgmma, and the tuner's key. */
static void shape_of(int b, int C, int O, int k, int s, int h, kf_mm_shape *sh, char *key, size_t n)
{
	int p = k / 2, oh = (h + 2 * p - k) / s + 1;
	char text[2048];
	snprintf(text, sizeof text,
		 "graph @c(%%x: f16[%d,%d,%d,%d], %%w: f16[%d,%d,%d,%d], %%b: f16[%d]) -> (f16[%d,%d,%d,%d]) {\n"
		 "  %%y = fusion @c0(%%x, %%w, %%b) {kind = \"conv\"} : f16[%d,%d,%d,%d] {\n"
		 "  ^(%%0: f16[%d,%d,%d,%d], %%1: f16[%d,%d,%d,%d], %%2: f16[%d]):\n"
		 "    %%c = conv(%%0, %%1, %%2) {channels_last = true, pads = [%d, %d, %d, %d], strides = [%d, %d]} : f16[%d,%d,%d,%d]\n"
		 "    %%r = relu(%%c) : f16[%d,%d,%d,%d]\n    yield %%r\n  }\n  return %%y\n}\n",
		 b, h, h, C, O, k, k, C, O, b, oh, oh, O, b, oh, oh, O, b, h, h, C, O, k, k, C, O, p, p, p, p, s, s, b, oh,
		 oh, O, b, oh, oh, O);
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse(c, text);
	kf_graph *g = m->graph[0];
	assert_true(kf_conv_node_shape(g, kft_first_fusion(g), sh));
	kf_mm_shape_key(sh, "sm_90", key, n);
	kf_module_free(m);
	kf_ctx_free(c);
}

static void defaults(void **st)
{
	(void)st;
	static const struct {
		int b, C, O, k, s, h;
		const char *cfg, *key;
	} cs[] = {
		/* the measured winners (bench/results/2026-12-01-gpu-s3-conv2-tune.txt)
		 * the rule reproduces: pointwise and wide, the TMA kernel */
		{32, 64, 256, 1, 1, 56, "wg128x128x64s4pvs", "sm_90:f16>f16:b1:m100352:n256:k64:nt:conv1x1s1x1p0x0x0x0d1x1i56x56:.relu"},
		{32, 2048, 512, 1, 1, 7, "wg128x128x64s4pvs", NULL},
		/* gathered: the largest tile that makes 90 tiles */
		{32, 256, 256, 3, 1, 14, "wgc128x128x64s4s", "sm_90:f16>f16:b1:m6272:n256:k2304:nt:conv3x3s1x1p1x1x1x1d1x1i14x14:.relu"},
		{32, 128, 128, 3, 2, 56, "wgc256x128x64s4s", "sm_90:f16>f16:b1:m25088:n128:k1152:nt:conv3x3s2x2p1x1x1x1d1x1i56x56:.relu"},
		{32, 64, 64, 3, 1, 56, "wgc128x64x64s6s", NULL},
		{32, 512, 512, 3, 1, 7, "wgc128x64x64s6s", NULL},
		{1, 64, 256, 1, 1, 56, "wgc128x64x64s6s", NULL},
		/* few tiles: 64 x 64, split 4 ways over a long K */
		{1, 512, 128, 1, 1, 28, "wgc64x64x64s8s", NULL},
		{1, 512, 512, 3, 1, 7, "wgc64x64x64s6k4s", NULL},
		{1, 2048, 512, 1, 1, 7, "wgc64x64x64s6k4s", NULL},
		{1, 256, 256, 3, 1, 14, "wgc64x64x64s6k4s", NULL},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
		kf_mm_shape sh;
		char key[128], txt[32];
		shape_of(cs[i].b, cs[i].C, cs[i].O, cs[i].k, cs[i].s, cs[i].h, &sh, key, sizeof key);
		if (cs[i].key)
			assert_string_equal(key, cs[i].key);
		sh.wgmma = 1;
		kf_mm_config cf;
		kf_conv_own_default(&sh, &cf);
		kf_mm_config_text(&cf, txt, sizeof txt);
		if (strcmp(txt, cs[i].cfg))
			fail_msg("%s: %s, not %s", key, txt, cs[i].cfg);
		/* without wgmma, mma.sync */
		sh.wgmma = -1;
		kf_conv_own_default(&sh, &cf);
		assert_int_equal(cf.algo, KF_MM_MMA);
		/* the tuner's candidates: the default among them, wgmma ones
		 * only on such a device */
		char cand[64][32];
		sh.wgmma = 1;
		int nc = kf_mm_candidates(&sh, cand, 64), def = 0;
		for (int j = 0; j < nc; j++) {
			assert_int_equal(kf_mm_config_parse(cand[j], &cf), 0);
			def += !strcmp(cand[j], cs[i].cfg);
		}
		assert_int_equal(def, 1);
		sh.wgmma = -1;
		nc = kf_mm_candidates(&sh, cand, 64);
		assert_true(nc >= 2);
		for (int j = 0; j < nc; j++)
			assert_true(strncmp(cand[j], "wg", 2) != 0);
	}
}

/* The tune table's conv lines: a line applies to its key, and to a conv
 * of the same geometry with another epilogue (a residual add); not to
 * another geometry.  The shipped H200 table has ResNet-50's layers. */
static void tune_lines(void **st)
{
	(void)st;
	static const char text[] =
		"graph @g(%x: f16[1,14,14,256], %w: f16[256,3,3,256], %b: f16[256], %r: f16[1,14,14,256], %v: f16[1024,1,1,256],"
		" %e: f16[1024]) -> (f16[1,14,14,256], f16[1,14,14,256], f16[1,14,14,1024]) {\n"
		"  %y = fusion @c0(%x, %w, %b) {kind = \"conv\"} : f16[1,14,14,256] {\n"
		"  ^(%0: f16[1,14,14,256], %1: f16[256,3,3,256], %2: f16[256]):\n"
		"    %c = conv(%0, %1, %2) {channels_last = true, pads = [1, 1, 1, 1]} : f16[1,14,14,256]\n"
		"    %z = relu(%c) : f16[1,14,14,256]\n    yield %z\n  }\n"
		"  %s = fusion @c1(%x, %w, %b, %r) {kind = \"conv\"} : f16[1,14,14,256] {\n"
		"  ^(%0: f16[1,14,14,256], %1: f16[256,3,3,256], %2: f16[256], %3: f16[1,14,14,256]):\n"
		"    %c = conv(%0, %1, %2) {channels_last = true, pads = [1, 1, 1, 1]} : f16[1,14,14,256]\n"
		"    %a = add(%c, %3) : f16[1,14,14,256]\n    %z = relu(%a) : f16[1,14,14,256]\n    yield %z\n  }\n"
		"  %p = fusion @c2(%x, %v, %e) {kind = \"conv\"} : f16[1,14,14,1024] {\n"
		"  ^(%0: f16[1,14,14,256], %1: f16[1024,1,1,256], %2: f16[1024]):\n"
		"    %c = conv(%0, %1, %2) {channels_last = true} : f16[1,14,14,1024]\n"
		"    %z = relu(%c) : f16[1,14,14,1024]\n    yield %z\n  }\n"
		"  return %y, %s, %p\n}\n";
	char dir[] = "/tmp/kf-tune-conv-XXXXXX";
	assert_non_null(mkdtemp(dir));
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse(c, text);
	kf_graph *g = m->graph[0];
	kf_nid f[3], n0 = kft_first_fusion(g);
	f[0] = n0, f[1] = kf_N(g, n0)->next, f[2] = kf_N(g, f[1])->next;
	kf_mm_shape sh;
	char key[128];
	assert_true(kf_conv_node_shape(g, f[0], &sh));
	kf_mm_shape_key(&sh, "sm_90", key, sizeof key);
	assert_string_equal(key, "sm_90:f16>f16:b1:m196:n256:k2304:nt:conv3x3s1x1p1x1x1x1d1x1i14x14:.relu");
	kf_buf path = {0};
	assert_int_equal(kf_tune_path(dir, &path), 0);
	kf_tune_table t = {0};
	kf_tune_set(&t, key, "wgc64x64x64s6k4s", 0.0087);
	assert_int_equal(kf_tune_save(c, path.p, &t), 0);
	kf_buf report = {0};
	assert_int_equal(kf_tune_apply(g, "sm_90", dir, &report), 2);
	assert_string_equal(kf_attr_str(g, f[0], "tile", ""), "wgc64x64x64s6k4s");
	assert_string_equal(kf_attr_str(g, f[1], "tile", ""), "wgc64x64x64s6k4s");
	assert_null(kf_attr_get(g, f[2], "tile"));
	kf_buf_putc(&report, 0);
	assert_non_null(strstr(report.p, "fusion @c1: wgc64x64x64s6k4s from"));
	assert_non_null(strstr(report.p, "(its conv geometry)"));
	/* the shipped table has the same layer (and the pointwise one) */
	unlink(path.p);
	kf_node_set_attrs(g, f[0], NULL, 0);
	kf_node_set_attrs(g, f[1], NULL, 0);
	for (int i = 0; i < 3; i++)
		kf_node_set_attr(g, f[i], kf_intern_cstr(c, "kind"),
				 (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(c, "conv")});
	assert_int_equal(kf_tune_apply_for(g, "sm_90", "NVIDIA H200", dir, NULL, NULL), 3);
	assert_string_equal(kf_attr_str(g, f[0], "tile", ""), "wgc64x64x64s6k4s");
	assert_string_equal(kf_attr_str(g, f[2], "tile", ""), "wgc64x64x64s8s");
	kf_buf_free(&report);
	kf_buf_free(&path);
	kf_tune_table_free(&t);
	rmdir(dir);
	kf_module_free(m);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(configs),     cmocka_unit_test(defaults),      cmocka_unit_test(wgc_2d),
		cmocka_unit_test(wgc_dims_split), cmocka_unit_test(pointwise_tma), cmocka_unit_test(catches),
		cmocka_unit_test(tune_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
