/* Unit tests of the contraction work: the fuse-matmul pass (groups made,
 * graphs still valid and computing the same on the interpreter), tile
 * configs and their choice, the tuner's cache file and its application,
 * and which nodes cuBLAS can take.  No GPU needed; the kernels' PTX is
 * checked by tests/golden/matmul and tests/cuda. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "kf_test.h"

#include "cublas.h"
#include "emit_cuda.h"
#include "emit_matmul.h"
#include "equiv.h"
#include "interp.h"
#include "kf.h"
#include "pass.h"
#include "passes.h"
#include "tune.h"

static kf_nid only_fusion(kf_graph *g, int *nbody)
{
	kf_nid f = KF_NONE;
	int k = 0;
	kf_foreach_node(g, 0, n)
		if (kf_N(g, n)->op == KF_OP_FUSION) {
			assert_int_equal(f, KF_NONE);
			f = n;
		}
	assert_int_not_equal(f, KF_NONE);
	kf_foreach_node(g, kf_N(g, f)->body, n)
		k += kf_N(g, n)->op != KF_OP_YIELD && kf_N(g, n)->op != KF_OP_CONST;
	*nbody = k;
	return f;
}

static const char mlp[] =
	"graph @mlp(%x: f32[24,40], %w: f16[56,40], %b: f16[56], %r: f16[24,56]) -> (f32[24,56]) {\n"
	"  %s = const 0.25 : f16[]\n"
	"  %xh = cast(%x) {to = \"f16\"} : f16[24,40]\n"
	"  %xs = mul(%s, %xh) : f16[24,40]\n"
	"  %wt = transpose(%w) {perm = [1, 0]} : f16[40,56]\n"
	"  %m = matmul(%xs, %wt) : f16[24,56]\n"
	"  %a = add(%m, %b) : f16[24,56]\n"
	"  %g = gelu(%a) : f16[24,56]\n"
	"  %y = add(%r, %g) : f16[24,56]\n"
	"  %o = cast(%y) {to = \"f32\"} : f32[24,56]\n"
	"  return %o\n"
	"}\n";

/* The whole chain becomes one contraction kernel computing what the
 * original computes. */
static void test_pass_groups_and_preserves(void **state)
{
	(void)state;
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	kf_module *ref = kft_parse(c, mlp), *m = kft_parse(c, mlp);
	kft_run_pipe(c, m, "fuse-matmul");
	kf_graph *g = m->graph[0];
	int nb;
	kf_nid f = only_fusion(g, &nb);
	assert_string_equal(kf_attr_str(g, f, "kind", ""), "contraction");
	assert_int_equal(nb, 8);
	assert_int_equal(kf_N(g, f)->nin, 4); /* x, w, b, r; the scale is embedded */
	kf_buf rep = {0};
	int rc = kf_equiv_check(ref->graph[0], g, 5, 2, 1e-3, 1e-3, &rep);
	if (rc != 0)
		fail_msg("fused graph differs: %.*s", (int)rep.n, rep.p);
	kf_buf_free(&rep);
	/* its shape as the tuner keys it: the transpose is folded into B */
	kf_mm_shape sh;
	assert_true(kf_mm_node_shape(g, f, &sh));
	assert_int_equal(sh.M, 24);
	assert_int_equal(sh.N, 56);
	assert_int_equal(sh.K, 40);
	assert_false(sh.ta);
	assert_true(sh.tb);
	char key[128];
	kf_mm_shape_key(&sh, "sm_90", key, sizeof key);
	assert_string_equal(key, "sm_90:f16>f16:b1:m24:n56:k40:nt:cast+mul.add+gelu+add+cast");
	/* and it emits a tensor-core kernel */
	kf_kernel k;
	assert_int_equal(kf_emit_node(g, f, &k), 0);
	assert_int_equal(k.kind, KF_KK_MATMUL);
	assert_non_null(strstr(k.src, "kf_mma_f16("));
	assert_true(k.smem > 0);
	kf_kernel_free(&k);
	kf_module_free(ref);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* A matmul whose result two ops read keeps its epilogue outside; with
 * single=false a lone matmul is left as it is. */
static void test_pass_stops(void **state)
{
	(void)state;
	static const char t[] = "graph @g(%x: f32[8,16], %w: f32[16,4]) -> (f32[8,4]) {\n"
				"  %m = matmul(%x, %w) : f32[8,4]\n"
				"  %a = relu(%m) : f32[8,4]\n"
				"  %b = exp(%m) : f32[8,4]\n"
				"  %s = add(%a, %b) : f32[8,4]\n"
				"  return %s\n"
				"}\n";
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse(c, t);
	kft_run_pipe(c, m, "fuse-matmul");
	int nb;
	only_fusion(m->graph[0], &nb);
	assert_int_equal(nb, 1);
	kf_module_free(m);
	m = kft_parse(c, t);
	kft_run_pipe(c, m, "fuse-matmul{single=false}");
	kf_foreach_node(m->graph[0], 0, n)
		assert_int_not_equal(kf_N(m->graph[0], n)->op, KF_OP_FUSION);
	kf_module_free(m);
	kf_ctx_free(c);
}

static void test_configs(void **state)
{
	(void)state;
	kf_mm_config cf;
	const char *good[] = {"mma128x128x32w2x4s3", "fma64x64x16t4x4", "gemv", "gemvk16"};
	for (int i = 0; i < 4; i++) {
		kft_mm_config(good[i], &cf);
	}
	const char *bad[] = {"", "mma128x128x32w2x4", "mma128x128x32w2x4s9", "fma64x64x16", "gemvk0", "gemv2",
			     "mma128x128x32w2x4s3 "};
	for (int i = 0; i < 7; i++)
		assert_int_equal(kf_mm_config_parse(bad[i], &cf), -1);
	/* candidates: tensor-core tiles only for f16, GEMV only for M = 1 */
	char cand[32][32];
	kf_mm_shape big = {.in = KF_F16, .out = KF_F16, .batch = 1, .M = 4096, .N = 4096, .K = 4096};
	int n = kf_mm_candidates(&big, cand, 32);
	assert_true(n >= 6);
	for (int i = 0; i < n; i++)
		assert_memory_equal(cand[i], "mma", 3);
	kf_mm_shape vec = {.in = KF_F32, .out = KF_F32, .batch = 1, .M = 1, .N = 1024, .K = 4096};
	n = kf_mm_candidates(&vec, cand, 32);
	assert_true(n >= 2);
	for (int i = 0; i < n; i++)
		assert_memory_equal(cand[i], "gemv", 4);
	kf_mm_shape f32 = {.in = KF_F32, .out = KF_F32, .batch = 2, .M = 256, .N = 256, .K = 256};
	n = kf_mm_candidates(&f32, cand, 32);
	for (int i = 0; i < n; i++)
		assert_memory_equal(cand[i], "fma", 3); /* exact f32: no tf32 unless allowed */
	f32.tf32 = true;
	n = kf_mm_candidates(&f32, cand, 32);
	assert_memory_equal(cand[0], "mma", 3);
}

static const char sq[] = "graph @sq(%x: f16[256,256], %w: f16[256,512]) -> (f16[256,512]) {\n"
			 "  %m = matmul(%x, %w) : f16[256,512]\n"
			 "  return %m\n"
			 "}\n";

/* The cache file: written, read back, a bad line skipped with a warning
 * naming the file and line; kf_tune_apply gives the node its tile, which
 * the emitter uses (the block size shows it). */
static void test_tune_cache(void **state)
{
	(void)state;
	char dir[] = "/tmp/kf-tune-XXXXXX";
	assert_non_null(mkdtemp(dir));
	kf_ctx *c = kf_ctx_new();
	kf_buf path = {0};
	assert_int_equal(kf_tune_path(dir, &path), 0);
	kf_tune_table t = {0};
	assert_int_equal(kf_tune_load(c, path.p, &t), 0); /* no file yet: empty */
	assert_int_equal(t.n, 0);
	kf_module *m = kft_parse(c, sq);
	kft_run_pipe(c, m, "fuse-matmul");
	kf_graph *g = m->graph[0];
	int nb;
	kf_nid f = only_fusion(g, &nb);
	kf_mm_shape sh;
	assert_true(kf_mm_node_shape(g, f, &sh));
	char key[128];
	kf_mm_shape_key(&sh, "sm_90", key, sizeof key);
	kf_tune_set(&t, "sm_80:f16>f16:b1:m1:n1:k1:nn", "mma128x128x32w2x4s3", 1.0);
	kf_tune_set(&t, key, "mma128x128x32w2x4s3", 0.5);
	assert_int_equal(kf_tune_save(c, path.p, &t), 0);
	kf_tune_table_free(&t);
	FILE *fp = fopen(path.p, "a");
	fputs("this line is wrong\n", fp);
	fclose(fp);
	assert_int_equal(kf_tune_load(c, path.p, &t), 0);
	assert_int_equal(t.n, 2);
	assert_string_equal(kf_tune_find(&t, key)->cfg, "mma128x128x32w2x4s3");
	kf_buf d = {0};
	kf_diag_render(c, &d);
	kf_buf_putc(&d, '\0');
	assert_non_null(strstr(d.p, "tune.txt:4: not 'KEY CONFIG [MS]'"));
	kf_buf_free(&d);
	kf_diag_clear(c);
	kf_kernel k;
	assert_int_equal(kf_emit_node(g, f, &k), 0);
	assert_int_equal(k.block, 128); /* the heuristic for few tiles: 64x64, 4 warps */
	kf_kernel_free(&k);
	assert_int_equal(kf_tune_apply(g, "sm_90", dir, NULL), 1);
	assert_string_equal(kf_attr_str(g, f, "tile", ""), "mma128x128x32w2x4s3");
	assert_int_equal(kf_emit_node(g, f, &k), 0);
	assert_int_equal(k.block, 256);
	assert_int_equal(k.units, 4);
	assert_int_equal(k.grid_y, 2);
	kf_kernel_free(&k);
	/* another arch has no entry */
	kf_node_set_attrs(g, f, NULL, 0);
	kf_node_set_attr(g, f, kf_intern_cstr(c, "kind"),
			 (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(c, "contraction")});
	assert_int_equal(kf_tune_apply(g, "sm_100", dir, NULL), 0);
	kf_tune_table_free(&t);
	unlink(path.p);
	rmdir(dir);
	kf_buf_free(&path);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* Every kind of contraction kernel emits; a config that does not fit the
 * shape ($KFUSE_MATMUL_TILE) is passed over. */
static void test_emit_kinds(void **state)
{
	(void)state;
	static const char t[] =
		"graph @g(%a: f32[1,300], %w: f32[300,200], %v: bf16[200,64], %u: bf16[64,200], %i: i8[3,5,7], %j: i8[7,4])"
		" -> (f32[1,200], bf16[200,200], i8[3,5,4]) {\n"
		"  %m = matmul(%a, %w) : f32[1,200]\n"
		"  %n = matmul(%v, %u) : bf16[200,200]\n"
		"  %k = matmul(%i, %j) : i8[3,5,4]\n"
		"  return %m, %n, %k\n"
		"}\n";
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kft_parse(c, t);
	kft_run_pipe(c, m, "fuse-matmul");
	kf_graph *g = m->graph[0];
	const char *named[] = {"_ws[", "kf_mma_bf16(", "long long acc["};
	int i = 0;
	setenv("KFUSE_MATMUL_TILE", "gemvk2", 1); /* fits only the first */
	kf_foreach_node(g, 0, n) {
		if (kf_N(g, n)->op != KF_OP_FUSION)
			continue;
		kf_kernel k;
		assert_int_equal(kf_emit_node(g, n, &k), 0);
		if (!strstr(k.src, named[i]))
			fail_msg("kernel %d lacks %s:\n%s", i, named[i], k.src);
		if (i == 0)
			assert_int_equal(k.grid_y, 2); /* K split in two, as the environment says */
		if (i == 2)
			assert_int_equal(k.block, 256);
		kf_kernel_free(&k);
		i++;
	}
	unsetenv("KFUSE_MATMUL_TILE");
	assert_int_equal(i, 3);
	kf_module_free(m);
	kf_ctx_free(c);
}

static void test_cublas_supports(void **state)
{
	(void)state;
	static const char t[] = "graph @g(%a: f16[4,32,16], %b: f16[16,8], %c: f32[8,16], %i: i32[4,4],"
				" %d: f32[2,3,4], %e: f32[3,4,5]) -> (f16[4,32,8], f32[8,8], i32[4,4], f32[3,3,5]) {\n"
				"  %m = matmul(%a, %b) : f16[4,32,8]\n"
				"  %g = gemm(%c, %c) {trans_b = 1} : f32[8,8]\n"
				"  %k = matmul(%i, %i) : i32[4,4]\n"
				"  %t = matmul(%d, %e) : f32[3,3,5]\n"
				"  return %m, %g, %k, %t\n"
				"}\n";
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kf_parse(c, "t.kf", t, strlen(t));
	if (!m) {
		kf_buf b = {0};
		kf_diag_render(c, &b);
		fail_msg("%.*s", (int)b.n, b.p);
	}
	kf_graph *g = m->graph[0];
	bool want[] = {true, true, false, false};
	int i = 0;
	kf_mm_blas bp;
	kf_foreach_node(g, 0, n)
		if (kf_N(g, n)->op == KF_OP_MATMUL || kf_N(g, n)->op == KF_OP_GEMM)
			assert_int_equal(kf_mm_blas_plan(g, n, &bp), want[i++]);
	assert_int_equal(i, 4);
	kf_module_free(m);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pass_groups_and_preserves),
		cmocka_unit_test(test_pass_stops),
		cmocka_unit_test(test_configs),
		cmocka_unit_test(test_tune_cache),
		cmocka_unit_test(test_emit_kinds),
		cmocka_unit_test(test_cublas_supports),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
