/* Unit tests of contractions around cuBLAS, without a GPU: the cost
 * model's choice for shape classes (a table: shape, libraries, expected
 * config), what a contraction's GEMM reads and writes (kf_mm_blas_plan:
 * batch folding, broadcast batch dims, transposes, prologues, epilogues),
 * the batch offsets of a broadcast GEMM (kf_blas_off against a brute-force
 * numpy broadcast), cuBLASLt plans of imported shapes, and dry-run plans
 * whose kernels around the GEMM compile with NVRTC and ptxas. */
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

#include "cublas.h"
#include "cuda_backend.h"
#include "emit_cuda.h"
#include "emit_matmul.h"
#include "kf.h"
#include "tune.h"

/* ---- the cost model ---------------------------------------------------------------------- */

typedef struct choice_case {
	kf_dtype in;
	int64_t batch, M, N, K;
	bool tf32;
	int wgmma;
	bool blas, lt;
	const char *want;
	bool sized;
	const char *tag; /* kf_mm_shape.tag: the body's ops, '.' the contraction */
} choice_case;

static void test_cost_model(void **st)
{
	(void)st;
	static const choice_case cs[] = {
		/* the fp32 Llama block's shapes: the SIMT kernel is 10x behind cuBLAS */
		{KF_F32, 1, 64, 512, 512, false, 1, true, false, "cublas"},
		{KF_F32, 1, 64, 1376, 512, false, 1, true, true, "cublaslt"},
		{KF_F32, 1, 64, 512, 1376, true, 1, true, false, "cublas"},
		/* GEMV: own, measured at 87-94% of copy */
		{KF_F32, 1, 1, 4096, 1024, false, 1, true, true, "gemvc"},
		{KF_F16, 1, 1, 1024, 4096, false, 1, true, false, "gemv"},
		/* the two measured wgmma classes */
		{KF_F16, 1, 4096, 4096, 4096, false, 1, true, true, "wg128x256x64s4c2pvs"},
		{KF_BF16, 1, 512, 4096, 4096, false, 1, true, true, "wg128x128x64s4pvs"},
		/* the same shapes without wgmma: mma.sync, a third of cuBLAS */
		{KF_F16, 1, 4096, 4096, 4096, false, -1, true, true, "cublaslt"},
		{KF_F16, 1, 512, 4096, 4096, false, -1, true, false, "cublas"},
		/* small f16 (BERT's 128 x 768): wg64x128 not measured */
		{KF_F16, 1, 128, 768, 768, false, 1, true, true, "cublaslt"},
		/* attention's batched products */
		{KF_F16, 12, 128, 128, 64, false, 1, true, false, "cublas"},
		{KF_F32, 8, 64, 64, 64, false, 1, true, false, "cublas"},
		/* a measured class's tiles, but M or K far from the measured shapes
		 * (GPT-2's tied LM head): the library */
		{KF_F16, 1, 128, 50257, 768, false, 1, true, false, "cublas"},
		{KF_F16, 1, 256, 8192, 8192, false, 1, true, false, "cublas"},
		{KF_F16, 1, 2048, 8192, 8192, false, 1, true, false, "wg128x256x64s4c2pvs"},
		/* BERT's FFN up, bias + exact GELU (cuBLASLt cannot): own at 8192
		 * rows, in a sized plan too; cuBLAS + epilogue at 2048, or with
		 * the tanh form */
		{KF_F16, 1, 8192, 3072, 768, false, 1, true, false, "wg128x256x64s4c2pvs", false, ".add+gelu"},
		{KF_F16, 1, 2048, 3072, 768, false, 1, true, false, "cublas"},
		{KF_F16, 1, 8192, 3072, 768, false, 1, true, true, "cublaslt"},
		{KF_F16, 1, 8192, 3072, 768, false, 1, true, false, "wg128x256x64s4c2pvs", true, ".add+gelu"},
		{KF_F16, 1, 2048, 3072, 768, false, 1, true, false, "cublas", true},
		/* Llama's MLP at 128 tokens, an epilogue cuBLASLt cannot take: B
		 * streamed by the own kernel (a cluster of the two M tiles, or a
		 * split over the long K); bare, at M = 64, at a short K, or in a
		 * sized plan, or bare (no epilogue to fuse): the library */
		{KF_F16, 1, 128, 5632, 2048, false, 1, true, false, "wg64x128x64s8c2s", false, ".silu+mul"},
		{KF_BF16, 1, 128, 5632, 2048, false, 1, true, false, "wg64x128x64s8c2s", false, ".add"},
		{KF_F16, 1, 100, 5632, 2048, false, 1, true, false, "cublas", false, ".silu+mul"},
		{KF_BF16, 1, 128, 5632, 4096, false, 1, true, false, "cublas", false, ".add"},
		{KF_F16, 1, 120, 2048, 5632, false, 1, true, false, "wg64x64x64s8k2s", false, ".add"},
		{KF_F16, 1, 128, 2048, 5632, false, 1, true, false, "wg64x64x64s8k2s", false, ".add+cast"},
		{KF_F16, 1, 128, 5632, 2048, false, 1, true, false, "cublas", false, ""},
		{KF_F16, 1, 128, 5632, 2048, false, 1, true, false, "cublas", false, "cast."},
		{KF_F16, 1, 128, 5632, 2048, false, 1, true, true, "cublaslt"},
		{KF_F16, 1, 64, 5632, 2048, false, 1, true, false, "cublas", false, ".add"},
		{KF_F16, 1, 128, 2048, 2048, false, 1, true, false, "cublas", false, ".add"},
		{KF_F16, 1, 128, 5632, 2048, false, 1, true, false, "cublas", true, ".add"},
		{KF_F16, 1, 128, 5632, 2048, false, 0, true, false, "cublas", false, ".add"},
		/* a sized plan's wgmma kernel is slower than the static one: the library */
		{KF_F16, 1, 4096, 4096, 4096, false, 1, true, true, "cublaslt", true},
		/* no library takes it: the own kernel */
		{KF_I32, 1, 64, 64, 64, false, 1, false, false, "fma64x64x16t4x4"},
		{KF_F32, 1, 64, 512, 512, false, 1, false, false, "fma64x64x16t4x4"},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
		const choice_case *c = &cs[i];
		kf_mm_shape sh = {.in = c->in, .out = c->in, .batch = c->batch, .M = c->M, .N = c->N, .K = c->K,
				  .tf32 = c->tf32, .raw = true, .wgmma = c->wgmma, .sized = c->sized};
		snprintf(sh.tag, sizeof sh.tag, "%s", c->tag ? c->tag : "");
		char out[32];
		const char *why = kf_mm_choose(&sh, (kf_mm_libs){.blas = c->blas, .lt = c->lt}, out, sizeof out);
		if (strcmp(out, c->want))
			fail_msg("case %zu: %s (%s), want %s", i, out, why, c->want);
		assert_non_null(why);
	}
}

/* ---- broadcast batches -------------------------------------------------------------------- */

/* numpy's broadcast of P's dims to O's: the element offset of batch z */
static int64_t brute_off(const kf_type *O, const kf_type *P, int64_t mat, int64_t z)
{
	int64_t idx[KF_MAX_RANK], r = z;
	for (int d = O->rank - 1; d >= 0; d--) {
		idx[d] = r % O->dim[d];
		r /= O->dim[d];
	}
	int64_t lin = 0;
	for (int j = 0; j < P->rank; j++) {
		int d = O->rank - P->rank + j;
		lin = lin * P->dim[j] + (P->dim[j] == 1 ? 0 : idx[d]);
	}
	return lin * mat;
}

static kf_type bt(int rank, int64_t a, int64_t b, int64_t c)
{
	kf_type t = {.dtype = KF_F16, .rank = (uint8_t)rank};
	int64_t d[3] = {a, b, c};
	for (int i = 0; i < rank; i++)
		t.dim[i] = d[i];
	return t;
}

static void test_batch_offsets(void **st)
{
	(void)st;
	struct {
		kf_type ob, abt, bbt;
		int64_t sa, sb; /* expected strides (-1: pointer arrays) */
	} cs[] = {
		/* equal batches: strided */
		{bt(2, 2, 12, 0), bt(2, 2, 12, 0), bt(2, 2, 12, 0), 64 * 32, 32 * 48},
		/* B without batches: stride 0 */
		{bt(1, 6, 0, 0), bt(1, 6, 0, 0), bt(0, 0, 0, 0), 64 * 32, 0},
		/* heads shared across the batch (k of grouped attention): B [1, 12] */
		{bt(2, 2, 12, 0), bt(2, 2, 12, 0), bt(2, 1, 12, 0), 64 * 32, -1},
		/* one matrix per batch for all heads: A [2, 1] */
		{bt(2, 2, 12, 0), bt(2, 2, 1, 0), bt(1, 12, 0, 0), -1, -1},
		/* all ones: broadcast */
		{bt(3, 2, 3, 4), bt(3, 1, 1, 1), bt(3, 2, 3, 4), 0, 32 * 48},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
		kf_blas_gemm g = {.dt = KF_F16, .M = 64, .N = 48, .K = 32, .ob = cs[i].ob, .abt = cs[i].abt, .bbt = cs[i].bbt};
		assert_true(kf_blas_fits(&g));
		int64_t nb = kf_blas_batch(&g);
		for (int64_t z = 0; z < nb; z++) {
			assert_int_equal(kf_blas_off(&g, 0, z), brute_off(&g.ob, &g.abt, 64 * 32, z));
			assert_int_equal(kf_blas_off(&g, 1, z), brute_off(&g.ob, &g.bbt, 32 * 48, z));
		}
		assert_int_equal(kf_blas_stride(&g, 0), cs[i].sa);
		assert_int_equal(kf_blas_stride(&g, 1), cs[i].sb);
	}
	/* batches that do not broadcast, a dtype cuBLAS lacks, tf32 of f16 */
	kf_blas_gemm bad = {.dt = KF_F16, .M = 4, .N = 4, .K = 4, .ob = bt(1, 3, 0, 0), .abt = bt(1, 2, 0, 0)};
	assert_false(kf_blas_fits(&bad));
	bad.abt = bt(0, 0, 0, 0);
	assert_true(kf_blas_fits(&bad));
	bad.dt = KF_I32;
	assert_false(kf_blas_fits(&bad));
	bad.dt = KF_F16;
	bad.tf32 = true;
	assert_false(kf_blas_fits(&bad));
}

/* ---- what the GEMM reads and writes ------------------------------------------------------- */

static kf_nid first_contraction(kf_graph *g)
{
	kf_foreach_node(g, 0, n)
		if (kf_mm_node_shape(g, n, NULL))
			return n;
	return KF_NONE;
}

static void test_blas_plan(void **st)
{
	(void)st;
	kf_ctx *c = kf_ctx_new();
	/* an activation [2, 64, 512] over a weight: one GEMM of 128 rows,
	 * the bias and the residual in the epilogue kernel (cuBLAS's route) */
	kf_module *m = kft_parse_fused(c, "graph @g(%x: f32[2,64,512], %w: f32[512,256], %b: f32[256], %r: f32[2,64,256])"
				       " -> (f32[2,64,256]) {\n  %m = matmul(%x, %w) : f32[2,64,256]\n"
				       "  %a = add(%m, %b) : f32[2,64,256]\n  %s = add(%a, %r) : f32[2,64,256]\n  return %s\n}\n");
	kf_graph *g = m->graph[0];
	kf_nid f = first_contraction(g);
	kf_mm_blas p;
	assert_true(kf_mm_blas_plan(g, f, &p));
	assert_int_equal(p.gemm.M, 128);
	assert_int_equal(p.gemm.N, 256);
	assert_int_equal(p.gemm.K, 512);
	assert_int_equal(kf_blas_batch(&p.gemm), 1);
	assert_false(p.pro[0] || p.pro[1]);
	assert_true(p.epi);
	assert_int_equal(p.a, g->blk[0].arg[0]);
	assert_int_equal(p.b, g->blk[0].arg[1]);
	assert_int_not_equal(p.acc, kf_res(g, f, 0)); /* the body's product */
	kf_lt_plan lp; /* the residual is cuBLASLt's C (beta 1), the bias its epilogue's */
	assert_true(kf_cublaslt_plan(g, f, &lp));
	assert_int_equal(lp.res, g->blk[0].arg[3]);
	assert_int_equal(lp.bias, g->blk[0].arg[2]);
	assert_int_equal(lp.epi, KF_LT_BIAS);
	kf_module_free(m);

	/* attention's scores: q [2, 12, 64, 32] @ transpose(k) with k [2, 1, 64, 32]
	 * (heads shared): batch 24, B broadcast in part, stored [N, K] */
	m = kft_parse_fused(c, "graph @g(%q: f16[2,12,64,32], %k: f16[2,1,64,32]) -> (f16[2,12,64,64]) {\n"
			       "  %t = transpose(%k) {perm = [0, 1, 3, 2]} : f16[2,1,32,64]\n"
			       "  %s = matmul(%q, %t) : f16[2,12,64,64]\n  return %s\n}\n");
	g = m->graph[0];
	f = first_contraction(g);
	assert_true(kf_mm_blas_plan(g, f, &p));
	assert_true(p.gemm.tb);
	assert_false(p.gemm.ta);
	assert_int_equal(kf_blas_batch(&p.gemm), 24);
	assert_int_equal(kf_blas_stride(&p.gemm, 0), 64 * 32);
	assert_int_equal(kf_blas_stride(&p.gemm, 1), -1);
	assert_int_equal(kf_blas_off(&p.gemm, 1, 13), 1 * 64 * 32); /* batch 1, head 1: k[1, 0] */
	assert_false(p.epi); /* the product is the result: written in place */
	assert_int_equal(p.acc, kf_res(g, f, 0));
	assert_int_equal(p.b, g->blk[0].arg[1]);
	kf_module_free(m);

	/* a cast before the contraction: the prologue kernel writes the operand */
	m = kft_parse_fused(c, "graph @g(%x: f16[64,128], %w: f32[128,32]) -> (f32[64,32]) {\n"
			       "  %c = cast(%x) {to = \"f32\"} : f32[64,128]\n"
			       "  %m = matmul(%c, %w) : f32[64,32]\n  return %m\n}\n");
	g = m->graph[0];
	f = first_contraction(g);
	assert_true(kf_mm_blas_plan(g, f, &p));
	assert_true(p.pro[0]);
	assert_false(p.pro[1]);
	assert_int_equal(kf_vtype(g, p.a)->dtype, KF_F32);
	assert_int_not_equal(p.a, g->blk[0].arg[0]);
	kf_module_free(m);

	/* gemm with alpha and no C: alpha goes to the GEMM, no epilogue */
	m = kft_parse_fused(c, "graph @g(%x: f32[64,128], %w: f32[32,128]) -> (f32[64,32]) {\n"
			       "  %m = gemm(%x, %w) {alpha = 0.5, trans_b = 1} : f32[64,32]\n  return %m\n}\n");
	g = m->graph[0];
	f = first_contraction(g);
	assert_true(kf_mm_blas_plan(g, f, &p));
	assert_true(p.gemm.tb);
	assert_false(p.epi);
	assert_true(p.gemm.alpha == 0.5);
	kf_module_free(m);

	/* integers: no cuBLAS */
	m = kft_parse_fused(c, "graph @g(%x: i32[8,8], %w: i32[8,8]) -> (i32[8,8]) {\n"
			       "  %m = matmul(%x, %w) : i32[8,8]\n  return %m\n}\n");
	assert_false(kf_mm_blas_plan(m->graph[0], first_contraction(m->graph[0]), &p));
	kf_module_free(m);
	kf_ctx_free(c);
}

/* What PyTorch exports for nn.Linear: MatMul over [1, T, D] then Add of
 * the bias (3-D), or Gemm with C and transB (2-D): both one cuBLASLt
 * call with the bias epilogue, the GELU-tanh one folded too. */
static void test_lt_imported(void **st)
{
	(void)st;
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse_fused(c, "graph @g(%x: f32[1,64,512], %w: f32[512,1376], %b: f32[1376]) -> (f32[1,64,1376]) {\n"
				       "  %m = matmul(%x, %w) : f32[1,64,1376]\n  %a = add(%b, %m) : f32[1,64,1376]\n"
				       "  %y = gelu(%a) {approximate = \"tanh\"} : f32[1,64,1376]\n  return %y\n}\n");
	kf_graph *g = m->graph[0];
	kf_lt_plan lp;
	assert_true(kf_cublaslt_plan(g, first_contraction(g), &lp));
	assert_int_equal(lp.M, 64);
	assert_int_equal(lp.epi, KF_LT_GELU_BIAS);
	assert_int_equal(lp.bias, g->blk[0].arg[2]);
	kf_module_free(m);
	m = kft_parse_fused(c, "graph @g(%x: f16[64,512], %w: f16[256,512], %b: f16[256]) -> (f16[64,256]) {\n"
			       "  %m = gemm(%x, %w, %b) {trans_b = 1} : f16[64,256]\n  %y = relu(%m) : f16[64,256]\n"
			       "  return %y\n}\n");
	g = m->graph[0];
	assert_true(kf_cublaslt_plan(g, first_contraction(g), &lp));
	assert_true(lp.tb);
	assert_int_equal(lp.epi, KF_LT_RELU_BIAS);
	assert_true(lp.alpha == 1.0);
	kf_lt_desc d;
	kf_cublaslt_describe(&lp, &d);
	assert_int_equal(d.compute, 68); /* CUBLAS_COMPUTE_32F */
	lp.tf32 = true;
	lp.dt = KF_F32;
	kf_cublaslt_describe(&lp, &d);
	assert_int_equal(d.compute, 77); /* CUBLAS_COMPUTE_32F_FAST_TF32 */
	kf_module_free(m);
	kf_ctx_free(c);
}

/* ---- dry-run plans: the kernels around the GEMM compile ------------------------------------ */

/* Plans text (fused) in a dry run; the report into rep; stats into *st. */
static void dry_plan(kf_ctx *c, const char *text, bool tf32, kf_buf *rep, kf_cuda_stats *st)
{
	kf_module *m = kft_parse_fused(c, text);
	char dir[] = "/tmp/kf-route-XXXXXX";
	assert_non_null(mkdtemp(dir));
	kf_cuda_opts co = {.dry_run = true, .cache_dir = dir, .report = rep, .allow_tf32 = tf32, .threads = 1};
	kf_cuda_session *s = kf_cuda_session_new(c, &co);
	assert_non_null(s);
	if (kf_cuda_session_plan(s, m->graph[0]) != 0)
		kft_fail_diags(c, "plan");
	kf_cuda_session_stats(s, st);
	kf_cuda_session_free(s);
	kf_module_free(m);
	kft_rmdir(dir);
	kf_buf_putc(rep, '\0');
	rep->n--;
}

static void test_dry_plans(void **st)
{
	(void)st;
	if (!kft_have_nvrtc())
		skip();
	kf_ctx *c = kf_ctx_new();
	kf_buf rep = {0};
	kf_cuda_stats s;
	/* the Llama block's down projection with its residual: cuBLAS, then
	 * the epilogue kernel (the one program compiled) */
	dry_plan(c, "graph @g(%x: f32[1,64,1376], %w: f32[1376,512], %r: f32[1,64,512]) -> (f32[1,64,512]) {\n"
		    "  %m = matmul(%x, %w) : f32[1,64,512]\n  %s = add(%r, %m) : f32[1,64,512]\n  return %s\n}\n",
		 false, &rep, &s);
	if (!strstr(rep.p, "cuBLAS + the fused epilogue kernel (library: cuBLAS)"))
		fail_msg("%s", rep.p);
	assert_int_equal(s.kernels, 2);
	assert_int_equal(s.compiled, 1);
	rep.n = 0;
	/* allowed tf32, a cast prologue: the prologue kernel, a tf32 GEMM, in place */
	dry_plan(c, "graph @g(%x: f16[64,512], %w: f32[512,512]) -> (f32[64,512]) {\n"
		    "  %c = cast(%x) {to = \"f32\"} : f32[64,512]\n  %m = matmul(%c, %w) : f32[64,512]\n  return %m\n}\n",
		 true, &rep, &s);
	if (!strstr(rep.p, "cuBLAS (tf32) after the prologue kernel (library"))
		fail_msg("%s", rep.p);
	assert_int_equal(s.kernels, 2);
	rep.n = 0;
	/* GEMV stays own */
	dry_plan(c, "graph @g(%x: f32[1,1024], %w: f32[1024,4096]) -> (f32[1,4096]) {\n"
		    "  %m = matmul(%x, %w) : f32[1,4096]\n  return %m\n}\n",
		 false, &rep, &s);
	if (!strstr(rep.p, "own kernel gemvc (cost model: gemv)"))
		fail_msg("%s", rep.p);
	kf_buf_free(&rep);
	kf_ctx_free(c);
}

/* Llama's MLP at 128 tokens, routed by a dry plan: the epilogues cuBLAS
 * would run as a second kernel go to the own kernels that stream the
 * weight (emit_mm_config.c mem_bound_tile); the bare product stays with
 * cuBLAS.  The SiLU epilogue has no IEEE division, whose slow-path branch
 * serialised each thread's 64 outputs (26.4 us against 13.6 with an add,
 * s15d); a division in the graph keeps its div.rn (the control). */
#define MLP128(w, body, out)                                                                                     \
	"graph @g(%x: f16[128," w "], %w: f16[" out "," w "], %r: f16[128," out "]) -> (f16[128," out "]) {\n"      \
	"  %t = transpose(%w) {perm = [1, 0]} : f16[" w "," out "]\n  %y = matmul(%x, %t) : f16[128," out "]\n" body \
	"}\n"
#define SILU_MUL "  %s = silu(%y) : f16[128,5632]\n  %z = mul(%s, %r) : f16[128,5632]\n  return %z\n"
static void test_mem_bound_route(void **st)
{
	(void)st;
	if (!kft_have_nvrtc())
		skip();
	static const char *const plans[][2] = {
		{MLP128("2048", SILU_MUL, "5632"), "own kernel wg64x128x64s8c2s (cost model: "},
		{MLP128("5632", "  %z = add(%y, %r) : f16[128,2048]\n  return %z\n", "2048"),
		 "own kernel wg64x64x64s8k2s (cost model: "},
		{MLP128("2048", "  return %y\n", "5632"), "cuBLAS (library: cuBLAS)"},
	};
	kf_ctx *c = kf_ctx_new();
	kf_buf rep = {0};
	kf_cuda_stats cs;
	for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
		rep.n = 0;
		dry_plan(c, plans[i][0], false, &rep, &cs);
		if (!strstr(rep.p, plans[i][1]))
			fail_msg("plan %zu: want \"%s\": %s", i, plans[i][1], rep.p);
	}
	kf_buf_free(&rep);
	kf_ctx_free(c);
	static const char *const text[2] = {
		MLP128("2048", SILU_MUL, "5632"),
		MLP128("2048", "  %z = div(%y, %r) : f16[128,5632]\n  return %z\n", "5632"),
	};
	kf_buf ptx = {0};
	for (int div = 0; div < 2; div++) {
		kf_kernel k;
		kft_emit_contraction(text[div], 1, "wg64x128x64s8c2s", &k);
		assert_true(k.sm90a);
		ptx.n = 0;
		kft_ptx(&k, "sm_90a", &ptx);
		if ((strstr(ptx.p, "div.rn.f32") != NULL) != (div == 1))
			fail_msg("%s: div.rn.f32 %s", div ? "div" : "silu", div ? "missing" : "present");
		kf_kernel_free(&k);
	}
	kf_buf_free(&ptx);
}

/* The part kernels of every kind compile to cubins without spills. */
static void test_parts_compile(void **st)
{
	(void)st;
	if (!kft_have_nvrtc())
		skip();
	static const char *const src[] = {
		/* bias + gelu (exact: not cuBLASLt's), f16, batched 3-D */
		"graph @g(%x: f16[4,32,64], %w: f16[64,48], %b: f16[48]) -> (f16[4,32,48]) {\n"
		"  %m = matmul(%x, %w) : f16[4,32,48]\n  %a = add(%m, %b) : f16[4,32,48]\n"
		"  %y = gelu(%a) : f16[4,32,48]\n  return %y\n}\n",
		/* gemm with C and alpha, bf16, two results (the sum and a cast) */
		"graph @g(%x: bf16[32,64], %w: bf16[64,16], %c: bf16[32,16]) -> (bf16[32,16], f32[32,16]) {\n"
		"  %m = gemm(%x, %w, %c) {alpha = 2.0, beta = 0.5} : bf16[32,16]\n"
		"  %f = cast(%m) {to = \"f32\"} : f32[32,16]\n  return %m, %f\n}\n",
		/* a scaled, transposed input operand (k * s, as attention scales):
		 * prologue (fuse-matmul keeps it: nothing else would compute it) */
		"graph @g(%q: f32[8,16,32], %k: f32[8,16,32]) -> (f32[8,16,16]) {\n"
		"  %h = const 0.125 : f32[]\n  %s = mul(%k, %h) : f32[8,16,32]\n"
		"  %t = transpose(%s) {perm = [0, 2, 1]} : f32[8,32,16]\n"
		"  %m = matmul(%q, %t) : f32[8,16,16]\n  return %m\n}\n",
	};
	int parts = 0;
	for (size_t i = 0; i < sizeof src / sizeof *src; i++) {
		kf_ctx *c = kf_ctx_new();
		kf_module *m = kft_parse_fused(c, src[i]);
		kf_graph *g = m->graph[0];
		kf_nid f = first_contraction(g);
		for (int part = KF_MM_PART_A; part <= KF_MM_PART_EPI; part++) {
			kf_kernel k;
			int rc = kf_emit_node_part(g, f, NULL, part, &k);
			if (rc < 0)
				kft_fail_diags(c, "part");
			if (rc == 1)
				continue;
			if (getenv("KFT_DUMP")) puts(k.src);
			kft_ptxas_checked(&k, "sm_90", 64);
			kf_kernel_free(&k);
			parts++;
		}
		kf_module_free(m);
		kf_ctx_free(c);
	}
	assert_int_equal(parts, 3); /* the two epilogues, then B's prologue */
}

/* The shipped H200 table: every line parses (no warning), its keys are
 * what the tuner writes for the bench's graph, and it applies on an H200
 * only (not on another sm_90 part, not with KFUSE_TUNE_SHIPPED=0), after
 * the user's cache. */
static void test_shipped_table(void **st)
{
	(void)st;
	kf_ctx *c = kf_ctx_new();
	const char *which = NULL, *text = kf_tune_shipped("NVIDIA H200", &which);
	assert_non_null(text);
	assert_string_equal(which, "cuda/tune_h200.txt");
	assert_null(kf_tune_shipped("NVIDIA H100 80GB HBM3", NULL));
	assert_null(kf_tune_shipped(NULL, NULL));
	kf_tune_table t = {0};
	kf_tune_parse(c, which, text, &t);
	assert_int_equal(kf_nerrors(c), 0);
	kf_buf d = {0};
	kf_diag_render(c, &d);
	assert_int_equal(d.n, 0); /* no warning either */
	assert_true(t.n >= 2);
	kf_tune_table_free(&t);
	kf_module *m = kft_parse_fused(c, "graph @g(%x: f16[4096,4096], %w: f16[4096,4096], %b: f16[4096]) -> (f16[4096,4096]) {\n"
				       "  %m = matmul(%x, %w) : f16[4096,4096]\n  %a = add(%m, %b) : f16[4096,4096]\n"
				       "  %y = gelu(%a) {approximate = \"tanh\"} : f16[4096,4096]\n  return %y\n}\n");
	kf_graph *g = m->graph[0];
	kf_nid f = first_contraction(g);
	char dir[] = "/tmp/kf-ship-XXXXXX";
	assert_non_null(mkdtemp(dir));
	assert_int_equal(kf_tune_apply_for(g, "sm_90", "NVIDIA H100 80GB HBM3", dir, NULL, NULL), 0);
	setenv("KFUSE_TUNE_SHIPPED", "0", 1);
	assert_int_equal(kf_tune_apply_for(g, "sm_90", "NVIDIA H200", dir, NULL, NULL), 0);
	unsetenv("KFUSE_TUNE_SHIPPED");
	assert_null(kf_attr_get(g, f, "tile"));
	assert_int_equal(kf_tune_apply_for(g, "sm_90", "NVIDIA H200", dir, NULL, NULL), 1);
	assert_string_equal(kf_attr_str(g, f, "tile", ""), "cublaslt");
	kf_module_free(m);
	/* the user's cache comes first */
	m = kft_parse_fused(c, "graph @g(%x: f16[4096,4096], %w: f16[4096,4096], %b: f16[4096]) -> (f16[4096,4096]) {\n"
			       "  %m = matmul(%x, %w) : f16[4096,4096]\n  %a = add(%m, %b) : f16[4096,4096]\n"
			       "  %y = gelu(%a) {approximate = \"tanh\"} : f16[4096,4096]\n  return %y\n}\n");
	g = m->graph[0];
	f = first_contraction(g);
	kf_mm_shape sh;
	char key[128];
	assert_true(kf_mm_node_shape(g, f, &sh));
	kf_mm_shape_key(&sh, "sm_90", key, sizeof key);
	assert_string_equal(key, "sm_90:f16>f16:b1:m4096:n4096:k4096:nn:.add+gelu_tanh");
	kf_buf path = {0};
	assert_int_equal(kf_tune_path(dir, &path), 0);
	kf_tune_set(&t, key, "wg128x256x64s4c2pvs", 0.19);
	assert_int_equal(kf_tune_save(c, path.p, &t), 0);
	assert_int_equal(kf_tune_apply_for(g, "sm_90", "NVIDIA H200", dir, NULL, NULL), 1);
	assert_string_equal(kf_attr_str(g, f, "tile", ""), "wg128x256x64s4c2pvs");
	kf_tune_table_free(&t);
	kf_buf_free(&path);
	kf_buf_free(&d);
	kf_module_free(m);
	kft_rmdir(dir);
	kf_ctx_free(c);
}

/* ---- split-K ------------------------------------------------------------------------------ */

/* The splits of K cover it exactly once, in whole tiles (a tile never
 * straddles two splits), for every K, tile and split count; the config
 * text round-trips and bad suffixes are refused. */
static void test_splitk_model(void **st)
{
	(void)st;
	static const int64_t Ks[] = {1, 7, 16, 64, 100, 512, 1376, 4096, 5632};
	static const int bks[] = {8, 16, 32, 64};
	for (size_t a = 0; a < sizeof Ks / sizeof *Ks; a++)
		for (size_t b = 0; b < sizeof bks / sizeof *bks; b++)
			for (int sk = 2; sk <= 16; sk++) {
				int64_t K = Ks[a], next = 0;
				int bk = bks[b];
				for (int ks = 0; ks < sk; ks++) {
					int64_t k0, k1;
					kf_mm_splitk_range(K, bk, sk, ks, &k0, &k1);
					if (k0 >= k1)
						continue; /* a split past the end: no tiles */
					assert_int_equal(k0, next); /* contiguous, no overlap */
					assert_int_equal(k0 % bk, 0);
					assert_true(k1 == K || (k1 - k0) % bk == 0);
					next = k1;
				}
				assert_int_equal(next, K);
			}
	static const char *const ok[] = {"fma32x32x16t2x2k8", "mma64x64x32w2x2s4k4", "fma64x64x16t4x4k64"};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
		kf_mm_config c;
		kft_mm_config(ok[i], &c);
		assert_true(c.sk >= 2);
	}
	static const char *const bad[] = {"fma32x32x16t2x2k1", "fma32x32x16t2x2k0", "mma64x64x32w2x2s4k65",
					  "mma64x64x32w2x2s4k08", "fma32x32x16t2x2k", "fma32x32x16t2x2k4x"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		kf_mm_config c;
		assert_int_equal(kf_mm_config_parse(bad[i], &c), -1);
	}
	/* offered for small M only */
	kf_mm_shape sm = {.in = KF_F32, .out = KF_F32, .batch = 1, .M = 64, .N = 512, .K = 1376, .raw = true, .wgmma = 1};
	char cand[64][32];
	int n = kf_mm_candidates(&sm, cand, 64), splits = 0;
	for (int i = 0; i < n; i++)
		splits += strchr(cand[i] + 3, 'k') != NULL;
	assert_true(splits >= 4);
	sm.M = 4096;
	n = kf_mm_candidates(&sm, cand, 64);
	for (int i = 0; i < n; i++)
		assert_null(strchr(cand[i] + 3, 'k'));
}

/* The split-K kernels compile without spills: SIMT f32, mma.sync f16
 * and tf32, with epilogues (the last block runs them after the sum). */
static void test_splitk_compile(void **st)
{
	(void)st;
	if (!kft_have_nvrtc())
		skip();
	static const struct {
		const char *text, *tile;
		int sk;
	} cs[] = {
		{"graph @g(%x: f32[1,64,512], %w: f32[512,512], %r: f32[1,64,512]) -> (f32[1,64,512]) {\n"
		 "  %m = matmul(%x, %w) : f32[1,64,512]\n  %s = add(%r, %m) : f32[1,64,512]\n  return %s\n}\n",
		 "fma32x32x16t2x2k8", 8},
		{"graph @g(%x: f16[64,512], %w: f16[512,1376], %r: f16[64,1376]) -> (f16[64,1376]) {\n"
		 "  %m = matmul(%x, %w) : f16[64,1376]\n  %g = silu(%m) : f16[64,1376]\n  %s = mul(%g, %r) : f16[64,1376]\n"
		 "  return %s\n}\n",
		 "mma64x64x32w2x2s4k4", 4},
		{"graph @g(%x: f64[16,300], %w: f64[300,40]) -> (f64[16,40]) {\n"
		 "  %m = matmul(%x, %w) : f64[16,40]\n  return %m\n}\n",
		 "fma32x32x16t2x2k4", 4},
	};
	for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
		kf_kernel k;
		kft_emit_contraction(cs[i].text, 1, cs[i].tile, &k);
		assert_int_equal(k.grid_z, (unsigned)cs[i].sk);
		assert_non_null(strstr(k.src, "atomicInc("));
		kft_ptxas_checked(&k, "sm_90", 128);
		kf_kernel_free(&k);
	}
	/* tf32: the pass option */
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse(c, "graph @g(%x: f32[64,1376], %w: f32[1376,512]) -> (f32[64,512]) {\n"
				    "  %m = matmul(%x, %w) : f32[64,512]\n  return %m\n}\n");
	kft_run_pipe(c, m, "fuse-matmul{tf32}");
	setenv("KFUSE_MATMUL_TILE", "mma64x64x32w2x2s4k8", 1);
	kf_kernel k;
	assert_int_equal(kf_emit_node(m->graph[0], kft_first_fusion(m->graph[0]), &k), 0);
	unsetenv("KFUSE_MATMUL_TILE");
	assert_int_equal(k.grid_z, 8u);
	assert_non_null(strstr(k.src, "kf_mma_tf32("));
	kft_ptxas_checked(&k, "sm_90", 128);
	kf_kernel_free(&k);
	kf_module_free(m);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cost_model),
		cmocka_unit_test(test_batch_offsets),
		cmocka_unit_test(test_blas_plan),
		cmocka_unit_test(test_lt_imported),
		cmocka_unit_test(test_dry_plans),
		cmocka_unit_test(test_mem_bound_route),
		cmocka_unit_test(test_parts_compile),
		cmocka_unit_test(test_shipped_table),
		cmocka_unit_test(test_splitk_model),
		cmocka_unit_test(test_splitk_compile),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
