/* Unit tests of the cuBLASLt epilogue path without a GPU: which fusions map
 * to one cublasLtMatmul (kf_cublaslt_plan), and every value the descriptor
 * setup hands the library (kf_cublaslt_describe): attribute ids, value
 * sizes and values, layouts in cuBLAS's column-major view.  When the CUDA
 * toolkit's cublasLt.h is found (KF_HAVE_CUBLASLT_H), the ids and enums are
 * checked against it, not against numbers copied by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf_test.h"

#include "cublas.h"
#include "emit_matmul.h"
#include "kf.h"
#include "pass.h"
#include "passes.h"

#ifdef KF_HAVE_CUBLASLT_H
#include <cublasLt.h>
#define H_TRANSA CUBLASLT_MATMUL_DESC_TRANSA
#define H_TRANSB CUBLASLT_MATMUL_DESC_TRANSB
#define H_EPILOGUE CUBLASLT_MATMUL_DESC_EPILOGUE
#define H_BIAS_POINTER CUBLASLT_MATMUL_DESC_BIAS_POINTER
#define H_BIAS_DATA_TYPE CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
#define H_EPI_BIAS CUBLASLT_EPILOGUE_BIAS
#define H_EPI_RELU_BIAS CUBLASLT_EPILOGUE_RELU_BIAS
#define H_EPI_GELU_BIAS CUBLASLT_EPILOGUE_GELU_BIAS
#define H_PREF_WS CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
#define H_PREF_RED CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK
#define H_RED_INPLACE CUBLASLT_REDUCTION_SCHEME_INPLACE
#define H_RED_COMPUTE CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
#define H_COMPUTE_32F CUBLAS_COMPUTE_32F
#define H_R_32F CUDA_R_32F
#define H_R_16F CUDA_R_16F
#define H_R_16BF CUDA_R_16BF
#define H_OP_N CUBLAS_OP_N
#define H_OP_T CUBLAS_OP_T
#else /* the values of CUDA 12/13's cublasLt.h, cublas_api.h, library_types.h */
#define H_TRANSA 3
#define H_TRANSB 4
#define H_EPILOGUE 7
#define H_BIAS_POINTER 8
#define H_BIAS_DATA_TYPE 26
#define H_EPI_BIAS 4
#define H_EPI_RELU_BIAS 6
#define H_EPI_GELU_BIAS 36
#define H_PREF_WS 1
#define H_PREF_RED 3
#define H_RED_INPLACE 1
#define H_RED_COMPUTE 2
#define H_COMPUTE_32F 68
#define H_R_32F 0
#define H_R_16F 2
#define H_R_16BF 14
#define H_OP_N 0
#define H_OP_T 1
#endif

static const kf_lt_attr *find(const kf_lt_attr *a, int n, int attr)
{
	for (int i = 0; i < n; i++)
		if (a[i].attr == attr)
			return &a[i];
	return NULL;
}

static void check_layout(const kf_lt_layout *l, int type, uint64_t rows, uint64_t cols, int64_t ld)
{
	assert_int_equal(l->type, type);
	assert_int_equal(l->rows, rows);
	assert_int_equal(l->cols, cols);
	assert_int_equal(l->ld, ld);
}

/* f16, M = 512, N = 4096, K = 1024, gelu-tanh: the bench's case */
static void test_describe_gelu(void **st)
{
	(void)st;
	kf_lt_plan p = {.M = 512, .N = 4096, .K = 1024, .dt = KF_F16, .epi = KF_LT_GELU_BIAS};
	kf_lt_desc d;
	kf_cublaslt_describe(&p, &d);
	assert_int_equal(d.compute, H_COMPUTE_32F);
	assert_int_equal(d.scale, H_R_32F);
	const kf_lt_attr *a = find(d.desc, d.ndesc, H_TRANSA);
	assert_non_null(a);
	assert_int_equal(a->size, sizeof(int32_t)); /* cublasOperation_t as int32_t */
	assert_int_equal(a->v.i32, H_OP_N);
	assert_non_null(a = find(d.desc, d.ndesc, H_TRANSB));
	assert_int_equal(a->size, sizeof(int32_t));
	assert_int_equal(a->v.i32, H_OP_N);
	assert_non_null(a = find(d.desc, d.ndesc, H_EPILOGUE));
	assert_int_equal(a->size, sizeof(uint32_t)); /* the header: "uint32_t" */
	assert_int_equal(a->v.u32, H_EPI_GELU_BIAS);
	assert_non_null(a = find(d.desc, d.ndesc, H_BIAS_POINTER));
	assert_int_equal(a->size, sizeof(void *));
	/* the heuristic reads the value for its alignment: never 1 (the bug) */
	assert_int_equal((uintptr_t)a->v.ptr % 256, 0);
	assert_true(a->v.ptr != NULL);
	assert_non_null(a = find(d.desc, d.ndesc, H_BIAS_DATA_TYPE));
	assert_int_equal(a->size, sizeof(int32_t));
	assert_int_equal(a->v.i32, H_R_16F);
	/* column-major D^T[N, M] = B^T[N, K] A^T[K, M]: cuBLAS's A is our B */
	check_layout(&d.a, H_R_16F, 4096, 1024, 4096);
	check_layout(&d.b, H_R_16F, 1024, 512, 1024);
	check_layout(&d.d, H_R_16F, 4096, 512, 4096); /* rows of D = N = the bias length */
	assert_non_null(a = find(d.pref, d.npref, H_PREF_WS));
	assert_int_equal(a->size, sizeof(uint64_t));
	assert_true(a->v.u64 >= (1u << 20));
	/* split-K partials reduced in f32, never in the f16 output type */
	assert_non_null(a = find(d.pref, d.npref, H_PREF_RED));
	assert_int_equal(a->size, sizeof(uint32_t));
	assert_int_equal(a->v.u32, H_RED_INPLACE | H_RED_COMPUTE);
	/* no attribute twice, every size 4 or 8 */
	for (int i = 0; i < d.ndesc; i++) {
		assert_true(d.desc[i].size == 4 || d.desc[i].size == 8);
		for (int j = i + 1; j < d.ndesc; j++)
			assert_int_not_equal(d.desc[i].attr, d.desc[j].attr);
	}
}

/* Transposed operands and the other epilogues. */
static void test_describe_trans(void **st)
{
	(void)st;
	kf_lt_plan p = {.M = 64, .N = 256, .K = 128, .ta = true, .tb = true, .dt = KF_BF16, .epi = KF_LT_RELU_BIAS};
	kf_lt_desc d;
	kf_cublaslt_describe(&p, &d);
	assert_int_equal(find(d.desc, d.ndesc, H_TRANSA)->v.i32, H_OP_T);
	assert_int_equal(find(d.desc, d.ndesc, H_TRANSB)->v.i32, H_OP_T);
	assert_int_equal(find(d.desc, d.ndesc, H_EPILOGUE)->v.u32, H_EPI_RELU_BIAS);
	assert_int_equal(find(d.desc, d.ndesc, H_BIAS_DATA_TYPE)->v.i32, H_R_16BF);
	check_layout(&d.a, H_R_16BF, 128, 256, 128); /* B stored [N, K] */
	check_layout(&d.b, H_R_16BF, 64, 128, 64);   /* A stored [K, M] */
	check_layout(&d.d, H_R_16BF, 256, 64, 256);
	p.epi = KF_LT_BIAS;
	p.dt = KF_F32;
	kf_cublaslt_describe(&p, &d);
	assert_int_equal(find(d.desc, d.ndesc, H_EPILOGUE)->v.u32, H_EPI_BIAS);
	assert_int_equal(find(d.desc, d.ndesc, H_BIAS_DATA_TYPE)->v.i32, H_R_32F);
}

/* kf_cublaslt_plan of graph g's fusion (its last one). */
static bool plan_of(kf_graph *g, kf_lt_plan *p)
{
	bool found = false;
	kf_foreach_node(g, 0, n) {
		if (kf_N(g, n)->op == KF_OP_FUSION)
			found = kf_cublaslt_plan(g, n, p);
	}
	return found;
}

/* The fusion the bench makes maps to a plan with the bias along N; an exact
 * gelu does not (cuBLASLt's is the tanh form). */
/* KFUSE_CUBLAS_MATH=fast leaves cuBLASLt its default mask (every scheme,
 * the output type's included); anything else keeps the f32 reduction. */
static void test_fast_math(void **st)
{
	(void)st;
	kf_lt_plan p = {.M = 128, .N = 1700, .K = 4096, .dt = KF_F16, .epi = KF_LT_BIAS};
	kf_lt_desc d;
	setenv("KFUSE_CUBLAS_MATH", "fast", 1);
	kf_cublaslt_describe(&p, &d);
	assert_true(kf_cublas_fast_math());
	assert_null(find(d.pref, d.npref, H_PREF_RED));
	setenv("KFUSE_CUBLAS_MATH", "strict", 1);
	kf_cublaslt_describe(&p, &d);
	assert_false(kf_cublas_fast_math());
	assert_non_null(find(d.pref, d.npref, H_PREF_RED));
	unsetenv("KFUSE_CUBLAS_MATH");
}

static void test_plan(void **st)
{
	(void)st;
	static const char *const src[2] = {
		"graph @g(%x: f16[512,1024], %w: f16[1024,4096], %b: f16[4096]) -> (f16[512,4096]) {\n"
		"  %y = fusion @m0(%x, %w, %b) {kind = \"contraction\"} : f16[512,4096] {\n"
		"  ^(%px: f16[512,1024], %pw: f16[1024,4096], %pb: f16[4096]):\n"
		"    %m = matmul(%px, %pw) : f16[512,4096]\n    %a = add(%m, %pb) : f16[512,4096]\n"
		"    %r = gelu(%a) {approximate = \"tanh\"} : f16[512,4096]\n    yield %r\n  }\n  return %y\n}\n",
		"graph @g(%x: f16[512,1024], %w: f16[1024,4096], %b: f16[4096]) -> (f16[512,4096]) {\n"
		"  %y = fusion @m0(%x, %w, %b) {kind = \"contraction\"} : f16[512,4096] {\n"
		"  ^(%px: f16[512,1024], %pw: f16[1024,4096], %pb: f16[4096]):\n"
		"    %m = matmul(%px, %pw) : f16[512,4096]\n    %a = add(%m, %pb) : f16[512,4096]\n"
		"    %r = gelu(%a) : f16[512,4096]\n    yield %r\n  }\n  return %y\n}\n"};
	for (int i = 0; i < 2; i++) {
		kf_ctx *c = kf_ctx_new();
		kf_module *m = kft_parse(c, src[i]);
		kf_graph *g = m->graph[0];
		kf_lt_plan p;
		bool found = plan_of(g, &p);
		assert_int_equal(found, i == 0);
		if (i == 0) {
			assert_int_equal(p.M, 512);
			assert_int_equal(p.N, 4096);
			assert_int_equal(p.K, 1024);
			assert_int_equal(p.epi, KF_LT_GELU_BIAS);
			assert_int_equal(kf_type_numel(kf_vtype(g, p.bias)), p.N);
			assert_int_equal(p.res, KF_NONE);
		}
		kf_module_free(m);
		kf_ctx_free(c);
	}
}

/* A residual added after the bias (BERT's attention output and FFN down
 * projection) is cuBLASLt's C with beta 1, before a ReLU too; added after
 * the activation, or of another shape (broadcast rows), it is no plan. */
static void test_plan_residual(void **st)
{
	(void)st;
#define RES_G(TAIL, RT)                                                                                                \
	"graph @g(%x: f16[3,64,128], %w: f16[128,256], %b: f16[256], %r: f16[" RT "]) -> (f16[3,64,256]) {\n"            \
	"  %y = fusion @m0(%x, %w, %b, %r) {kind = \"contraction\"} : f16[3,64,256] {\n"                                  \
	"  ^(%px: f16[3,64,128], %pw: f16[128,256], %pb: f16[256], %pr: f16[" RT "]):\n"                                  \
	"    %m = matmul(%px, %pw) : f16[3,64,256]\n    %a = add(%m, %pb) : f16[3,64,256]\n" TAIL "  }\n  return %y\n}\n"
	static const char *const src[4] = {
		RES_G("    %s = add(%pr, %a) : f16[3,64,256]\n    yield %s\n", "3,64,256"),
		RES_G("    %s = add(%a, %pr) : f16[3,64,256]\n    %t = relu(%s) : f16[3,64,256]\n    yield %t\n", "3,64,256"),
		RES_G("    %t = relu(%a) : f16[3,64,256]\n    %s = add(%t, %pr) : f16[3,64,256]\n    yield %s\n", "3,64,256"),
		RES_G("    %s = add(%a, %pr) : f16[3,64,256]\n    yield %s\n", "64,256")};
#undef RES_G
	const int epi[4] = {KF_LT_BIAS, KF_LT_RELU_BIAS, -1, -1};
	for (int i = 0; i < 4; i++) {
		kf_ctx *c = kf_ctx_new();
		kf_module *m = kft_parse(c, src[i]);
		kf_graph *g = m->graph[0];
		kf_lt_plan p;
		bool found = plan_of(g, &p);
		assert_int_equal(found, epi[i] >= 0);
		if (found) {
			assert_int_equal(p.M, 192);
			assert_int_equal(p.epi, epi[i]);
			assert_int_equal(p.res, g->blk[0].arg[3]);
			assert_int_equal(p.bias, g->blk[0].arg[2]);
		}
		kf_module_free(m);
		kf_ctx_free(c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_describe_gelu),
		cmocka_unit_test(test_describe_trans),
		cmocka_unit_test(test_fast_math),
		cmocka_unit_test(test_plan),
		cmocka_unit_test(test_plan_residual),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
