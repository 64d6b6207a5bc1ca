/* Unit tests of the cuDNN conv route without a GPU: every value the
 * descriptor setup hands the library (kf_cudnn_describe) in cuDNN's own
 * terms, checked against the toolkit's cudnn headers when there are some
 * (KF_HAVE_CUDNN_H); which convs take the route (kf_conv_dnn_plan) and
 * what they read and write; and dry-run plans that route a conv through
 * cuDNN when its tile says so (the epilogue kernel compiled by NVRTC and
 * ptxas).  The epilogue kernel's numbers are emulated in test_dyn_emu. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf_test.h"
#include "kf_test_nvrtc.h"
#include "cuda_backend.h"
#include "emit_matmul.h"
#include "kf.h"

#ifdef KF_HAVE_CUDNN_H
/* the toolkit's (cudnn.h itself would be kfuse's cuda/cudnn.h here) */
#include <cudnn_cnn.h>
#define H_HALF CUDNN_DATA_HALF
#define H_FLOAT CUDNN_DATA_FLOAT
#define H_BF16 CUDNN_DATA_BFLOAT16
#define H_NHWC CUDNN_TENSOR_NHWC
#define H_XCORR CUDNN_CROSS_CORRELATION
#define H_TENSOR_OP CUDNN_TENSOR_OP_MATH
#define H_FMA CUDNN_FMA_MATH
#else /* the values of cuDNN 9's headers */
#define H_HALF 2
#define H_FLOAT 0
#define H_BF16 9
#define H_NHWC 1
#define H_XCORR 1
#define H_TENSOR_OP 1
#define H_FMA 3
#endif

static kf_dnn_conv conv2d(int dt, int64_t N, int64_t C, int64_t H, int64_t O, int64_t k, int64_t s, int64_t p)
{
	int64_t out = (H + 2 * p - k) / s + 1;
	return (kf_dnn_conv){.dt = dt, .N = N, .C = C, .O = O, .in = {1, H, H + 1}, .out = {1, out, (H + 1 + 2 * p - k) / s + 1},
			     .k = {1, k, k}, .s = {1, s, s}, .d = {1, 1, 1}, .p = {0, p, p}};
}

static void check_dims(const int *got, int n, const int *want)
{
	for (int i = 0; i < n; i++)
		assert_int_equal(got[i], want[i]);
}

/* ResNet's 3x3 stride-2 conv: 4-D descriptors in N, C, H, W order, NHWC
 * format, the filter KRSC (kfuse's [O, KH, KW, C]). */
static void test_describe(void **st)
{
	(void)st;
	kf_dnn_conv c = conv2d(KF_F16, 32, 64, 56, 128, 3, 2, 1);
	assert_true(kf_dnn_fits(&c));
	kf_dnn_desc d;
	kf_cudnn_describe(&c, &d);
	assert_int_equal(d.nbdims, 4);
	assert_int_equal(d.type, H_HALF);
	assert_int_equal(d.format, H_NHWC);
	check_dims(d.xdim, 4, (int[]){32, 64, 56, 57});
	check_dims(d.wdim, 4, (int[]){128, 64, 3, 3});
	check_dims(d.ydim, 4, (int[]){32, 128, 28, 29});
	check_dims(d.pad, 2, (int[]){1, 1});
	check_dims(d.stride, 2, (int[]){2, 2});
	check_dims(d.dil, 2, (int[]){1, 1});
	assert_int_equal(d.mode, H_XCORR);
	assert_int_equal(d.compute, H_FLOAT);
	assert_int_equal(d.math, H_TENSOR_OP);
	/* f32 keeps FMA math unless tf32 is allowed */
	c.dt = KF_F32;
	kf_cudnn_describe(&c, &d);
	assert_int_equal(d.type, H_FLOAT);
	assert_int_equal(d.math, H_FMA);
	c.tf32 = true;
	kf_cudnn_describe(&c, &d);
	assert_int_equal(d.math, H_TENSOR_OP);
	c.dt = KF_BF16;
	c.tf32 = false;
	kf_cudnn_describe(&c, &d);
	assert_int_equal(d.type, H_BF16);
	/* 3-D: 5-D descriptors, the depth first */
	kf_dnn_conv v = {.dt = KF_F16, .N = 2, .C = 8, .O = 16, .in = {5, 6, 7}, .out = {5, 6, 7}, .k = {3, 3, 3},
			 .s = {1, 1, 1}, .d = {1, 1, 1}, .p = {1, 1, 1}};
	assert_true(kf_dnn_fits(&v));
	kf_cudnn_describe(&v, &d);
	assert_int_equal(d.nbdims, 5);
	check_dims(d.xdim, 5, (int[]){2, 8, 5, 6, 7});
	check_dims(d.wdim, 5, (int[]){16, 8, 3, 3, 3});
	check_dims(d.pad, 3, (int[]){1, 1, 1});
}

/* What cuDNN does not take: f64, tf32 on f16, an output size its formula
 * does not give (a pad only at one end), a window past the padded input. */
static void test_fits(void **st)
{
	(void)st;
	kf_dnn_conv c = conv2d(KF_F16, 1, 3, 224, 64, 7, 2, 3);
	assert_true(kf_dnn_fits(&c));
	kf_dnn_conv x = c;
	x.dt = KF_F64;
	assert_false(kf_dnn_fits(&x));
	x = c;
	x.tf32 = true;
	assert_false(kf_dnn_fits(&x));
	x = c;
	x.out[1]++;
	assert_false(kf_dnn_fits(&x));
	x = c;
	x.k[2] = 240;
	assert_false(kf_dnn_fits(&x));
	x = c;
	x.d[1] = 0;
	assert_false(kf_dnn_fits(&x));
}

#define CONV_FUSION(pads, body_extra, yield)                                                                      \
	"graph @g(%x: f16[2,28,28,64], %w: f16[128,3,3,64], %b: f16[128], %r: f16[2,14,14,128]) -> (f16[2,14,14,128]) {\n" \
	"  %y = fusion @c0(%x, %w, %b, %r) {kind = \"conv\"} : f16[2,14,14,128] {\n"                                    \
	"  ^(%0: f16[2,28,28,64], %1: f16[128,3,3,64], %2: f16[128], %3: f16[2,14,14,128]):\n"                         \
	"    %c = conv(%0, %1, %2) {channels_last = true, pads = " pads ", strides = [2, 2]} : f16[2,14,14,128]\n"       \
	body_extra "    yield " yield "\n  }\n  return %y\n}\n"

static kf_nid first_fusion(kf_graph *g)
{
	kf_foreach_node(g, 0, n) if (kf_N(g, n)->op == KF_OP_FUSION || kf_N(g, n)->op == KF_OP_CONV) return n;
	return KF_NONE;
}

static bool plan_of(const char *text, kf_mm_blas *p, kf_graph **gout, kf_module **mout, kf_ctx *c)
{
	kf_module *m = kft_parse(c, text);
	*mout = m;
	*gout = m->graph[0];
	return kf_conv_dnn_plan(m->graph[0], first_fusion(m->graph[0]), p);
}

/* The plan: x and w as the fusion reads them, the conv's own value as the
 * accumulator the epilogue kernel reads (bias, residual, relu); a conv
 * alone without bias writes the result itself; not taken: asymmetric pads,
 * a conv alone with a bias (no kernel would add it), a cast before it. */
static void test_plan(void **st)
{
	(void)st;
	kf_ctx *c = kf_ctx_new();
	kf_mm_blas p;
	kf_graph *g;
	kf_module *m;
	assert_true(plan_of(CONV_FUSION("[1, 1, 1, 1]",
					"    %a = add(%c, %3) : f16[2,14,14,128]\n    %e = relu(%a) : f16[2,14,14,128]\n", "%e"),
			    &p, &g, &m, c));
	kf_nid f = first_fusion(g);
	assert_true(p.dnn && p.epi);
	assert_int_equal(p.a, kf_in(g, f, 0));
	assert_int_equal(p.b, kf_in(g, f, 1));
	assert_int_equal(kf_vtype(g, p.acc)->dim[3], 128);
	assert_true(p.acc != kf_res(g, f, 0));
	assert_int_equal(p.conv.N, 2);
	assert_int_equal(p.conv.C, 64);
	assert_int_equal(p.conv.O, 128);
	assert_int_equal(p.conv.p[2], 1);
	assert_int_equal(p.conv.s[1], 2);
	assert_int_equal(p.conv.out[2], 14);
	kf_module_free(m);
	/* the bias alone still needs the epilogue */
	assert_true(plan_of(CONV_FUSION("[1, 1, 1, 1]", "", "%c"), &p, &g, &m, c));
	assert_true(p.epi);
	kf_module_free(m);
	/* pads [top, left, bottom, right] = [0, 0, 1, 1]: cuDNN pads both ends alike */
	assert_false(plan_of(CONV_FUSION("[0, 0, 1, 1]", "", "%c"), &p, &g, &m, c));
	kf_module_free(m);
	/* a conv alone, without bias: cuDNN writes the result */
	const char *bare = "graph @g(%x: f16[1,8,8,16], %w: f16[32,1,1,16]) -> (f16[1,8,8,32]) {\n"
			   "  %y = conv(%x, %w) {channels_last = true} : f16[1,8,8,32]\n  return %y\n}\n";
	assert_true(plan_of(bare, &p, &g, &m, c));
	assert_false(p.epi);
	assert_int_equal(p.acc, kf_res(g, first_fusion(g), 0));
	kf_module_free(m);
	const char *biased = "graph @g(%x: f16[1,8,8,16], %w: f16[32,1,1,16], %b: f16[32]) -> (f16[1,8,8,32]) {\n"
			     "  %y = conv(%x, %w, %b) {channels_last = true} : f16[1,8,8,32]\n  return %y\n}\n";
	assert_false(plan_of(biased, &p, &g, &m, c));
	kf_module_free(m);
	const char *cast = "graph @g(%x: f32[1,8,8,16], %w: f16[32,1,1,16]) -> (f16[1,8,8,32]) {\n"
			   "  %y = fusion @c0(%x, %w) {kind = \"conv\"} : f16[1,8,8,32] {\n"
			   "  ^(%0: f32[1,8,8,16], %1: f16[32,1,1,16]):\n"
			   "    %h = cast(%0) {to = \"f16\"} : f16[1,8,8,16]\n"
			   "    %c = conv(%h, %1) {channels_last = true} : f16[1,8,8,32]\n    yield %c\n  }\n  return %y\n}\n";
	assert_false(plan_of(cast, &p, &g, &m, c));
	kf_module_free(m);
	kf_ctx_free(c);
}

/* Plans text in a dry run with $KFUSE_CONV_TILE = tile (NULL: unset); the
 * report into rep. */
static void dry_plan(kf_ctx *c, const char *text, const char *tile, kf_buf *rep)
{
	kf_module *m = kft_parse(c, text);
	char dir[] = "/tmp/kf-cudnn-XXXXXX";
	assert_non_null(mkdtemp(dir));
	if (tile)
		setenv("KFUSE_CONV_TILE", tile, 1);
	kf_cuda_opts co = {.dry_run = true, .cache_dir = dir, .report = rep, .threads = 1};
	kf_cuda_session *s = kf_cuda_session_new(c, &co);
	assert_non_null(s);
	if (kf_cuda_session_plan(s, m->graph[0]) != 0)
		kft_fail_diags(c, "plan");
	kf_cuda_stats cs;
	kf_cuda_session_stats(s, &cs);
	kf_cuda_session_free(s);
	unsetenv("KFUSE_CONV_TILE");
	kf_module_free(m);
	kft_rmdir(dir);
	kf_buf_putc(rep, '\0');
	rep->n--;
}

/* A conv + bias + residual + relu routed through cuDNN: the report says
 * so, and the one program compiled is the epilogue kernel (NVRTC checks
 * it); without the tile the own kernel; a conv cuDNN cannot take keeps
 * its own kernel with a note. */
static void test_dry_route(void **st)
{
	(void)st;
	if (!kft_have_nvrtc())
		skip();
	kf_ctx *c = kf_ctx_new();
	kf_buf rep = {0};
	const char *g = CONV_FUSION("[1, 1, 1, 1]",
				    "    %a = add(%c, %3) : f16[2,14,14,128]\n    %e = relu(%a) : f16[2,14,14,128]\n", "%e");
	dry_plan(c, g, "cudnn", &rep);
	assert_non_null(strstr(rep.p, "@c0: cuDNN + the fused epilogue kernel (KFUSE_CONV_TILE; a dry run)"));
	rep.n = 0;
	dry_plan(c, g, NULL, &rep);
	assert_null(strstr(rep.p, "cuDNN"));
	rep.n = 0;
	dry_plan(c, CONV_FUSION("[0, 0, 1, 1]", "", "%c"), "cudnn", &rep);
	assert_non_null(strstr(rep.p, "@c0: cuDNN not used (a conv it does not take"));
	kf_buf_free(&rep);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_describe),
		cmocka_unit_test(test_fits),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_dry_route),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
