/* Unit tests of the shape-keyed plan cache (api/dyn.h): a symbolic graph
 * on a backend that wants static shapes.  Over the CPU backend the plans
 * run (each shape's copy of the graph the pipeline fused once, specialised,
 * against the interpreter on the symbolic graph); over a dry-run CUDA
 * backend they are planned and compiled by NVRTC without a GPU: hits,
 * misses, evictions, sized plans whose kernels read their sizes, so that a
 * new shape within known buckets compiles nothing (row, loop, contraction
 * and attention kernels; the zoo's BERT and GPT-2), and the errors.  The
 * kernels' results at several sizes are test_dyn_emu's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cuda_backend.h"
#include "dyn.h"
#include "equiv.h"
#include "kf_test.h"
#include "kf_test_nvrtc.h"
#include "kfuse_int.h"

/* Two inputs sharing B and T, one elementwise chain and a reduction: the
 * pipeline fuses a copy of it once (the fuse pass groups symbolic dims at
 * generic sizes), which each shape specialises. */
static const char *sym_graph = "graph @f(%x: f32[B,T,16], %y: f32[B,T,16]) -> (f32[B,T,16], f32[B,T]) {\n"
			       "  %a = add(%x, %y) : f32[B,T,16]\n"
			       "  %b = mul(%a, %a) : f32[B,T,16]\n"
			       "  %c = exp(%b) : f32[B,T,16]\n"
			       "  %s = reduce_sum(%c) {axes = [2], keepdims = false} : f32[B,T]\n"
			       "  return %c, %s\n"
			       "}\n";

typedef struct fx {
	kf_ctx *c;
	kf_module *m;
	kf_backend *be;
	kf_plan *p;
	kf_buf report;
} fx;

static void fx_open(fx *f, kf_backend *inner, int max_plans)
{
	kf_passreg r = {0};
	kf_passes_builtin(&r);
	kf_dyn_opts o = {.pipeline = "canonicalize,cse,fuse,dce", .max_plans = max_plans, .report = &f->report};
	f->be = kf_dyn_backend_new(f->c, inner, &r, &o);
	kf_passreg_free(&r);
	if (!f->be)
		kft_fail_diags(f->c, "dyn backend");
	f->p = f->be->compile(f->be, f->m->graph[0]);
	assert_non_null(f->p);
	assert_true(kf_dyn_is(f->p));
}

static void fx_close(fx *f)
{
	kf_plan_free(f->p);
	kf_backend_free(f->be);
	kf_module_free(f->m);
	kf_buf_free(&f->report);
	kf_ctx_free(f->c);
}

/* Random inputs x and y of shape [b,t,16] into in[0..2). */
static void inputs(kf_tensor *in, int64_t b, int64_t t, uint64_t seed)
{
	int64_t d[3] = {b, t, 16};
	assert_int_equal(kf_tensor_random(&in[0], KF_F32, 3, d, &seed), 0);
	assert_int_equal(kf_tensor_random(&in[1], KF_F32, 3, d, &seed), 0);
}

/* Runs the dyn plan at [b,t] and checks it against the interpreter on
 * the symbolic graph. */
static void run_check(fx *f, int64_t b, int64_t t)
{
	kf_tensor in[2] = {0}, out[2] = {0}, ref[2] = {0};
	inputs(in, b, t, (uint64_t)(b * 131 + t));
	if (f->be->run(f->p, in, 2, out, 2) != 0)
		kft_fail_diags(f->c, "dyn run");
	assert_int_equal(kf_interp_run(f->m->graph[0], in, 2, ref, 2), 0);
	for (int i = 0; i < 2; i++) {
		assert_true(kf_tensor_same_shape(&out[i], &ref[i]));
		kf_equiv_stat st;
		kf_equiv_compare(&out[i], &ref[i], 1e-5, 1e-6, &st);
		kf_equiv_tol tol = {1e-5, 1e-6, 0};
		assert_false(kf_equiv_bad(&st, &tol));
		kf_tensor_free(&out[i]);
		kf_tensor_free(&ref[i]);
	}
	kf_tensor_free(&in[0]);
	kf_tensor_free(&in[1]);
}

/* The plan a shape ran: specialised (static) and fused (one fusion node
 * where the symbolic graph has none). */
static void check_plan_fused(fx *f, int64_t b, int64_t t)
{
	kf_graph *pg = kf_dyn_last(f->p)->g;
	assert_ptr_not_equal(pg, f->m->graph[0]);
	assert_false(kf_dyn_graph_symbolic(pg));
	const kf_type *x = kf_vtype(pg, pg->blk[0].arg[0]);
	assert_int_equal(x->dim[0], b);
	assert_int_equal(x->dim[1], t);
	int fusions = 0;
	kf_foreach_node(pg, 0, n) fusions += kf_N(pg, n)->op == KF_OP_FUSION;
	assert_true(fusions >= 1);
	kf_foreach_node(f->m->graph[0], 0, n) assert_int_not_equal(kf_N(f->m->graph[0], n)->op, KF_OP_FUSION);
}

/* Hits, misses and LRU eviction over the CPU backend, with every result
 * checked; the symbolic graph itself stays unchanged. */
static void test_lru_cpu(void **st)
{
	fx f = {.c = kf_ctx_new()};
	f.m = kft_parse(f.c, sym_graph);
	uint32_t nodes = f.m->graph[0]->nnode;
	fx_open(&f, kf_backend_cpu_new(f.c), 2);
	kf_dyn_stats s;
	run_check(&f, 2, 3); /* miss */
	check_plan_fused(&f, 2, 3);
	run_check(&f, 2, 3); /* hit */
	run_check(&f, 1, 5); /* miss: two plans */
	check_plan_fused(&f, 1, 5);
	kf_dyn_get_stats(f.p, &s);
	assert_int_equal(s.hits, 1);
	assert_int_equal(s.misses, 2);
	assert_int_equal(s.evictions, 0);
	assert_int_equal(s.plans, 2);
	run_check(&f, 2, 3); /* hit: {1,5} is now the least recently used */
	run_check(&f, 4, 1); /* miss: evicts {1,5} */
	run_check(&f, 2, 3); /* still a hit */
	kf_dyn_get_stats(f.p, &s);
	assert_int_equal(s.hits, 3);
	assert_int_equal(s.misses, 3);
	assert_int_equal(s.evictions, 1);
	assert_int_equal(s.plans, 2);
	run_check(&f, 1, 5); /* evicted, so planned again */
	kf_dyn_get_stats(f.p, &s);
	assert_int_equal(s.misses, 4);
	assert_int_equal(s.evictions, 2);
	/* grown to 3, then shrunk to 1: the most recently used plan stays */
	kf_dyn_set_max(f.p, 3);
	run_check(&f, 4, 1); /* miss: {2,3} {1,5} {4,1} */
	kf_dyn_set_max(f.p, 1);
	kf_dyn_get_stats(f.p, &s);
	assert_int_equal(s.plans, 1);
	assert_int_equal(s.evictions, 4);
	assert_non_null(kf_dyn_last(f.p));
	run_check(&f, 4, 1); /* hit */
	kf_dyn_get_stats(f.p, &s);
	assert_int_equal(s.hits, 4);
	assert_int_equal(s.misses, 5);
	assert_non_null(strstr(f.report.p, "dyn: @f {B=2,T=3}: hit"));
	assert_non_null(strstr(f.report.p, "dyn: @f {B=1,T=5}: miss"));
	assert_non_null(strstr(f.report.p, "dyn: @f: evicted the plan of {B=1,T=5}"));
	assert_int_equal(f.m->graph[0]->nnode, nodes);
	assert_true(kf_dyn_graph_symbolic(f.m->graph[0]));
	fx_close(&f);
}

/* Inputs that disagree: the error names the input and the symbol (or the
 * rank, or the static dim), and nothing is planned. */
static void expect_error(fx *f, int64_t b0, int64_t t0, int64_t b1, int64_t t1, int rank1, const char *want)
{
	kf_tensor in[2] = {0}, out[2] = {0};
	int64_t d0[3] = {b0, t0, 16}, d1[3] = {b1, t1, 16};
	if (rank1 == 2)
		d1[1] = 16;
	uint64_t seed = 1;
	assert_int_equal(kf_tensor_random(&in[0], KF_F32, 3, d0, &seed), 0);
	assert_int_equal(kf_tensor_random(&in[1], KF_F32, rank1, d1, &seed), 0);
	assert_int_equal(f->be->run(f->p, in, 2, out, 2), -1);
	kf_buf b = {0};
	kf_diag_render(f->c, &b);
	if (!strstr(b.p, want))
		fail_msg("want '%s' in: %s", want, b.p);
	kf_buf_free(&b);
	kf_tensor_free(&in[0]);
	kf_tensor_free(&in[1]);
}

static void test_bind_errors(void **st)
{
	fx f = {.c = kf_ctx_new()};
	f.m = kft_parse(f.c, sym_graph);
	fx_open(&f, kf_backend_cpu_new(f.c), 4);
	expect_error(&f, 2, 3, 2, 4, 3, "input 1 (%y) is f32[2,4,16] but the graph takes f32[B,T,16]: dim 1 is 4, but T is already 3");
	expect_error(&f, 2, 3, 5, 3, 3, "dim 0 is 5, but B is already 2");
	expect_error(&f, 2, 3, 2, 3, 2, "input 1 (%y) is f32[2,16] but the graph takes f32[B,T,16]: rank 2, expected 3");
	kf_dyn_stats s;
	kf_dyn_get_stats(f.p, &s);
	assert_int_equal(s.misses + s.hits, 0);
	fx_close(&f);
}

/* A symbol no input gives: an error naming it, unless the dims give it. */
static void test_unsized_symbol(void **st)
{
	static const char *g = "graph @g(%x: f32[N]) -> (f32[N,K]) {\n"
			       "  %b = broadcast_to(%x) {shape = [\"K\", \"N\"]} : f32[K,N]\n"
			       "  %t = transpose(%b) {perm = [1, 0]} : f32[N,K]\n"
			       "  return %t\n"
			       "}\n";
	fx f = {.c = kf_ctx_new()};
	f.m = kft_parse(f.c, g);
	fx_open(&f, kf_backend_cpu_new(f.c), 2);
	kf_tensor in = {0}, out = {0};
	int64_t d = 3;
	uint64_t seed = 7;
	assert_int_equal(kf_tensor_random(&in, KF_F32, 1, &d, &seed), 0);
	assert_int_equal(f.be->run(f.p, &in, 1, &out, 1), -1);
	kf_buf b = {0};
	kf_diag_render(f.c, &b);
	assert_non_null(strstr(b.p, "symbol 'K' gets no size from the inputs"));
	kf_buf_free(&b);
	kf_plan_free(f.p);
	kf_backend_free(f.be);
	/* --dim K=2 gives it */
	kf_passreg r = {0};
	kf_passes_builtin(&r);
	const char *dims[] = {"K=2"};
	kf_dyn_opts o = {.dims = dims, .ndim = 1};
	f.be = kf_dyn_backend_new(f.c, kf_backend_cpu_new(f.c), &r, &o);
	kf_passreg_free(&r);
	f.p = f.be->compile(f.be, f.m->graph[0]);
	assert_int_equal(f.be->run(f.p, &in, 1, &out, 1), 0);
	assert_int_equal(out.dim[0], 3);
	assert_int_equal(out.dim[1], 2);
	/* the copy's broadcast_to got sizes, the graph's keeps its symbols */
	kf_graph *g0 = f.m->graph[0];
	kf_nid bn = g0->blk[0].first;
	assert_int_equal(kf_attr_get(g0, bn, "shape")->list[0].kind, KF_ATTR_STR);
	kf_graph *pg = kf_dyn_last(f.p)->g;
	assert_int_equal(kf_attr_get(pg, bn, "shape")->list[0].kind, KF_ATTR_INT);
	kf_tensor_free(&out);
	kf_tensor_free(&in);
	fx_close(&f);
}

/* sym_graph with its row length symbolic too. */
static const char *sym_graph_d = "graph @f(%x: f32[B,T,D], %y: f32[B,T,D]) -> (f32[B,T,D], f32[B,T]) {\n"
				 "  %a = add(%x, %y) : f32[B,T,D]\n"
				 "  %b = mul(%a, %a) : f32[B,T,D]\n"
				 "  %c = exp(%b) : f32[B,T,D]\n"
				 "  %s = reduce_sum(%c) {axes = [2], keepdims = false} : f32[B,T]\n"
				 "  return %c, %s\n"
				 "}\n";

/* Over a dry-run CUDA backend keeping one plan: each shape is planned and
 * its kernels compiled by NVRTC.  The fused row kernel takes its row count
 * (B*T) and its row length (D) as arguments, its geometry made for D's
 * bucket, which here fits 16 and 32 alike; so no shape after the first
 * compiles, and the plan reads its sizes (a sized plan). */
static void test_cuda_dry_run(void **st)
{
	if (!kft_have_nvrtc())
		skip();
	char dir[] = "/tmp/kf-dyn-cacheXXXXXX";
	assert_non_null(mkdtemp(dir));
	fx f = {.c = kf_ctx_new()};
	f.m = kft_parse(f.c, sym_graph_d);
	/* the backend keeps its own copy of the directory's name: later shapes
	 * compile long after the caller's string is gone (the Python bench
	 * passed a temporary) */
	char *cache = strdup(dir);
	kf_cuda_opts co = {.dry_run = true, .cache_dir = cache, .threads = 1, .report = &f.report};
	fx_open(&f, kf_backend_cuda_new(f.c, &co), 1);
	memset(cache, 'x', strlen(cache));
	free(cache);
	static const int64_t shapes[4][3] = {{2, 8, 16}, {3, 5, 16}, {2, 8, 32}, {2, 8, 16}};
	static const bool compiles[4] = {true, false, false, false};
	for (int i = 0; i < 4; i++) {
		kf_tensor in[2] = {0};
		uint64_t seed = 3;
		assert_int_equal(kf_tensor_random(&in[0], KF_F32, 3, shapes[i], &seed), 0);
		assert_int_equal(kf_tensor_random(&in[1], KF_F32, 3, shapes[i], &seed), 0);
		kf_plan *ip = kf_dyn_plan_for(f.p, in, 2);
		if (!ip)
			kft_fail_diags(f.c, "dyn plan");
		check_plan_fused(&f, shapes[i][0], shapes[i][1]);
		kf_cuda_stats cs;
		kf_cuda_session_stats(kf_cuda_plan_session(ip), &cs);
		assert_true(cs.kernels >= 1);
		assert_non_null(strstr(f.report.p, "sized plan:"));
		if (compiles[i] != (cs.compiled > 0))
			fail_msg("shape %d: %d kernels compiled, %d from the cache", i, cs.compiled, cs.cached);
		kf_tensor_free(&in[0]);
		kf_tensor_free(&in[1]);
	}
	kf_dyn_stats s;
	kf_dyn_get_stats(f.p, &s);
	assert_int_equal(s.misses, 4);
	assert_int_equal(s.evictions, 3);
	fx_close(&f);
	kft_rmdir(dir);
}

/* A linear layer as GPT-2 exports it (gemm over B*T rows, with its bias;
 * an own SIMT kernel, cuBLAS not taking a gemm with C unfused) on the
 * dry-run CUDA backend: the tile is chosen for the bucket of M = B*T (the
 * product of B's and T's buckets), so B, T = 3, 16 and 4, 13 share one
 * kernel (M <= 64), 2, 9 is another (M <= 32) which 2, 16 then shares,
 * and 3, 9 (M <= 64 again) compiles nothing either.  Without the sized
 * plan every new M compiles (the matmul's M in its text). */
static const char *gemm_graph = "graph @l(%x: f32[B,T,64], %w: f32[64,96], %b: f32[96]) -> (f32[B,T,96]) {\n"
				"  %x2 = reshape(%x) {shape = [-1, 64]} : f32[B*T,64]\n"
				"  %y = gemm(%x2, %w, %b) {alpha = 1.0, beta = 1.0, trans_a = 0, trans_b = 0} : f32[B*T,96]\n"
				"  %y3 = reshape(%y) {shape = [\"B\", \"T\", 96]} : f32[B,T,96]\n"
				"  %g = gelu(%y3) {approximate = \"tanh\"} : f32[B,T,96]\n"
				"  return %g\n"
				"}\n";

static void test_cuda_matmul_buckets(void **st)
{
	if (!kft_have_nvrtc())
		skip();
	char dir[] = "/tmp/kf-dyn-mmXXXXXX";
	assert_non_null(mkdtemp(dir));
	fx f = {.c = kf_ctx_new()};
	f.m = kft_parse(f.c, gemm_graph);
	kf_cuda_opts co = {.dry_run = true, .cache_dir = dir, .threads = 1, .report = &f.report};
	kf_passreg r = {0};
	kf_passes_builtin(&r);
	kf_dyn_opts o = {.pipeline = "fuse-matmul,fuse", .max_plans = 8, .report = &f.report};
	f.be = kf_dyn_backend_new(f.c, kf_backend_cuda_new(f.c, &co), &r, &o);
	kf_passreg_free(&r);
	f.p = f.be->compile(f.be, f.m->graph[0]);
	assert_non_null(f.p);
	static const int64_t shapes[5][2] = {{3, 16}, {4, 13}, {2, 9}, {2, 16}, {3, 9}};
	static const bool compiles[5] = {true, false, true, false, false};
	for (int i = 0; i < 5; i++) {
		kf_tensor in[3] = {0};
		int64_t d[3] = {shapes[i][0], shapes[i][1], 64}, w[2] = {64, 96}, b = 96;
		uint64_t seed = 5;
		assert_int_equal(kf_tensor_random(&in[0], KF_F32, 3, d, &seed), 0);
		assert_int_equal(kf_tensor_random(&in[1], KF_F32, 2, w, &seed), 0);
		assert_int_equal(kf_tensor_random(&in[2], KF_F32, 1, &b, &seed), 0);
		kf_plan *ip = kf_dyn_plan_for(f.p, in, 3);
		if (!ip)
			kft_fail_diags(f.c, "dyn plan");
		kf_cuda_stats cs;
		kf_cuda_session_stats(kf_cuda_plan_session(ip), &cs);
		if (compiles[i] != (cs.compiled > 0))
			fail_msg("shape %d: %d kernels compiled, %d from the cache\n%s", i, cs.compiled, cs.cached,
				 f.report.p);
		for (int j = 0; j < 3; j++)
			kf_tensor_free(&in[j]);
	}
	/* the buckets the contraction's tile was chosen for, in the plan notes */
	assert_non_null(strstr(f.report.p, "bucket M<=64"));
	assert_non_null(strstr(f.report.p, "bucket M<=32"));
	fx_close(&f);
	kft_rmdir(dir);
}

/* Attention of 2 heads of 64 in f16 (q, k, v [B,T,128], a padding mask):
 * on the dry run for sm_90 the Hopper kernel (TMA, wgmma), whose key-tile
 * counts, batch and tensor-map offsets are size arguments: B, T = 2, 300
 * and 2, 400 share a kernel (3 and 4 key tiles of 128), 2, 13 compiles
 * another (keys a tile for its bucket: 16) that 2, 16 shares. */
static const char *wga_graph =
	"graph @a(%q: f16[B,T,128], %k: f16[B,T,128], %v: f16[B,T,128], %m: f16[B,1,1,T]) -> (f16[B,T,128]) {\n"
	"  %q4 = reshape(%q) {shape = [\"B\", \"T\", 2, 64]} : f16[B,T,2,64]\n"
	"  %qt = transpose(%q4) {perm = [0, 2, 1, 3]} : f16[B,2,T,64]\n"
	"  %k4 = reshape(%k) {shape = [\"B\", \"T\", 2, 64]} : f16[B,T,2,64]\n"
	"  %kt = transpose(%k4) {perm = [0, 2, 3, 1]} : f16[B,2,64,T]\n"
	"  %v4 = reshape(%v) {shape = [\"B\", \"T\", 2, 64]} : f16[B,T,2,64]\n"
	"  %vt = transpose(%v4) {perm = [0, 2, 1, 3]} : f16[B,2,T,64]\n"
	"  %s = matmul(%qt, %kt) : f16[B,2,T,T]\n"
	"  %c = const 0.125 : f16[]\n"
	"  %t = mul(%s, %c) : f16[B,2,T,T]\n"
	"  %u = add(%t, %m) : f16[B,2,T,T]\n"
	"  %p = softmax(%u) {axis = -1} : f16[B,2,T,T]\n"
	"  %o = matmul(%p, %vt) : f16[B,2,T,64]\n"
	"  %ot = transpose(%o) {perm = [0, 2, 1, 3]} : f16[B,T,2,64]\n"
	"  %y = reshape(%ot) {shape = [\"B\", \"T\", 128]} : f16[B,T,128]\n"
	"  return %y\n}\n";

static void test_cuda_wgmma_attention(void **st)
{
	if (!kft_have_nvrtc())
		skip();
	char dir[] = "/tmp/kf-dyn-wgaXXXXXX";
	assert_non_null(mkdtemp(dir));
	fx f = {.c = kf_ctx_new()};
	f.m = kft_parse(f.c, wga_graph);
	kf_cuda_opts co = {.dry_run = true, .cache_dir = dir, .threads = 1, .report = &f.report};
	kf_passreg r = {0};
	kf_passes_builtin(&r);
	kf_dyn_opts o = {.pipeline = "fuse-attention", .max_plans = 8, .report = &f.report};
	f.be = kf_dyn_backend_new(f.c, kf_backend_cuda_new(f.c, &co), &r, &o);
	kf_passreg_free(&r);
	f.p = f.be->compile(f.be, f.m->graph[0]);
	assert_non_null(f.p);
	static const int64_t shapes[4][2] = {{2, 300}, {2, 400}, {2, 13}, {2, 16}};
	static const bool compiles[4] = {true, false, true, false};
	for (int i = 0; i < 4; i++) {
		kf_tensor in[4] = {0};
		int64_t d[3] = {shapes[i][0], shapes[i][1], 128}, md[4] = {shapes[i][0], 1, 1, shapes[i][1]};
		for (int j = 0; j < 3; j++)
			assert_int_equal(kf_tensor_alloc(&in[j], KF_F16, 3, d), 0);
		assert_int_equal(kf_tensor_alloc(&in[3], KF_F16, 4, md), 0);
		kf_plan *ip = kf_dyn_plan_for(f.p, in, 4);
		if (!ip)
			kft_fail_diags(f.c, "dyn plan");
		kf_cuda_stats cs;
		kf_cuda_session_stats(kf_cuda_plan_session(ip), &cs);
		if (compiles[i] != (cs.compiled > 0))
			fail_msg("shape %d: %d kernels compiled, %d from the cache\n%s", i, cs.compiled, cs.cached,
				 f.report.p);
		for (int j = 0; j < 4; j++)
			kf_tensor_free(&in[j]);
	}
	if (!strstr(f.report.p, "wgmma kernel"))
		fail_msg("not the wgmma kernel:\n%s", f.report.p);
	fx_close(&f);
	kft_rmdir(dir);
}

/* Causal attention whose batch comes from a broadcast inside the attention
 * (q, k, v [1,2,T,16] for B batches; a mask [B,1,1,T] gives B): at B =
 * 40000, T = 100 the scores of the bucket's 65536 batches reach 2^30
 * elements, so the kernel takes 64-bit indices and long long size
 * arguments, whose min() with an int must be an int's (the bug this
 * found: an ambiguous overload).  Planned on the dry-run CUDA backend in
 * f32 (the SIMT kernel) and f16 (mma.sync), every kernel compiled. */
static void test_cuda_wide(void **st)
{
	if (!kft_have_nvrtc())
		skip();
	for (int f16 = 0; f16 < 2; f16++) {
		char dir[] = "/tmp/kf-dyn-wideXXXXXX";
		assert_non_null(mkdtemp(dir));
		const char *dt = f16 ? "f16" : "f32";
		kf_buf text = {0};
		kf_buf_printf(&text,
			      "graph @a(%%q: %s[1,2,T,16], %%k: %s[1,2,T,16], %%v: %s[1,2,T,16], %%m: %s[B,1,1,T]) -> (%s[B,2,T,16]) {\n"
			      "  %%qb = broadcast_to(%%q) {shape = [\"B\", 2, \"T\", 16]} : %s[B,2,T,16]\n"
			      "  %%kb = broadcast_to(%%k) {shape = [\"B\", 2, \"T\", 16]} : %s[B,2,T,16]\n"
			      "  %%vb = broadcast_to(%%v) {shape = [\"B\", 2, \"T\", 16]} : %s[B,2,T,16]\n"
			      "  %%kt = transpose(%%kb) {perm = [0, 1, 3, 2]} : %s[B,2,16,T]\n"
			      "  %%s = matmul(%%qb, %%kt) : %s[B,2,T,T]\n"
			      "  %%r = iota() {axis = 2, dtype = \"i64\", shape = [1, 1, \"T\", \"T\"]} : i64[1,1,T,T]\n"
			      "  %%j = iota() {axis = 3, dtype = \"i64\", shape = [1, 1, \"T\", \"T\"]} : i64[1,1,T,T]\n"
			      "  %%keep = le(%%j, %%r) : i1[1,1,T,T]\n  %%f = const -10000.0 : %s[]\n"
			      "  %%w = where(%%keep, %%s, %%f) : %s[B,2,T,T]\n"
			      "  %%u = add(%%w, %%m) : %s[B,2,T,T]\n"
			      "  %%p = softmax(%%u) {axis = -1} : %s[B,2,T,T]\n"
			      "  %%o = matmul(%%p, %%vb) : %s[B,2,T,16]\n  return %%o\n}\n",
			      dt, dt, dt, dt, dt, dt, dt, dt, dt, dt, dt, dt, dt, dt, dt);
		kf_buf_putc(&text, '\0');
		fx f = {.c = kf_ctx_new()};
		f.m = kft_parse(f.c, text.p);
		kf_buf_free(&text);
		kf_cuda_opts co = {.dry_run = true, .cache_dir = dir, .threads = 2};
		kf_passreg r = {0};
		kf_passes_builtin(&r);
		kf_dyn_opts o = {.pipeline = "fuse-attention", .report = &f.report};
		f.be = kf_dyn_backend_new(f.c, kf_backend_cuda_new(f.c, &co), &r, &o);
		kf_passreg_free(&r);
		f.p = f.be->compile(f.be, f.m->graph[0]);
		assert_non_null(f.p);
		kf_dtype d = f16 ? KF_F16 : KF_F32;
		int64_t qd[4] = {1, 2, 100, 16}, md[4] = {40000, 1, 1, 100};
		kf_tensor in[4] = {0};
		for (int i = 0; i < 3; i++)
			assert_int_equal(kf_tensor_alloc(&in[i], d, 4, qd), 0);
		assert_int_equal(kf_tensor_alloc(&in[3], d, 4, md), 0);
		kf_plan *ip = kf_dyn_plan_for(f.p, in, 4);
		if (!ip)
			kft_fail_diags(f.c, dt);
		bool att = false;
		kf_foreach_node(ip->g, 0, n) att |= kf_N(ip->g, n)->op == KF_OP_FUSION &&
						    !strcmp(kf_attr_str(ip->g, n, "kind", ""), "attention");
		assert_true(att);
		for (int i = 0; i < 4; i++)
			kf_tensor_free(&in[i]);
		fx_close(&f);
		kft_rmdir(dir);
	}
}

/* Token ids in [0, 100) (the zoo's vocabulary) and an all-ones mask for
 * the inputs of a zoo transformer at [b,t]. */
static void zoo_inputs(kf_graph *g, kf_tensor *in, int64_t b, int64_t t)
{
	int64_t d[2] = {b, t};
	for (uint32_t i = 0; i < g->blk[0].narg; i++) {
		assert_int_equal(kf_tensor_alloc(&in[i], KF_I64, 2, d), 0);
		int64_t *p = in[i].data;
		for (int64_t k = 0; k < b * t; k++)
			p[k] = i ? 1 : (k * 37 + 11) % 100;
	}
}

/* g planned for CUDA without a GPU through the transformer pipeline
 * (attention fused), at [3,16] (every kernel compiles), then at [4,13] and
 * [3,9], whose batch and sequence share [3,16]'s buckets (4 and 16): those
 * compile nothing, and hold as many kernels.  Then (wide) at [40000,63],
 * whose scores at the bucket's batch, 65536, reach 2^30 elements (not
 * stored, but the attention's body computes them): kernels of 64-bit
 * indices, whose size arguments are long long, must compile too (the
 * attention's min() of a row and the last one; GPT-2's rows, a gemm's M,
 * would pass 65535 row tiles there). */
static void zoo_cuda_plan(kf_ctx *c, kf_graph *g, const kf_passreg *r, bool wide)
{
	char dir[] = "/tmp/kf-dyn-zooXXXXXX";
	assert_non_null(mkdtemp(dir));
	kf_cuda_opts co = {.dry_run = true, .cache_dir = dir, .threads = 2};
	kf_dyn_opts o = {.pipeline = "canonicalize,cse,rules,canonicalize,cse,merge-matmul,fuse-attention,fuse-matmul,"
				     "fuse,dce"};
	kf_backend *be = kf_dyn_backend_new(c, kf_backend_cuda_new(c, &co), r, &o);
	kf_plan *p = be ? be->compile(be, g) : NULL;
	static const int64_t shapes[4][2] = {{3, 16}, {4, 13}, {3, 9}, {40000, 63}};
	int kernels = 0;
	for (int i = 0; i < 3 + wide; i++) {
		kf_tensor in[2] = {0};
		zoo_inputs(g, in, shapes[i][0], shapes[i][1]);
		kf_plan *ip = p ? kf_dyn_plan_for(p, in, (int)g->blk[0].narg) : NULL;
		if (!ip)
			kft_fail_diags(c, "zoo cuda plan");
		kf_cuda_stats cs;
		kf_cuda_session_stats(kf_cuda_plan_session(ip), &cs);
		if (getenv("KF_TEST_VERBOSE"))
			print_message("cuda at %lldx%lld: %d kernels, %d programs, %d compiled\n", (long long)shapes[i][0],
				      (long long)shapes[i][1], cs.kernels, cs.programs, cs.compiled);
		assert_true(cs.kernels > 4);
		assert_int_equal(cs.compiled + cs.cached, cs.programs);
		if (i == 0)
			kernels = cs.kernels;
		else if (i < 3 && (cs.compiled != 0 || cs.kernels != kernels))
			fail_msg("shape %d: %d kernels compiled of %d (%d at the first shape)", i, cs.compiled, cs.kernels,
				 kernels);
		/* an attention kernel in the plan: the pipeline fused it on the
		 * symbolic graph */
		bool att = false;
		kf_foreach_node(ip->g, 0, n) att |= kf_N(ip->g, n)->op == KF_OP_FUSION &&
						    !strcmp(kf_attr_str(ip->g, n, "kind", ""), "attention");
		assert_true(att);
		kf_tensor_free(&in[0]);
		kf_tensor_free(&in[1]);
	}
	kf_plan_free(p);
	kf_backend_free(be);
	kft_rmdir(dir);
}

/* The zoo's BERT and GPT-2 exported with dynamic batch and sequence: at
 * each shape the specialised, fused copy on the CPU backend matches the
 * interpreter on the symbolic graph, and (with NVRTC) every kernel of a
 * shape's CUDA plan compiles. */
static void test_zoo(void **st)
{
	static const char *models[] = {"bert_dyn", "gpt2_dyn"};
	static const int64_t shapes[][2] = {{1, 7}, {3, 16}};
	for (int mi = 0; mi < 2; mi++) {
		char path[512];
		snprintf(path, sizeof path, "%s/models/zoo/%s.onnx", KF_TEST_DATA, models[mi]);
		kfuse_ctx *k = kfuse_new();
		kfuse_model *km = kfuse_load(k, path);
		if (!km)
			fail_msg("%s", kfuse_error(k));
		fx f = {.c = k->c, .m = NULL};
		kf_graph *g = km->m->graph[0];
		kf_passreg r = {0};
		kf_passes_builtin(&r);
		kf_dyn_opts o = {.pipeline = "canonicalize,cse,rules,fuse,dce", .report = &f.report};
		f.be = kf_dyn_backend_new(f.c, kf_backend_cpu_new(f.c), &r, &o);
		f.p = f.be->compile(f.be, g);
		for (int si = 0; si < 2; si++) {
			kf_tensor in[2] = {0}, out[2] = {0}, ref[2] = {0};
			zoo_inputs(g, in, shapes[si][0], shapes[si][1]);
			int nin = (int)g->blk[0].narg, nres = (int)g->nres;
			if (f.be->run(f.p, in, nin, out, nres) != 0 || kf_interp_run(g, in, nin, ref, nres) != 0)
				kft_fail_diags(f.c, models[mi]);
			kf_graph *pg = kf_dyn_last(f.p)->g;
			assert_false(kf_dyn_graph_symbolic(pg));
			int fusions = 0;
			kf_foreach_node(pg, 0, n) fusions += kf_N(pg, n)->op == KF_OP_FUSION;
			assert_true(fusions >= 4); /* fused once static */
			/* the result is a number (valid ids and mask), not NaN */
			assert_true(kf_tensor_numel(&out[0]) > 0 && ((float *)out[0].data)[0] == ((float *)out[0].data)[0]);
			if (getenv("KF_TEST_VERBOSE"))
				print_message("%s: %d fusions\n%s", models[mi], fusions, f.report.p);
			for (int i = 0; i < nres; i++) {
				kf_equiv_stat es;
				kf_equiv_tol tol = {1e-4, 1e-5, 0};
				kf_equiv_compare(&out[i], &ref[i], tol.rtol, tol.atol, &es);
				assert_true(kf_tensor_same_shape(&out[i], &ref[i]));
				assert_false(kf_equiv_bad(&es, &tol));
				kf_tensor_free(&out[i]);
				kf_tensor_free(&ref[i]);
			}
			kf_tensor_free(&in[0]);
			kf_tensor_free(&in[1]);
		}
		kf_plan_free(f.p);
		kf_backend_free(f.be);
		if (kft_have_nvrtc())
			zoo_cuda_plan(f.c, g, &r, mi == 0);
		kf_buf_free(&f.report);
		kfuse_model_free(km);
		kfuse_free(k);
		kf_passreg_free(&r);
	}
}

/* The embedding API puts the cache in front of cuda for a symbolic graph
 * (not in front of cpu, nor for a static graph), with the pipelines the
 * program ran on the model as the copies' pipeline. */
static void test_api_wraps(void **st)
{
	kfuse_ctx *k = kfuse_new();
	kfuse_model *m = kfuse_load_text(k, "t.kf", sym_graph, strlen(sym_graph));
	assert_non_null(m);
	assert_int_equal(kfuse_pipeline(m, "canonicalize"), 0);
	assert_int_equal(kfuse_pipeline(m, "cse,fuse"), 0);
	assert_string_equal(m->pipes.p, "canonicalize,cse,fuse");
	kfuse_compiled *x = kfuse_compile(m, NULL, "cuda", NULL);
	if (!x)
		fail_msg("%s", kfuse_error(k));
	assert_true(kf_dyn_is(x->plan));
	assert_string_equal(kfuse_compiled_backend(x), "cuda");
	assert_int_equal(kfuse_set_max_plans(x, 0), -1);
	assert_int_equal(kfuse_set_max_plans(x, 3), 0);
	kfuse_compiled_free(x);
	x = kfuse_compile(m, NULL, "cpu", NULL);
	assert_false(kf_dyn_is(x->plan));
	kfuse_compiled_free(x);
	kfuse_model_free(m);
	static const char *st_graph = "graph @s(%x: f32[2]) -> (f32[2]) {\n  %e = exp(%x) : f32[2]\n  return %e\n}\n";
	m = kfuse_load_text(k, "s.kf", st_graph, strlen(st_graph));
	kf_cuda_opts co = {.dry_run = true, .no_cache = true};
	x = kf_api_compile(m, NULL, kf_backend_cuda_new(k->c, &co));
	if (kft_have_nvrtc()) {
		assert_non_null(x);
		assert_false(kf_dyn_is(x->plan));
	}
	kfuse_compiled_free(x);
	kfuse_model_free(m);
	kfuse_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lru_cpu),
		cmocka_unit_test(test_bind_errors),
		cmocka_unit_test(test_unsized_symbol),
		cmocka_unit_test(test_cuda_dry_run),
		cmocka_unit_test(test_cuda_matmul_buckets),
		cmocka_unit_test(test_cuda_wgmma_attention),
		cmocka_unit_test(test_cuda_wide),
		cmocka_unit_test(test_zoo),
		cmocka_unit_test(test_api_wraps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
