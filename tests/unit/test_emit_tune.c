/* Unit tests of the emitter's tuning variables (docs/fusion.md, "Tuning"):
 * each KFUSE_* choice changes the kernel text (so the name and the cache
 * key), the block and the launch policy the backend reads (units, per_sm);
 * a bad value is an error naming the variable.  The kernels themselves are
 * compiled by tests/cuda/nvrtc-all.sh and timed by bench/gpu/sweep.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "emit_cuda.h"
#include "fuse.h"
#include "kf.h"

static const char *const vars[] = {"KFUSE_EW_VEC", "KFUSE_EW_BLOCK", "KFUSE_EW_GRID", "KFUSE_ROW_WARPS",
				   "KFUSE_ROW_BLOCK", "KFUSE_ROW_GRID", "KFUSE_CACHE_HINTS", "KFUSE_FAST_GELU"};

static int clear_env(void **st)
{
	(void)st;
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
		unsetenv(vars[i]);
	return 0;
}

/* Parses text, fuses it and emits its first node (the fusion); rc is what
 * kf_emit_node returned, the diagnostics (if any) go to diag. */
static int emit_first(const char *text, kf_kernel *k, char *diag, size_t n)
{
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kf_parse(c, "t.kf", text, strlen(text));
	if (!m)
		fail_msg("parse failed");
	kf_fuse_opts o;
	kf_fuse_opts_default(&o);
	bool ch;
	assert_int_equal(kf_fuse_run(m->graph[0], &o, &ch), 0);
	kf_graph *g = m->graph[0];
	kf_nid first = g->blk[0].first;
	assert_int_equal(kf_N(g, first)->op, KF_OP_FUSION);
	int rc = kf_emit_node(g, first, k);
	kf_buf b = {0};
	kf_diag_render(c, &b);
	snprintf(diag, n, "%.*s", (int)b.n, b.p ? b.p : "");
	kf_buf_free(&b);
	kf_module_free(m);
	kf_ctx_free(c);
	return rc;
}

static const char bias_gelu[] =
	"graph @bg(%x: f32[8,1024], %b: f32[1024]) -> (f32[8,1024]) {\n"
	"  %y = add(%x, %b) : f32[8,1024]\n"
	"  %g = gelu(%y) {approximate = \"tanh\"} : f32[8,1024]\n"
	"  return %g\n}\n";

static const char softmax[] =
	"graph @sm(%x: f32[10,1024]) -> (f32[10,1024]) {\n"
	"  %m = reduce_max(%x) {axes = [-1], keepdims = true} : f32[10,1]\n"
	"  %s = sub(%x, %m) : f32[10,1024]\n"
	"  %e = exp(%s) : f32[10,1024]\n"
	"  %z = reduce_sum(%e) {axes = [-1], keepdims = true} : f32[10,1]\n"
	"  %y = div(%e, %z) : f32[10,1024]\n"
	"  return %y\n}\n";

static bool has(const kf_kernel *k, const char *s) { return strstr(k->src, s) != NULL; }

/* Loop kernels with 4 vectors per thread: 8192 floats = 2048 float4 = 2
 * tiles of 256 threads x 4.  (The default is 1 vector: test_defaults.) */
static void test_loop_default(void **st)
{
	(void)st;
	kf_kernel k;
	char d[512];
	setenv("KFUSE_EW_VEC", "4", 1);
	assert_int_equal(emit_first(bias_gelu, &k, d, sizeof d), 0);
	unsetenv("KFUSE_EW_VEC");
	assert_int_equal(k.block, 256);
	assert_int_equal(k.units, 2);
	assert_int_equal(k.per_sm, -1); /* one block per tile, no loop */
	assert_true(has(&k, "for (int j = 0; j < 4; j++) kf_vld<float, 4>("));
	assert_true(has(&k, "p1 + (b + j * 1024) % 1024)")); /* the bias, reused: plain loads */
	assert_true(has(&k, "kf_gelu_tanh_fast("));
	assert_false(has(&k, "gridDim"));
	assert_false(has(&k, "if (b + j")); /* the tiles divide the tensor */
	kf_kernel_free(&k);
}

/* The defaults the H200 sweep chose: one float4 per thread, 4 warps a row. */
static void test_defaults(void **st)
{
	(void)st;
	kf_kernel k;
	char d[512];
	assert_int_equal(emit_first(bias_gelu, &k, d, sizeof d), 0);
	assert_int_equal(k.block, 256);
	assert_int_equal(k.units, 8); /* 2048 float4, one per thread */
	kf_kernel_free(&k);
	assert_int_equal(emit_first(softmax, &k, d, sizeof d), 0);
	assert_true(has(&k, "kf_rowred<128>("));
	kf_kernel_free(&k);
}

static void test_loop_variants(void **st)
{
	(void)st;
	kf_kernel k0, k;
	char d[512];
	assert_int_equal(emit_first(bias_gelu, &k0, d, sizeof d), 0);

	setenv("KFUSE_EW_VEC", "2", 1);
	setenv("KFUSE_EW_GRID", "4", 1);
	setenv("KFUSE_EW_BLOCK", "128", 1);
	assert_int_equal(emit_first(bias_gelu, &k, d, sizeof d), 0);
	assert_int_equal(k.block, 128);
	assert_int_equal(k.units, 8);   /* 2048 float4 / (128 x 2) */
	assert_int_equal(k.per_sm, 4);  /* a grid-stride loop, 4 blocks per SM */
	assert_true(has(&k, "b += (int)gridDim.x * 1024)"));
	assert_true(has(&k, "for (int j = 0; j < 2; j++)"));
	assert_true(has(&k, "__launch_bounds__(128)"));
	assert_string_not_equal(k.name, k0.name);
	kf_kernel_free(&k);

	setenv("KFUSE_EW_GRID", "wave", 1);
	assert_int_equal(emit_first(bias_gelu, &k, d, sizeof d), 0);
	assert_int_equal(k.per_sm, 0); /* as many as fit */
	kf_kernel_free(&k);
	clear_env(NULL);

	setenv("KFUSE_FAST_GELU", "0", 1);
	setenv("KFUSE_CACHE_HINTS", "2", 1);
	assert_int_equal(emit_first(bias_gelu, &k, d, sizeof d), 0);
	assert_true(has(&k, "kf_gelu_tanh("));
	assert_true(has(&k, "kf_vldcs<float, 4>(")); /* x is streamed */
	assert_true(has(&k, "kf_vld<float, 4>("));   /* the bias is not */
	assert_true(has(&k, "kf_vstcs<float, 4>("));
	kf_kernel_free(&k);
	setenv("KFUSE_CACHE_HINTS", "3", 1);
	assert_int_equal(emit_first(bias_gelu, &k, d, sizeof d), 0);
	assert_true(has(&k, "kf_vldna<float, 4>("));
	kf_kernel_free(&k);
	kf_kernel_free(&k0);
	clear_env(NULL);
}

/* A partial last tile: 100 floats = 25 float4, one tile of 1024 vectors. */
static void test_loop_guard(void **st)
{
	(void)st;
	kf_kernel k;
	char d[512];
	assert_int_equal(emit_first("graph @a(%x: f32[100], %y: f32[100]) -> (f32[100]) {\n"
				    "  %s = add(%x, %y) : f32[100]\n  %t = exp(%s) : f32[100]\n  return %t\n}\n",
				    &k, d, sizeof d),
			 0);
	assert_int_equal(k.units, 1);
	assert_true(has(&k, "if (b + j * 1024 < 100) kf_vld<float, 4>("));
	assert_true(has(&k, "if (b + j * 1024 < 100) kf_vst<float, 4>("));
	kf_kernel_free(&k);
}

/* Row kernels with a warp per row: 10 rows of 1024 floats, 4 rows per
 * block.  (The default is 4 warps per row: test_defaults.) */
static void test_row(void **st)
{
	(void)st;
	kf_kernel k;
	char d[512];
	setenv("KFUSE_ROW_WARPS", "1", 1);
	assert_int_equal(emit_first(softmax, &k, d, sizeof d), 0);
	unsetenv("KFUSE_ROW_WARPS");
	assert_int_equal(k.block, 128);
	assert_int_equal(k.units, 3);
	assert_int_equal(k.per_sm, -1);
	assert_true(has(&k, "kf_rowred<32>("));
	assert_true(has(&k, "const bool rv = row < 10;")); /* the last block has 2 rows */
	assert_true(has(&k, "if (rv) kf_vld<float, 4>("));
	assert_false(has(&k, "c0 < 1024")); /* 8 float4 per thread fill the row */
	kf_kernel_free(&k);

	setenv("KFUSE_ROW_WARPS", "2", 1);
	setenv("KFUSE_ROW_GRID", "2", 1);
	setenv("KFUSE_ROW_BLOCK", "256", 1);
	setenv("KFUSE_CACHE_HINTS", "1", 1);
	assert_int_equal(emit_first(softmax, &k, d, sizeof d), 0);
	assert_int_equal(k.block, 256);
	assert_int_equal(k.units, 3); /* 4 rows of 64 threads per block */
	assert_int_equal(k.per_sm, 2);
	assert_true(has(&k, "kf_rowred<64>("));
	assert_true(has(&k, "r0 += (int)gridDim.x * 4)"));
	assert_true(has(&k, "kf_vstcs<float, 4>("));
	assert_true(has(&k, "kf_vld<float, 4>(")); /* loads: hints 1 is stores only */
	kf_kernel_free(&k);
	clear_env(NULL);
}

static void test_bad_values(void **st)
{
	(void)st;
	static const char *const bad[][2] = {
		{"KFUSE_EW_BLOCK", "100"}, {"KFUSE_EW_VEC", "16"}, {"KFUSE_EW_GRID", "often"},
		{"KFUSE_ROW_WARPS", "3"}, {"KFUSE_CACHE_HINTS", "4"}, {"KFUSE_FAST_GELU", "yes"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		kf_kernel k;
		char d[512], want[128];
		setenv(bad[i][0], bad[i][1], 1);
		assert_int_equal(emit_first(bias_gelu, &k, d, sizeof d), -1);
		snprintf(want, sizeof want, "error: cuda: %s must be", bad[i][0]);
		if (!strstr(d, want) || !strstr(d, bad[i][1]))
			fail_msg("%s=%s: %s", bad[i][0], bad[i][1], d);
		unsetenv(bad[i][0]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_defaults, clear_env),
		cmocka_unit_test_setup(test_loop_default, clear_env),
		cmocka_unit_test_setup(test_loop_variants, clear_env),
		cmocka_unit_test_setup(test_loop_guard, clear_env),
		cmocka_unit_test_setup(test_row, clear_env),
		cmocka_unit_test_setup(test_bad_values, clear_env),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
