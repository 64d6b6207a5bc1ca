/* test_interp.c: the CPU reference interpreter against numpy (the cases in
 * tests/interp/cases, written by tests/interp/gen_cases.py) and against
 * hand-computed values, its errors, and the equivalence checker. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "equiv.h"
#include "interp.h"
#include "kf.h"
#include "npy.h"
#include "tensor.h"

/* ---- helpers --------------------------------------------------------------- */

static kf_module *parse_ok(kf_ctx *c, const char *text)
{
	kf_module *m = kf_parse(c, "test.kf", text, strlen(text));
	kf_buf d = {0};
	if (!m || kf_verify(m->graph[0]) > 0) {
		kf_diag_render(c, &d);
		fail_msg("does not parse or verify:\n%s\n%.*s", text, (int)d.n, d.p ? d.p : "");
	}
	return m;
}

static void tensor_of(kf_tensor *t, kf_dtype dt, int rank, const int64_t *dims, const double *v)
{
	assert_int_equal(kf_tensor_alloc(t, dt, rank, dims), 0);
	for (int64_t i = 0; i < kf_tensor_numel(t); i++)
		kf_tensor_set(t, i, v[i]);
}

/* Runs g; fails the test with the diagnostics if it does not run. */
static void run_ok(kf_graph *g, const kf_tensor *in, int nin, kf_tensor *out, int nout)
{
	if (kf_interp_run(g, in, nin, out, nout) != 0) {
		kf_buf d = {0};
		kf_diag_render(g->ctx, &d);
		fail_msg("run failed:\n%.*s", (int)d.n, d.p ? d.p : "");
	}
}

/* Runs g expecting failure; returns the rendered diagnostics (caller frees). */
static char *run_fails(kf_graph *g, const kf_tensor *in, int nin, int nout)
{
	kf_tensor out[8] = {0};
	assert_int_equal(kf_interp_run(g, in, nin, out, nout), -1);
	kf_buf d = {0};
	kf_diag_render(g->ctx, &d);
	kf_diag_clear(g->ctx);
	kf_buf_putc(&d, 0);
	return d.p;
}

static void expect_values(const kf_tensor *t, const double *want, int64_t n, double tol)
{
	assert_int_equal(kf_tensor_numel(t), n);
	for (int64_t i = 0; i < n; i++) {
		double g = kf_tensor_get(t, i);
		if (isnan(want[i]) ? !isnan(g) : fabs(g - want[i]) > tol)
			fail_msg("element %lld is %.9g, expected %.9g", (long long)i, g, want[i]);
	}
}

/* ---- the numpy cases -------------------------------------------------------- */

static void run_case(const char *name, double rtol, double atol)
{
	kf_ctx *c = kf_ctx_new();
	char path[1024];
	snprintf(path, sizeof path, "%s/interp/cases/%s.kf", KF_TEST_DATA, name);
	kf_module *m = kf_parse_file(c, path);
	kf_buf d = {0};
	if (!m || kf_verify(m->graph[0]) > 0) {
		kf_diag_render(c, &d);
		fail_msg("%s: does not parse or verify:\n%.*s", name, (int)d.n, d.p ? d.p : "");
	}
	kf_graph *g = m->graph[0];
	uint32_t nin = g->blk[0].narg, nout = g->nres;
	kf_tensor in[16] = {0}, out[16] = {0}, want = {0};
	for (uint32_t i = 0; i < nin; i++) {
		snprintf(path, sizeof path, "%s/interp/cases/%s.in%u.npy", KF_TEST_DATA, name, i);
		assert_int_equal(kf_npy_read(c, path, &in[i]), 0);
	}
	run_ok(g, in, (int)nin, out, (int)nout);
	for (uint32_t i = 0; i < nout; i++) {
		snprintf(path, sizeof path, "%s/interp/cases/%s.out%u.npy", KF_TEST_DATA, name, i);
		assert_int_equal(kf_npy_read(c, path, &want), 0);
		kf_equiv_stat st;
		kf_equiv_compare(&out[i], &want, rtol, atol, &st);
		if (st.nbad) {
			kf_buf_printf(&d, "%s result %u: ", name, i);
			kf_equiv_describe(&d, &st);
			kf_buf_puts(&d, "\n  got  ");
			kf_tensor_summary(&d, &out[i]);
			kf_buf_puts(&d, "\n  want ");
			kf_tensor_summary(&d, &want);
			fail_msg("%.*s", (int)d.n, d.p);
		}
		kf_tensor_free(&want);
	}
	for (uint32_t i = 0; i < 16; i++) {
		kf_tensor_free(&in[i]);
		kf_tensor_free(&out[i]);
	}
	kf_module_free(m);
	kf_ctx_free(c);
}

#define CASE(name, rtol, atol) \
	static void test_case_##name(void **s) { (void)s; run_case(#name, rtol, atol); }
CASE(bcast_add, 1e-7, 0)
CASE(arith_bcast, 1e-6, 0)
CASE(max_min_nan, 0, 0)
CASE(unary_f32, 2e-6, 1e-6)
CASE(f16_ops, 1e-3, 0)
CASE(f64_ops, 1e-14, 1e-15)
CASE(gemm, 1e-7, 0)
CASE(matmul, 1e-6, 1e-7)
CASE(reduce, 1e-6, 1e-7)
CASE(softmax, 1e-6, 1e-8)
CASE(layer_norm, 1e-6, 1e-6)
CASE(shape_ops, 0, 0)
CASE(split_sizes, 0, 0)
CASE(int_ops, 0, 0)
CASE(int8_wrap, 0, 0)
CASE(cast, 0, 0)
CASE(compare_logic, 0, 0)
CASE(empty, 0, 0)
CASE(fusion, 1e-6, 1e-7)
CASE(const, 1e-7, 0)
CASE(symbolic, 1e-6, 1e-7)
CASE(floor_ceil, 0, 0)

/* ---- hand-computed ------------------------------------------------------------ */

/* bf16 has 8 significant bits: 1 + 2^-8 is a tie that rounds to even (1),
 * 1 + 2^-7 is exact, pi is 3.140625. */
static void test_bf16(void **s)
{
	(void)s;
	kf_ctx *c = kf_ctx_new();
	kf_module *m = parse_ok(c, "graph @g(%x: f32[4]) -> (bf16[4], f32[4]) {\n"
				   "  %b = cast(%x) {to = \"bf16\"} : bf16[4]\n"
				   "  %s = add(%b, %b) : bf16[4]\n"
				   "  %f = cast(%s) {to = \"f32\"} : f32[4]\n"
				   "  return %b, %f\n}\n");
	int64_t d4 = 4;
	kf_tensor in = {0}, out[2] = {0};
	tensor_of(&in, KF_F32, 1, &d4, (double[]){1.00390625, 1.0078125, 3.14159265, -1e39});
	run_ok(m->graph[0], &in, 1, out, 2);
	expect_values(&out[0], (double[]){1.0, 1.0078125, 3.140625, -INFINITY}, 4, 0);
	expect_values(&out[1], (double[]){2.0, 2.015625, 6.28125, -INFINITY}, 4, 0);
	kf_tensor_free(&in);
	kf_tensor_free(&out[0]);
	kf_tensor_free(&out[1]);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* Big enough to take the threaded paths and every matmul block edge
 * (M, N, K not multiples of the tiles), checked against naive loops. */
static void test_large_against_naive(void **s)
{
	(void)s;
	kf_ctx *c = kf_ctx_new();
	kf_module *m = parse_ok(c, "graph @g(%a: f32[70,300], %b: f32[300,270], %v: f32[270]) -> (f32[70,270], f32[70]) {\n"
				   "  %0 = matmul(%a, %b) : f32[70,270]\n"
				   "  %1 = add(%0, %v) : f32[70,270]\n"
				   "  %2 = reduce_max(%1) {axes = [1], keepdims = false} : f32[70]\n"
				   "  return %1, %2\n}\n");
	uint64_t rng = 7;
	kf_tensor in[3] = {0}, out[2] = {0};
	assert_int_equal(kf_tensor_random(&in[0], KF_F32, 2, (int64_t[]){70, 300}, &rng), 0);
	assert_int_equal(kf_tensor_random(&in[1], KF_F32, 2, (int64_t[]){300, 270}, &rng), 0);
	assert_int_equal(kf_tensor_random(&in[2], KF_F32, 1, (int64_t[]){270}, &rng), 0);
	run_ok(m->graph[0], in, 3, out, 2);
	const float *A = in[0].data, *B = in[1].data, *V = in[2].data, *Y = out[0].data, *R = out[1].data;
	for (int i = 0; i < 70; i++) {
		double mx = -INFINITY;
		for (int j = 0; j < 270; j++) {
			double acc = 0;
			for (int k = 0; k < 300; k++)
				acc += (double)A[i * 300 + k] * B[k * 270 + j];
			float want = (float)acc + V[j];
			if (fabsf(Y[i * 270 + j] - want) > 1e-5f * (1 + fabsf(want)))
				fail_msg("y[%d,%d] = %.9g, expected %.9g", i, j, Y[i * 270 + j], want);
			mx = fmax(mx, Y[i * 270 + j]);
		}
		assert_float_equal(R[i], mx, 0);
	}
	for (int i = 0; i < 3; i++)
		kf_tensor_free(&in[i]);
	kf_tensor_free(&out[0]);
	kf_tensor_free(&out[1]);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* 300K elements with a broadcast operand: threaded tiles, strided gather. */
static void test_large_broadcast(void **s)
{
	(void)s;
	kf_ctx *c = kf_ctx_new();
	kf_module *m = parse_ok(c, "graph @g(%a: f32[600,500], %b: f32[600,1]) -> (f32[600,500]) {\n"
				   "  %0 = sub(%a, %b) : f32[600,500]\n  return %0\n}\n");
	uint64_t rng = 3;
	kf_tensor in[2] = {0}, out = {0};
	kf_tensor_random(&in[0], KF_F32, 2, (int64_t[]){600, 500}, &rng);
	kf_tensor_random(&in[1], KF_F32, 2, (int64_t[]){600, 1}, &rng);
	run_ok(m->graph[0], in, 2, &out, 1);
	const float *a = in[0].data, *b = in[1].data, *y = out.data;
	for (int i = 0; i < 600; i++)
		for (int j = 0; j < 500; j++)
			if (y[i * 500 + j] != a[i * 500 + j] - b[i])
				fail_msg("y[%d,%d] wrong", i, j);
	kf_tensor_free(&in[0]);
	kf_tensor_free(&in[1]);
	kf_tensor_free(&out);
	kf_module_free(m);
	kf_ctx_free(c);
}

static const char *sym_graph = "graph @g(%x: f32[N,2], %y: f32[N,1]) -> (f32[N,2]) {\n"
			       "  %0 = mul(%x, %y) : f32[N,2]\n  return %0\n}\n";

/* One graph, two sizes of N; an inconsistent N is an error naming it. */
static void test_symbolic_sizes(void **s)
{
	(void)s;
	kf_ctx *c = kf_ctx_new();
	kf_module *m = parse_ok(c, sym_graph);
	kf_graph *g = m->graph[0];
	for (int64_t n = 1; n <= 3; n += 2) {
		kf_tensor in[2] = {0}, out = {0};
		double xv[6] = {1, 2, 3, 4, 5, 6}, yv[3] = {10, 100, 1000};
		tensor_of(&in[0], KF_F32, 2, (int64_t[]){n, 2}, xv);
		tensor_of(&in[1], KF_F32, 2, (int64_t[]){n, 1}, yv);
		run_ok(g, in, 2, &out, 1);
		assert_int_equal(out.rank, 2);
		assert_int_equal(out.dim[0], n);
		expect_values(&out, (double[]){10, 20, 300, 400, 5000, 6000}, 2 * n, 0);
		kf_tensor_free(&in[0]);
		kf_tensor_free(&in[1]);
		kf_tensor_free(&out);
	}
	kf_tensor in[2] = {0};
	kf_tensor_alloc(&in[0], KF_F32, 2, (int64_t[]){3, 2});
	kf_tensor_alloc(&in[1], KF_F32, 2, (int64_t[]){4, 1});
	char *msg = run_fails(g, in, 2, 1);
	assert_non_null(strstr(msg, "input 1 (%y)"));
	assert_non_null(strstr(msg, "N is already 3"));
	free(msg);
	kf_tensor_free(&in[0]);
	kf_tensor_free(&in[1]);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* Wrong count, dtype and shape: each a clear error naming the input. */
static void test_input_errors(void **s)
{
	(void)s;
	kf_ctx *c = kf_ctx_new();
	kf_module *m = parse_ok(c, "graph @g(%x: f32[2,3], %w: i32[3]) -> (f32[2,3]) {\n"
				   "  %0 = neg(%x) : f32[2,3]\n  return %0\n}\n");
	kf_graph *g = m->graph[0];
	kf_tensor in[2] = {0};
	kf_tensor_alloc(&in[0], KF_F32, 2, (int64_t[]){2, 3});
	kf_tensor_alloc(&in[1], KF_F32, 1, (int64_t[]){3});
	char *msg = run_fails(g, in, 1, 1);
	assert_non_null(strstr(msg, "@g takes 2 inputs, 1 given"));
	free(msg);
	msg = run_fails(g, in, 2, 1);
	assert_non_null(strstr(msg, "input 1 (%w)"));
	assert_non_null(strstr(msg, "dtype f32, expected i32"));
	free(msg);
	kf_tensor_free(&in[1]);
	kf_tensor_alloc(&in[1], KF_I32, 1, (int64_t[]){4});
	msg = run_fails(g, in, 2, 1);
	assert_non_null(strstr(msg, "input 1 (%w) is i32[4] but the graph takes i32[3]"));
	free(msg);
	kf_tensor_free(&in[0]);
	kf_tensor_free(&in[1]);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* A missing or mismatched file() constant fails at its node, naming the file. */
static void test_const_file_errors(void **s)
{
	(void)s;
	kf_ctx *c = kf_ctx_new();
	const char *texts[2] = {
		"graph @g() -> (f32[3,2]) {\n  %w = const file(\"no_such.npy\") : f32[3,2]\n  return %w\n}\n",
		"graph @g() -> (f32[2,3]) {\n  %w = const file(\"const.w.npy\") : f32[2,3]\n  return %w\n}\n",
	};
	const char *want[2] = {"no_such.npy", "const.w.npy holds f32[3,2], but the constant is declared f32[2,3]"};
	for (int i = 0; i < 2; i++) {
		kf_module *m = parse_ok(c, texts[i]);
		char dir[1024];
		snprintf(dir, sizeof dir, "%s/interp/cases", KF_TEST_DATA);
		m->graph[0]->dir = kf_intern_cstr(c, dir);
		char *msg = run_fails(m->graph[0], NULL, 0, 1);
		if (!strstr(msg, want[i]) || !strstr(msg, "test.kf:2:"))
			fail_msg("unexpected diagnostics:\n%s", msg);
		free(msg);
		kf_module_free(m);
	}
	kf_ctx_free(c);
}

/* A value returned twice and an input returned directly are copies. */
static void test_return_aliases(void **s)
{
	(void)s;
	kf_ctx *c = kf_ctx_new();
	kf_module *m = parse_ok(c, "graph @g(%x: i64[2]) -> (i64[2], i64[2], i64[2]) {\n"
				   "  %0 = neg(%x) : i64[2]\n  return %0, %x, %0\n}\n");
	kf_tensor in = {0}, out[3] = {0};
	tensor_of(&in, KF_I64, 1, (int64_t[]){2}, (double[]){5, -7});
	run_ok(m->graph[0], &in, 1, out, 3);
	expect_values(&out[0], (double[]){-5, 7}, 2, 0);
	expect_values(&out[1], (double[]){5, -7}, 2, 0);
	expect_values(&out[2], (double[]){-5, 7}, 2, 0);
	assert_ptr_not_equal(out[0].data, out[2].data);
	assert_ptr_not_equal(out[1].data, in.data);
	kf_tensor_free(&in);
	for (int i = 0; i < 3; i++)
		kf_tensor_free(&out[i]);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* Integer edge cases by hand: total division, i64 wrap, f64 -> f16 with one
 * rounding. */
static void test_integer_edges(void **s)
{
	(void)s;
	kf_ctx *c = kf_ctx_new();
	kf_module *m = parse_ok(c, "graph @g(%a: i64[3], %b: i64[3]) -> (i64[3], i64[3], i64[3]) {\n"
				   "  %0 = div(%a, %b) : i64[3]\n  %1 = add(%a, %a) : i64[3]\n"
				   "  %2 = pow(%b, %b) : i64[3]\n  return %0, %1, %2\n}\n");
	kf_tensor in[2] = {0}, out[3] = {0};
	kf_tensor_alloc(&in[0], KF_I64, 1, (int64_t[]){3});
	kf_tensor_alloc(&in[1], KF_I64, 1, (int64_t[]){3});
	int64_t *a = in[0].data, *b = in[1].data;
	a[0] = INT64_MIN, b[0] = -1;
	a[1] = INT64_MAX, b[1] = 0;
	a[2] = -9, b[2] = -1;
	run_ok(m->graph[0], in, 2, out, 3);
	const int64_t *q = out[0].data, *s2 = out[1].data, *p = out[2].data;
	assert_true(q[0] == INT64_MIN && q[1] == 0 && q[2] == 9);
	assert_true(s2[0] == 0 && s2[1] == -2 && s2[2] == -18);
	assert_true(p[0] == -1 && p[1] == 1 && p[2] == -1);
	for (int i = 0; i < 3; i++)
		kf_tensor_free(&out[i]);
	kf_tensor_free(&in[0]);
	kf_tensor_free(&in[1]);
	kf_module_free(m);
	kf_ctx_free(c);
}

/* ---- random inputs and equivalence --------------------------------------------- */

static void test_random(void **s)
{
	(void)s;
	uint64_t r1 = 42, r2 = 42;
	kf_tensor a = {0}, b = {0}, i = {0}, t = {0};
	kf_tensor_random(&a, KF_F32, 1, (int64_t[]){10000}, &r1);
	kf_tensor_random(&b, KF_F32, 1, (int64_t[]){10000}, &r2);
	assert_memory_equal(a.data, b.data, a.nbytes);
	double sum = 0, sq = 0;
	for (int k = 0; k < 10000; k++) {
		double v = kf_tensor_get(&a, k);
		sum += v, sq += v * v;
	}
	assert_true(fabs(sum / 10000) < 0.05 && fabs(sq / 10000 - 1) < 0.1);
	kf_tensor_random(&i, KF_I8, 1, (int64_t[]){1000}, &r1);
	kf_tensor_random(&t, KF_I1, 1, (int64_t[]){1000}, &r1);
	int ones = 0;
	for (int k = 0; k < 1000; k++) {
		int64_t v = kf_tensor_get_i64(&i, k);
		assert_true(v >= -8 && v <= 8);
		ones += ((uint8_t *)t.data)[k];
		assert_true(((uint8_t *)t.data)[k] <= 1);
	}
	assert_true(ones > 400 && ones < 600);
	kf_tensor_free(&a), kf_tensor_free(&b), kf_tensor_free(&i), kf_tensor_free(&t);
}

static void test_equiv(void **s)
{
	(void)s;
	kf_ctx *c = kf_ctx_new();
	kf_module *a = parse_ok(c, "graph @g(%x: f32[N,4]) -> (f32[N,4]) {\n"
				   "  %0 = add(%x, %x) : f32[N,4]\n  return %0\n}\n");
	kf_module *b = parse_ok(c, "graph @g(%x: f32[N,4]) -> (f32[N,4]) {\n"
				   "  %c = const 2.0 : f32[]\n  %0 = mul(%x, %c) : f32[N,4]\n  return %0\n}\n");
	kf_module *d = parse_ok(c, "graph @g(%x: f32[N,4]) -> (f32[N,4]) {\n"
				   "  %c = const 2.001 : f32[]\n  %0 = mul(%x, %c) : f32[N,4]\n  return %0\n}\n");
	kf_buf rep = {0};
	assert_int_equal(kf_equiv_check(a->graph[0], b->graph[0], 1, 3, 1e-6, 0, &rep), 0);
	kf_buf_putc(&rep, 0);
	assert_non_null(strstr(rep.p, "[ok]"));
	rep.n = 0;
	assert_int_equal(kf_equiv_check(a->graph[0], d->graph[0], 1, 3, 1e-4, 1e-5, &rep), 1);
	kf_buf_putc(&rep, 0);
	assert_non_null(strstr(rep.p, "MISMATCH"));
	/* within a looser tolerance the same pair passes */
	assert_int_equal(kf_equiv_check(a->graph[0], d->graph[0], 1, 3, 1e-3, 1e-5, NULL), 0);
	/* finite_ref: where the reference is infinite (x / 0 at x != 0) the
	 * other may be anything; where it is finite, it must still agree */
	kf_module *inf = parse_ok(c, "graph @g(%x: f32[N,4]) -> (f32[N,4]) {\n"
				     "  %z = const 0.0 : f32[]\n  %0 = div(%x, %z) : f32[N,4]\n  return %0\n}\n");
	kf_equiv_tol strict = {1e-4, 1e-5, 0, false}, refine = {1e-4, 1e-5, 0, true};
	assert_int_equal(kf_equiv_check_tol(inf->graph[0], b->graph[0], 1, 3, &strict, NULL), 1);
	assert_int_equal(kf_equiv_check_tol(inf->graph[0], b->graph[0], 1, 3, &refine, NULL), 0);
	rep.n = 0;
	assert_int_equal(kf_equiv_check_tol(a->graph[0], d->graph[0], 1, 3, &refine, &rep), 1);
	kf_buf_putc(&rep, 0);
	assert_non_null(strstr(rep.p, "MISMATCH"));
	kf_buf_free(&rep);
	kf_module_free(a), kf_module_free(b), kf_module_free(d), kf_module_free(inf);
	kf_ctx_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_case_bcast_add),
		cmocka_unit_test(test_case_arith_bcast),
		cmocka_unit_test(test_case_max_min_nan),
		cmocka_unit_test(test_case_unary_f32), cmocka_unit_test(test_case_floor_ceil),
		cmocka_unit_test(test_case_f16_ops),
		cmocka_unit_test(test_case_f64_ops),
		cmocka_unit_test(test_case_gemm),
		cmocka_unit_test(test_case_matmul),
		cmocka_unit_test(test_case_reduce),
		cmocka_unit_test(test_case_softmax),
		cmocka_unit_test(test_case_layer_norm),
		cmocka_unit_test(test_case_shape_ops),
		cmocka_unit_test(test_case_split_sizes),
		cmocka_unit_test(test_case_int_ops),
		cmocka_unit_test(test_case_int8_wrap),
		cmocka_unit_test(test_case_cast),
		cmocka_unit_test(test_case_compare_logic),
		cmocka_unit_test(test_case_empty),
		cmocka_unit_test(test_case_fusion),
		cmocka_unit_test(test_case_const),
		cmocka_unit_test(test_case_symbolic),
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_large_against_naive),
		cmocka_unit_test(test_large_broadcast),
		cmocka_unit_test(test_symbolic_sizes),
		cmocka_unit_test(test_input_errors),
		cmocka_unit_test(test_const_file_errors),
		cmocka_unit_test(test_return_aliases),
		cmocka_unit_test(test_integer_edges),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_equiv),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
