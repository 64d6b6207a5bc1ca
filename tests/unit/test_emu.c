/* Unit tests of the host emulation of CUDA (tests/unit/kf_emu.h) on
 * kernels that ran right on an H200 (docs/matmul.md, bench/results): the
 * mma.sync matmul (ldmatrix, cp.async) and the wgmma matmul (TMA with the
 * 128-byte swizzle, mbarrier rings, a producer and consumer warpgroups,
 * wgmma by descriptor, K-major and N-major B) must compute what the
 * interpreter computes in the emulation, so that the emulation's verdict
 * on kernels that never ran on a GPU (the attention kernels,
 * test_attention.c) means something.  Skipped without a C++ compiler. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf_test.h"
#include "kf_emu.h"
#include "equiv.h"

/* The matmul of text with tile `tile` (its text's `from` replaced by `to`
 * where from is given), emulated against the interpreter; -1 when it
 * cannot run here, else the elements out of tolerance. */
static int64_t emulate_as(const char *text, const char *tile, const char *from, const char *to)
{
	kf_ctx *c = kf_ctx_new();
	kf_kernel k;
	kft_emit_contraction(text, 0, tile, &k);
	assert_non_null(strstr(k.src, strncmp(tile, "wg", 2) ? "kf_mma_" : "kf_wgmma_"));
	if (from)
		kfe_corrupt(&k, from, to);
	kf_rt_register(c);
	kf_module *m = kft_parse(c, text);
	kf_graph *g = m->graph[0];
	uint32_t na = g->blk[0].narg;
	kf_tensor in[4], want, got;
	uint64_t rng = 11;
	for (uint32_t i = 0; i < na; i++) {
		const kf_type *t = kf_vtype(g, g->blk[0].arg[i]);
		assert_int_equal(kf_tensor_random(&in[i], (kf_dtype)t->dtype, t->rank, t->dim, &rng), 0);
	}
	assert_int_equal(kf_interp_run(g, in, (int)na, &want, 1), 0);
	assert_true(k.nin == na && k.nout == 1);
	/* the kernel's parameters in its order (the same text parses to the
	 * same value ids as in kft_emit_contraction's module) */
	kf_tensor par[4];
	kfe_params_from_inputs(g, &k, in, par);
	assert_int_equal(kf_tensor_alloc_type(&got, kf_vtype(g, kf_block_terminator(g, 0) == KF_NONE ? 0 :
							 kf_in(g, kf_block_terminator(g, 0), 0))), 0);
	int64_t bad = -1;
	if (kfe_run(&k, par, &got)) {
		kf_equiv_stat st;
		kf_equiv_compare(&got, &want, 1e-2, 1e-2, &st);
		kf_buf d = {0};
		kf_equiv_describe(&d, &st);
		fprintf(stderr, "emu %s: %.*s\n", tile, (int)d.n, d.p);
		kf_buf_free(&d);
		bad = st.nbad;
	} else {
		fprintf(stderr, "emu: no C++ compiler, %s not emulated\n", tile);
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

static int64_t emulate(const char *text, const char *tile) { return emulate_as(text, tile, NULL, NULL); }

static const char mm_kn[] = "graph @g(%a: f16[192,256], %b: f16[256,256]) -> (f16[192,256]) {\n"
			    "  %y = matmul(%a, %b) : f16[192,256]\n  return %y\n}\n";
static const char mm_nk[] = "graph @g(%a: f16[128,128], %b: f16[192,128]) -> (f16[128,192]) {\n"
			    "  %t = transpose(%b) {perm = [1, 0]} : f16[128,192]\n"
			    "  %y = matmul(%a, %t) : f16[128,192]\n  return %y\n}\n";

static void check(const char *text, const char *tile) { kfe_expect_clean(emulate(text, tile)); }

/* Every kernel of graph text (its top-level nodes of op `op`, or of any op
 * for -1) emulated against the interpreter on random inputs, each kernel's
 * text holding `needle`; the kernels' count. */
static int emulate_nodes(const char *text, int op, const char *needle)
{
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	kf_module *m = kft_parse(c, text);
	kf_graph *g = m->graph[0];
	uint32_t na = g->blk[0].narg;
	kf_tensor in[4];
	uint64_t rng = 5;
	assert_true(na <= 4);
	for (uint32_t i = 0; i < na; i++) {
		const kf_type *t = kf_vtype(g, g->blk[0].arg[i]);
		assert_int_equal(kf_tensor_random(&in[i], (kf_dtype)t->dtype, t->rank, t->dim, &rng), 0);
	}
	kf_emit_target tg = {.wgmma = 1};
	int kernels = 0;
	kf_foreach_node(g, 0, n) {
		if (op >= 0 && kf_N(g, n)->op != op)
			continue;
		kf_kernel k;
		if (kf_emit_node_for(g, n, &tg, &k) != 0)
			continue; /* no kernel: a const, an alias */
		assert_non_null(strstr(k.src, needle));
		kfe_expect_clean(kfe_check_node(g, n, &k, in, (int)na, needle));
		kf_kernel_free(&k);
		kernels++;
	}
	for (uint32_t i = 0; i < na; i++)
		kf_tensor_free(&in[i]);
	kf_module_free(m);
	kf_ctx_free(c);
	return kernels;
}

/* cubic resize's loop kernel (emit_index.c) against the interpreter, which
 * matches ONNX's conformance tests (exclude_outside, cubic_coeff_a -0.5,
 * the coordinate modes) and PyTorch's bicubic: up and down, on two dims at
 * once, with the edge taps left out and renormalised, and aligned corners. */
static void test_resize_cubic(void **s)
{
	(void)s;
	static const char text[] =
		"graph @g(%x: f32[1,2,5,6]) -> (f32[1,2,8,4], f32[1,2,3,9]) {\n"
		"  %a = resize(%x) {mode = \"cubic\", cubic_coeff_a = -0.5, exclude_outside = 1, scales = [1.0, 1.0, 1.6, 0.6667]} : f32[1,2,8,4]\n"
		"  %b = resize(%x) {mode = \"cubic\", coordinate_transformation_mode = \"align_corners\", scales = [1.0, 1.0, 0.6, 1.5]} : f32[1,2,3,9]\n"
		"  return %a, %b\n}\n";
	assert_int_equal(emulate_nodes(text, KF_OP_RESIZE, "kf_rs_cub"), 2);
}

/* floor, ceil and round in an element-wise kernel, f32 and f16: round of
 * multiples of 0.5 (floor(4x) / 2), so that halves go to even */
static void test_rounding(void **s)
{
	(void)s;
	static const char text[] =
		"graph @g(%x: f32[64], %h: f16[64]) -> (f32[64], f16[64]) {\n"
		"  %c = const 4.0 : f32[]\n  %x4 = mul(%x, %c) : f32[64]\n  %q = floor(%x4) : f32[64]\n"
		"  %k = const 0.5 : f32[]\n  %hv = mul(%q, %k) : f32[64]\n  %r = round(%hv) : f32[64]\n"
		"  %e = ceil(%x4) : f32[64]\n  %a = add(%r, %e) : f32[64]\n  %y = add(%a, %q) : f32[64]\n"
		"  %c16 = const 4.0 : f16[]\n  %h4 = mul(%h, %c16) : f16[64]\n  %hq = floor(%h4) : f16[64]\n"
		"  %k16 = const 0.5 : f16[]\n  %hh = mul(%hq, %k16) : f16[64]\n  %zr = round(%hh) : f16[64]\n"
		"  return %y, %zr\n}\n";
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse(c, text);
	kft_run_pipe(c, m, "fuse");
	kf_buf b = {0};
	kf_print_module(&b, m);
	kf_buf_putc(&b, '\0');
	assert_true(emulate_nodes(b.p, KF_OP_FUSION, "rintf(") >= 1);
	kf_buf_free(&b);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* wgmma is asynchronous in the emulation as on the GPU: a kernel that
 * releases a stage before the product reading it is known done (waiting
 * for all but 2 groups, not 1) computes with the next tile's data, which
 * the producer loaded there meanwhile. */
static void test_wgmma_async(void **s)
{
	(void)s;
	static const char mm_long[] = "graph @g(%a: f16[128,640], %b: f16[640,128]) -> (f16[128,128]) {\n"
				      "  %y = matmul(%a, %b) : f16[128,128]\n  return %y\n}\n";
	int64_t bad = emulate(mm_long, "wg128x128x64s2");
	if (bad < 0) {
		skip();
		return;
	}
	assert_int_equal(bad, 0);
	assert_true(emulate_as(mm_long, "wg128x128x64s2", "kf_wg_wait<1>();", "kf_wg_wait<2>();") > 0);
}

static void test_mma(void **s) { (void)s; check(mm_kn, "mma64x64x32w2x2s3"); }
static void test_wgmma_nmajor(void **s) { (void)s; check(mm_kn, "wg128x128x64s4"); }
static void test_wgmma_kmajor(void **s) { (void)s; check(mm_nk, "wg128x128x64s4"); }
static void test_wgmma_bn64(void **s) { (void)s; check(mm_nk, "wg128x64x64s3"); }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mma), cmocka_unit_test(test_resize_cubic), cmocka_unit_test(test_rounding),
		cmocka_unit_test(test_wgmma_nmajor),
		cmocka_unit_test(test_wgmma_kmajor),
		cmocka_unit_test(test_wgmma_bn64),
		cmocka_unit_test(test_wgmma_async),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
